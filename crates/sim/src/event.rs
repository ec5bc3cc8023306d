//! The event queue: events ordered by (time, sequence number), so that two events at the same
//! nanosecond are handled in the order they were scheduled and a run never depends on how a heap
//! breaks ties.

use std::cmp::Reverse;
use std::collections::BinaryHeap;

/// Simulated time: nanoseconds since the start of a run.
pub type Nanos = u64;

/// A queue of events `E` on the simulated clock.
pub struct EventQueue<E> {
    heap: BinaryHeap<Reverse<(Nanos, u64, Slot<E>)>>,
    seq: u64,
}

/// Keeps `E` out of the ordering: (time, sequence) is already unique.
struct Slot<E>(E);

impl<E> PartialEq for Slot<E> {
    fn eq(&self, _: &Self) -> bool {
        true
    }
}
impl<E> Eq for Slot<E> {}
impl<E> PartialOrd for Slot<E> {
    fn partial_cmp(&self, other: &Self) -> Option<std::cmp::Ordering> {
        Some(self.cmp(other))
    }
}
impl<E> Ord for Slot<E> {
    fn cmp(&self, _: &Self) -> std::cmp::Ordering {
        std::cmp::Ordering::Equal
    }
}

impl<E> Default for EventQueue<E> {
    fn default() -> Self {
        EventQueue { heap: BinaryHeap::new(), seq: 0 }
    }
}

impl<E> EventQueue<E> {
    /// Schedules `event` at `at`.
    pub fn push(&mut self, at: Nanos, event: E) {
        self.heap.push(Reverse((at, self.seq, Slot(event))));
        self.seq += 1;
    }

    /// The earliest event (the first scheduled among equal times).
    pub fn pop(&mut self) -> Option<(Nanos, E)> {
        self.heap.pop().map(|Reverse((at, _, Slot(e)))| (at, e))
    }

    /// When the earliest event is due.
    pub fn peek_time(&self) -> Option<Nanos> {
        self.heap.peek().map(|Reverse((at, _, _))| *at)
    }

    /// Events scheduled so far.
    pub fn scheduled(&self) -> u64 {
        self.seq
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn events_come_out_by_time_then_in_the_order_scheduled() {
        let mut q = EventQueue::default();
        q.push(5, "c");
        q.push(1, "a");
        q.push(5, "d");
        q.push(1, "b");
        q.push(3, "x");
        let order: Vec<_> = std::iter::from_fn(|| q.pop()).collect();
        assert_eq!(order, vec![(1, "a"), (1, "b"), (3, "x"), (5, "c"), (5, "d")]);
        assert_eq!(q.scheduled(), 5);
        assert_eq!(q.peek_time(), None);
    }
}

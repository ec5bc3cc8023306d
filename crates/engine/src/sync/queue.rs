//! The FIFO queue inside a channel: its two oldest entries live in the channel itself (a ring of
//! two slots), the rest in a `VecDeque` behind them.
//!
//! At a low rate a channel holds at most a batch and the watermark behind it, and a hop then
//! touches no memory outside the channel. A `VecDeque` alone keeps even one entry in a buffer of
//! its own, which on a long pipeline has left the caches by the time the next tuple comes: on
//! 10 000 operators at 100 tuples/s the inline entries took a turn from 364 to 321 ns of CPU, and
//! on 100 000 channels taken in turn a hop of the channel alone from 110 to 81 ns, with no
//! change where everything stays in the caches (`docs/results/2026-11-29/inline-queue/`). The
//! first version moved the second entry into the first on every receive, which cost 25 ns a hop
//! in the caches; the ring moves nothing. At a high rate the entries spill into the `VecDeque` as
//! before.

use std::collections::VecDeque;

/// A FIFO queue whose two oldest entries are held inline.
///
/// The inline entries are always older than the spilled ones: an entry goes inline only while
/// nothing is spilled, so once the inline slots are full, later entries queue behind them in the
/// spill until it has drained.
#[derive(Debug)]
pub(crate) struct Queue<E> {
    /// The inline entries, a ring: `len` of them from `head` on.
    inline: [Option<E>; INLINE],
    head: usize,
    len: usize,
    spill: VecDeque<E>,
}

/// Entries held inline: a batch and the watermark behind it.
const INLINE: usize = 2;

impl<E> Default for Queue<E> {
    fn default() -> Self {
        Queue { inline: std::array::from_fn(|_| None), head: 0, len: 0, spill: VecDeque::new() }
    }
}

impl<E> Queue<E> {
    /// Appends `entry` at the back.
    #[inline]
    pub(crate) fn push_back(&mut self, entry: E) {
        if self.len < INLINE && self.spill.is_empty() {
            self.inline[(self.head + self.len) % INLINE] = Some(entry);
            self.len += 1;
        } else {
            self.spill.push_back(entry);
        }
    }

    /// Takes the oldest entry.
    #[inline]
    pub(crate) fn pop_front(&mut self) -> Option<E> {
        if self.len == 0 {
            return self.spill.pop_front();
        }
        let entry = self.inline[self.head].take();
        self.head = (self.head + 1) % INLINE;
        self.len -= 1;
        entry
    }

    /// The oldest entry.
    #[inline]
    pub(crate) fn front(&self) -> Option<&E> {
        if self.len == 0 {
            return self.spill.front();
        }
        self.inline[self.head].as_ref()
    }

    /// The newest entry.
    #[inline]
    pub(crate) fn back_mut(&mut self) -> Option<&mut E> {
        if !self.spill.is_empty() {
            return self.spill.back_mut();
        }
        if self.len == 0 {
            return None;
        }
        self.inline[(self.head + self.len - 1) % INLINE].as_mut()
    }

    #[inline]
    pub(crate) fn is_empty(&self) -> bool {
        self.len == 0 && self.spill.is_empty()
    }
}

#[cfg(all(test, not(loom)))]
mod tests {
    use super::*;
    use proptest::prelude::*;

    /// What a test does to the queue.
    #[derive(Clone, Debug)]
    enum Op {
        Push(u32),
        Pop,
        SetBack(u32),
    }

    fn op() -> impl Strategy<Value = Op> {
        prop_oneof![3 => any::<u32>().prop_map(Op::Push), 2 => Just(Op::Pop), 1 => any::<u32>().prop_map(Op::SetBack)]
    }

    proptest! {
        /// Any sequence of pushes, pops and writes to the back leaves the queue as a plain
        /// `VecDeque` would be, seen from every accessor.
        #[test]
        fn behaves_as_a_vecdeque(ops in proptest::collection::vec(op(), 0..200)) {
            let (mut queue, mut model) = (Queue::default(), VecDeque::new());
            for op in ops {
                match op {
                    Op::Push(v) => {
                        queue.push_back(v);
                        model.push_back(v);
                    }
                    Op::Pop => prop_assert_eq!(queue.pop_front(), model.pop_front()),
                    Op::SetBack(v) => {
                        if let (Some(b), Some(m)) = (queue.back_mut(), model.back_mut()) {
                            *b = v;
                            *m = v;
                        } else {
                            prop_assert!(queue.is_empty() && model.is_empty());
                        }
                    }
                }
                prop_assert_eq!(queue.front(), model.front());
                prop_assert_eq!(queue.is_empty(), model.is_empty());
            }
            while let Some(m) = model.pop_front() {
                prop_assert_eq!(queue.pop_front(), Some(m));
            }
            prop_assert!(queue.pop_front().is_none());
        }
    }

    #[test]
    fn a_batch_and_its_watermark_stay_inline() {
        let mut queue = Queue::default();
        queue.push_back(1);
        queue.push_back(2);
        assert!(queue.spill.is_empty() && queue.spill.capacity() == 0, "nothing allocated");
        assert_eq!(queue.len, 2);
        queue.push_back(3);
        assert_eq!(queue.spill.len(), 1);
        assert_eq!((queue.pop_front(), queue.pop_front()), (Some(1), Some(2)));
        // Behind a spilled entry, a new one queues in the spill even though the inline slots are free.
        queue.push_back(4);
        assert_eq!(queue.spill.len(), 2);
        assert_eq!((queue.pop_front(), queue.pop_front(), queue.pop_front()), (Some(3), Some(4), None));
    }
}

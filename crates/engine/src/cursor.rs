//! A source instance driven per micro-batch: the tuples intended in a time range, pushed into a
//! chain (micro-batch execution's map side).

use crate::erase::{down, AnyBox};
use crate::offered::Offered;
use crate::operator::Input;
use crate::source::Source;
use crate::tuple::Tuple;

/// A source instance as the head of micro-batch map tasks.
pub(crate) trait SourceCursor: Send {
    /// Pushes the tuples intended in `[from_ns, to_ns)` (ns after the start) into the chain, and
    /// returns the watermark after them: the largest event time so far minus the source's
    /// out-of-orderness (none before the first tuple).
    fn run(&mut self, from_ns: u64, to_ns: u64) -> Option<u64>;
    /// Feeds `head` (a `Box<dyn Input<T>>`) from now on: operators are made afresh per task.
    fn set_head(&mut self, head: AnyBox);
}

pub(crate) struct Cursor<T> {
    source: Source<T>,
    instance: usize,
    parallelism: usize,
    offered: Offered,
    items: Box<dyn Iterator<Item = T> + Send>,
    next: u64,
    max_event: Option<u64>,
    head: Box<dyn Input<T>>,
}

impl<T: Send + 'static> Cursor<T> {
    pub(crate) fn new(source: Source<T>, instance: usize, parallelism: usize, head: Box<dyn Input<T>>) -> Self {
        let items = (source.generator)(instance, parallelism);
        let offered = source.offered.split(parallelism);
        Cursor { source, instance, parallelism, offered, items, next: 0, max_event: None, head }
    }
}

impl<T: Send + 'static> SourceCursor for Cursor<T> {
    fn run(&mut self, from_ns: u64, to_ns: u64) -> Option<u64> {
        if self.next > 0 && self.offered.intended(self.next - 1) >= from_ns {
            // A replay: regenerate the instance's input from its start.
            self.items = (self.source.generator)(self.instance, self.parallelism);
            (self.next, self.max_event) = (0, None);
        }
        let mut batch = Vec::new();
        loop {
            let intended = self.offered.intended(self.next);
            if intended >= to_ns {
                break;
            }
            let Some(item) = self.items.next() else { break };
            self.next += 1;
            let event = self.source.event_time.as_ref().map_or(intended, |f| f(&item));
            self.max_event = Some(self.max_event.map_or(event, |m| m.max(event)));
            if intended >= from_ns {
                batch.push(Tuple { event_ns: event, intended_ns: intended, ingress_ns: intended, data: item });
            }
        }
        if !batch.is_empty() {
            self.head.push_batch(&mut batch);
        }
        self.max_event.map(|m| m.saturating_sub(self.source.out_of_orderness_ns))
    }

    fn set_head(&mut self, head: AnyBox) {
        self.head = down::<T>(Some(head));
    }
}

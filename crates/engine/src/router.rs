//! The end of a chain that sends tuples on: partitioning and batching into channels.
//!
//! One [`Route`] per outgoing logical edge; each keeps a batch buffer per target channel and
//! sends it when it holds `batch_size` tuples, when the producer goes idle ([`Control::flush`]),
//! before a watermark (which travels in the same send) and at the end of the stream.

use std::sync::Arc;

use smallvec::SmallVec;

use crate::exchange::LinkSender;
use crate::executor::ahead::spilled_lines;
use crate::graph::Partitioning;
use crate::metrics::OperatorMetrics;
use crate::operator::{Control, Input};
use crate::sync::channel::{Closed, Message, Sender};
use crate::tuple::{Data, Tuple};

/// Hash of a tuple's key, for [`Partitioning::KeyBy`].
pub type KeyHash<T> = Arc<dyn Fn(&T) -> u64 + Send + Sync>;

/// Maps a 64-bit hash onto `0..n` using its high bits (Lemire's multiply-shift), which a
/// multiplicative hash mixes best.
#[inline]
pub fn bucket(hash: u64, n: usize) -> usize {
    ((hash as u128 * n as u128) >> 64) as usize
}

/// Where a route sends to one consumer instance: its channel, or the producer's outgoing queue
/// in front of a Hone exchange's link ([`crate::exchange`]).
pub enum Out<T> {
    /// A channel.
    Channel(Sender<T>),
    /// An exchange's outgoing queue.
    Link(LinkSender<T>),
}

impl<T: Send> Out<T> {
    /// Sends without waiting (see [`Sender::send`] and [`LinkSender::send`]).
    pub fn send(&self, message: Message<T>) -> Result<(), Closed> {
        match self {
            Out::Channel(s) => s.send(message),
            Out::Link(s) => s.send(message),
        }
    }

    /// Sends `buffer`'s tuples as one batch and leaves an empty vector in it: one the consumer
    /// gave back where the channel has one ([`Sender::send_batch`]); then `watermark` if given,
    /// in the same send into a channel ([`Sender::send_batch_then`]).
    pub fn send_batch_then(&self, buffer: &mut Vec<Tuple<T>>, watermark: Option<u64>) -> Result<(), Closed> {
        match self {
            Out::Channel(s) => s.send_batch_then(buffer, watermark),
            Out::Link(s) => {
                s.send(Message::Batch(std::mem::take(buffer)))?;
                watermark.map_or(Ok(()), |w| s.send(Message::Watermark(w)))
            }
        }
    }
}

/// One outgoing logical edge of a physical operator.
///
/// A forward edge (one consumer) keeps its sender and buffer inside the route, and a router of
/// one route keeps that inside the router: at a low rate a hop crosses a long pipeline, and each
/// allocation of its own would be one more cache line to fetch per operator.
pub struct Route<T> {
    partitioning: Partitioning,
    key_hash: Option<KeyHash<T>>,
    /// One per consumer instance reached (just one for a forward edge).
    senders: SmallVec<[Out<T>; 1]>,
    buffers: SmallVec<[Vec<Tuple<T>>; 1]>,
    next: usize,
}

impl<T: Data> Route<T> {
    /// A route over `senders`, ordered by consumer instance.
    pub fn new(partitioning: Partitioning, key_hash: Option<KeyHash<T>>, senders: Vec<Sender<T>>) -> Self {
        Self::with_outs(partitioning, key_hash, senders.into_iter().map(Out::Channel).collect())
    }

    /// A route over `senders`, which may lead into an exchange, ordered by consumer instance.
    pub fn with_outs(partitioning: Partitioning, key_hash: Option<KeyHash<T>>, senders: Vec<Out<T>>) -> Self {
        assert!(partitioning != Partitioning::KeyBy || key_hash.is_some(), "a keyed route needs a key hash");
        let buffers = senders.iter().map(|_| Vec::new()).collect();
        Route { partitioning, key_hash, senders: senders.into_iter().collect(), buffers, next: 0 }
    }

    #[inline]
    fn target(&mut self, t: &Tuple<T>) -> usize {
        let n = self.senders.len();
        match self.partitioning {
            Partitioning::Forward | Partitioning::Broadcast => 0,
            Partitioning::Rebalance => {
                self.next = if self.next + 1 >= n { 0 } else { self.next + 1 };
                self.next
            }
            Partitioning::Shuffle => fastrand::usize(..n),
            Partitioning::KeyBy => bucket((self.key_hash.as_ref().expect("checked in new"))(&t.data), n),
        }
    }
}

/// Sends the tuples of a physical operator to its consumers.
pub struct Router<T> {
    routes: SmallVec<[Route<T>; 1]>,
    /// Copies sent per tuple taken in: one per route, one per consumer of a broadcast route.
    fanout: usize,
    batch_size: usize,
    metrics: Arc<OperatorMetrics>,
    last_watermark: u64,
    /// Some buffer may hold tuples not sent yet (false: a flush has nothing to send, and returns
    /// at once; at a low rate every step ends in a flush, most of them after the watermark's
    /// send took the batch along).
    unsent: bool,
}

impl<T: Data> Router<T> {
    /// A router over `routes`, sending batches of `batch_size` tuples.
    pub fn new(routes: Vec<Route<T>>, batch_size: usize, metrics: Arc<OperatorMetrics>) -> Self {
        let fanout =
            routes.iter().map(|r| if r.partitioning == Partitioning::Broadcast { r.senders.len() } else { 1 }).sum();
        Router {
            routes: routes.into_iter().collect(),
            fanout,
            batch_size: batch_size.max(1),
            metrics,
            last_watermark: 0,
            unsent: false,
        }
    }

    /// Sends `buffer` as a batch. Without a vector given back by the consumer, a full batch's
    /// buffer is replaced by one of `refill` tuples' capacity (more full batches are likely to
    /// follow), a partial one's by an unallocated vector (a low rate: it may hold one tuple).
    fn send(sender: &Out<T>, buffer: &mut Vec<Tuple<T>>, refill: usize) {
        Self::send_then(sender, buffer, refill, None);
    }

    /// [`Router::send`], then `watermark` if given, in one send.
    fn send_then(sender: &Out<T>, buffer: &mut Vec<Tuple<T>>, refill: usize, watermark: Option<u64>) {
        // A closed channel means the engine is aborting; the task stops on the abort flag, and
        // what it was sending is dropped with it.
        let _ = sender.send_batch_then(buffer, watermark);
        if buffer.capacity() < refill {
            buffer.reserve_exact(refill);
        }
    }

    #[inline]
    fn route_one(route: &mut Route<T>, t: Tuple<T>, batch_size: usize) {
        if route.partitioning == Partitioning::Broadcast {
            for i in 0..route.senders.len() {
                route.buffers[i].push(t.clone());
                if route.buffers[i].len() >= batch_size {
                    Self::send(&route.senders[i], &mut route.buffers[i], batch_size);
                }
            }
            return;
        }
        let i = route.target(&t);
        let buffer = &mut route.buffers[i];
        buffer.push(t);
        if buffer.len() >= batch_size {
            Self::send(&route.senders[i], buffer, batch_size);
        }
    }

    /// Sends every partial batch, each followed by `watermark` if given (which goes alone where
    /// no batch is waiting).
    fn send_partial(&mut self, watermark: Option<u64>) {
        self.unsent = false;
        for route in &mut self.routes {
            for (sender, buffer) in route.senders.iter().zip(&mut route.buffers) {
                if !buffer.is_empty() {
                    Self::send_then(sender, buffer, 0, watermark);
                } else if let Some(w) = watermark {
                    let _ = sender.send(Message::Watermark(w));
                }
            }
        }
    }

    fn end_all(&mut self) {
        self.send_partial(None);
        for route in &self.routes {
            for sender in &route.senders {
                let _ = sender.send(Message::End);
            }
        }
    }
}

impl<T: Data> Input<T> for Router<T> {
    fn push_batch(&mut self, batch: &mut Vec<Tuple<T>>) {
        OperatorMetrics::add(&self.metrics.tuples_out, batch.len() * self.fanout);
        let batch_size = self.batch_size;
        let (last, others) = self.routes.split_last_mut().expect("a router has a route");
        // Fast path: one route to one consumer (whatever its partitioning, every tuple goes
        // there): an empty buffer takes a whole batch as it is (a partial one by trading vectors
        // with the caller: no tuple moved), else the tuples are appended.
        if let ([], [sender], [buffer]) = (&*others, &last.senders[..], &mut last.buffers[..]) {
            if buffer.is_empty() {
                if batch.len() >= batch_size {
                    Self::send(sender, batch, batch_size);
                } else {
                    std::mem::swap(buffer, batch);
                    self.unsent = true;
                }
                return;
            }
            self.unsent = true;
            for t in batch.drain(..) {
                buffer.push(t);
                if buffer.len() >= batch_size {
                    Self::send(sender, buffer, batch_size);
                }
            }
            return;
        }
        self.unsent = true;
        for t in batch.drain(..) {
            for route in others.iter_mut() {
                Self::route_one(route, t.clone(), batch_size);
            }
            Self::route_one(last, t, batch_size);
        }
    }
}

impl<T: Data> Control for Router<T> {
    fn watermark(&mut self, watermark: u64) {
        if watermark > self.last_watermark {
            self.last_watermark = watermark;
            // Each partial batch goes first, with the watermark behind it in the same send.
            self.send_partial(Some(watermark));
        }
    }
    fn tick(&mut self, _now_ns: u64) {}
    fn next_timer(&self) -> Option<u64> {
        None
    }
    fn flush(&mut self) {
        if self.unsent {
            self.send_partial(None);
        }
    }
    fn finish(&mut self) {
        self.end_all();
    }
    #[cold]
    fn touched(&self, at: &mut Vec<usize>) {
        spilled_lines(at, &self.routes);
        for r in &self.routes {
            spilled_lines(at, &r.senders);
            spilled_lines(at, &r.buffers);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::sync::channel::channel;
    use crate::sync::Signal;

    #[test]
    fn a_full_batch_is_refilled_with_room_for_the_next_and_a_partial_one_is_not() {
        let (tx, rx) = channel::<u64>(1 << 12, Arc::new(Signal::default()), Arc::new(Signal::default()));
        let route = Route::new(Partitioning::Forward, None, vec![tx]);
        let mut router = Router::new(vec![route], 4, Arc::new(OperatorMetrics::default()));
        // Four tuples fill a batch: sent, and the buffer (nothing came back yet) is made ready for
        // the next four instead of growing from nothing.
        let mut batch: Vec<Tuple<u64>> = (0..4).map(|i| Tuple::at(0, i)).collect();
        router.push_batch(&mut batch);
        assert!(batch.is_empty() && batch.capacity() >= 4, "the fast path's buffer: {}", batch.capacity());
        let Some(Message::Batch(first)) = rx.try_recv() else { panic!("a batch") };
        assert_eq!(first.len(), 4);
        // One tuple, then a flush: a partial batch goes on, and the buffer stays unallocated.
        router.push_batch(&mut vec![Tuple::at(0, 9)]);
        router.flush();
        assert!(router.routes[0].buffers[0].is_empty() && router.routes[0].buffers[0].capacity() == 0);
        // A forward router holds its route, sender and buffer inside itself.
        assert!(!router.routes.spilled() && !router.routes[0].senders.spilled() && !router.routes[0].buffers.spilled());
        assert!(matches!(rx.try_recv(), Some(Message::Batch(b)) if b.len() == 1 && b[0].data == 9));
    }

    #[test]
    fn a_flush_sends_what_any_route_holds_and_nothing_twice() {
        let (senders, channels): (Vec<_>, Vec<_>) =
            (0..2).map(|_| channel::<u64>(1 << 12, Arc::new(Signal::default()), Arc::new(Signal::default()))).unzip();
        let routes = senders.into_iter().map(|tx| Route::new(Partitioning::Forward, None, vec![tx])).collect();
        let mut router = Router::new(routes, 4, Arc::new(OperatorMetrics::default()));
        // Nothing pushed: a flush sends nothing.
        router.flush();
        assert!(channels.iter().all(|rx| rx.try_recv().is_none()));
        // One tuple reaches both routes' buffers; the flush sends both partial batches, once.
        router.push_batch(&mut vec![Tuple::at(0, 5)]);
        router.flush();
        router.flush();
        for rx in &channels {
            assert!(matches!(rx.try_recv(), Some(Message::Batch(b)) if b.len() == 1 && b[0].data == 5));
            assert!(rx.try_recv().is_none(), "sent once");
        }
        // A watermark takes a partial batch along; the flush after it has nothing left to send.
        router.push_batch(&mut vec![Tuple::at(0, 6)]);
        router.watermark(10);
        router.flush();
        for rx in &channels {
            assert!(matches!(rx.try_recv(), Some(Message::Batch(b)) if b.len() == 1 && b[0].data == 6));
            assert!(matches!(rx.try_recv(), Some(Message::Watermark(10))));
            assert!(rx.try_recv().is_none(), "nothing after the watermark");
        }
    }
}

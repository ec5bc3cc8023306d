//! Bounded, batched, single-producer single-consumer channels between physical operators.
//!
//! One channel joins one producer instance to one consumer instance, as Flink's subpartitions
//! do, so FIFO order per channel is simply queue order. Tuples travel in batches to amortise
//! synchronisation; the capacity is counted in tuples. A producer facing a full channel blocks
//! (backpressure, which thus reaches the source); a consumer with nothing to read waits on the
//! [`Signal`] that all channels into its operator share.
//!
//! No lost wake-ups: the producer's wait for space happens under the channel's mutex, and the
//! consumer's wait follows the event-count protocol of [`Signal`]. No busy spinning: both block
//! in the kernel when idle.

use std::collections::VecDeque;
use std::sync::atomic::{fence, AtomicBool, AtomicU64, AtomicUsize, Ordering};
use std::sync::{Arc, Condvar, Mutex, MutexGuard};
use std::time::Duration;

use crate::tuple::{now_ns, Tuple};

/// What travels through a channel.
#[derive(Debug)]
pub enum Message<T> {
    /// Tuples in FIFO order.
    Batch(Vec<Tuple<T>>),
    /// No tuple with an event time below this will follow on this channel.
    Watermark(u64),
    /// The producer has finished; nothing follows.
    End,
}

/// Wakes one consumer thread when any of its input channels gets a message (an event count).
///
/// The consumer registers as a sleeper *before* it checks its channels one last time; a producer
/// publishes its message *before* it checks for sleepers. With a sequentially consistent fence on
/// both sides, at least one of them sees the other, so a wake-up is never lost, and producers pay
/// only an atomic load when nobody sleeps.
#[derive(Default)]
pub struct Signal {
    epoch: Mutex<u64>,
    wake: Condvar,
    sleepers: AtomicUsize,
}

impl Signal {
    /// Wakes the waiting consumer, if any.
    pub fn notify(&self) {
        fence(Ordering::SeqCst);
        if self.sleepers.load(Ordering::Relaxed) > 0 {
            *lock(&self.epoch) += 1;
            self.wake.notify_all();
        }
    }

    /// Blocks until [`Signal::notify`] is called, `timeout` elapses, or `ready()` is true.
    /// `ready` is checked after registering as a sleeper, so a message published concurrently is
    /// never missed.
    pub fn wait_unless(&self, timeout: Option<Duration>, ready: impl FnOnce() -> bool) {
        let mut epoch = lock(&self.epoch);
        self.sleepers.fetch_add(1, Ordering::SeqCst);
        fence(Ordering::SeqCst);
        let start = *epoch;
        if !ready() {
            match timeout {
                None => {
                    while *epoch == start {
                        epoch = self.wake.wait(epoch).unwrap_or_else(|e| e.into_inner());
                    }
                }
                Some(t) => {
                    epoch =
                        self.wake.wait_timeout_while(epoch, t, |e| *e == start).unwrap_or_else(|e| e.into_inner()).0;
                }
            }
        }
        self.sleepers.fetch_sub(1, Ordering::SeqCst);
        drop(epoch);
    }
}

/// Locks a mutex, ignoring poisoning: a panicking operator is reported by the executor, and the
/// queues it leaves behind are still consistent (every critical section here is panic-free).
pub(crate) fn lock<T>(m: &Mutex<T>) -> MutexGuard<'_, T> {
    m.lock().unwrap_or_else(|e| e.into_inner())
}

struct State<T> {
    queue: VecDeque<(u64, Message<T>)>,
    /// Tuples in `queue` (batches only).
    tuples: usize,
    producer_waiting: bool,
    closed: bool,
}

/// The shared part of a channel.
pub struct Channel<T> {
    state: Mutex<State<T>>,
    space: Condvar,
    consumer: Arc<Signal>,
    capacity: usize,
    /// Nanoseconds the producer spent blocked on this channel.
    blocked_ns: AtomicU64,
}

/// Occupancy of a channel, for metrics.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Occupancy {
    /// Tuples queued.
    pub queue_len: usize,
    /// Age of the oldest queued batch, in nanoseconds (0 when empty).
    pub head_wait_ns: u64,
}

/// The reading side of a channel, seen by metrics without its type.
pub trait Observe: Send + Sync {
    /// Current occupancy.
    fn occupancy(&self, now_ns: u64) -> Occupancy;
    /// Closes the channel: blocked producers and the consumer wake up and give up.
    fn close(&self);
    /// Nanoseconds the producer has spent blocked on this channel so far.
    fn blocked_ns(&self) -> u64;
}

impl<T: Send> Observe for Channel<T> {
    fn occupancy(&self, now: u64) -> Occupancy {
        let state = lock(&self.state);
        Occupancy {
            queue_len: state.tuples,
            head_wait_ns: state.queue.front().map_or(0, |(t, _)| now.saturating_sub(*t)),
        }
    }

    fn close(&self) {
        lock(&self.state).closed = true;
        self.space.notify_all();
        self.consumer.notify();
    }

    fn blocked_ns(&self) -> u64 {
        self.blocked_ns.load(Ordering::Relaxed)
    }
}

/// Returned by [`Sender::send`] when the channel was closed (the engine is aborting).
#[derive(Debug, PartialEq, Eq)]
pub struct Closed;

/// Creates a channel holding at most `capacity` tuples (at least one batch, however large) whose
/// consumer waits on `consumer`.
pub fn channel<T: Send>(capacity: usize, consumer: Arc<Signal>) -> (Sender<T>, Receiver<T>) {
    let channel = Arc::new(Channel {
        state: Mutex::new(State { queue: VecDeque::new(), tuples: 0, producer_waiting: false, closed: false }),
        space: Condvar::new(),
        consumer,
        capacity: capacity.max(1),
        blocked_ns: AtomicU64::new(0),
    });
    (Sender { channel: channel.clone() }, Receiver { channel })
}

/// The writing side of a channel; one per channel.
pub struct Sender<T> {
    channel: Arc<Channel<T>>,
}

impl<T: Send> Sender<T> {
    /// Enqueues a message, blocking while the channel is full.
    pub fn send(&self, message: Message<T>) -> Result<(), Closed> {
        let ch = &*self.channel;
        let n = match &message {
            Message::Batch(b) => b.len(),
            _ => 0,
        };
        let mut state = lock(&ch.state);
        if n > 0 && state.tuples + n > ch.capacity && state.tuples > 0 && !state.closed {
            let start = now_ns();
            while state.tuples + n > ch.capacity && state.tuples > 0 && !state.closed {
                state.producer_waiting = true;
                state = ch.space.wait(state).unwrap_or_else(|e| e.into_inner());
            }
            state.producer_waiting = false;
            ch.blocked_ns.fetch_add(now_ns() - start, Ordering::Relaxed);
        }
        if state.closed {
            return Err(Closed);
        }
        let now = now_ns();
        match (message, state.queue.back_mut()) {
            // Consecutive watermarks: only the newest matters, so a stalled consumer cannot make
            // the queue grow without bound.
            (Message::Watermark(w), Some((_, Message::Watermark(last)))) => *last = w,
            (message, _) => {
                state.tuples += n;
                state.queue.push_back((now, message));
            }
        }
        drop(state);
        ch.consumer.notify();
        Ok(())
    }

    /// The channel, for metrics.
    pub fn observer(&self) -> Arc<dyn Observe>
    where
        T: 'static,
    {
        self.channel.clone()
    }
}

/// The reading side of a channel; one per channel.
pub struct Receiver<T> {
    channel: Arc<Channel<T>>,
}

impl<T: Send> Receiver<T> {
    /// Takes the oldest message, if any.
    pub fn try_recv(&self) -> Option<Message<T>> {
        let ch = &*self.channel;
        let mut state = lock(&ch.state);
        let (_, message) = state.queue.pop_front()?;
        if let Message::Batch(b) = &message {
            state.tuples -= b.len();
            if state.producer_waiting {
                ch.space.notify_one();
            }
        }
        Some(message)
    }

    /// True if a message is queued.
    pub fn is_ready(&self) -> bool {
        !lock(&self.channel.state).queue.is_empty()
    }

    /// True once the channel was closed by an abort.
    pub fn is_closed(&self) -> bool {
        lock(&self.channel.state).closed
    }

    /// The channel, for metrics.
    pub fn observer(&self) -> Arc<dyn Observe>
    where
        T: 'static,
    {
        self.channel.clone()
    }
}

/// Set once the engine aborts; every blocking wait checks it.
#[derive(Default)]
pub struct AbortFlag(AtomicBool);

impl AbortFlag {
    /// Raises the flag.
    pub fn raise(&self) {
        self.0.store(true, Ordering::SeqCst);
    }
    /// True once raised.
    pub fn is_raised(&self) -> bool {
        self.0.load(Ordering::Relaxed)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::thread;

    fn batch(range: std::ops::Range<u64>) -> Message<u64> {
        Message::Batch(range.map(|i| Tuple::at(0, i)).collect())
    }

    #[test]
    fn fifo_and_capacity_in_tuples() {
        let signal = Arc::new(Signal::default());
        let (tx, rx) = channel::<u64>(10, signal.clone());
        let producer = thread::spawn(move || {
            for i in 0..100 {
                tx.send(batch(i * 4..i * 4 + 4)).unwrap();
            }
            tx.send(Message::End).unwrap();
        });
        let mut next = 0;
        loop {
            match rx.try_recv() {
                Some(Message::Batch(b)) => {
                    for t in b {
                        assert_eq!(t.data, next);
                        next += 1;
                    }
                }
                Some(Message::End) => break,
                Some(Message::Watermark(_)) => unreachable!(),
                None => {
                    let occ = rx.channel.occupancy(now_ns());
                    // Never more than capacity, except one oversize batch into an empty queue.
                    assert!(occ.queue_len <= 10, "{occ:?}");
                    signal.wait_unless(None, || rx.is_ready());
                }
            }
        }
        producer.join().unwrap();
        assert_eq!(next, 400);
    }

    #[test]
    fn oversize_batch_into_empty_channel_does_not_deadlock() {
        let (tx, rx) = channel::<u64>(2, Arc::new(Signal::default()));
        tx.send(batch(0..50)).unwrap();
        assert!(matches!(rx.try_recv(), Some(Message::Batch(b)) if b.len() == 50));
    }

    #[test]
    fn watermarks_coalesce() {
        let (tx, rx) = channel::<u64>(8, Arc::new(Signal::default()));
        for w in 1..=5 {
            tx.send(Message::Watermark(w)).unwrap();
        }
        assert!(matches!(rx.try_recv(), Some(Message::Watermark(5))));
        assert!(rx.try_recv().is_none());
    }

    #[test]
    fn close_wakes_a_blocked_producer() {
        let (tx, rx) = channel::<u64>(4, Arc::new(Signal::default()));
        tx.send(batch(0..4)).unwrap();
        let observer = rx.observer();
        let blocked = thread::spawn(move || tx.send(batch(4..8)));
        thread::sleep(Duration::from_millis(20));
        observer.close();
        assert_eq!(blocked.join().unwrap(), Err(Closed));
        assert!(rx.is_closed());
    }

    #[test]
    fn signal_never_loses_a_wakeup() {
        // Many rounds of: consumer waits with no timeout, producer sends once. A lost wake-up
        // would hang this test (the harness then reports it).
        let signal = Arc::new(Signal::default());
        let (tx, rx) = channel::<u64>(1 << 20, signal.clone());
        let producer = thread::spawn(move || {
            for i in 0..20_000u64 {
                tx.send(batch(i..i + 1)).unwrap();
                if i % 64 == 0 {
                    thread::yield_now();
                }
            }
        });
        let mut got = 0;
        while got < 20_000 {
            match rx.try_recv() {
                Some(Message::Batch(b)) => got += b.len(),
                Some(_) => {}
                None => signal.wait_unless(None, || rx.is_ready()),
            }
        }
        producer.join().unwrap();
    }
}

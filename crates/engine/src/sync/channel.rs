//! Bounded, batched, single-producer single-consumer channels between physical operators.
//!
//! One channel joins one producer instance to one consumer instance, as Flink's subpartitions
//! do, so FIFO order per channel is simply queue order. Tuples travel in batches to amortise
//! synchronisation; the capacity is counted in tuples.
//!
//! Sending never blocks, so that a task never holds its thread while it waits (IBM Streams'
//! dynamic model, Haren's executor: a few workers run many operators). A send always enqueues;
//! when it leaves the channel at or above its capacity, the channel counts itself among its
//! producer's *full outputs* ([`Signal::is_blocked`]) and the producer is not stepped again until
//! the consumer has drained the channel to half its capacity, which clears the mark and wakes the
//! producer. A channel thus holds at most its capacity plus what one step of its producer sends
//! (backpressure, which reaches the source). A consumer with nothing to read waits on the
//! [`Signal`] that all channels into its operator share.
//!
//! No lost wake-ups: marks are set and cleared under the channel's mutex, and every wait follows
//! the event-count protocol of [`Signal`]. No busy spinning: threads block in the kernel when idle.
//!
//! Batch buffers circulate instead of being allocated per batch (timely-dataflow recycles its
//! buffers the same way): a consumer hands the emptied vector of a batch back with its next
//! receive ([`Receiver::try_recv_giving_back`]), and [`Sender::send_batch`] leaves one of those in
//! the producer's buffer. A hop then costs no allocation, and no vector is freed on another
//! thread than the one that allocated it (which costs glibc's allocator a lock per batch).
//!
//! A watermark that follows a batch travels with it: [`Sender::send_batch_then`] queues both under
//! one lock with one notification, and the receive that takes a batch also takes a watermark queued
//! right behind it ([`Received::watermark`]). At a low rate, where a source sends a watermark behind
//! every tuple, a hop then costs one send, one receive and one step of the consumer instead of two.
//!
//! The queue holds its two oldest messages inside the channel (`sync/queue.rs`): such a hop
//! touches no allocation of the queue's own.

use std::sync::Arc;

use smallvec::SmallVec;

use super::primitive::atomic::{AtomicU64, AtomicUsize, Ordering};
use super::primitive::{lock, Mutex};
use super::queue::Queue;
use super::Signal;
use crate::tuple::{now_ns, step_now_ns, Tuple};

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

struct State<T> {
    /// (when it was queued, message), oldest first.
    queue: Queue<(u64, Message<T>)>,
    /// When the channel became full, if it counts among its producer's full outputs now.
    full_since: Option<u64>,
    closed: bool,
    /// Emptied batch vectors the consumer gave back, for the producer's next batches: inside the
    /// channel, so that a hand-off reads no allocation of their own (at 10 tuples/s that one was
    /// out of every cache at each hop: ~a fifth of the workers' CPU on 10 000 operators).
    spares: SmallVec<[Vec<Tuple<T>>; SPARES]>,
}

/// Emptied vectors a channel keeps for its producer: one in the producer's hands, one queued and
/// one on its way back cover a pipeline at any rate.
const SPARES: usize = 2;

/// The shared part of a channel. `tuples` comes first, next to the lock's word: a hand-off that
/// takes the lock has that line already.
#[repr(C)]
pub struct Channel<T> {
    /// Tuples in the queue (batches only): written under the lock, read without it, so that a
    /// sampler reading every channel's length takes no lock (a locked instruction each, which
    /// let the CPU fetch no two of 10 000 channels at once: `moirai run`'s main thread spent
    /// 1.2 ms a second reading them under their locks through the operators, 0.7 ms reading them
    /// without from one list, [`crate::view::EngineView::queue_lengths`]).
    tuples: AtomicUsize,
    /// When the oldest queued message was queued (engine clock, at least 1), 0 while the queue
    /// is empty: written under the lock whenever the head changes, read without it, so that a
    /// scrape of the head's age ([`Observe::occupancy`]) takes no lock an operator takes.
    head_since: AtomicU64,
    state: Mutex<State<T>>,
    consumer: Arc<Signal>,
    producer: Arc<Signal>,
    capacity: usize,
    /// Nanoseconds the producer spent blocked on this channel.
    blocked_ns: AtomicU64,
}

impl<T> Channel<T> {
    /// Publishes the queue's head time to [`Channel::head_since`]; called under the lock after
    /// every change of the queue's head.
    fn publish_head(&self, state: &State<T>) {
        let since = state.queue.front().map_or(0, |(t, _)| (*t).max(1));
        self.head_since.store(since, Ordering::Relaxed);
    }

    /// Clears the full mark, if set; true when it was the producer's last full output, and the
    /// producer must be woken (after the channel's lock is released).
    fn release_producer(&self, state: &mut State<T>) -> bool {
        match state.full_since.take() {
            Some(since) => {
                self.blocked_ns.fetch_add(now_ns().saturating_sub(since), Ordering::Relaxed);
                self.producer.release()
            }
            None => false,
        }
    }
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
    /// Tuples queued now (the occupancy's `queue_len` without the head's age).
    fn queue_len(&self) -> usize;
    /// Closes the channel: blocked producers and the consumer wake up and give up.
    fn close(&self);
    /// Nanoseconds the producer has spent blocked on this channel so far.
    fn blocked_ns(&self) -> u64;
}

impl<T: Send> Observe for Channel<T> {
    fn occupancy(&self, now: u64) -> Occupancy {
        let since = self.head_since.load(Ordering::Relaxed);
        Occupancy {
            queue_len: self.tuples.load(Ordering::Relaxed),
            head_wait_ns: if since == 0 { 0 } else { now.saturating_sub(since) },
        }
    }

    fn queue_len(&self) -> usize {
        self.tuples.load(Ordering::Relaxed)
    }

    fn close(&self) {
        let mut state = lock(&self.state);
        state.closed = true;
        let wake_producer = self.release_producer(&mut state);
        drop(state);
        if wake_producer {
            self.producer.notify();
        }
        self.consumer.notify();
    }

    fn blocked_ns(&self) -> u64 {
        self.blocked_ns.load(Ordering::Relaxed)
    }
}

/// Returned by [`Sender::send`] when the channel was closed (the engine is aborting).
#[derive(Debug, PartialEq, Eq)]
pub struct Closed;

/// Creates a channel of `capacity` tuples whose consumer waits on `consumer` and whose producer
/// is held back through `producer` while the channel is full.
pub fn channel<T: Send>(capacity: usize, consumer: Arc<Signal>, producer: Arc<Signal>) -> (Sender<T>, Receiver<T>) {
    let channel = Arc::new(Channel {
        tuples: AtomicUsize::new(0),
        head_since: AtomicU64::new(0),
        state: Mutex::new(State { queue: Queue::default(), full_since: None, closed: false, spares: SmallVec::new() }),
        consumer,
        producer,
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
    /// Enqueues a message without waiting. If that fills the channel, it counts among the
    /// producer's full outputs until the consumer drains it ([`Signal::is_blocked`]).
    pub fn send(&self, message: Message<T>) -> Result<(), Closed> {
        self.enqueue(message, None, None)
    }

    /// Sends the tuples in `buffer` as one batch, as [`Sender::send`] does, and leaves in
    /// `buffer` an emptied vector the consumer gave back (or a new, unallocated one).
    pub fn send_batch(&self, buffer: &mut Vec<Tuple<T>>) -> Result<(), Closed> {
        self.send_batch_then(buffer, None)
    }

    /// [`Sender::send_batch`], followed by `watermark` if given, under one lock and with one
    /// notification of the consumer.
    pub fn send_batch_then(&self, buffer: &mut Vec<Tuple<T>>, watermark: Option<u64>) -> Result<(), Closed> {
        let batch = std::mem::take(buffer);
        self.enqueue(Message::Batch(batch), watermark, Some(buffer))
    }

    fn enqueue(
        &self,
        message: Message<T>,
        then_watermark: Option<u64>,
        refill: Option<&mut Vec<Tuple<T>>>,
    ) -> Result<(), Closed> {
        let ch = &*self.channel;
        let mut state = lock(&ch.state);
        if state.closed {
            return Err(Closed);
        }
        // When the message was queued, for the age of the head: a pool worker's step start does.
        let now = step_now_ns();
        let was_empty = state.queue.is_empty();
        match (message, state.queue.back_mut()) {
            // Consecutive watermarks: only the newest matters, so a stalled consumer cannot make
            // the queue grow without bound.
            (Message::Watermark(w), Some((_, Message::Watermark(last)))) => *last = w,
            (message, _) => {
                if let Message::Batch(b) = &message {
                    ch.tuples.store(ch.tuples.load(Ordering::Relaxed) + b.len(), Ordering::Relaxed);
                }
                state.queue.push_back((now, message));
            }
        }
        // Only a batch has one (`send_batch_then`): it goes right behind it, never next to
        // another watermark.
        if let Some(w) = then_watermark {
            state.queue.push_back((now, Message::Watermark(w)));
        }
        if was_empty {
            // The head is new only then (a coalesced watermark keeps its time).
            ch.publish_head(&state);
        }
        if ch.tuples.load(Ordering::Relaxed) >= ch.capacity && state.full_since.is_none() {
            state.full_since = Some(now);
            ch.producer.hold();
        }
        if let (Some(buffer), Some(spare)) = (refill, state.spares.pop()) {
            *buffer = spare;
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

/// What one receive took from a channel.
#[derive(Debug)]
pub struct Received<T> {
    /// The oldest message.
    pub message: Message<T>,
    /// When the message is a batch: the watermark queued right behind it, taken with it.
    pub watermark: Option<u64>,
    /// Whether more messages are queued behind these.
    pub more: bool,
}

/// The reading side of a channel; one per channel.
pub struct Receiver<T> {
    channel: Arc<Channel<T>>,
}

impl<T: Send> Receiver<T> {
    /// Takes the oldest message, if any (one message: a watermark behind a batch stays queued).
    pub fn try_recv(&self) -> Option<Message<T>> {
        let ch = &*self.channel;
        let mut state = lock(&ch.state);
        let (_, message) = state.queue.pop_front()?;
        ch.publish_head(&state);
        let wake_producer = Self::took(ch, &mut state, &message);
        drop(state);
        if wake_producer {
            ch.producer.notify();
        }
        Some(message)
    }

    /// Takes the oldest message, if any, with the watermark queued right behind it when the
    /// message is a batch, and says whether more are queued behind them. First hands the producer
    /// back the emptied vector of an earlier batch in `spare` (taken out of it; a vector without
    /// capacity, or one the channel has no room for, stays).
    pub fn try_recv_giving_back(&self, spare: &mut Option<Vec<Tuple<T>>>) -> Option<Received<T>> {
        let ch = &*self.channel;
        let mut state = lock(&ch.state);
        if state.spares.len() < SPARES {
            if let Some(v) = spare.take_if(|v| v.capacity() > 0) {
                debug_assert!(v.is_empty(), "only emptied vectors are given back");
                state.spares.push(v);
            }
        }
        let (_, message) = state.queue.pop_front()?;
        let watermark = match (&message, state.queue.front()) {
            (Message::Batch(_), Some((_, Message::Watermark(w)))) => Some(*w),
            _ => None,
        };
        if watermark.is_some() {
            state.queue.pop_front();
        }
        let more = !state.queue.is_empty();
        ch.publish_head(&state);
        let wake_producer = Self::took(ch, &mut state, &message);
        drop(state);
        if wake_producer {
            ch.producer.notify();
        }
        Some(Received { message, watermark, more })
    }

    /// Accounts for `message` taken off the queue; true when that released the producer, which
    /// must be notified after the lock is released.
    fn took(ch: &Channel<T>, state: &mut State<T>, message: &Message<T>) -> bool {
        let Message::Batch(b) = message else { return false };
        let tuples = ch.tuples.load(Ordering::Relaxed) - b.len();
        ch.tuples.store(tuples, Ordering::Relaxed);
        state.full_since.is_some() && tuples <= ch.capacity / 2 && ch.release_producer(state)
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

#[cfg(all(test, not(loom)))]
mod tests {
    use super::*;
    use std::sync::atomic::AtomicUsize;
    use std::thread;
    use std::time::Duration;

    fn batch(range: std::ops::Range<u64>) -> Message<u64> {
        Message::Batch(range.map(|i| Tuple::at(0, i)).collect())
    }

    #[test]
    fn fifo_and_capacity_in_tuples() {
        let (signal, full) = (Arc::new(Signal::default()), Arc::new(Signal::default()));
        let (tx, rx) = channel::<u64>(10, signal.clone(), full.clone());
        let producer = thread::spawn(move || {
            for i in 0..100 {
                // The producer's side of the dedicated model: never send while blocked.
                full.wait_unless(None, || !full.is_blocked());
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
                    // Never more than capacity plus the one batch that filled it.
                    assert!(occ.queue_len < 10 + 4, "{occ:?}");
                    signal.wait_unless(None, || rx.is_ready());
                }
            }
        }
        producer.join().unwrap();
        assert_eq!(next, 400);
    }

    #[test]
    fn a_full_channel_blocks_its_producer_until_drained_to_half() {
        let producer = Arc::new(Signal::default());
        let (tx, rx) = channel::<u64>(8, Arc::new(Signal::default()), producer.clone());
        tx.send(batch(0..4)).unwrap();
        assert!(!producer.is_blocked());
        tx.send(batch(4..8)).unwrap();
        assert!(producer.is_blocked(), "full at capacity");
        // An oversize batch still goes in: sending never waits.
        tx.send(batch(8..58)).unwrap();
        assert!(producer.is_blocked());
        assert!(matches!(rx.try_recv(), Some(Message::Batch(b)) if b.len() == 4));
        assert!(producer.is_blocked(), "54 tuples left");
        rx.try_recv();
        rx.try_recv();
        assert!(!producer.is_blocked(), "empty");
        assert!(rx.observer().blocked_ns() > 0);
    }

    #[test]
    fn blocked_counts_full_outputs_and_the_last_release_wakes() {
        let producer = Arc::new(Signal::default());
        let (a, ra) = channel::<u64>(2, Arc::new(Signal::default()), producer.clone());
        let (b, rb) = channel::<u64>(2, Arc::new(Signal::default()), producer.clone());
        let woken = Arc::new(AtomicUsize::new(0));
        let w = woken.clone();
        producer.set_hook(
            Arc::new(move |_: &Signal, _| {
                w.fetch_add(1, Ordering::SeqCst);
            }),
            0,
        );
        a.send(batch(0..2)).unwrap();
        b.send(batch(0..2)).unwrap();
        assert!(producer.is_blocked());
        ra.try_recv();
        assert!(producer.is_blocked(), "one output is still full");
        assert_eq!(woken.load(Ordering::SeqCst), 0);
        rb.try_recv();
        assert!(!producer.is_blocked());
        assert_eq!(woken.load(Ordering::SeqCst), 1, "woken once, by the last release");
    }

    #[test]
    fn batch_vectors_go_back_to_the_producer_instead_of_being_freed() {
        let (tx, rx) = channel::<u64>(1 << 10, Arc::new(Signal::default()), Arc::new(Signal::default()));
        let mut buffer: Vec<Tuple<u64>> = Vec::with_capacity(64);
        buffer.push(Tuple::at(0, 1));
        let first = buffer.as_ptr();
        tx.send_batch(&mut buffer).unwrap();
        assert!(buffer.is_empty() && buffer.capacity() == 0, "nothing given back yet: a new, unallocated vector");
        let Some(Received { message: Message::Batch(mut batch), watermark: None, more: false }) =
            rx.try_recv_giving_back(&mut None)
        else {
            panic!("the batch, and nothing behind it")
        };
        assert_eq!(batch.as_ptr(), first);
        batch.clear();
        let mut spare = Some(batch);
        buffer.push(Tuple::at(0, 2));
        tx.send_batch(&mut buffer).unwrap();
        // The receive that takes the second batch hands the first vector back ...
        let Some(Received { message: Message::Batch(second), .. }) = rx.try_recv_giving_back(&mut spare) else {
            panic!("the second batch")
        };
        assert!(spare.is_none() && second[0].data == 2);
        // ... and the producer's next send leaves it in the producer's buffer, capacity and all.
        buffer.push(Tuple::at(0, 3));
        tx.send_batch(&mut buffer).unwrap();
        assert_eq!((buffer.as_ptr(), buffer.capacity(), buffer.len()), (first, 64, 0));
        // A vector without capacity is not worth keeping.
        let mut empty = Some(Vec::new());
        assert!(matches!(rx.try_recv_giving_back(&mut empty), Some(Received { message: Message::Batch(_), .. })));
        assert!(empty.is_some());
    }

    #[test]
    fn the_head_age_read_without_the_lock_follows_the_head() {
        let (tx, rx) = channel::<u64>(1 << 10, Arc::new(Signal::default()), Arc::new(Signal::default()));
        let age = |at: u64| rx.observer().occupancy(at).head_wait_ns;
        let sent_at = |t: u64, send: &dyn Fn()| {
            crate::tuple::set_step_clock(Some(t));
            send();
            crate::tuple::set_step_clock(None);
        };
        let t = now_ns();
        assert_eq!(age(t), 0, "empty");
        sent_at(t, &|| tx.send(batch(0..1)).unwrap());
        sent_at(t + 10, &|| tx.send(batch(1..2)).unwrap());
        assert_eq!(age(t + 100), 100, "the oldest batch's");
        rx.try_recv().unwrap();
        assert_eq!(age(t + 100), 90, "the next one's once the oldest is taken");
        rx.try_recv().unwrap();
        assert_eq!(age(t + 100), 0, "empty again");
        // Coalesced watermarks keep the first one's time.
        sent_at(t + 20, &|| tx.send(Message::Watermark(1)).unwrap());
        sent_at(t + 30, &|| tx.send(Message::Watermark(2)).unwrap());
        assert_eq!(age(t + 100), 80);
        rx.try_recv().unwrap();
        // A batch and its watermark, taken by one receive.
        sent_at(t + 40, &|| tx.send_batch_then(&mut vec![Tuple::at(0, 3)], Some(3)).unwrap());
        assert_eq!(age(t + 100), 60);
        let got = rx.try_recv_giving_back(&mut None).unwrap();
        assert_eq!((got.watermark, got.more), (Some(3), false));
        assert_eq!(age(t + 100), 0, "both taken");
    }

    #[test]
    fn a_batch_sent_in_a_pool_step_is_stamped_with_the_step_start() {
        let (tx, rx) = channel::<u64>(1 << 10, Arc::new(Signal::default()), Arc::new(Signal::default()));
        let step_began = now_ns();
        crate::tuple::set_step_clock(Some(step_began));
        tx.send(batch(0..1)).unwrap();
        crate::tuple::set_step_clock(None);
        let later = step_began + 5_000_000;
        assert_eq!(rx.observer().occupancy(later).head_wait_ns, 5_000_000, "aged from the step's start");
        rx.try_recv_giving_back(&mut None).unwrap();
        // Outside a step (a dedicated thread), the clock at the send.
        std::thread::sleep(std::time::Duration::from_millis(2));
        let before = now_ns();
        tx.send(batch(1..2)).unwrap();
        let after = now_ns();
        let age = rx.observer().occupancy(after).head_wait_ns;
        assert!(age <= after - before, "stamped between {before} and {after}: age {age}");
    }

    #[test]
    fn a_watermark_behind_a_batch_is_sent_and_taken_with_it() {
        let consumer = Arc::new(Signal::default());
        let notified = Arc::new(AtomicUsize::new(0));
        let n = notified.clone();
        consumer.set_hook(
            Arc::new(move |_: &Signal, _| {
                n.fetch_add(1, Ordering::SeqCst);
            }),
            0,
        );
        let (tx, rx) = channel::<u64>(1 << 10, consumer, Arc::new(Signal::default()));
        let mut buffer = vec![Tuple::at(0, 1)];
        tx.send_batch_then(&mut buffer, Some(7)).unwrap();
        assert_eq!(notified.load(Ordering::SeqCst), 1, "one notification for both");
        assert_eq!(rx.observer().occupancy(now_ns()).queue_len, 1);
        let Some(Received { message: Message::Batch(b), watermark: Some(7), more: false }) =
            rx.try_recv_giving_back(&mut None)
        else {
            panic!("the batch with its watermark, nothing behind")
        };
        assert_eq!(b[0].data, 1);
        // Sent apart, they are still taken together; a second batch behind them stays queued.
        tx.send(batch(2..3)).unwrap();
        tx.send(Message::Watermark(8)).unwrap();
        tx.send(batch(3..4)).unwrap();
        let Some(Received { message: Message::Batch(_), watermark: Some(8), more: true }) =
            rx.try_recv_giving_back(&mut None)
        else {
            panic!("the batch with its watermark, a batch behind")
        };
        // A watermark is taken with a batch only, never with another watermark or the end; a
        // plain `try_recv` takes one message.
        tx.send(Message::Watermark(9)).unwrap();
        assert!(matches!(rx.try_recv(), Some(Message::Batch(_))));
        assert!(matches!(rx.try_recv(), Some(Message::Watermark(9))));
        tx.send(Message::Watermark(10)).unwrap();
        tx.send(Message::End).unwrap();
        let Some(Received { message: Message::Watermark(10), watermark: None, more: true }) =
            rx.try_recv_giving_back(&mut None)
        else {
            panic!("the watermark alone")
        };
        assert!(matches!(rx.try_recv(), Some(Message::End)));
    }

    #[test]
    fn watermarks_coalesce() {
        let (tx, rx) = channel::<u64>(8, Arc::new(Signal::default()), Arc::new(Signal::default()));
        for w in 1..=5 {
            tx.send(Message::Watermark(w)).unwrap();
        }
        assert!(matches!(rx.try_recv(), Some(Message::Watermark(5))));
        assert!(rx.try_recv().is_none());
    }

    #[test]
    fn close_releases_a_blocked_producer() {
        let producer = Arc::new(Signal::default());
        let (tx, rx) = channel::<u64>(4, Arc::new(Signal::default()), producer.clone());
        tx.send(batch(0..4)).unwrap();
        assert!(producer.is_blocked());
        let p = producer.clone();
        let waiting = thread::spawn(move || p.wait_unless(None, || !p.is_blocked()));
        thread::sleep(Duration::from_millis(20));
        rx.observer().close();
        waiting.join().unwrap();
        assert!(!producer.is_blocked());
        assert_eq!(tx.send(batch(4..8)), Err(Closed));
        assert!(rx.is_closed());
    }

    #[test]
    fn signal_never_loses_a_wakeup() {
        // Many rounds of: consumer waits with no timeout, producer sends once. A lost wake-up
        // would hang this test (the harness then reports it).
        let signal = Arc::new(Signal::default());
        let (tx, rx) = channel::<u64>(1 << 20, signal.clone(), Arc::new(Signal::default()));
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

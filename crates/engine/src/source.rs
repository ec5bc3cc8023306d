//! Sources: where tuples enter the engine, stamped with their intended send time.
//!
//! A source instance draws data from a generator (any iterator) at an offered rate: tuple *k* is
//! intended to be sent at `start + k / rate` (or, on a ramp, when the ramp's cumulative rate
//! reaches *k*). The instances of a source with parallelism *n* share one schedule and one start
//! (the moment the first of them runs): instance *i* sends the schedule's tuples *i*, *i + n*, ...
//! ([`Share`]), so that together they offer exactly the rate asked, tuple for tuple. When the engine cannot keep up the source falls behind its
//! schedule, but the intended times stay on it, so end-to-end latency shows the delay.
//!
//! The source's lag is the external queue (the stand-in for Kafka): the tuples that are due but
//! not yet taken in are exactly those an external broker would hold, and each carries the time it
//! was due. They are generated when the engine takes them rather than buffered, which is the same
//! for latency and throughput and keeps memory bounded; the lag is exposed as the source's
//! `backlog` metric, like a Kafka consumer's lag. At rate 0 the source produces as fast as the
//! engine takes tuples, and intended = ingress.
//!
//! A source may instead follow a clock in its data ([`Source::replay`]): each tuple is intended at
//! `start + (its time − the first tuple's time) / speed`, so a recorded stream is replayed at its
//! own pace (speed 1), or faster.

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use std::time::Duration;

pub use crate::offered::{Offered, Share, MAX_RATE};

use crate::metrics::OperatorMetrics;
use crate::operator::Input;
use crate::slack;
use crate::sync::Signal;
use crate::task::{Step, StopFlag, Task};
use crate::tuple::{now_ns, Tuple};

/// Makes the generator of one source instance: `(instance, parallelism) -> iterator`.
pub type Generator<T> = Arc<dyn Fn(usize, usize) -> Box<dyn Iterator<Item = T> + Send> + Send + Sync>;

/// Extracts a tuple's event time, in nanoseconds.
pub type EventTime<T> = Arc<dyn Fn(&T) -> u64 + Send + Sync>;

/// A replay clock: the time a tuple carries (ns) and how many times faster than that clock to
/// replay.
pub(crate) struct Replay<T> {
    clock: EventTime<T>,
    speed: f64,
}

impl<T> Clone for Replay<T> {
    fn clone(&self) -> Self {
        Replay { clock: self.clock.clone(), speed: self.speed }
    }
}

/// How a source produces its stream.
pub struct Source<T> {
    pub(crate) generator: Generator<T>,
    pub(crate) offered: Offered,
    pub(crate) event_time: Option<EventTime<T>>,
    pub(crate) out_of_orderness_ns: u64,
    pub(crate) replay: Option<Replay<T>>,
}

impl<T> Clone for Source<T> {
    fn clone(&self) -> Self {
        Source {
            generator: self.generator.clone(),
            offered: self.offered,
            event_time: self.event_time.clone(),
            out_of_orderness_ns: self.out_of_orderness_ns,
            replay: self.replay.clone(),
        }
    }
}

impl<T: Send + 'static> Source<T> {
    /// A source whose instance `i` of `n` produces what `generator(i, n)` yields, as fast as the
    /// engine takes it, with event time = intended send time.
    pub fn new<I, F>(generator: F) -> Self
    where
        I: IntoIterator<Item = T>,
        I::IntoIter: Send + 'static,
        F: Fn(usize, usize) -> I + Send + Sync + 'static,
    {
        Source {
            generator: Arc::new(move |i, n| Box::new(generator(i, n).into_iter())),
            offered: Offered::Unlimited,
            event_time: None,
            out_of_orderness_ns: 0,
            replay: None,
        }
    }

    /// Offers `tuples_per_second` in total, shared by the instances ([`Share`]); 0 = as fast as
    /// possible. A rate that cannot be scheduled (negative, not finite, above [`MAX_RATE`]) makes
    /// [`crate::Query::build`] fail. Replaces a [`replay`](Self::replay) clock.
    pub fn rate(mut self, tuples_per_second: f64) -> Self {
        self.offered = if tuples_per_second == 0.0 { Offered::Unlimited } else { Offered::Constant(tuples_per_second) };
        self.replay = None;
        self
    }

    /// Replays the data at its own clock: `clock(data)` is the time a tuple carries, in ns (non-
    /// decreasing along each instance's generator), and each tuple is intended `(clock −
    /// the first tuple's clock) / speed` after the instance started; `speed` 1.0 is real time,
    /// 10.0 ten times faster. A tuple is sent when it is due; one that is late (the engine did not
    /// take tuples fast enough) keeps its intended time, so end-to-end latency shows the delay.
    /// Replaces a [`rate`](Self::rate); `speed` must be positive and finite (else the source
    /// sends as fast as possible).
    pub fn replay(mut self, clock: impl Fn(&T) -> u64 + Send + Sync + 'static, speed: f64) -> Self {
        self.offered = Offered::Unlimited;
        self.replay = (speed.is_finite() && speed > 0.0).then(|| Replay { clock: Arc::new(clock), speed });
        self
    }

    /// Offers a rate rising linearly from `from` to `to` tuples/s in total over `over`, then
    /// staying at `to`. A ramp that cannot be scheduled makes [`crate::Query::build`] fail.
    pub fn ramp(mut self, from: f64, to: f64, over: Duration) -> Self {
        self.offered = Offered::Ramp { from, to, over };
        self.replay = None;
        self
    }

    /// The schedule it offers.
    pub fn offered(&self) -> Offered {
        self.offered
    }

    /// Takes event time from the data; watermarks then trail the largest event time seen by
    /// `out_of_orderness`.
    pub fn event_time(mut self, f: impl Fn(&T) -> u64 + Send + Sync + 'static, out_of_orderness: Duration) -> Self {
        self.event_time = Some(Arc::new(f));
        self.out_of_orderness_ns = out_of_orderness.as_nanos() as u64;
        self
    }
}

/// How often a source emits a watermark.
const WATERMARK_INTERVAL_NS: u64 = 1_000_000;

/// The shortest a rate-limited source sleeps. Waking for every tuple at millions of tuples per
/// second would cost more than the tuples; instead the source wakes at most every 50 µs and sends
/// everything due as one batch, as a consumer polling Kafka would. The wait shows in end-to-end
/// latency (against the intended send times), not in processing latency.
const MIN_SLEEP_NS: u64 = 50_000;

/// One running source instance.
pub(crate) struct SourceTask<T> {
    generator: Box<dyn Iterator<Item = T> + Send>,
    head: Box<dyn Input<T>>,
    /// This instance's share of the source's schedule.
    offered: Share,
    /// The instances' common start (0 until the first of them steps); none for a source of
    /// parallelism 1, which starts when it first steps.
    common_start: Option<Arc<AtomicU64>>,
    start_ns: u64,
    emitted: u64,
    batch: Vec<Tuple<T>>,
    batch_size: usize,
    event_time: Option<EventTime<T>>,
    out_of_orderness_ns: u64,
    max_event_ns: u64,
    next_watermark_ns: u64,
    replay: Option<Replay<T>>,
    /// The clock of the first tuple, when replaying.
    replay_origin: Option<u64>,
    /// A tuple drawn from the generator but not yet due, when replaying.
    peeked: Option<T>,
    exhausted: bool,
    /// How much later than a tuple's due time the source may wake for it ([`crate::slack`]).
    slack_ns: u64,
    stop: Arc<StopFlag>,
    signal: Arc<Signal>,
    metrics: Arc<OperatorMetrics>,
}

impl<T: Send + 'static> SourceTask<T> {
    #[allow(clippy::too_many_arguments)]
    pub(crate) fn new(
        source: &Source<T>,
        instance: usize,
        parallelism: usize,
        head: Box<dyn Input<T>>,
        batch_size: usize,
        common_start: Option<Arc<AtomicU64>>,
        slack_ns: u64,
        stop: Arc<StopFlag>,
        signal: Arc<Signal>,
        metrics: Arc<OperatorMetrics>,
    ) -> Self {
        stop.register(signal.clone());
        let offered = source.offered.share(instance, parallelism);
        *crate::sync::lock(&metrics.offered) = Some((0, offered));
        SourceTask {
            generator: (source.generator)(instance, parallelism),
            head,
            offered,
            common_start,
            start_ns: 0,
            emitted: 0,
            batch: Vec::with_capacity(batch_size),
            batch_size,
            event_time: source.event_time.clone(),
            out_of_orderness_ns: source.out_of_orderness_ns,
            max_event_ns: 0,
            next_watermark_ns: 0,
            replay: source.replay.clone(),
            replay_origin: None,
            peeked: None,
            exhausted: false,
            slack_ns,
            stop,
            signal,
            metrics,
        }
    }

    fn intended(&self, k: u64) -> u64 {
        // (Saturating: at a tiny rate the next tuple may be due after the end of time.)
        self.start_ns.saturating_add(self.offered.intended(k))
    }

    /// Replaying: moves the tuples due at `now` (at most a batch) into the batch; returns when the
    /// next one is due if it is not yet.
    fn take_replayed(&mut self, replay: &Replay<T>, now: u64) -> Option<u64> {
        while self.batch.len() < self.batch_size {
            let Some(data) = self.peeked.take().or_else(|| self.generator.next()) else {
                self.exhausted = true;
                return None;
            };
            let clock = (replay.clock)(&data);
            let origin = *self.replay_origin.get_or_insert(clock);
            let intended_ns = self.start_ns + (clock.saturating_sub(origin) as f64 / replay.speed) as u64;
            if intended_ns > now {
                self.peeked = Some(data);
                return Some(intended_ns);
            }
            let event_ns = self.event_time.as_ref().map_or(intended_ns, |f| f(&data));
            self.max_event_ns = self.max_event_ns.max(event_ns);
            self.batch.push(Tuple { event_ns, intended_ns, ingress_ns: now, data });
            self.emitted += 1;
        }
        None
    }

    fn maybe_watermark(&mut self, now: u64) {
        if now >= self.next_watermark_ns && self.max_event_ns > 0 {
            self.next_watermark_ns = now + WATERMARK_INTERVAL_NS;
            self.head.watermark(self.max_event_ns.saturating_sub(self.out_of_orderness_ns));
        }
    }
}

impl<T: Send + 'static> Task for SourceTask<T> {
    fn step(&mut self) -> Step {
        if self.exhausted || self.stop.is_requested() {
            self.head.finish();
            return Step::Finished;
        }
        let now = now_ns();
        if self.start_ns == 0 {
            // The first instance to step starts the schedule for all of them.
            self.start_ns = match &self.common_start {
                None => now,
                Some(common) => match common.compare_exchange(0, now, Ordering::SeqCst, Ordering::SeqCst) {
                    Ok(_) => now,
                    Err(start) => start,
                },
            };
            *crate::sync::lock(&self.metrics.offered) = Some((now, self.offered));
        }
        // Operators chained behind the source may have processing-time timers: this thread is
        // the only one that can fire them.
        if self.head.next_timer().is_some_and(|t| t <= now) {
            self.head.tick(now);
            if self.signal.is_blocked() {
                return Step::Blocked;
            }
        }
        if let Some(replay) = self.replay.clone() {
            let next = self.take_replayed(&replay, now);
            if self.batch.is_empty() && !self.exhausted {
                self.maybe_watermark(now);
                self.head.flush();
                if self.signal.is_blocked() {
                    return Step::Blocked;
                }
                let next = next.unwrap_or(now).max(now + MIN_SLEEP_NS);
                return Step::Idle { until: Some(self.head.next_timer().map_or(next, |t| t.min(next))) };
            }
            OperatorMetrics::add(&self.metrics.tuples_in, self.batch.len());
            self.head.push_batch(&mut self.batch);
            self.maybe_watermark(now);
            return if self.signal.is_blocked() { Step::Blocked } else { Step::Worked };
        }
        let unlimited = self.offered.is_unlimited();
        let due = if unlimited {
            self.batch_size as u64
        } else {
            self.offered.due(now.saturating_sub(self.start_ns)).saturating_sub(self.emitted).min(self.batch_size as u64)
        };
        if due == 0 {
            self.maybe_watermark(now);
            self.head.flush();
            if self.signal.is_blocked() {
                return Step::Blocked;
            }
            let next = slack::wake_at(&self.offered, self.start_ns, self.emitted, now, self.slack_ns, MIN_SLEEP_NS);
            return Step::Idle { until: Some(self.head.next_timer().map_or(next, |t| t.min(next))) };
        }
        for _ in 0..due {
            let Some(data) = self.generator.next() else {
                self.exhausted = true;
                break;
            };
            let intended_ns = if unlimited { now } else { self.intended(self.emitted) };
            let event_ns = self.event_time.as_ref().map_or(intended_ns, |f| f(&data));
            self.max_event_ns = self.max_event_ns.max(event_ns);
            self.batch.push(Tuple { event_ns, intended_ns, ingress_ns: now, data });
            self.emitted += 1;
        }
        OperatorMetrics::add(&self.metrics.tuples_in, self.batch.len());
        self.head.push_batch(&mut self.batch);
        self.maybe_watermark(now);
        if self.signal.is_blocked() {
            Step::Blocked
        } else {
            Step::Worked
        }
    }

    fn has_input(&self) -> bool {
        self.stop.is_requested()
    }

    fn signal(&self) -> &Arc<Signal> {
        &self.signal
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn constant_schedule() {
        let o = Offered::Constant(1000.0);
        assert_eq!(o.intended(0), 0);
        assert_eq!(o.intended(5), 5_000_000);
        assert_eq!(o.due(0), 1);
        assert_eq!(o.due(4_999_999), 5);
        assert_eq!(o.due(5_000_000), 6);
        assert_eq!(o.split(4), Offered::Constant(250.0));
    }

    #[test]
    fn ramp_schedule_is_consistent_and_monotone() {
        let o = Offered::Ramp { from: 1000.0, to: 3000.0, over: Duration::from_secs(2) };
        // On the ramp 2 s x (1000 + 3000) / 2 = 4000 tuples, then 3000/s.
        assert_eq!(o.due(2_000_000_000), 4001);
        assert_eq!(o.due(3_000_000_000), 7001);
        let mut last = 0;
        for k in 0..10_000u64 {
            let t = o.intended(k);
            assert!(t >= last, "intended times never go back");
            last = t;
            // Tuple k is due from its intended time on and not a microsecond before (floating
            // point puts the exact instant within a few ns).
            assert!(o.due(t + 1_000) > k, "k {k} at {t}");
            assert!(t < 1_000 || o.due(t - 1_000) <= k, "k {k} at {t}");
        }
        // The rate rises: gaps between tuples shrink from ~1 ms towards ~0.33 ms.
        let gap = |k: u64| o.intended(k + 1) - o.intended(k);
        assert!(gap(10) > gap(3000) && gap(3000) > gap(9000));
        let down = Offered::Ramp { from: 3000.0, to: 1000.0, over: Duration::from_secs(2) };
        assert!(down.intended(100) < Offered::Constant(1000.0).intended(100));
        assert!(Offered::Ramp { from: 0.0, to: 100.0, over: Duration::from_secs(1) }.intended(10) > 0);
    }

    #[test]
    fn bad_schedules_are_explained() {
        assert!(Offered::Constant(-1.0).validate().is_err());
        assert!(Offered::Ramp { from: 10.0, to: 0.0, over: Duration::from_secs(1) }.validate().is_err());
        assert!(Offered::Ramp { from: 10.0, to: 20.0, over: Duration::ZERO }.validate().is_err());
        assert!(Offered::Ramp { from: 0.0, to: 20.0, over: Duration::from_secs(1) }.validate().is_ok());
        // One tuple per nanosecond is the most a source schedules.
        assert!(Offered::Constant(MAX_RATE).validate().is_ok());
        let e = Offered::Constant(1e25).validate().unwrap_err().to_string();
        assert!(e.contains("1000000000 tuples/s"), "{e}");
        assert!(Offered::Constant(f64::NAN).validate().is_err());
        assert!(Offered::Ramp { from: 1.0, to: 1e10, over: Duration::from_secs(1) }.validate().is_err());
    }

    #[test]
    fn extreme_schedules_saturate_instead_of_overflowing() {
        // Far beyond any run, everything is due; a tiny rate's next tuple is due at the end of time.
        assert_eq!(Offered::Constant(MAX_RATE).due(u64::MAX), u64::MAX);
        assert_eq!(Offered::Constant(1e-300).intended(1), u64::MAX);
    }
}

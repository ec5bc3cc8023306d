//! Sources: where tuples enter the engine, stamped with their intended send time.
//!
//! A source instance draws data from a generator (any iterator) at an offered rate on its own
//! clock: tuple *k* is intended to be sent at `start + k / rate`. When the engine cannot keep up
//! the source falls behind its schedule, but the intended times stay on it, so end-to-end latency
//! shows the delay (the source's lag is the stand-in for an external queue such as Kafka). At rate
//! 0 it produces as fast as the engine takes tuples, and intended = ingress.

use std::sync::Arc;
use std::time::Duration;

use crate::channel::Signal;
use crate::metrics::OperatorMetrics;
use crate::operator::Input;
use crate::task::{Step, StopFlag, Task};
use crate::tuple::{now_ns, Tuple};

/// Makes the generator of one source instance: `(instance, parallelism) -> iterator`.
pub type Generator<T> = Arc<dyn Fn(usize, usize) -> Box<dyn Iterator<Item = T> + Send> + Send + Sync>;

/// Extracts a tuple's event time, in nanoseconds.
pub type EventTime<T> = Arc<dyn Fn(&T) -> u64 + Send + Sync>;

/// How a source produces its stream.
pub struct Source<T> {
    pub(crate) generator: Generator<T>,
    pub(crate) rate: f64,
    pub(crate) event_time: Option<EventTime<T>>,
    pub(crate) out_of_orderness_ns: u64,
}

impl<T> Clone for Source<T> {
    fn clone(&self) -> Self {
        Source {
            generator: self.generator.clone(),
            rate: self.rate,
            event_time: self.event_time.clone(),
            out_of_orderness_ns: self.out_of_orderness_ns,
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
            rate: 0.0,
            event_time: None,
            out_of_orderness_ns: 0,
        }
    }

    /// Offers `tuples_per_second` in total, split evenly over the instances; 0 = as fast as
    /// possible.
    pub fn rate(mut self, tuples_per_second: f64) -> Self {
        self.rate = tuples_per_second.max(0.0);
        self
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
    /// Nanoseconds between intended send times; 0 = unlimited.
    interval_ns: f64,
    start_ns: u64,
    emitted: u64,
    batch: Vec<Tuple<T>>,
    batch_size: usize,
    event_time: Option<EventTime<T>>,
    out_of_orderness_ns: u64,
    max_event_ns: u64,
    next_watermark_ns: u64,
    exhausted: bool,
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
        stop: Arc<StopFlag>,
        metrics: Arc<OperatorMetrics>,
    ) -> Self {
        let signal = Arc::new(Signal::default());
        stop.register(signal.clone());
        let per_instance = source.rate / parallelism as f64;
        SourceTask {
            generator: (source.generator)(instance, parallelism),
            head,
            interval_ns: if per_instance > 0.0 { 1e9 / per_instance } else { 0.0 },
            start_ns: 0,
            emitted: 0,
            batch: Vec::with_capacity(batch_size),
            batch_size,
            event_time: source.event_time.clone(),
            out_of_orderness_ns: source.out_of_orderness_ns,
            max_event_ns: 0,
            next_watermark_ns: 0,
            exhausted: false,
            stop,
            signal,
            metrics,
        }
    }

    fn intended(&self, k: u64) -> u64 {
        self.start_ns + (k as f64 * self.interval_ns) as u64
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
            self.start_ns = now;
        }
        // Operators chained behind the source may have processing-time timers: this thread is
        // the only one that can fire them.
        if self.head.next_timer().is_some_and(|t| t <= now) {
            self.head.tick(now);
        }
        let due = if self.interval_ns == 0.0 {
            self.batch_size as u64
        } else {
            let elapsed = (now - self.start_ns) as f64;
            ((elapsed / self.interval_ns) as u64 + 1).saturating_sub(self.emitted).min(self.batch_size as u64)
        };
        if due == 0 {
            self.maybe_watermark(now);
            self.head.flush();
            let next = self.intended(self.emitted).max(now + MIN_SLEEP_NS);
            return Step::Idle { until: Some(self.head.next_timer().map_or(next, |t| t.min(next))) };
        }
        for _ in 0..due {
            let Some(data) = self.generator.next() else {
                self.exhausted = true;
                break;
            };
            let intended_ns = if self.interval_ns == 0.0 { now } else { self.intended(self.emitted) };
            let event_ns = self.event_time.as_ref().map_or(intended_ns, |f| f(&data));
            self.max_event_ns = self.max_event_ns.max(event_ns);
            self.batch.push(Tuple { event_ns, intended_ns, ingress_ns: now, data });
            self.emitted += 1;
        }
        OperatorMetrics::add(&self.metrics.tuples_in, self.batch.len());
        self.head.push_batch(&mut self.batch);
        self.maybe_watermark(now);
        Step::Worked
    }

    fn has_input(&self) -> bool {
        self.stop.is_requested()
    }

    fn signal(&self) -> &Arc<Signal> {
        &self.signal
    }
}

//! Sinks: where tuples leave the engine and their latency is recorded.

use std::sync::Arc;

use hdrhistogram::Histogram;

use crate::metrics::{latency_histogram, OperatorMetrics, Recorded, SinkMetrics};
use crate::operator::{Control, Input};
use crate::tuple::{now_ns, Tuple};

/// A sink's consumer function.
pub type SinkFn<T> = Box<dyn FnMut(Tuple<T>) + Send>;

/// A sink publishes its latencies into the shared histograms at most this often (and at the end),
/// whatever the rate: merging walks every bucket of the local and the shared histograms (some
/// 40 000 each, 1.3 MB in all, more than a core's cache) and then clears the local ones. Once per
/// 8 192 tuples, as before, that was a fifth of a raw pipeline's instructions. A reader of the
/// shared histograms while the sink runs (`/metrics`) sees its latencies up to this late; at its
/// end the sink publishes all.
const PUBLISH_INTERVAL_NS: u64 = 100_000_000;

/// Up to this many runs of latencies since the last publication are kept as they are and
/// recorded into the shared histograms one by one: at a low rate that is far cheaper than merging
/// (and then clearing) a local histogram's every bucket. Past it, the sink records into its local
/// histogram and merges it, as it does at any high rate.
const RAW_LATENCIES: usize = 256;

/// One kind of latency (processing or end-to-end) a sink recorded since it last published.
///
/// A batch's tuples leave at one time, and those of one source batch entered at one time (at rate
/// 0 they were also meant to be sent then): runs of equal latencies are recorded once, with their
/// count, instead of once per tuple.
struct Latencies {
    /// Runs (latency, count), while they are few.
    runs: Vec<(u64, u64)>,
    /// True once `runs` overflowed since the last publication: `histogram` holds data.
    spilled: bool,
    histogram: Histogram<u64>,
}

impl Latencies {
    fn new() -> Self {
        Latencies { runs: Vec::with_capacity(RAW_LATENCIES), spilled: false, histogram: latency_histogram() }
    }

    /// Records `count` latencies of `ns`: kept as a run while the runs are few, else into the
    /// local histogram.
    #[inline]
    fn record(&mut self, ns: u64, count: u64) {
        if !self.spilled {
            if self.runs.len() < RAW_LATENCIES {
                self.runs.push((ns, count));
                return;
            }
            self.spilled = true;
            for (v, n) in self.runs.drain(..) {
                self.histogram.saturating_record_n(v, n);
            }
        }
        self.histogram.saturating_record_n(ns, count);
    }

    fn recorded(&self) -> Recorded<'_> {
        if self.spilled {
            Recorded::Histogram(&self.histogram)
        } else {
            Recorded::Runs(&self.runs)
        }
    }

    /// Forgets what was recorded.
    fn clear(&mut self) {
        if self.spilled {
            self.histogram.reset();
            self.spilled = false;
        }
        self.runs.clear();
    }
}

/// A run of equal latencies being counted: (latency, count); count 0 before the first.
#[derive(Clone, Copy)]
struct Run(u64, u64);

impl Run {
    /// Adds one latency of `ns`; a run it ends goes to `into`.
    #[inline]
    fn add(&mut self, ns: u64, into: &mut Latencies) {
        if self.0 == ns {
            self.1 += 1;
        } else {
            self.end(into);
            *self = Run(ns, 1);
        }
    }

    fn end(self, into: &mut Latencies) {
        if self.1 > 0 {
            into.record(self.0, self.1);
        }
    }
}

/// The last link of a chain that ends in a sink.
pub(crate) struct SinkInput<T> {
    f: SinkFn<T>,
    /// Egress − ingress, since the last publication.
    processing: Latencies,
    /// Egress − intended send time, since the last publication.
    e2e: Latencies,
    unpublished: usize,
    published_ns: u64,
    /// The shared histograms' resets when the unpublished latencies began ([`SinkMetrics::reset`]).
    epoch: u64,
    shared: Arc<SinkMetrics>,
    metrics: Arc<OperatorMetrics>,
}

impl<T> SinkInput<T> {
    pub(crate) fn new(f: SinkFn<T>, shared: Arc<SinkMetrics>, metrics: Arc<OperatorMetrics>) -> Self {
        SinkInput {
            f,
            processing: Latencies::new(),
            e2e: Latencies::new(),
            unpublished: 0,
            published_ns: 0,
            epoch: shared.epoch(),
            shared,
            metrics,
        }
    }

    /// Publishes the latencies recorded since the last time (dropped instead if the shared
    /// histograms were reset since).
    fn publish(&mut self, now_ns: u64) {
        self.published_ns = now_ns;
        if self.unpublished > 0 {
            self.shared.publish(self.epoch, self.processing.recorded(), self.e2e.recorded());
            self.clear();
        }
        self.epoch = self.shared.epoch();
    }

    /// Forgets the unpublished latencies.
    fn clear(&mut self) {
        self.processing.clear();
        self.e2e.clear();
        self.unpublished = 0;
    }
}

impl<T> Input<T> for SinkInput<T> {
    fn push_batch(&mut self, batch: &mut Vec<Tuple<T>>) {
        let egress = now_ns();
        let n = batch.len();
        if self.shared.epoch() != self.epoch {
            // The shared histograms were reset (a warm-up ended): what came before is dropped.
            self.clear();
            self.epoch = self.shared.epoch();
        }
        let (mut processing, mut e2e) = (Run(0, 0), Run(0, 0));
        for t in batch.drain(..) {
            // Never 0, so the first tuple starts a run.
            processing.add(egress.saturating_sub(t.ingress_ns).max(1), &mut self.processing);
            e2e.add(egress.saturating_sub(t.intended_ns).max(1), &mut self.e2e);
            (self.f)(t);
        }
        processing.end(&mut self.processing);
        e2e.end(&mut self.e2e);
        OperatorMetrics::add(&self.metrics.tuples_out, n);
        self.unpublished += n;
        if egress.saturating_sub(self.published_ns) >= PUBLISH_INTERVAL_NS {
            self.publish(egress);
        }
    }
}

impl<T> Control for SinkInput<T> {
    fn watermark(&mut self, _watermark: u64) {}
    fn tick(&mut self, _now_ns: u64) {}
    fn next_timer(&self) -> Option<u64> {
        None
    }
    fn flush(&mut self) {
        let now = now_ns();
        if self.unpublished > 0 && now.saturating_sub(self.published_ns) >= PUBLISH_INTERVAL_NS {
            self.publish(now);
        }
    }
    fn finish(&mut self) {
        self.publish(now_ns());
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::sync::lock;

    /// `n` tuples sent and taken in at `sent_ns`: all of one latency at the sink.
    fn tuples(n: u64, sent_ns: u64) -> Vec<Tuple<u64>> {
        (0..n).map(|i| Tuple { event_ns: 0, intended_ns: sent_ns, ingress_ns: sent_ns, data: i }).collect()
    }

    /// `n` tuples sent and taken in 1 µs apart until now: each of its own latency.
    fn spread(n: u64) -> Vec<Tuple<u64>> {
        // The engine clock starts at its first reading: wait until it has run for the span.
        while now_ns() <= n * 1_000 {
            std::thread::sleep(std::time::Duration::from_millis(1));
        }
        let sent_ns = now_ns();
        (0..n)
            .map(|i| {
                let at = sent_ns - i * 1_000;
                Tuple { event_ns: 0, intended_ns: at, ingress_ns: at, data: i }
            })
            .collect()
    }

    #[test]
    fn latencies_reach_the_shared_histograms_whether_kept_as_runs_or_spilled() {
        let shared = Arc::new(SinkMetrics::default());
        let mut sink = SinkInput::new(Box::new(|_| {}), shared.clone(), Arc::new(OperatorMetrics::default()));
        // As if it had just published: what follows waits for the end.
        sink.published_ns = now_ns();
        // A few tuples, sent at one time and received 2 ms later at least: one run of each kind,
        // recorded with its count when published.
        let start = now_ns();
        std::thread::sleep(std::time::Duration::from_millis(2));
        sink.push_batch(&mut tuples(10, start));
        assert!(!sink.processing.spilled && sink.processing.runs.len() == 1 && sink.processing.runs[0].1 == 10);
        assert!(!sink.e2e.spilled && sink.e2e.runs.len() == 1);
        sink.finish();
        assert_eq!(lock(&shared.e2e).len(), 10);
        assert!(lock(&shared.e2e).min() >= 2_000_000 && lock(&shared.processing).min() >= 2_000_000);
        assert!(sink.processing.runs.is_empty() && sink.e2e.runs.is_empty());
        // More different latencies than the runs hold before a publication: the local histograms
        // take over, the runs included.
        sink.push_batch(&mut spread(RAW_LATENCIES as u64 + 100));
        assert!(sink.processing.spilled && sink.processing.runs.is_empty());
        assert_eq!(sink.processing.histogram.len(), RAW_LATENCIES as u64 + 100);
        sink.finish();
        let e2e = lock(&shared.e2e);
        assert_eq!(e2e.len(), 10 + RAW_LATENCIES as u64 + 100);
        assert_eq!(lock(&shared.processing).len(), e2e.len());
        assert_eq!(sink.processing.histogram.len(), 0, "reset after the merge");
        assert!(!sink.processing.spilled && !sink.e2e.spilled);
    }

    #[test]
    fn equal_latencies_next_to_each_other_are_one_run_of_each_kind() {
        let shared = Arc::new(SinkMetrics::default());
        let mut sink = SinkInput::new(Box::new(|_| {}), shared.clone(), Arc::new(OperatorMetrics::default()));
        sink.published_ns = now_ns();
        // Taken in at a, a, a, b, b, a (processing: 3 runs), meant to be sent at x, then y five
        // times (end-to-end: 2 runs).
        std::thread::sleep(std::time::Duration::from_millis(1));
        let a = now_ns();
        let b = a - 5_000;
        let (x, y) = (b - 7_000, b - 3_000);
        let at = [(a, x), (a, y), (a, y), (b, y), (b, y), (a, y)];
        let mut batch: Vec<Tuple<u64>> = at
            .iter()
            .map(|&(ingress_ns, intended_ns)| Tuple { event_ns: 0, intended_ns, ingress_ns, data: 0 })
            .collect();
        sink.push_batch(&mut batch);
        let p = sink.processing.runs.clone();
        assert_eq!(p.iter().map(|r| r.1).collect::<Vec<_>>(), [3, 2, 1], "{p:?}");
        assert!(p[0].0 == p[2].0 && p[1].0 == p[0].0 + 5_000, "{p:?}");
        let e = sink.e2e.runs.clone();
        assert_eq!(e.iter().map(|r| r.1).collect::<Vec<_>>(), [1, 5], "{e:?}");
        assert_eq!(e[0].0, e[1].0 + 4_000, "{e:?}");
        sink.finish();
        let (processing, e2e) = (lock(&shared.processing), lock(&shared.e2e));
        assert_eq!((processing.len(), e2e.len()), (6, 6));
        assert_eq!(processing.count_at(p[0].0), 4);
        assert_eq!(e2e.count_at(e[1].0), 5);
    }

    #[test]
    fn latencies_are_published_once_the_interval_passed_not_before() {
        let shared = Arc::new(SinkMetrics::default());
        let mut sink = SinkInput::new(Box::new(|_| {}), shared.clone(), Arc::new(OperatorMetrics::default()));
        let start = now_ns();
        sink.published_ns = start;
        // Past the runs' room: kept locally while the interval has not passed.
        sink.push_batch(&mut spread(RAW_LATENCIES as u64 * 40));
        let n = RAW_LATENCIES as u64 * 40;
        if now_ns() - start < PUBLISH_INTERVAL_NS {
            assert_eq!(lock(&shared.e2e).len(), 0, "published before the interval passed");
            // An idle moment before the interval passed publishes nothing either.
            sink.flush();
            if now_ns() - start < PUBLISH_INTERVAL_NS {
                assert_eq!(lock(&shared.e2e).len(), 0, "published by a flush before the interval passed");
            }
        }
        std::thread::sleep(std::time::Duration::from_nanos(PUBLISH_INTERVAL_NS));
        // After the interval an idle moment publishes all of it.
        sink.flush();
        assert_eq!(lock(&shared.e2e).len(), n);
        assert_eq!(lock(&shared.processing).len(), n);
    }

    #[test]
    fn a_reset_drops_the_latencies_before_it_and_keeps_those_after() {
        for before in [3, RAW_LATENCIES as u64 + 100] {
            let shared = Arc::new(SinkMetrics::default());
            let mut sink = SinkInput::new(Box::new(|_| {}), shared.clone(), Arc::new(OperatorMetrics::default()));
            sink.published_ns = now_ns();
            // Recorded, not yet published, then a reset (a warm-up ended), then two more tuples.
            sink.push_batch(&mut spread(before));
            shared.reset();
            sink.push_batch(&mut tuples(2, now_ns()));
            sink.finish();
            assert_eq!(lock(&shared.e2e).len(), 2, "{before} tuples before the reset");
            assert_eq!(lock(&shared.processing).len(), 2, "{before} tuples before the reset");
            // A reset between the records and their publication: nothing of them is merged.
            sink.published_ns = now_ns();
            sink.push_batch(&mut spread(before));
            shared.reset();
            sink.finish();
            assert_eq!(lock(&shared.e2e).len(), 0, "{before} tuples published after the reset");
            assert_eq!(lock(&shared.processing).len(), 0, "{before} tuples published after the reset");
        }
    }
}

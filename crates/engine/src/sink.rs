//! Sinks: where tuples leave the engine and their latency is recorded.

use std::sync::Arc;

use hdrhistogram::Histogram;

use crate::metrics::{latency_histogram, OperatorMetrics, SinkMetrics};
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

/// Up to this many latencies since the last publication are kept as they are and recorded into
/// the shared histograms one by one: at a low rate that is far cheaper than merging (and then
/// clearing) the local histograms' every bucket. Past it, the sink records into its local
/// histograms and merges them, as it does at any high rate.
const RAW_LATENCIES: usize = 256;

/// The last link of a chain that ends in a sink.
pub(crate) struct SinkInput<T> {
    f: SinkFn<T>,
    /// (processing, end-to-end) latencies since the last publication, while they are few.
    raw: Vec<(u64, u64)>,
    /// True once `raw` overflowed since the last publication: the local histograms hold data.
    spilled: bool,
    processing: Histogram<u64>,
    e2e: Histogram<u64>,
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
            raw: Vec::with_capacity(RAW_LATENCIES),
            spilled: false,
            processing: latency_histogram(),
            e2e: latency_histogram(),
            unpublished: 0,
            published_ns: 0,
            epoch: shared.epoch(),
            shared,
            metrics,
        }
    }

    /// Records one tuple's latencies: kept raw while they are few, else into the local
    /// histograms.
    #[inline]
    fn record(&mut self, processing_ns: u64, e2e_ns: u64) {
        if !self.spilled {
            if self.raw.len() < RAW_LATENCIES {
                self.raw.push((processing_ns, e2e_ns));
                return;
            }
            self.spilled = true;
            for (p, e) in self.raw.drain(..) {
                self.processing.saturating_record(p);
                self.e2e.saturating_record(e);
            }
        }
        self.processing.saturating_record(processing_ns);
        self.e2e.saturating_record(e2e_ns);
    }

    /// Publishes the latencies recorded since the last time (dropped instead if the shared
    /// histograms were reset since).
    fn publish(&mut self, now_ns: u64) {
        self.published_ns = now_ns;
        if self.unpublished > 0 {
            if self.spilled {
                self.shared.merge(self.epoch, &self.processing, &self.e2e);
            } else {
                self.shared.record(self.epoch, &self.raw);
            }
            self.clear();
        }
        self.epoch = self.shared.epoch();
    }

    /// Forgets the unpublished latencies.
    fn clear(&mut self) {
        if self.spilled {
            self.processing.reset();
            self.e2e.reset();
            self.spilled = false;
        }
        self.raw.clear();
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
        for t in batch.drain(..) {
            self.record(egress.saturating_sub(t.ingress_ns).max(1), egress.saturating_sub(t.intended_ns).max(1));
            (self.f)(t);
        }
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

    fn tuples(n: u64, intended_ns: u64) -> Vec<Tuple<u64>> {
        (0..n).map(|i| Tuple { event_ns: 0, intended_ns, ingress_ns: intended_ns, data: i }).collect()
    }

    #[test]
    fn latencies_reach_the_shared_histograms_whether_kept_raw_or_spilled() {
        let shared = Arc::new(SinkMetrics::default());
        let mut sink = SinkInput::new(Box::new(|_| {}), shared.clone(), Arc::new(OperatorMetrics::default()));
        // As if it had just published: what follows waits for the end.
        sink.published_ns = now_ns();
        // A few tuples, sent at the clock's start and received 2 ms later at least: kept raw,
        // recorded one by one when published, values and all.
        let start = now_ns();
        std::thread::sleep(std::time::Duration::from_millis(2));
        sink.push_batch(&mut tuples(10, start));
        assert!(!sink.spilled && sink.raw.len() == 10);
        sink.finish();
        assert_eq!(lock(&shared.e2e).len(), 10);
        assert!(lock(&shared.e2e).min() >= 2_000_000 && lock(&shared.processing).min() >= 2_000_000);
        assert!(sink.raw.is_empty());
        // More than the raw buffer holds before a publication: the local histograms take over,
        // the raw ones included.
        let sent = now_ns();
        sink.push_batch(&mut tuples(RAW_LATENCIES as u64 + 100, sent));
        assert!(sink.spilled && sink.raw.is_empty());
        assert_eq!(sink.processing.len(), RAW_LATENCIES as u64 + 100);
        sink.finish();
        let e2e = lock(&shared.e2e);
        assert_eq!(e2e.len(), 10 + RAW_LATENCIES as u64 + 100);
        assert_eq!(lock(&shared.processing).len(), e2e.len());
        assert_eq!(sink.processing.len(), 0, "reset after the merge");
        assert!(!sink.spilled);
    }

    #[test]
    fn latencies_are_published_once_the_interval_passed_not_before() {
        let shared = Arc::new(SinkMetrics::default());
        let mut sink = SinkInput::new(Box::new(|_| {}), shared.clone(), Arc::new(OperatorMetrics::default()));
        let start = now_ns();
        sink.published_ns = start;
        // Past the raw buffer: kept locally while the interval has not passed.
        sink.push_batch(&mut tuples(RAW_LATENCIES as u64 * 40, now_ns()));
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
            sink.push_batch(&mut tuples(before, now_ns()));
            shared.reset();
            sink.push_batch(&mut tuples(2, now_ns()));
            sink.finish();
            assert_eq!(lock(&shared.e2e).len(), 2, "{before} tuples before the reset");
            assert_eq!(lock(&shared.processing).len(), 2, "{before} tuples before the reset");
            // A reset between the records and their publication: nothing of them is merged.
            sink.published_ns = now_ns();
            sink.push_batch(&mut tuples(before, now_ns()));
            shared.reset();
            sink.finish();
            assert_eq!(lock(&shared.e2e).len(), 0, "{before} tuples published after the reset");
            assert_eq!(lock(&shared.processing).len(), 0, "{before} tuples published after the reset");
        }
    }
}

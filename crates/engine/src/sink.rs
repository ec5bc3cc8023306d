//! Sinks: where tuples leave the engine and their latency is recorded.

use std::sync::Arc;

use hdrhistogram::Histogram;

use crate::metrics::{latency_histogram, OperatorMetrics, SinkMetrics};
use crate::operator::{Control, Input};
use crate::tuple::{now_ns, Tuple};

/// A sink's consumer function.
pub type SinkFn<T> = Box<dyn FnMut(Tuple<T>) + Send>;

/// Records up to this many tuples locally before merging into the shared histograms, so the hot
/// path takes no lock.
const PUBLISH_EVERY: usize = 8192;

/// An idle sink publishes at most this often: merging walks every bucket of the histograms (some
/// 60 000), which would cost far more than the tuples if done on every idle moment at low rates.
const PUBLISH_INTERVAL_NS: u64 = 100_000_000;

/// The last link of a chain that ends in a sink.
pub(crate) struct SinkInput<T> {
    f: SinkFn<T>,
    processing: Histogram<u64>,
    e2e: Histogram<u64>,
    unpublished: usize,
    published_ns: u64,
    shared: Arc<SinkMetrics>,
    metrics: Arc<OperatorMetrics>,
}

impl<T> SinkInput<T> {
    pub(crate) fn new(f: SinkFn<T>, shared: Arc<SinkMetrics>, metrics: Arc<OperatorMetrics>) -> Self {
        SinkInput {
            f,
            processing: latency_histogram(),
            e2e: latency_histogram(),
            unpublished: 0,
            published_ns: 0,
            shared,
            metrics,
        }
    }

    fn publish(&mut self) {
        if self.unpublished > 0 {
            self.published_ns = now_ns();
            self.shared.merge(&self.processing, &self.e2e);
            self.processing.reset();
            self.e2e.reset();
            self.unpublished = 0;
        }
    }
}

impl<T> Input<T> for SinkInput<T> {
    fn push_batch(&mut self, batch: &mut Vec<Tuple<T>>) {
        let egress = now_ns();
        let n = batch.len();
        for t in batch.drain(..) {
            self.processing.saturating_record(egress.saturating_sub(t.ingress_ns).max(1));
            self.e2e.saturating_record(egress.saturating_sub(t.intended_ns).max(1));
            (self.f)(t);
        }
        OperatorMetrics::add(&self.metrics.tuples_out, n);
        self.unpublished += n;
        if self.unpublished >= PUBLISH_EVERY {
            self.publish();
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
        if now_ns().saturating_sub(self.published_ns) >= PUBLISH_INTERVAL_NS {
            self.publish();
        }
    }
    fn finish(&mut self) {
        self.publish();
    }
}

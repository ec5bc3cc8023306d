//! The metric values of one round, per physical operator and aggregated per logical operator:
//! what the [`MetricProvider`](crate::MetricProvider) hands to the policies.

use std::collections::BTreeMap;

use crate::cluster::Cluster;
use crate::derive::finite;
use crate::entity::{LogicalRef, OpRef};
use crate::metric::Metric;
use crate::transform;

/// Metric values of one round. Every value is finite (NaN never gets here).
#[derive(Clone, Debug, Default)]
pub struct MetricValues {
    spes: Vec<SpeValues>,
}

#[derive(Clone, Debug, Default)]
struct SpeValues {
    /// Per metric, one value per physical operator.
    physical: BTreeMap<Metric, Vec<f64>>,
    /// Per metric, one value per logical operator (see [`MetricValues::logical`]).
    logical: BTreeMap<Metric, Vec<f64>>,
    /// The metrics obtained this round, in the order they were obtained.
    computed: Vec<Metric>,
}

impl MetricValues {
    /// Values built by hand, e.g. by a simulator or an engine that knows its metrics exactly:
    /// `value(metric, op)` for every listed metric and physical operator of `cluster`. Non-finite
    /// values are replaced (NaN by 0, ±∞ by the largest finite value).
    pub fn from_fn(cluster: &Cluster, metrics: &[Metric], mut value: impl FnMut(Metric, OpRef) -> f64) -> MetricValues {
        let mut out = MetricValues::with_spes(cluster.spes().len());
        for (spe, s) in cluster.spes().iter().enumerate() {
            for &m in metrics {
                let v = (0..s.physical_len()).map(|op| finite(value(m, OpRef { spe, op }))).collect();
                out.insert(cluster, spe, m, v);
            }
        }
        out
    }

    pub(crate) fn with_spes(n: usize) -> MetricValues {
        MetricValues { spes: vec![SpeValues::default(); n] }
    }

    /// Stores a metric's physical values for SPE `spe` and aggregates them per logical operator.
    pub(crate) fn insert(&mut self, cluster: &Cluster, spe: usize, metric: Metric, values: Vec<f64>) {
        let s = &mut self.spes[spe];
        s.logical.insert(metric, transform::to_logical(cluster.spe(spe), &values, metric.aggregation()));
        s.physical.insert(metric, values);
        if !s.computed.contains(&metric) {
            s.computed.push(metric);
        }
    }

    pub(crate) fn set_computed(&mut self, spe: usize, order: Vec<Metric>) {
        self.spes[spe].computed = order;
    }

    /// The value of `metric` for physical operator `op`, or `None` if the metric was not computed
    /// for its SPE (no registered policy needs it) or `op` is not in the cluster.
    pub fn get(&self, metric: Metric, op: OpRef) -> Option<f64> {
        self.spes.get(op.spe)?.physical.get(&metric)?.get(op.op).copied()
    }

    /// The value of `metric` for a logical operator, combined from the physical operators running
    /// it by [`Metric::aggregation`]: summed over replicas for counters, rates and queues, the
    /// maximum for `head_wait`, the mean for per-tuple ratios. A logical operator fused with
    /// others sees the values of its whole chain (an SPE reports one set per physical operator).
    pub fn logical(&self, metric: Metric, op: LogicalRef) -> Option<f64> {
        self.spes.get(op.spe)?.logical.get(&metric)?.get(op.op).copied()
    }

    /// All values of `metric` for the physical operators of SPE `spe`, indexed by operator.
    pub fn physical_values(&self, metric: Metric, spe: usize) -> Option<&[f64]> {
        self.spes.get(spe)?.physical.get(&metric).map(Vec::as_slice)
    }

    /// The metrics obtained for SPE `spe` this round (from the driver or derived), in the order
    /// they were obtained: every metric after its dependencies, each once.
    pub fn computed(&self, spe: usize) -> &[Metric] {
        self.spes.get(spe).map_or(&[], |s| s.computed.as_slice())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::fixtures::*;

    #[test]
    fn from_fn_aggregates_replicas_per_logical_operator() {
        let c = Cluster::new(vec![fused_and_replicated("s", "q")]).unwrap();
        let v = MetricValues::from_fn(&c, &[Metric::QueueSize, Metric::HeadWait, Metric::Cost], |m, op| match m {
            Metric::QueueSize => [0.0, 5.0, 7.0, 1.0][op.op],
            Metric::HeadWait => [0.0, 0.5, 0.25, 0.1][op.op],
            _ => [1.0, 10.0, 30.0, 2.0][op.op],
        });
        let map = LogicalRef { spe: 0, op: 1 };
        assert_eq!(v.logical(Metric::QueueSize, map), Some(12.0));
        assert_eq!(v.logical(Metric::HeadWait, map), Some(0.5));
        assert_eq!(v.logical(Metric::Cost, map), Some(20.0));
        assert_eq!(v.get(Metric::QueueSize, OpRef { spe: 0, op: 2 }), Some(7.0));
        assert_eq!(v.get(Metric::RateIn, OpRef { spe: 0, op: 2 }), None);
        assert_eq!(v.get(Metric::QueueSize, OpRef { spe: 3, op: 0 }), None);
        assert_eq!(v.computed(0), &[Metric::QueueSize, Metric::HeadWait, Metric::Cost]);
    }

    #[test]
    fn from_fn_never_stores_nan() {
        let c = Cluster::new(vec![pipeline("s", "q")]).unwrap();
        let v = MetricValues::from_fn(&c, &[Metric::Cost], |_, _| f64::NAN);
        assert_eq!(v.physical_values(Metric::Cost, 0), Some(&[0.0, 0.0, 0.0][..]));
    }
}

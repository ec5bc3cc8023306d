//! Policies whose priority is one metric: QS (`queue_size`), HR (`highest_rate`), FCFS
//! (`head_wait`), or any other [`Metric`].

use crate::metric::Metric;
use crate::policy::{single_priority, Level, Policy, PolicyContext, PolicyError};
use crate::schedule::Schedule;

/// Priority = the value of one metric: the more, the more important.
#[derive(Clone, Debug)]
pub struct MetricPolicy {
    name: String,
    metric: Metric,
    level: Level,
}

impl MetricPolicy {
    /// A policy named `name` prioritising by `metric` at `level`.
    pub fn new(name: impl Into<String>, metric: Metric, level: Level) -> MetricPolicy {
        MetricPolicy { name: name.into(), metric, level }
    }

    /// QS (Queue Size, Lachesis §5.1): operators with more queued input first, balancing queues.
    pub fn queue_size(name: impl Into<String>, level: Level) -> MetricPolicy {
        MetricPolicy::new(name, Metric::QueueSize, level)
    }

    /// HR (Highest Rate, Sharaf et al.): productive, cheap paths to the sinks first, minimising
    /// average latency.
    pub fn highest_rate(name: impl Into<String>, level: Level) -> MetricPolicy {
        MetricPolicy::new(name, Metric::HighestRate, level)
    }

    /// FCFS (First Come First Serve): operators whose oldest queued tuple has waited longest
    /// first, minimising the maximum latency.
    pub fn fcfs(name: impl Into<String>, level: Level) -> MetricPolicy {
        MetricPolicy::new(name, Metric::HeadWait, level)
    }

    /// The metric it prioritises by.
    pub fn metric(&self) -> Metric {
        self.metric
    }
}

impl Policy for MetricPolicy {
    fn name(&self) -> &str {
        &self.name
    }

    fn metrics(&self) -> Vec<Metric> {
        vec![self.metric]
    }

    fn schedule(&mut self, ctx: &PolicyContext<'_>) -> Result<Schedule, PolicyError> {
        single_priority(ctx, &self.name, self.level, |op| op.metric(self.metric))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::fixtures::*;
    use crate::{Cluster, MetricValues, OpRef, Scope};
    use std::collections::BTreeMap;

    #[test]
    fn qs_hr_fcfs_prioritise_by_their_metric() {
        let c = Cluster::new(vec![diamond("s", "q")]).unwrap();
        let m = MetricValues::from_fn(&c, &[Metric::QueueSize, Metric::HighestRate, Metric::HeadWait], |m, op| {
            let v = [0.0, 5.0, 2.0, 9.0][op.op];
            if m == Metric::HeadWait {
                v / 10.0
            } else {
                v
            }
        });
        let scope = Scope::all().resolve(&c);
        let ctx = PolicyContext { cluster: &c, metrics: &m, scope: &scope };
        for mut p in [
            MetricPolicy::queue_size("qs", Level::Physical),
            MetricPolicy::highest_rate("hr", Level::Physical),
            MetricPolicy::fcfs("fcfs", Level::Physical),
        ] {
            assert_eq!(p.metrics(), vec![p.metric()]);
            let Schedule::Single(s) = p.schedule(&ctx).unwrap() else { panic!("single expected") };
            let best = s.iter().max_by(|a, b| a.1.total_cmp(b.1)).unwrap().0;
            assert_eq!(*best, OpRef { spe: 0, op: 3 }, "{}", p.name());
            assert!(s[&OpRef { spe: 0, op: 1 }] > s[&OpRef { spe: 0, op: 2 }], "{}", p.name());
        }
    }

    #[test]
    fn logical_qs_sums_replicas_and_inherits() {
        let c = Cluster::new(vec![fused_and_replicated("s", "q")]).unwrap();
        let m = MetricValues::from_fn(&c, &[Metric::QueueSize], |_, op| [0.0, 5.0, 1.0, 4.0][op.op]);
        let scope = Scope::all().resolve(&c);
        let ctx = PolicyContext { cluster: &c, metrics: &m, scope: &scope };
        let s = MetricPolicy::queue_size("qs", Level::Logical).schedule(&ctx).unwrap();
        let expected: BTreeMap<_, _> =
            [0.0, 6.0, 6.0, 4.0].iter().enumerate().map(|(op, &p)| (OpRef { spe: 0, op }, p)).collect();
        assert_eq!(s, Schedule::Single(expected));
    }
}

//! RANDOM (Lachesis §5.1): uniformly random priorities, a baseline that ignores every metric.

use crate::metric::Metric;
use crate::policy::{single_priority, Level, Policy, PolicyContext, PolicyError};
use crate::schedule::Schedule;

/// Gives every operator a priority drawn uniformly from [0, 1) each round, from a seeded
/// generator so that runs can be repeated.
#[derive(Clone, Debug)]
pub struct RandomPolicy {
    name: String,
    level: Level,
    rng: fastrand::Rng,
}

impl RandomPolicy {
    /// A random policy whose sequence of schedules is determined by `seed`.
    pub fn new(name: impl Into<String>, seed: u64, level: Level) -> RandomPolicy {
        RandomPolicy { name: name.into(), level, rng: fastrand::Rng::with_seed(seed) }
    }
}

impl Policy for RandomPolicy {
    fn name(&self) -> &str {
        &self.name
    }

    fn metrics(&self) -> Vec<Metric> {
        Vec::new()
    }

    fn schedule(&mut self, ctx: &PolicyContext<'_>) -> Result<Schedule, PolicyError> {
        let rng = &mut self.rng;
        single_priority(ctx, &self.name, self.level, |_| Ok(rng.f64()))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::fixtures::*;
    use crate::{Cluster, MetricValues, Scope};

    fn priorities(p: &mut RandomPolicy, c: &Cluster) -> Vec<f64> {
        let m = MetricValues::default();
        let scope = Scope::all().resolve(c);
        let ctx = PolicyContext { cluster: c, metrics: &m, scope: &scope };
        match p.schedule(&ctx).unwrap() {
            Schedule::Single(s) => s.into_values().collect(),
            Schedule::Grouping(_) => panic!("single expected"),
        }
    }

    #[test]
    fn same_seed_same_schedules_and_values_change_between_rounds() {
        let c = Cluster::new(vec![diamond("s", "q")]).unwrap();
        let (mut a, mut b) = (RandomPolicy::new("r", 7, Level::Physical), RandomPolicy::new("r", 7, Level::Physical));
        let (a1, b1) = (priorities(&mut a, &c), priorities(&mut b, &c));
        assert_eq!(a1, b1);
        assert!(a1.iter().all(|p| (0.0..1.0).contains(p)));
        assert_ne!(priorities(&mut a, &c), a1, "a new round draws new priorities");
        assert_ne!(priorities(&mut RandomPolicy::new("r", 8, Level::Physical), &c), a1);
    }

    #[test]
    fn logical_random_gives_replicas_the_same_priority() {
        let c = Cluster::new(vec![fused_and_replicated("s", "q")]).unwrap();
        let p = priorities(&mut RandomPolicy::new("r", 1, Level::Logical), &c);
        assert_eq!(p[1], p[2]);
    }
}

//! Constant priorities chosen by the user, per operator name or per query name — e.g. to favour
//! one query over another, or to pin an operator.

use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};

use crate::cluster::Cluster;
use crate::metric::Metric;
use crate::policy::{single_priority, Level, Policy, PolicyContext, PolicyError};
use crate::schedule::Schedule;

/// What the names of a [`ConstantPolicy`] refer to.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum ConstantKey {
    /// Operator names: logical names at the logical level (`"map"`), physical names at the
    /// physical level (`"map (2/4)"`); a name used in several queries matches in all of them.
    Operator,
    /// Query names.
    Query,
}

/// Priority = a number looked up by operator or query name, or a default.
#[derive(Clone, Debug)]
pub struct ConstantPolicy {
    name: String,
    by: ConstantKey,
    values: BTreeMap<String, f64>,
    default: f64,
    level: Level,
}

impl ConstantPolicy {
    /// A constant policy; fails if a priority is not a finite number.
    pub fn new(
        name: impl Into<String>,
        by: ConstantKey,
        values: BTreeMap<String, f64>,
        default: f64,
        level: Level,
    ) -> Result<ConstantPolicy, PolicyError> {
        let name = name.into();
        let bad = values.iter().find(|(_, v)| !v.is_finite()).map(|(k, v)| (k.as_str(), *v));
        if let Some((key, value)) = bad.or((!default.is_finite()).then_some(("default", default))) {
            return Err(PolicyError::Config {
                policy: name,
                message: format!("priority of '{key}' is {value}; use a finite number"),
            });
        }
        Ok(ConstantPolicy { name, by, values, default, level })
    }
}

impl Policy for ConstantPolicy {
    fn name(&self) -> &str {
        &self.name
    }

    fn metrics(&self) -> Vec<Metric> {
        Vec::new()
    }

    fn schedule(&mut self, ctx: &PolicyContext<'_>) -> Result<Schedule, PolicyError> {
        single_priority(ctx, &self.name, self.level, |op| {
            let key = match self.by {
                ConstantKey::Operator => op.name(),
                ConstantKey::Query => op.query(),
            };
            Ok(self.values.get(key).copied().unwrap_or(self.default))
        })
    }

    fn warnings(&self, cluster: &Cluster) -> Vec<String> {
        let known: Vec<&str> = match (self.by, self.level) {
            (ConstantKey::Query, _) => cluster.queries().into_iter().collect(),
            (ConstantKey::Operator, Level::Logical) => {
                cluster.logical_ops().map(|l| cluster.logical(l).name.as_str()).collect()
            }
            (ConstantKey::Operator, Level::Physical) => {
                cluster.ops().map(|p| cluster.physical(p).name.as_str()).collect()
            }
        };
        let what = match self.by {
            ConstantKey::Operator => "operator",
            ConstantKey::Query => "query",
        };
        self.values
            .keys()
            .filter(|k| !known.contains(&k.as_str()))
            .map(|k| {
                format!(
                    "policy '{}': no {what} is named '{k}' (it gets no priority; the others get theirs or {}); known: {}",
                    self.name,
                    self.default,
                    known.join(", ")
                )
            })
            .collect()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::fixtures::*;
    use crate::{MetricValues, OpRef, Scope};

    fn run(p: &mut ConstantPolicy, c: &Cluster) -> BTreeMap<OpRef, f64> {
        let m = MetricValues::default();
        let scope = Scope::all().resolve(c);
        match p.schedule(&PolicyContext { cluster: c, metrics: &m, scope: &scope }).unwrap() {
            Schedule::Single(s) => s,
            Schedule::Grouping(_) => panic!("single expected"),
        }
    }

    #[test]
    fn per_query_priorities_with_default() {
        let c = Cluster::new(vec![two_queries("s")]).unwrap();
        let values = BTreeMap::from([("q2".to_string(), 10.0)]);
        let mut p = ConstantPolicy::new("c", ConstantKey::Query, values, 1.0, Level::Physical).unwrap();
        let s = run(&mut p, &c);
        assert_eq!(s.values().copied().collect::<Vec<_>>(), vec![1.0, 1.0, 1.0, 10.0, 10.0, 10.0]);
        assert!(p.warnings(&c).is_empty());
    }

    #[test]
    fn per_logical_operator_priorities_reach_replicas_and_chains() {
        let c = Cluster::new(vec![fused_and_replicated("s", "q")]).unwrap();
        let values =
            BTreeMap::from([("filter".to_string(), 3.0), ("sink".to_string(), -1.0), ("nope".to_string(), 9.0)]);
        let mut p = ConstantPolicy::new("c", ConstantKey::Operator, values, 0.0, Level::Logical).unwrap();
        assert_eq!(run(&mut p, &c).values().copied().collect::<Vec<_>>(), vec![0.0, 3.0, 3.0, -1.0]);
        let w = p.warnings(&c);
        assert_eq!(w.len(), 1);
        assert!(w[0].contains("no operator is named 'nope'") && w[0].contains("filter"), "{}", w[0]);
    }

    #[test]
    fn rejects_non_finite_priorities() {
        let values = BTreeMap::from([("q".to_string(), f64::NAN)]);
        let err = ConstantPolicy::new("c", ConstantKey::Query, values, 0.0, Level::Physical).unwrap_err();
        assert!(err.to_string().contains("priority of 'q' is NaN"), "{err}");
        let err =
            ConstantPolicy::new("c", ConstantKey::Query, BTreeMap::new(), f64::INFINITY, Level::Physical).unwrap_err();
        assert!(err.to_string().contains("'default'"), "{err}");
    }
}

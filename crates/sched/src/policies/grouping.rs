//! Grouping policies (Lachesis §5.3): operators grouped by query, by SPE or one group each, with a
//! priority per group — for "CPU shares per query or per SPE, nice per operator inside", or for
//! cgroup-per-operator enforcement of a metric (Lachesis' `operator-metric` cgroup policy).

use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};

use crate::cluster::Cluster;
use crate::entity::OpRef;
use crate::metric::Metric;
use crate::policy::{Policy, PolicyContext, PolicyError};
use crate::schedule::{Group, Schedule};
use crate::values::MetricValues;

/// How operators are grouped.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum GroupBy {
    /// One group per query name (group name = the query name).
    Query,
    /// One group per SPE (group name = the SPE name).
    Spe,
    /// One group per physical operator (group name = `"<spe>/<query>/<operator>"`).
    Operator,
}

/// How a group's members' metric values combine into the group's priority.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Combine {
    /// The sum, e.g. a query's total queued tuples.
    Sum,
    /// The largest, e.g. a query's longest head wait.
    Max,
    /// The mean.
    Mean,
}

/// Where a group's priority comes from.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case", deny_unknown_fields)]
pub enum GroupPriority {
    /// A number per group name, or the default (equal shares when all are default).
    Constant {
        /// Priority by group name.
        #[serde(default)]
        values: BTreeMap<String, f64>,
        /// Priority of groups not listed.
        #[serde(default = "one")]
        default: f64,
    },
    /// A metric of the members, combined.
    Metric {
        /// The metric.
        metric: Metric,
        /// How the members' values combine.
        combine: Combine,
    },
}

fn one() -> f64 {
    1.0
}

/// A grouping schedule: groups of the operators in scope, each with a priority.
#[derive(Clone, Debug)]
pub struct GroupPolicy {
    name: String,
    by: GroupBy,
    priority: GroupPriority,
}

impl GroupPolicy {
    /// A grouping policy; fails if a constant priority is not finite.
    pub fn new(name: impl Into<String>, by: GroupBy, priority: GroupPriority) -> Result<GroupPolicy, PolicyError> {
        let name = name.into();
        if let GroupPriority::Constant { values, default } = &priority {
            if let Some((k, v)) = values
                .iter()
                .map(|(k, v)| (k.as_str(), *v))
                .chain([("default", *default)])
                .find(|(_, v)| !v.is_finite())
            {
                return Err(PolicyError::Config {
                    policy: name,
                    message: format!("priority of '{k}' is {v}; use a finite number"),
                });
            }
        }
        Ok(GroupPolicy { name, by, priority })
    }

    fn group_name(&self, cluster: &Cluster, op: OpRef) -> String {
        match self.by {
            GroupBy::Query => cluster.physical(op).query.clone(),
            GroupBy::Spe => cluster.spe(op.spe).name().to_string(),
            GroupBy::Operator => {
                let p = cluster.physical(op);
                format!("{}/{}/{}", cluster.spe(op.spe).name(), p.query, p.name)
            }
        }
    }

    fn priority_of(
        &self,
        name: &str,
        members: &[OpRef],
        cluster: &Cluster,
        metrics: &MetricValues,
    ) -> Result<f64, PolicyError> {
        match &self.priority {
            GroupPriority::Constant { values, default } => Ok(values.get(name).copied().unwrap_or(*default)),
            GroupPriority::Metric { metric, combine } => {
                let values = members
                    .iter()
                    .map(|&op| {
                        metrics.get(*metric, op).ok_or_else(|| PolicyError::MissingMetric {
                            policy: self.name.clone(),
                            metric: *metric,
                            op: format!(
                                "operator '{}' of SPE '{}'",
                                cluster.physical(op).name,
                                cluster.spe(op.spe).name()
                            ),
                        })
                    })
                    .collect::<Result<Vec<f64>, _>>()?;
                let p = match combine {
                    Combine::Sum => values.iter().sum(),
                    Combine::Max => values.iter().copied().fold(f64::MIN, f64::max),
                    Combine::Mean => values.iter().sum::<f64>() / values.len() as f64,
                };
                if !p.is_finite() {
                    let op = format!("group '{name}'");
                    return Err(PolicyError::NotFinite { policy: self.name.clone(), op, value: p });
                }
                Ok(p)
            }
        }
    }
}

impl Policy for GroupPolicy {
    fn name(&self) -> &str {
        &self.name
    }

    fn metrics(&self) -> Vec<Metric> {
        match self.priority {
            GroupPriority::Metric { metric, .. } => vec![metric],
            GroupPriority::Constant { .. } => Vec::new(),
        }
    }

    fn schedule(&mut self, ctx: &PolicyContext<'_>) -> Result<Schedule, PolicyError> {
        let mut members: BTreeMap<String, Vec<OpRef>> = BTreeMap::new();
        for &op in ctx.scope {
            members.entry(self.group_name(ctx.cluster, op)).or_default().push(op);
        }
        let groups = members
            .into_iter()
            .map(|(name, members)| {
                let priority = self.priority_of(&name, &members, ctx.cluster, ctx.metrics)?;
                Ok(Group { name, priority, members })
            })
            .collect::<Result<Vec<_>, PolicyError>>()?;
        Ok(Schedule::Grouping(groups))
    }

    fn warnings(&self, cluster: &Cluster) -> Vec<String> {
        let GroupPriority::Constant { values, .. } = &self.priority else { return Vec::new() };
        let known: std::collections::BTreeSet<String> = cluster.ops().map(|op| self.group_name(cluster, op)).collect();
        let listed = known.iter().map(String::as_str).collect::<Vec<_>>().join(", ");
        values
            .keys()
            .filter(|k| !known.contains(*k))
            .map(|k| format!("policy '{}': no group is named '{k}'; groups are: {listed}", self.name))
            .collect()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::fixtures::*;
    use crate::Scope;

    fn groups(p: &mut GroupPolicy, c: &Cluster, m: &MetricValues) -> Vec<Group> {
        let scope = Scope::all().resolve(c);
        match p.schedule(&PolicyContext { cluster: c, metrics: m, scope: &scope }).unwrap() {
            Schedule::Grouping(g) => g,
            Schedule::Single(_) => panic!("grouping expected"),
        }
    }

    #[test]
    fn one_group_per_query_with_summed_queue_size() {
        let c = Cluster::new(vec![two_queries("s")]).unwrap();
        let m = MetricValues::from_fn(&c, &[Metric::QueueSize], |_, op| op.op as f64);
        let metric = GroupPriority::Metric { metric: Metric::QueueSize, combine: Combine::Sum };
        let mut p = GroupPolicy::new("g", GroupBy::Query, metric).unwrap();
        assert_eq!(p.metrics(), vec![Metric::QueueSize]);
        let g = groups(&mut p, &c, &m);
        assert_eq!(
            g.iter().map(|g| (g.name.as_str(), g.priority)).collect::<Vec<_>>(),
            vec![("q1", 3.0), ("q2", 12.0)]
        );
        assert_eq!(g[1].members, (3..6).map(|op| OpRef { spe: 0, op }).collect::<Vec<_>>());
        let max = GroupPriority::Metric { metric: Metric::QueueSize, combine: Combine::Max };
        let g = groups(&mut GroupPolicy::new("g", GroupBy::Query, max).unwrap(), &c, &m);
        assert_eq!((g[0].priority, g[1].priority), (2.0, 5.0));
        let mean = GroupPriority::Metric { metric: Metric::QueueSize, combine: Combine::Mean };
        let g = groups(&mut GroupPolicy::new("g", GroupBy::Query, mean).unwrap(), &c, &m);
        assert_eq!((g[0].priority, g[1].priority), (1.0, 4.0));
    }

    #[test]
    fn one_group_per_spe_with_constants() {
        let c = two_spes();
        let constant = GroupPriority::Constant {
            values: BTreeMap::from([("storm".into(), 3.0), ("spark".into(), 1.0)]),
            default: 1.0,
        };
        let mut p = GroupPolicy::new("g", GroupBy::Spe, constant).unwrap();
        let g = groups(&mut p, &c, &MetricValues::default());
        assert_eq!(
            g.iter().map(|g| (g.name.as_str(), g.priority, g.members.len())).collect::<Vec<_>>(),
            vec![("flink", 1.0, 3), ("storm", 3.0, 4)]
        );
        let w = p.warnings(&c);
        assert_eq!(w.len(), 1);
        assert!(w[0].ends_with("no group is named 'spark'; groups are: flink, storm"), "{w:?}");
    }

    #[test]
    fn one_group_per_operator_and_missing_metrics() {
        let c = Cluster::new(vec![pipeline("s", "q")]).unwrap();
        let metric = GroupPriority::Metric { metric: Metric::HighestRate, combine: Combine::Sum };
        let mut p = GroupPolicy::new("g", GroupBy::Operator, metric).unwrap();
        let m = MetricValues::from_fn(&c, &[Metric::HighestRate], |_, op| op.op as f64 + 0.5);
        let g = groups(&mut p, &c, &m);
        assert_eq!(
            g.iter().map(|g| g.name.as_str()).collect::<Vec<_>>(),
            vec!["s/q/map (1/1)", "s/q/sink (1/1)", "s/q/source (1/1)"]
        );
        assert!(g.iter().all(|g| g.members.len() == 1));
        let scope = Scope::all().resolve(&c);
        let empty = MetricValues::default();
        let err = p.schedule(&PolicyContext { cluster: &c, metrics: &empty, scope: &scope }).unwrap_err();
        assert!(matches!(err, PolicyError::MissingMetric { metric: Metric::HighestRate, .. }), "{err}");
        let bad = GroupPriority::Constant { values: BTreeMap::new(), default: f64::NAN };
        assert!(GroupPolicy::new("g", GroupBy::Spe, bad).is_err());
    }
}

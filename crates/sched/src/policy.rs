//! The policy interface (Lachesis Definition 3.2): metrics at one time → priorities of physical
//! operators. A policy only *chooses*; it never touches a thread. The same object drives the
//! middleware (→ nice / cgroups), the engine's user-level scheduler and the simulator.
//!
//! Policies may be written on logical operators ([`Level::Logical`]): they are evaluated per
//! logical operator, on metric values aggregated over its physical operators, and the
//! transformation rule ([`crate::transform::logical_to_physical`]) turns the result into a
//! physical schedule.

use std::collections::{BTreeMap, BTreeSet};

use serde::{Deserialize, Serialize};

use crate::cluster::Cluster;
use crate::entity::{LogicalRef, OpKind, OpRef};
use crate::metric::Metric;
use crate::schedule::Schedule;
use crate::transform;
use crate::values::MetricValues;

/// A scheduling policy.
pub trait Policy: Send {
    /// Its name, for errors and reports.
    fn name(&self) -> &str;

    /// The metrics it reads; register them with the [`MetricProvider`](crate::MetricProvider).
    fn metrics(&self) -> Vec<Metric>;

    /// The schedule for the operators in `ctx.scope`, from this round's metric values. Errors
    /// (a script that fails, a metric that was not computed) mean: skip this policy this round.
    fn schedule(&mut self, ctx: &PolicyContext<'_>) -> Result<Schedule, PolicyError>;

    /// Problems worth a warning in this cluster that do not stop the policy, e.g. a constant
    /// priority given for an operator name that matches no operator.
    fn warnings(&self, _cluster: &Cluster) -> Vec<String> {
        Vec::new()
    }
}

/// What a policy sees in one round.
#[derive(Clone, Copy, Debug)]
pub struct PolicyContext<'a> {
    /// The topologies.
    pub cluster: &'a Cluster,
    /// This round's metric values.
    pub metrics: &'a MetricValues,
    /// The physical operators this policy governs.
    pub scope: &'a BTreeSet<OpRef>,
}

/// Which operators a policy is written for.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Level {
    /// Logical operators, as the user wrote the query; turned into physical priorities by the
    /// transformation rule.
    Logical,
    /// Physical operators, as deployed (the default).
    #[default]
    Physical,
}

/// Which operators a policy governs, as written in a config: filters by SPE name and by query
/// name; a missing filter matches everything.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Scope {
    /// SPE names, or `None` for every SPE.
    #[serde(default)]
    pub spes: Option<Vec<String>>,
    /// Query names, or `None` for every query.
    #[serde(default)]
    pub queries: Option<Vec<String>>,
}

impl Scope {
    /// Every operator of every SPE.
    pub fn all() -> Scope {
        Scope::default()
    }

    /// The physical operators of `cluster` it matches.
    pub fn resolve(&self, cluster: &Cluster) -> BTreeSet<OpRef> {
        let matches =
            |filter: &Option<Vec<String>>, name: &str| filter.as_ref().is_none_or(|f| f.iter().any(|x| x == name));
        cluster
            .ops()
            .filter(|&op| {
                matches(&self.spes, cluster.spe(op.spe).name()) && matches(&self.queries, &cluster.physical(op).query)
            })
            .collect()
    }

    /// The SPE filter as a set, for a [`Requirement`](crate::Requirement).
    pub fn spe_names(&self) -> Option<BTreeSet<String>> {
        self.spes.as_ref().map(|s| s.iter().cloned().collect())
    }
}

/// Why a policy could not produce a schedule (or be built).
#[derive(Clone, Debug, PartialEq, thiserror::Error)]
pub enum PolicyError {
    /// A metric the policy reads was not computed this round.
    #[error("policy '{policy}' reads {metric} of {op}, but it was not computed; create the MetricProvider with this policy's metrics()")]
    MissingMetric {
        /// The policy.
        policy: String,
        /// The metric.
        metric: Metric,
        /// The operator, described.
        op: String,
    },
    /// A priority came out NaN or infinite.
    #[error("policy '{policy}' gave {op} the priority {value}; priorities must be finite numbers")]
    NotFinite {
        /// The policy.
        policy: String,
        /// The operator, described.
        op: String,
        /// The value.
        value: f64,
    },
    /// A user script does not compile.
    #[error("policy '{policy}': script error{}: {message}", at(*line, *column))]
    ScriptCompile {
        /// The policy.
        policy: String,
        /// 1-based line (0 if unknown).
        line: usize,
        /// 1-based column (0 if unknown).
        column: usize,
        /// What is wrong.
        message: String,
    },
    /// A user script failed while evaluating one operator.
    #[error("policy '{policy}': script failed for {op}{}: {message}", at(*line, *column))]
    ScriptRuntime {
        /// The policy.
        policy: String,
        /// The operator, described.
        op: String,
        /// 1-based line (0 if unknown).
        line: usize,
        /// 1-based column (0 if unknown).
        column: usize,
        /// What went wrong.
        message: String,
    },
    /// A policy's configuration is invalid.
    #[error("policy '{policy}': {message}")]
    Config {
        /// The policy.
        policy: String,
        /// What is wrong and how to fix it.
        message: String,
    },
}

/// `" at line 2, column 3"`, or nothing when the position is unknown (0).
fn at(line: usize, column: usize) -> String {
    match (line, column) {
        (0, _) => String::new(),
        (l, 0) => format!(" at line {l}"),
        (l, c) => format!(" at line {l}, column {c}"),
    }
}

/// An operator at a policy's level: a physical or a logical one.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord)]
pub enum Operator {
    /// A physical operator.
    Physical(OpRef),
    /// A logical operator.
    Logical(LogicalRef),
}

/// One operator as a policy sees it: names, kind and metric values at the policy's level.
#[derive(Clone, Copy, Debug)]
pub struct OperatorView<'a> {
    ctx: &'a PolicyContext<'a>,
    policy: &'a str,
    /// Which operator.
    pub op: Operator,
}

impl<'a> OperatorView<'a> {
    /// Its name (the logical name at the logical level, e.g. `"map"`; the physical name at the
    /// physical level, e.g. `"map (2/4)"`).
    pub fn name(&self) -> &'a str {
        match self.op {
            Operator::Physical(op) => &self.ctx.cluster.physical(op).name,
            Operator::Logical(op) => &self.ctx.cluster.logical(op).name,
        }
    }

    /// Its query.
    pub fn query(&self) -> &'a str {
        match self.op {
            Operator::Physical(op) => &self.ctx.cluster.physical(op).query,
            Operator::Logical(op) => &self.ctx.cluster.logical(op).query,
        }
    }

    /// The name of its SPE.
    pub fn spe(&self) -> &'a str {
        let spe = match self.op {
            Operator::Physical(op) => op.spe,
            Operator::Logical(op) => op.spe,
        };
        self.ctx.cluster.spe(spe).name()
    }

    /// Source, operator or sink ([`Spe::physical_kind`](crate::Spe::physical_kind) for a fused
    /// physical operator).
    pub fn kind(&self) -> OpKind {
        match self.op {
            Operator::Physical(op) => self.ctx.cluster.spe(op.spe).physical_kind(op.op),
            Operator::Logical(op) => self.ctx.cluster.logical(op).kind,
        }
    }

    /// Its replica index, for a physical operator.
    pub fn instance(&self) -> Option<usize> {
        match self.op {
            Operator::Physical(op) => Some(self.ctx.cluster.physical(op).instance),
            Operator::Logical(_) => None,
        }
    }

    /// The value of `metric` for it this round.
    pub fn metric(&self, metric: Metric) -> Result<f64, PolicyError> {
        let v = match self.op {
            Operator::Physical(op) => self.ctx.metrics.get(metric, op),
            Operator::Logical(op) => self.ctx.metrics.logical(metric, op),
        };
        v.ok_or_else(|| PolicyError::MissingMetric { policy: self.policy.to_string(), metric, op: self.describe() })
    }

    /// `"operator 'map (1/1)' of query 'q1' in SPE 'flink'"`, for error messages.
    pub fn describe(&self) -> String {
        let level = match self.op {
            Operator::Physical(_) => "operator",
            Operator::Logical(_) => "logical operator",
        };
        format!("{level} '{}' of query '{}' in SPE '{}'", self.name(), self.query(), self.spe())
    }
}

/// Builds a single-priority schedule by evaluating `priority` for every operator in scope at
/// `level`; at the logical level the transformation rule makes it physical, restricted to the
/// scope. Fails on the first error or non-finite priority.
pub fn single_priority(
    ctx: &PolicyContext<'_>,
    policy: &str,
    level: Level,
    mut priority: impl FnMut(&OperatorView<'_>) -> Result<f64, PolicyError>,
) -> Result<Schedule, PolicyError> {
    let mut eval = |op: Operator| -> Result<f64, PolicyError> {
        let view = OperatorView { ctx, policy, op };
        let p = priority(&view)?;
        if !p.is_finite() {
            return Err(PolicyError::NotFinite { policy: policy.to_string(), op: view.describe(), value: p });
        }
        Ok(p)
    };
    let physical = match level {
        Level::Physical => ctx
            .scope
            .iter()
            .map(|&op| Ok((op, eval(Operator::Physical(op))?)))
            .collect::<Result<BTreeMap<_, _>, _>>()?,
        Level::Logical => {
            let logical: BTreeSet<LogicalRef> =
                ctx.scope.iter().flat_map(|&op| ctx.cluster.logical_parts(op)).collect();
            let priorities = logical
                .into_iter()
                .map(|l| Ok((l, eval(Operator::Logical(l))?)))
                .collect::<Result<BTreeMap<_, _>, PolicyError>>()?;
            let mut physical = transform::logical_to_physical(ctx.cluster, &priorities);
            physical.retain(|op, _| ctx.scope.contains(op));
            physical
        }
    };
    Ok(Schedule::Single(physical))
}

/// The operators of `level` in `scope`, viewed, for policies that need them all at once.
pub fn views<'a>(ctx: &'a PolicyContext<'a>, policy: &'a str, level: Level) -> Vec<OperatorView<'a>> {
    let ops: Vec<Operator> = match level {
        Level::Physical => ctx.scope.iter().map(|&op| Operator::Physical(op)).collect(),
        Level::Logical => {
            let logical: BTreeSet<LogicalRef> =
                ctx.scope.iter().flat_map(|&op| ctx.cluster.logical_parts(op)).collect();
            logical.into_iter().map(Operator::Logical).collect()
        }
    };
    ops.into_iter().map(|op| OperatorView { ctx, policy, op }).collect()
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::fixtures::*;

    #[test]
    fn scope_filters_by_spe_and_query() {
        let c = Cluster::new(vec![two_queries("engine"), pipeline("flink", "lr")]).unwrap();
        assert_eq!(Scope::all().resolve(&c).len(), 9);
        let q2 = Scope { spes: None, queries: Some(vec!["q2".into()]) };
        assert_eq!(q2.resolve(&c), (3..6).map(|op| OpRef { spe: 0, op }).collect());
        let flink = Scope { spes: Some(vec!["flink".into()]), queries: None };
        assert_eq!(flink.resolve(&c), (0..3).map(|op| OpRef { spe: 1, op }).collect());
        assert_eq!(flink.spe_names(), Some(BTreeSet::from(["flink".to_string()])));
        let none = Scope { spes: Some(vec!["flink".into()]), queries: Some(vec!["q1".into()]) };
        assert!(none.resolve(&c).is_empty());
    }

    #[test]
    fn logical_level_goes_through_the_transformation_rule() {
        let c = Cluster::new(vec![fused_and_replicated("s", "q")]).unwrap();
        let m = MetricValues::default();
        let scope = Scope::all().resolve(&c);
        let ctx = PolicyContext { cluster: &c, metrics: &m, scope: &scope };
        // Priority = index of the logical operator: the fused chain gets max(1, 2) on both replicas.
        let s = single_priority(&ctx, "t", Level::Logical, |v| match v.op {
            Operator::Logical(l) => Ok(l.op as f64),
            Operator::Physical(_) => unreachable!("logical level evaluates logical operators"),
        })
        .unwrap();
        let Schedule::Single(s) = s else { panic!("single expected") };
        assert_eq!(s.values().copied().collect::<Vec<_>>(), vec![0.0, 2.0, 2.0, 3.0]);
    }

    #[test]
    fn views_describe_operators_and_missing_metrics_are_errors() {
        let c = Cluster::new(vec![fused_and_replicated("s", "q")]).unwrap();
        let m = MetricValues::default();
        let scope = BTreeSet::from([OpRef { spe: 0, op: 2 }]);
        let ctx = PolicyContext { cluster: &c, metrics: &m, scope: &scope };
        let v = views(&ctx, "p", Level::Physical);
        assert_eq!(v.len(), 1);
        assert_eq!(
            (v[0].name(), v[0].query(), v[0].spe(), v[0].instance()),
            ("map -> filter (2/2)", "q", "s", Some(1))
        );
        assert_eq!(v[0].kind(), OpKind::Operator);
        let err = v[0].metric(Metric::QueueSize).unwrap_err();
        assert_eq!(
            err.to_string(),
            "policy 'p' reads queue_size of operator 'map -> filter (2/2)' of query 'q' in SPE 's', but it was not \
             computed; create the MetricProvider with this policy's metrics()"
        );
        let logical = views(&ctx, "p", Level::Logical);
        assert_eq!(logical.iter().map(|v| v.name()).collect::<Vec<_>>(), vec!["map", "filter"]);
        assert_eq!(logical[0].instance(), None);
    }

    #[test]
    fn non_finite_priorities_are_rejected() {
        let c = Cluster::new(vec![pipeline("s", "q")]).unwrap();
        let m = MetricValues::default();
        let scope = Scope::all().resolve(&c);
        let ctx = PolicyContext { cluster: &c, metrics: &m, scope: &scope };
        let err = single_priority(&ctx, "p", Level::Physical, |_| Ok(f64::INFINITY)).unwrap_err();
        assert!(matches!(err, PolicyError::NotFinite { .. }), "{err}");
    }
}

//! The one conversion of what an engine says into the scheduling core's model (feature `sched`):
//! a `/topology` into an [`SpeTopology`], an operator's counters into samples, a policy short
//! name into a [`PolicySpec`]. The engine's in-process adapter and the middleware's moirai driver
//! both call these, so the two levels see an engine the same way.

use std::collections::BTreeSet;
use std::fmt;

use moirai_sched::policies::{ConstantKey, PolicySpec};
use moirai_sched::{Level, LogicalOperator, Metric, OpKind, PhysicalOperator as SchedOperator, SpeTopology, ThreadRef};

use crate::metrics::OperatorCounters;
use crate::policies;
use crate::topology::{NodeKind, PhysicalOperator, Topology};

/// The primitive metrics an engine provides (what `/metrics` serves per physical operator).
pub const PROVIDES: [Metric; 5] =
    [Metric::TuplesIn, Metric::TuplesOut, Metric::QueueLen, Metric::HeadWait, Metric::CpuNs];

fn op_kind(kind: NodeKind) -> OpKind {
    match kind {
        NodeKind::Source => OpKind::Source,
        NodeKind::Sink => OpKind::Sink,
        NodeKind::Operator => OpKind::Operator,
    }
}

/// The scheduling core's view of an engine's topology, as SPE `name`; `threads` gives each
/// physical operator its threads (none where the caller schedules operators, not threads).
/// Physical ids are indices: the engine numbers its physical operators `0..n` in order
/// ([`Topology::check_ids`]).
pub fn spe_topology(
    name: &str,
    t: &Topology,
    mut threads: impl FnMut(&PhysicalOperator) -> Vec<ThreadRef>,
) -> SpeTopology {
    let dedup = |pairs: Vec<(usize, usize)>| pairs.into_iter().collect::<BTreeSet<_>>().into_iter().collect();
    SpeTopology {
        name: name.to_string(),
        pid: t.pid,
        queries: t.queries.clone(),
        logical: (t.logical.nodes.iter())
            .map(|n| LogicalOperator { name: n.name.clone(), query: n.query.clone(), kind: op_kind(n.kind) })
            .collect(),
        logical_edges: dedup(t.logical.edges.iter().map(|e| (e.from, e.to)).collect()),
        physical: (t.physical.iter())
            .map(|p| SchedOperator {
                name: p.name.clone(),
                query: p.query.clone(),
                logical: p.logical.clone(),
                instance: p.instance,
                threads: threads(p),
            })
            .collect(),
        physical_edges: dedup(t.channels.iter().map(|c| (c.from, c.to)).collect()),
    }
}

/// The samples of `needed` metrics from each physical operator's counters (`(id, counters)`;
/// ids beyond the topology are skipped). A source's queue is its backlog — how far it is behind
/// its schedule, the external queue (Kafka's lag, or the engine's own open-loop source), as
/// lachesis-mod's external-queue metrics had it: without it a source always looks idle to
/// queue-size scheduling, gets the lowest priority and starves its query.
pub fn samples<'a>(
    t: &Topology,
    counters: impl IntoIterator<Item = (usize, &'a OperatorCounters)>,
    needed: &[Metric],
) -> Vec<(usize, Metric, f64)> {
    let mut out = Vec::new();
    for (op, c) in counters {
        if op >= t.physical.len() {
            continue;
        }
        let source = t.head_kind(op) == Some(NodeKind::Source);
        for &m in needed {
            let v = match m {
                Metric::TuplesIn => c.tuples_in,
                Metric::TuplesOut => c.tuples_out,
                Metric::QueueLen if source => c.backlog,
                Metric::QueueLen => c.queue_len,
                Metric::HeadWait => c.head_wait_s,
                Metric::CpuNs => c.cpu_ns,
                _ => continue,
            };
            out.push((op, m, v));
        }
    }
    out
}

/// A policy name that names no policy.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum PolicyNameError {
    /// Not in the table, nor `script:`/`metric:`.
    Unknown(String),
    /// `metric:<name>` with a metric the scheduling core does not know.
    Metric {
        /// The metric named.
        metric: String,
        /// Why it is refused.
        reason: String,
    },
    /// `script:` with an empty expression.
    EmptyScript,
}

impl fmt::Display for PolicyNameError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            PolicyNameError::Unknown(name) => write!(f, "unknown policy '{name}'"),
            PolicyNameError::Metric { reason, .. } => f.write_str(reason),
            PolicyNameError::EmptyScript => f.write_str("the policy script is empty"),
        }
    }
}

impl std::error::Error for PolicyNameError {}

/// The policy a short name stands for ([`policies::POLICIES`]), or `script:<expression>`, or
/// `metric:<metric>`, deciding for operators at `level`. STAFiLOS' schedulers: `rr` gives every
/// operator the same priority (the quantum does the rest); `rb`, rate-based, ranks by output
/// rate per unit of cost along the path, which is what HR computes; `qbs` is a constant here —
/// its two priority classes are the engine's (sinks and the operators feeding them first).
pub fn policy_spec(name: &str, level: Level) -> Result<PolicySpec, PolicyNameError> {
    if let Some(script) = name.strip_prefix("script:") {
        if script.trim().is_empty() {
            return Err(PolicyNameError::EmptyScript);
        }
        return Ok(PolicySpec::Script { script: script.to_string(), level, max_operations: None, time_limit_ms: None });
    }
    if let Some(metric) = name.strip_prefix("metric:") {
        let metric: Metric =
            metric.parse().map_err(|reason: String| PolicyNameError::Metric { metric: metric.to_string(), reason })?;
        return Ok(PolicySpec::Metric { metric, level });
    }
    let named = policies::find(name).ok_or_else(|| PolicyNameError::Unknown(name.to_string()))?;
    Ok(match named.name {
        "qs" => PolicySpec::QueueSize { level },
        "hr" | "rb" => PolicySpec::HighestRate { level },
        "fcfs" => PolicySpec::Fcfs { level },
        "random" => PolicySpec::Random { seed: 0, level },
        _ => PolicySpec::Constant { by: ConstantKey::Operator, values: Default::default(), default: 1.0, level },
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::topology::{LogicalGraph, LogicalNode};

    fn topology() -> Topology {
        let node = |name: &str, kind| LogicalNode {
            query: "q".into(),
            name: name.into(),
            kind,
            ports: 1,
            parallelism: 1,
            thread: None,
        };
        let op = |id: usize, kind| PhysicalOperator {
            id,
            query: "q".into(),
            name: format!("{id} (1/1)"),
            logical: vec![id],
            logical_names: Vec::new(),
            instance: 0,
            parallelism: 1,
            kind,
            tid: 10 + id as i32,
        };
        Topology {
            pid: 1,
            queries: vec!["q".into()],
            logical: LogicalGraph {
                nodes: vec![node("src", NodeKind::Source), node("out", NodeKind::Sink)],
                edges: Vec::new(),
            },
            physical: vec![op(0, NodeKind::Source), op(1, NodeKind::Sink)],
            ..Topology::default()
        }
    }

    #[test]
    fn a_sources_queue_is_its_backlog() {
        let c = OperatorCounters { queue_len: 3.0, backlog: 700.0, ..OperatorCounters::default() };
        let s = samples(&topology(), [(0, &c), (1, &c), (9, &c)], &[Metric::QueueLen, Metric::BusyNs]);
        assert_eq!(s, vec![(0, Metric::QueueLen, 700.0), (1, Metric::QueueLen, 3.0)]);
    }

    #[test]
    fn threads_come_from_the_caller() {
        let t = spe_topology("e", &topology(), |p| vec![ThreadRef { tid: p.tid, start_ticks: 0 }]);
        assert_eq!(t.physical[1].threads, vec![ThreadRef { tid: 11, start_ticks: 0 }]);
        assert_eq!(t.logical[0].kind, OpKind::Source);
    }

    #[test]
    fn every_named_policy_has_a_spec() {
        for p in policies::POLICIES {
            assert!(policy_spec(p.name, Level::Physical).is_ok(), "{}", p.name);
        }
        assert_eq!(policy_spec("nope", Level::Physical), Err(PolicyNameError::Unknown("nope".into())));
        assert!(matches!(policy_spec("metric:bogus", Level::Physical), Err(PolicyNameError::Metric { .. })));
        assert!(matches!(policy_spec("script:queue_size", Level::Logical), Ok(PolicySpec::Script { .. })));
    }
}

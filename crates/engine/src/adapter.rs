//! The in-process adapter between the engine and `moirai-sched` (feature `policies`): the
//! engine's physical plan and live counters become the scheduling core's topology and samples,
//! without HTTP, so that the middleware's policy objects rank the engine's operators for the
//! user-level policy executor ([`crate::user_level`]).

use std::collections::BTreeSet;
use std::time::Duration;

use moirai_sched::policies::{ConstantKey, PolicySpec};
use moirai_sched::{
    Capabilities, Controller, Level, LogicalOperator, Metric, Observation, OpKind, PhysicalOperator, PolicyRun,
    Schedule, Scope, SpeTopology,
};

use crate::engine::Topology;
use crate::graph::NodeKind;
use crate::metrics::OperatorSnapshot;
use crate::user_level::Prioritizer;

/// The name the engine goes by in its own cluster.
const SPE: &str = "engine";

/// The primitive metrics the engine samples for its policies: what its metrics endpoint serves.
pub const PROVIDES: [Metric; 5] =
    [Metric::TuplesIn, Metric::TuplesOut, Metric::QueueLen, Metric::HeadWait, Metric::CpuNs];

/// The scheduling core's view of the engine's topology. Operators get no threads: the policy
/// executor schedules operators, not threads.
pub fn spe_topology(t: &Topology) -> SpeTopology {
    let kind = |k: NodeKind| match k {
        NodeKind::Source => OpKind::Source,
        NodeKind::Sink => OpKind::Sink,
        _ => OpKind::Operator,
    };
    let dedup = |pairs: Vec<(usize, usize)>| pairs.into_iter().collect::<BTreeSet<_>>().into_iter().collect();
    SpeTopology {
        name: SPE.to_string(),
        pid: t.pid,
        queries: t.queries.clone(),
        logical: t
            .logical
            .nodes
            .iter()
            .map(|n| LogicalOperator { name: n.name.clone(), query: n.query.clone(), kind: kind(n.kind) })
            .collect(),
        logical_edges: dedup(t.logical.edges.iter().map(|e| (e.from, e.to)).collect()),
        physical: t
            .physical
            .iter()
            .map(|p| PhysicalOperator {
                name: p.name.clone(),
                query: p.query.clone(),
                logical: p.logical.clone(),
                instance: p.instance,
                threads: Vec::new(),
            })
            .collect(),
        physical_edges: dedup(t.channels.iter().map(|c| (c.from, c.to)).collect()),
    }
}

/// The samples of one snapshot, as the middleware's moirai driver samples them: a source's
/// queue is its backlog (how far it is behind its schedule, the external queue), else a source
/// would always look idle to queue-size scheduling and starve its query.
pub fn samples(topology: &Topology, ops: &[OperatorSnapshot]) -> Vec<(usize, Metric, f64)> {
    let mut samples = Vec::with_capacity(ops.len() * PROVIDES.len());
    for (i, o) in ops.iter().enumerate() {
        let source = topology.physical.get(i).is_some_and(|p| p.kind == NodeKind::Source);
        let queue = if source { o.backlog } else { o.queue_len };
        samples.extend([
            (i, Metric::TuplesIn, o.tuples_in as f64),
            (i, Metric::TuplesOut, o.tuples_out as f64),
            (i, Metric::QueueLen, queue as f64),
            (i, Metric::HeadWait, o.head_wait_ns as f64 / 1e9),
            (i, Metric::CpuNs, o.cpu_ns as f64),
        ]);
    }
    samples
}

/// The policy of a `policy:<name>` threading model, as the middleware would configure it.
/// STAFiLOS' schedulers: `rr` gives every operator the same priority (the quantum does the
/// rest); `rb`, rate-based, ranks by output rate per unit of cost along the path, which is what
/// HR computes; `qbs` has two priority classes, 10 for the operators that produce the output
/// (sinks and the operators feeding them) and 5 for the others.
pub fn policy_spec(name: &str) -> Result<PolicySpec, String> {
    let level = Level::Physical;
    Ok(match name {
        "qs" => PolicySpec::QueueSize { level },
        "hr" | "rb" => PolicySpec::HighestRate { level },
        "fcfs" => PolicySpec::Fcfs { level },
        "random" => PolicySpec::Random { seed: 0, level },
        "rr" | "qbs" => {
            PolicySpec::Constant { by: ConstantKey::Operator, values: Default::default(), default: 1.0, level }
        }
        other => match (other.strip_prefix("script:"), other.strip_prefix("metric:")) {
            (Some(script), _) => {
                PolicySpec::Script { script: script.to_string(), level, max_operations: None, time_limit_ms: None }
            }
            (_, Some(metric)) => PolicySpec::Metric {
                metric: metric.parse().map_err(|e| format!("policy metric:{metric}: {e}"))?,
                level,
            },
            _ => return Err(format!("unknown policy '{other}'")),
        },
    })
}

/// A [`Prioritizer`] running one of the scheduling core's policies on the engine's counters,
/// through the same [`Controller`] as the middleware's daemon: one SPE (the engine), one policy,
/// due at every call (the executor's controller thread sets the pace).
pub struct PolicyPrioritizer {
    controller: Controller,
    /// QBS: priority classes by position instead of the policy's values.
    classes: bool,
}

impl PolicyPrioritizer {
    /// Builds the policy `name` (see [`policy_spec`]).
    pub fn new(name: &str) -> Result<PolicyPrioritizer, String> {
        let policy = policy_spec(name)?.build(name).map_err(|e| format!("policy '{name}': {e}"))?;
        let run = PolicyRun { name: name.to_string(), period: Duration::from_millis(1), scope: Scope::all() };
        let caps = Capabilities { spe: SPE.into(), driver: "moirai (in-process)".into(), provides: PROVIDES.into() };
        let controller =
            Controller::new(vec![(run, policy)], vec![caps]).map_err(|e| format!("policy '{name}': {e}"))?;
        Ok(PolicyPrioritizer { controller, classes: name == "qbs" })
    }
}

impl Prioritizer for PolicyPrioritizer {
    fn priorities(&mut self, topology: &Topology, ops: &[OperatorSnapshot], at: Duration) -> Result<Vec<f64>, String> {
        let observation = Observation { topology: spe_topology(topology), samples: samples(topology, ops) };
        let due = self.controller.due(at);
        let round = self.controller.round(&due, at, vec![observation]).map_err(|e| e.to_string())?;
        let spe = round.cluster.spe(0);
        let mut priorities = vec![0.0; spe.physical_len()];
        if self.classes {
            for (op, p) in priorities.iter_mut().enumerate() {
                let output = spe.physical_kind(op) == OpKind::Sink
                    || spe.downstream(op).iter().any(|&d| spe.physical_kind(d) == OpKind::Sink);
                *p = if output { 10.0 } else { 5.0 };
            }
            return Ok(priorities);
        }
        let Some(&policy) = round.policies().first() else {
            return Err("called again within a millisecond: not due".into());
        };
        match self.controller.decide(&round, policy).schedule.map_err(|e| e.to_string())? {
            Schedule::Single(m) => m.into_iter().for_each(|(op, p)| priorities[op.op] = p),
            Schedule::Grouping(groups) => {
                for g in groups {
                    g.members.iter().for_each(|op| priorities[op.op] = g.priority);
                }
            }
        }
        Ok(priorities)
    }
}

//! The in-process adapter between the engine and `moirai-sched` (feature `policies`): the
//! engine's topology and live counters become the scheduling core's topology and samples,
//! without HTTP, so that the middleware's policy objects rank the engine's operators for the
//! user-level policy executor ([`crate::user_level`]). The conversion is the one the middleware's
//! moirai driver uses ([`moirai_contract::sched`]), so both levels see the engine alike.

use std::time::Duration;

use moirai_contract::metrics::OperatorCounters;
use moirai_contract::sched::{self as contract, PolicyNameError};
use moirai_contract::topology::Topology;
use moirai_sched::policies::PolicySpec;
use moirai_sched::{
    Capabilities, Controller, Level, Metric, Observation, OpKind, PolicyRun, Schedule, Scope, SpeTopology,
};

use crate::metrics::OperatorSnapshot;
use crate::user_level::{PolicyError, Prioritizer};

/// The name the engine goes by in its own cluster.
const SPE: &str = "engine";

/// The primitive metrics the engine samples for its policies: what its metrics endpoint serves.
pub const PROVIDES: [Metric; 5] = contract::PROVIDES;

/// The scheduling core's view of the engine's topology. Operators get no threads: the policy
/// executor schedules operators, not threads.
pub fn spe_topology(t: &Topology) -> SpeTopology {
    contract::spe_topology(SPE, t, |_| Vec::new())
}

/// An operator snapshot as the counters `/metrics` serves.
pub fn counters(o: &OperatorSnapshot) -> OperatorCounters {
    OperatorCounters {
        tuples_in: o.tuples_in as f64,
        tuples_out: o.tuples_out as f64,
        queue_len: o.queue_len as f64,
        head_wait_s: o.head_wait_ns as f64 / 1e9,
        cpu_ns: o.cpu_ns as f64,
        backlog: o.backlog as f64,
    }
}

/// The samples of one snapshot, as the middleware's moirai driver samples them (a source's queue
/// is its backlog; see [`moirai_contract::sched::samples`]).
pub fn samples(topology: &Topology, ops: &[OperatorSnapshot]) -> Vec<(usize, Metric, f64)> {
    let counters: Vec<OperatorCounters> = ops.iter().map(counters).collect();
    contract::samples(topology, counters.iter().enumerate(), &PROVIDES)
}

/// The policy of a `policy:<name>` threading model, as the middleware would configure it
/// ([`moirai_contract::sched::policy_spec`] at the physical level).
pub fn policy_spec(name: &str) -> Result<PolicySpec, PolicyNameError> {
    contract::policy_spec(name, Level::Physical)
}

/// A [`Prioritizer`] running one of the scheduling core's policies on the engine's counters,
/// through the same [`Controller`] as the middleware's daemon: one SPE (the engine), one policy,
/// due at every call (the policy controller sets the pace). QBS ranks by its two classes
/// instead: 10 for the operators that produce the output (sinks and the operators feeding
/// them), 5 for the others.
pub struct PolicyPrioritizer {
    controller: Controller,
    /// QBS: priority classes by position instead of the policy's values.
    classes: bool,
}

impl PolicyPrioritizer {
    /// Builds the policy `name` (see [`policy_spec`]).
    pub fn new(name: &str) -> Result<PolicyPrioritizer, PolicyError> {
        let build = |reason: String| PolicyError::Build { policy: name.to_string(), reason };
        let policy =
            policy_spec(name).map_err(|e| build(e.to_string()))?.build(name).map_err(|e| build(e.to_string()))?;
        let run = PolicyRun { name: name.to_string(), period: Duration::from_millis(1), scope: Scope::all() };
        let caps = Capabilities { spe: SPE.into(), driver: "moirai (in-process)".into(), provides: PROVIDES.into() };
        let controller = Controller::new(vec![(run, policy)], vec![caps]).map_err(|e| build(e.to_string()))?;
        Ok(PolicyPrioritizer { controller, classes: name == "qbs" })
    }
}

impl Prioritizer for PolicyPrioritizer {
    fn priorities(
        &mut self,
        topology: &Topology,
        ops: &[OperatorSnapshot],
        at: Duration,
    ) -> Result<Vec<f64>, PolicyError> {
        let observation = Observation { topology: spe_topology(topology), samples: samples(topology, ops) };
        let due = self.controller.due(at);
        let round =
            self.controller.round(&due, at, vec![observation]).map_err(|e| PolicyError::Round(e.to_string()))?;
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
            return Err(PolicyError::NotDue);
        };
        match self.controller.decide(&round, policy).schedule.map_err(|e| PolicyError::Round(e.to_string()))? {
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

//! The policy controller of the user-level policy executor: every period, the topology and a
//! snapshot of the counters → the prioritizer → each operator's priority level.

use std::time::Duration;

use moirai_contract::topology::Topology;

use super::Controller;
use crate::threading::PolicyThreading;
use crate::user_level::{publish, PolicyError, Prioritizer};
use crate::view::EngineView;

/// The prioritizer of policy `name`: the scheduling core's policy run in-process.
pub fn prioritizer(name: &str) -> Result<Box<dyn Prioritizer>, PolicyError> {
    #[cfg(feature = "policies")]
    {
        Ok(Box::new(crate::adapter::PolicyPrioritizer::new(name)?))
    }
    #[cfg(not(feature = "policies"))]
    {
        Err(PolicyError::NotBuilt(name.to_string()))
    }
}

/// Ranks the operators by a scheduling policy for the policy executor's ready queue. A failing
/// policy leaves the previous priorities in place and is reported (a `tracing` warning) once
/// until it works again.
pub struct PolicyController {
    prioritizer: Box<dyn Prioritizer>,
    policy: String,
    period: Duration,
    /// The plan does not change while the engine runs: taken once (its thread ids, which
    /// change, are no business of a prioritizer).
    topology: Option<Topology>,
    failing: bool,
}

impl PolicyController {
    /// A controller running `prioritizer` by `config` (its policy's name and period).
    pub fn new(prioritizer: Box<dyn Prioritizer>, config: &PolicyThreading) -> PolicyController {
        PolicyController {
            prioritizer,
            policy: config.policy.clone(),
            period: config.period,
            topology: None,
            failing: false,
        }
    }
}

impl Controller for PolicyController {
    fn name(&self) -> &'static str {
        "moirai-policy"
    }

    fn period(&self) -> Duration {
        self.period
    }

    fn start(&mut self, view: &EngineView) {
        self.topology = Some(view.topology());
    }

    fn round(&mut self, view: &EngineView, at: Duration) {
        let Some(topology) = &self.topology else { return };
        let ops = view.snapshot();
        let result = self.prioritizer.priorities(topology, &ops, at).and_then(|p| {
            if p.len() == ops.len() {
                Ok(p)
            } else {
                Err(PolicyError::Count { got: p.len(), expected: ops.len() })
            }
        });
        match result {
            Ok(p) => {
                publish(view.operators(), &p);
                if std::mem::take(&mut self.failing) {
                    tracing::info!("moirai engine: policy '{}' works again", self.policy);
                }
            }
            Err(e) if !self.failing => {
                self.failing = true;
                tracing::warn!(
                    "moirai engine: policy '{}': {e}; priorities unchanged until it works again",
                    self.policy
                );
            }
            Err(_) => {}
        }
    }
}

//! The policy controller of the user-level policy executor: every period, the topology and a
//! snapshot of the counters → the prioritizer → each operator's priority level.
//!
//! With activation `auto` (the default) the levels apply only while the activation rule
//! (`moirai_sched::activation`, the middleware's) says scheduling can help: every period it is
//! told the machine's busy share (`/proc/stat`), the tuples waiting in the engine (the sources'
//! backlog and the other operators' input queues) and what the sources took in. While idle,
//! every operator waits at one level: the ready queue is the dynamic pool's FIFO.

use std::sync::Arc;
use std::time::Duration;

use moirai_contract::policies::ActivationMode;
use moirai_contract::topology::Topology;

use super::Controller;
use crate::executor::{ActivationChange, ThreadLevel};
use crate::metrics::OperatorSnapshot;
use crate::sync::lock;
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
    /// When the levels apply.
    gate: Gate,
    /// The executor's pools, told whether the levels apply.
    pools: Vec<Arc<dyn ThreadLevel>>,
}

impl PolicyController {
    /// A controller running `prioritizer` by `config` (its policy's name, period and activation)
    /// on the policy executor's `pools`.
    pub fn new(
        prioritizer: Box<dyn Prioritizer>,
        config: &PolicyThreading,
        pools: Vec<Arc<dyn ThreadLevel>>,
    ) -> PolicyController {
        PolicyController {
            prioritizer,
            policy: config.policy.clone(),
            period: config.period,
            topology: None,
            failing: false,
            gate: Gate::new(config),
            pools,
        }
    }
}

/// When the policy's levels apply (see [`PolicyThreading::activation`]).
enum Gate {
    /// From the start.
    Always,
    /// While the activation rule is active.
    #[cfg(feature = "policies")]
    Auto(Box<AutoGate>),
}

/// A change of the gate: active or not, the reason's code and the reason.
type Change = (bool, &'static str, String);

impl Gate {
    fn new(config: &PolicyThreading) -> Gate {
        match config.activation {
            ActivationMode::Always => Gate::Always,
            // Without policies there is no prioritizer, and so no controller to gate.
            #[cfg(not(feature = "policies"))]
            ActivationMode::Auto => Gate::Always,
            #[cfg(feature = "policies")]
            ActivationMode::Auto => {
                Gate::Auto(Box::new(AutoGate::new(config.activation_threshold, config.activation_lag)))
            }
        }
    }

    /// The state change this round brings, if any (`Always`: active from the first round).
    #[cfg_attr(not(feature = "policies"), allow(unused_variables))]
    fn update(&mut self, view: &EngineView, ops: &[OperatorSnapshot], at: Duration) -> Option<Change> {
        match self {
            Gate::Always => lock(&view.observed.activation_changes)
                .is_empty()
                .then(|| (true, "always", "always active (activation=always)".to_string())),
            #[cfg(feature = "policies")]
            Gate::Auto(gate) => gate.update(view, ops, at),
        }
    }
}

/// How often the activation rule is fed, whatever the policy's period: the middleware's default
/// period for moirai's engine. `/proc/stat` counts in 10 ms ticks, so the busy share of a 20 ms
/// round is a quarter-step figure, and the rule wants every round of its window above the
/// threshold.
#[cfg(feature = "policies")]
const ACTIVATION_PERIOD: Duration = Duration::from_millis(200);

/// The activation rule fed from the engine's own counters and the machine's CPU.
#[cfg(feature = "policies")]
struct AutoGate {
    rule: moirai_sched::activation::Activation,
    /// When the rule was last fed, and the machine's CPU ticks (busy, total) then.
    last: Option<(Duration, (u64, u64))>,
}

#[cfg(feature = "policies")]
impl AutoGate {
    fn new(cpu_threshold: f64, lag: Option<Duration>) -> AutoGate {
        use moirai_sched::activation::{Activation, ActivationConfig};
        // The windows of the middleware's rule for moirai's engine (whose metrics change at
        // every round): confirm 1 s, release 10 s, losing ground 3 s.
        let config = ActivationConfig { cpu_threshold, ..ActivationConfig::default() };
        let config = match lag {
            Some(lag) => config.with_lag(lag),
            None => config,
        };
        AutoGate { rule: Activation::new(config), last: None }
    }

    fn update(&mut self, view: &EngineView, ops: &[OperatorSnapshot], at: Duration) -> Option<Change> {
        if self.last.is_some_and(|(fed, _)| at.saturating_sub(fed) < ACTIVATION_PERIOD) {
            return None;
        }
        let now = moirai_os::proc::machine_cpu_ticks().ok();
        let cpu_busy = match (self.last, now) {
            (Some((_, (b0, t0))), Some((b1, t1))) if t1 > t0 => Some(b1.saturating_sub(b0) as f64 / (t1 - t0) as f64),
            _ => None,
        };
        if let Some(ticks) = now {
            self.last = Some((at, ticks));
        }
        let (mut waiting, mut at_sources, mut ingested) = (0u64, 0u64, 0u64);
        for (id, op) in ops.iter().enumerate() {
            if view.head_kind(id) == crate::graph::NodeKind::Source {
                waiting += op.backlog;
                at_sources += op.backlog;
                ingested += op.tuples_in;
            } else {
                waiting += op.queue_len;
            }
        }
        let sample = moirai_sched::activation::LoadSample {
            at,
            cpu_busy,
            backlog: Some(waiting as f64),
            source_backlog: Some(at_sources as f64),
            ingested: Some(ingested as f64),
        };
        self.rule.update(sample).map(|t| (t.active, t.reason.code(), t.reason.to_string()))
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
        // Until the rule first acts, the pool runs as the dynamic one.
        let apply = matches!(self.gate, Gate::Always);
        self.pools.iter().for_each(|p| p.set_levels_apply(apply));
    }

    fn round(&mut self, view: &EngineView, at: Duration) {
        let Some(topology) = &self.topology else { return };
        let ops = view.snapshot();
        let change = self.gate.update(view, &ops, at);
        if let Some((active, _, reason)) = &change {
            tracing::info!(
                "moirai engine: policy '{}' {} at {:.2} s: {reason}",
                self.policy,
                if *active { "orders the ready queue" } else { "idle, one level for every operator" },
                at.as_secs_f64()
            );
            self.pools.iter().for_each(|p| p.set_levels_apply(*active));
            if !active {
                // At once, whether or not the policy works this round.
                for m in view.operators() {
                    m.priority_level.store(0, std::sync::atomic::Ordering::Relaxed);
                }
            }
        }
        let active = change.as_ref().map_or(view.policy_active() == Some(true), |(active, ..)| *active);
        let result = self.prioritizer.priorities(topology, &ops, at).and_then(|p| {
            if p.len() == ops.len() {
                Ok(p)
            } else {
                Err(PolicyError::Count { got: p.len(), expected: ops.len() })
            }
        });
        match result {
            Ok(p) => {
                publish(view.operators(), &p, active);
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
        // Recorded once this round's levels are out: whoever sees the policy active (the view,
        // `/metrics`) sees its levels too.
        if let Some((active, code, reason)) = change {
            lock(&view.observed.activation_changes).push(ActivationChange {
                at_s: at.as_secs_f64(),
                active,
                code,
                reason,
            });
        }
    }
}

#[cfg(all(test, feature = "policies"))]
mod tests {
    use super::*;

    #[test]
    fn the_gate_takes_the_threading_model_s_lag() {
        let default = moirai_sched::activation::ActivationConfig::default();
        let gate = AutoGate::new(0.8, None);
        assert_eq!((gate.rule.config().cpu_threshold, gate.rule.config().lag), (0.8, default.lag));
        let gate = AutoGate::new(0.9, Some(Duration::from_millis(25)));
        assert_eq!(gate.rule.config().lag, Duration::from_millis(25));
        // Kept up still means below the default keep-up level on average.
        assert_eq!(gate.rule.config().keep_up, default.keep_up);
        let gate = AutoGate::new(0.9, Some(Duration::from_millis(500)));
        assert_eq!(
            (gate.rule.config().lag, gate.rule.config().keep_up),
            (Duration::from_millis(500), Duration::from_millis(500))
        );
    }
}

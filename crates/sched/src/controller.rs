//! The controller: one scheduling round of Lachesis (Algorithm 1) as a pure function of what the
//! drivers observed and the time, so that the middleware, the engine's user-level scheduler and
//! the tests run the very same round.
//!
//! A [`Controller`] owns the policies (each with its [`PolicyRun`]: name, period, scope), the
//! policy [`Clock`] and the [`MetricProvider`]. A caller — a middleware with drivers and
//! translators, or an in-process adapter — loops:
//!
//! 1. [`Controller::due`]`(now)`: which policies are due; if none, sleep until
//!    [`Controller::next_due`]`(now)`;
//! 2. observe every SPE, sampling [`Controller::needed`] metrics (everything the driver offers
//!    when it is `None`), into an [`Observation`] each;
//! 3. [`Controller::round`]: builds the [`Cluster`], (re)creates the metric provider when the set
//!    of SPEs that answered changes and derives the metrics, into a [`Round`] (with the policies'
//!    warnings the first time) — or says why the whole round is skipped ([`SkippedRound`]);
//! 4. for each of the round's [`policies`](Round::policies), [`Controller::decide`] runs it: its
//!    [`Schedule`] or why it was skipped ([`Decision`]); translate the schedule (nice values,
//!    cgroup weights, a user-level scheduler's priorities) before running the next policy, so a
//!    policy that hangs does not hold back the schedules of the ones before it;
//!    [`Controller::decide_all`] runs them all at once;
//! 5. log what happened.
//!
//! Time is always passed in, as a duration since the caller's origin on a monotonic clock; the
//! controller never reads a clock, sleeps, logs or does I/O, so it is deterministic.
//!
//! ```
//! use std::time::Duration;
//! use moirai_sched::*;
//!
//! let topology = SpeTopology {
//!     name: "engine".into(), pid: 42, queries: vec!["q".into()],
//!     logical: vec![
//!         LogicalOperator { name: "source".into(), query: "q".into(), kind: OpKind::Source },
//!         LogicalOperator { name: "sink".into(), query: "q".into(), kind: OpKind::Sink },
//!     ],
//!     logical_edges: vec![(0, 1)],
//!     physical: vec![
//!         PhysicalOperator { name: "source (1/1)".into(), query: "q".into(), logical: vec![0], instance: 0,
//!                            threads: vec![ThreadRef { tid: 100, start_ticks: 5 }] },
//!         PhysicalOperator { name: "sink (1/1)".into(), query: "q".into(), logical: vec![1], instance: 0,
//!                            threads: vec![ThreadRef { tid: 101, start_ticks: 5 }] },
//!     ],
//!     physical_edges: vec![(0, 1)],
//! };
//! let qs = PolicySpec::QueueSize { level: Level::Physical }.build("qs")?;
//! let run = PolicyRun { name: "qs".into(), period: Duration::from_millis(100), scope: Scope::all() };
//! let engine = Capabilities { spe: "engine".into(), driver: "moirai".into(), provides: [Metric::QueueLen].into() };
//! let mut controller = Controller::new(vec![(run, qs)], vec![engine])?;
//!
//! let now = Duration::from_millis(100);
//! let due = controller.due(now);
//! assert_eq!(due.policies(), &[0]);
//! assert_eq!(controller.needed("engine"), None); // no round yet: sample all the driver offers
//! let observed = Observation { topology, samples: vec![(0, Metric::QueueLen, 0.0), (1, Metric::QueueLen, 800.0)] };
//! let round = controller.round(&due, now, vec![observed])?;
//! assert_eq!(round.policies(), &[0]);
//! let decision = controller.decide(&round, 0);
//! let Ok(Schedule::Single(priorities)) = &decision.schedule else { unreachable!() };
//! assert_eq!(priorities.values().copied().collect::<Vec<_>>(), vec![0.0, 800.0]);
//! assert_eq!(controller.needed("engine"), Some(vec![Metric::QueueLen, Metric::QueueSize]));
//! assert_eq!(controller.next_due(now), Duration::from_millis(200));
//! # Ok::<(), Box<dyn std::error::Error>>(())
//! ```

use std::collections::BTreeSet;
use std::time::Duration;

use crate::clock::{Clock, ClockError};
use crate::cluster::Cluster;
use crate::entity::{OpRef, SpeTopology, TopologyError};
use crate::metric::Metric;
use crate::policy::{Policy, PolicyContext, PolicyError, Scope};
use crate::provider::{Capabilities, MetricError, MetricProvider, Requirement, RoundError, Samples};
use crate::schedule::Schedule;
use crate::values::MetricValues;

/// How a policy is run, apart from the policy itself: its name, how often, and what it governs.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct PolicyRun {
    /// Its name, in errors and reports (unique among a controller's policies).
    pub name: String,
    /// How often it runs.
    pub period: Duration,
    /// The operators it governs.
    pub scope: Scope,
}

/// What a driver saw of one SPE in one round.
#[derive(Clone, Debug)]
pub struct Observation {
    /// The SPE's topology, with thread ids and start times.
    pub topology: SpeTopology,
    /// Primitive metric values: (physical operator index, metric, value). Indices beyond the
    /// topology's physical operators are ignored.
    pub samples: Vec<(usize, Metric, f64)>,
}

/// Why a controller cannot be created.
#[derive(Debug, thiserror::Error)]
pub enum ControllerError {
    /// A policy needs a metric that an SPE's driver cannot provide.
    #[error(transparent)]
    Metric(#[from] MetricError),
    /// The periods cannot be scheduled.
    #[error(transparent)]
    Clock(#[from] ClockError),
}

/// Why a whole round was skipped (no policy ran); the next round may work.
#[derive(Debug, thiserror::Error)]
pub enum SkippedRound {
    /// The SPEs' topologies are invalid or inconsistent.
    #[error("inconsistent topology: {0}")]
    Topology(#[from] TopologyError),
    /// The metric provider cannot be created for the SPEs that answered.
    #[error("{0}")]
    Provider(#[from] MetricError),
    /// This round's metrics could not be computed.
    #[error("metrics: {0}")]
    Metrics(#[from] RoundError),
}

/// The policies due at one tick of the policy clock, from [`Controller::due`].
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Due {
    tick: u64,
    policies: Vec<usize>,
}

impl Due {
    /// The indices of the due policies (as given to [`Controller::new`]), in order.
    pub fn policies(&self) -> &[usize] {
        &self.policies
    }

    /// Whether no policy is due (no round is needed).
    pub fn is_empty(&self) -> bool {
        self.policies.is_empty()
    }
}

/// What one due policy decided in a round.
#[derive(Debug)]
pub struct Decision {
    /// The policy's index (as given to [`Controller::new`]).
    pub policy: usize,
    /// Its schedule, or why it was skipped this round.
    pub schedule: Result<Schedule, PolicyError>,
    /// Whether this differs from its previous run: it fails after working (or from the start), or
    /// it works again after failing. Report the failure once, while counting every one.
    pub changed: bool,
}

/// A round ready for its policies: this round's topologies and metric values, from
/// [`Controller::round`].
#[derive(Debug)]
pub struct Round {
    /// This round's validated topologies, which the schedules' [`OpRef`]s index.
    pub cluster: Cluster,
    /// The policies' warnings about the topology, `(policy index, warning)`: given once, in the
    /// first round that computes its metrics, for every policy.
    pub warnings: Vec<(usize, String)>,
    metrics: MetricValues,
    policies: Vec<usize>,
}

impl Round {
    /// The due policies to run this round, in index order: a policy scoped to SPEs none of which
    /// answered is left out.
    pub fn policies(&self) -> &[usize] {
        &self.policies
    }
}

/// One policy with how it is run.
struct Governed {
    run: PolicyRun,
    policy: Box<dyn Policy>,
    /// Whether its last run failed.
    failing: bool,
}

impl Governed {
    /// What it needs from the metric provider.
    fn requirement(&self) -> Requirement {
        Requirement { policy: self.run.name.clone(), metrics: self.policy.metrics(), spes: self.run.scope.spe_names() }
    }
}

/// Runs the scheduling rounds of a set of policies over a set of SPEs; see the [module
/// docs](self).
pub struct Controller {
    policies: Vec<Governed>,
    clock: Clock,
    /// What each SPE's driver can sample, for every SPE that may be observed.
    capabilities: Vec<Capabilities>,
    /// The provider for the SPEs that answered last, rebuilt when that set changes.
    provider: Option<(Vec<String>, MetricProvider)>,
    /// The tick of the last round.
    last: Option<u64>,
    /// Whether the policies' warnings were given.
    warned: bool,
}

impl Controller {
    /// A controller for `policies` over the SPEs in `capabilities`. Fails when a policy needs a
    /// metric that a driver of an SPE in its scope cannot provide, or when the periods have no
    /// usable common tick.
    pub fn new(
        policies: Vec<(PolicyRun, Box<dyn Policy>)>,
        capabilities: Vec<Capabilities>,
    ) -> Result<Controller, ControllerError> {
        let policies: Vec<Governed> =
            policies.into_iter().map(|(run, policy)| Governed { run, policy, failing: false }).collect();
        // A missing primitive is an error now rather than in the first round.
        MetricProvider::new(&policies.iter().map(Governed::requirement).collect::<Vec<_>>(), &capabilities)?;
        let clock = Clock::new(&policies.iter().map(|p| p.run.period).collect::<Vec<_>>())?;
        Ok(Controller { policies, clock, capabilities, provider: None, last: None, warned: false })
    }

    /// How policy `index` is run.
    ///
    /// # Panics
    /// If there is no such policy.
    pub fn policy(&self, index: usize) -> &PolicyRun {
        &self.policies[index].run
    }

    /// The policy clock's tick: the GCD of the periods.
    pub fn tick(&self) -> Duration {
        self.clock.tick()
    }

    /// The policies due at any tick since the last round up to the one in progress at `now`
    /// (each once: a late caller runs what it missed once, then is back on the grid).
    pub fn due(&self, now: Duration) -> Due {
        let tick = self.clock.tick_at(now);
        Due { tick, policies: self.clock.due_between(self.last, tick) }
    }

    /// When the first tick after the one in progress at `now` with a policy due starts: where a
    /// caller sleeps to.
    pub fn next_due(&self, now: Duration) -> Duration {
        self.clock.deadline(self.clock.next_due(self.clock.tick_at(now)))
    }

    /// The metrics to sample from SPE `spe` for the next round (requested ones and their
    /// dependencies), or `None` when the current metric provider does not cover it (before the
    /// first round, or an SPE that was down when it was created): then sample everything its
    /// driver offers, so the round that recreates the provider has every value it asks for.
    pub fn needed(&self, spe: &str) -> Option<Vec<Metric>> {
        self.provider.as_ref()?.1.needed(spe)
    }

    /// Prepares the round of the `due` policies (from [`Controller::due`]) from what the SPEs that
    /// answered were observed to be, with samples taken at `at`: validates the topologies and
    /// computes the metrics. Run the policies with [`Controller::decide`].
    ///
    /// The round is skipped as a whole when the topologies are inconsistent, the metric provider
    /// cannot be created for the SPEs that answered, or the metrics cannot be computed. Either way
    /// the due policies count as run: they are due again at their next period.
    pub fn round(&mut self, due: &Due, at: Duration, observations: Vec<Observation>) -> Result<Round, SkippedRound> {
        self.last = Some(self.last.map_or(due.tick, |l| l.max(due.tick)));
        let mut samples = Vec::with_capacity(observations.len());
        let mut topologies = Vec::with_capacity(observations.len());
        for o in observations {
            topologies.push(o.topology);
            samples.push(o.samples);
        }
        let live: Vec<String> = topologies.iter().map(|t| t.name.clone()).collect();
        let cluster = Cluster::new(topologies)?;
        if self.provider.as_ref().is_none_or(|(names, _)| *names != live) {
            self.provider = Some((live.clone(), self.provider_for(&live)?));
        }
        let mut sampled = Samples::new(&cluster, at);
        for (spe, values) in samples.iter().enumerate() {
            for &(op, metric, value) in values {
                if op < cluster.spe(spe).physical_len() {
                    sampled.set(OpRef { spe, op }, metric, value);
                }
            }
        }
        let provider = &mut self.provider.as_mut().expect("created above").1;
        let values = provider.update(&cluster, &sampled)?;

        let mut warnings = Vec::new();
        if !self.warned {
            self.warned = true;
            for (i, p) in self.policies.iter().enumerate() {
                warnings.extend(p.policy.warnings(&cluster).into_iter().map(|w| (i, w)));
            }
        }
        let policies = (due.policies.iter().copied())
            .filter(|&i| self.policies[i].run.scope.spe_names().is_none_or(|s| s.iter().any(|n| live.contains(n))))
            .collect();
        Ok(Round { cluster, warnings, metrics: values, policies })
    }

    /// Runs policy `policy` (normally one of [`Round::policies`]) on `round`'s metrics, over its
    /// scope.
    ///
    /// # Panics
    /// If there is no such policy.
    pub fn decide(&mut self, round: &Round, policy: usize) -> Decision {
        let governed = &mut self.policies[policy];
        let scope = governed.run.scope.resolve(&round.cluster);
        let ctx = PolicyContext { cluster: &round.cluster, metrics: &round.metrics, scope: &scope };
        let schedule = governed.policy.schedule(&ctx);
        let failing = schedule.is_err();
        let changed = failing != governed.failing;
        governed.failing = failing;
        Decision { policy, schedule, changed }
    }

    /// Runs every policy of `round`, in order.
    pub fn decide_all(&mut self, round: &Round) -> Vec<Decision> {
        round.policies.iter().map(|&i| self.decide(round, i)).collect()
    }

    /// A metric provider for the SPEs in `live`, each policy restricted to those of its scope.
    fn provider_for(&self, live: &[String]) -> Result<MetricProvider, MetricError> {
        let capabilities: Vec<Capabilities> =
            self.capabilities.iter().filter(|c| live.contains(&c.spe)).cloned().collect();
        let requirements: Vec<Requirement> = self
            .policies
            .iter()
            .map(Governed::requirement)
            .map(|mut r| {
                r.spes = Some(match r.spes.take() {
                    Some(s) => s.into_iter().filter(|n| live.contains(n)).collect(),
                    None => live.iter().cloned().collect::<BTreeSet<_>>(),
                });
                r
            })
            .collect();
        MetricProvider::new(&requirements, &capabilities)
    }
}

#[cfg(test)]
#[path = "controller_tests.rs"]
mod tests;

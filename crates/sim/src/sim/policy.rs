//! The simulator's scheduling policies, on the simulated clock: the middleware at the OS level
//! (its [`Controller`] and nice or cgroup translator → CFS weights or cpu cgroups) and the policy executor's prioritizer at
//! the user level (→ ready-queue levels). Both observe the simulated counters through the engine's
//! adapter, as they would observe a live engine, and both act only while the activation rule
//! says scheduling can help ([`Gate`]), as `moirai schedule` and the engine's policy executor do.

use std::collections::BTreeMap;

use moirai_engine::adapter;
use moirai_engine::adapter::PolicyPrioritizer;
use moirai_engine::user_level::levels;
use moirai_engine::Prioritizer;
use moirai_sched::{Capabilities, Controller, Observation, PolicyRun, Scope, ThreadRef};

use moirai_middleware::activity::{config_for, ActivationMode};
use moirai_middleware::driver::SourceLoad;
use moirai_sched::activation::{Activation, LoadSample};
use moirai_sched::normalize::WeightRange;
use moirai_sched::Normalization;

use crate::cfs::{group_weight, CgroupVersion};
use crate::event::Nanos;
use crate::sim::{ns, Simulation, Translator, TID_BASE};
use crate::SimError;

/// The middleware at the OS level: its controller, and when it acts.
pub(crate) struct Middleware {
    pub controller: Controller,
    pub gate: Gate,
}

/// The policy executor at the user level: its prioritizer and period, and when its levels apply.
pub(crate) struct UserPolicy {
    pub prioritizer: PolicyPrioritizer,
    pub period_ns: Nanos,
    pub gate: Gate,
}

/// When a scheduler acts: the activation rule fed every round, and how long it has acted.
pub(crate) struct Gate {
    /// The activation rule (`None`: activation `always`).
    pub rule: Option<Activation>,
    /// When the last round ran and the cores' busy time then (for the machine's busy share).
    pub cpu_mark: Option<(Nanos, Nanos)>,
    /// How long it has acted (between rounds that found it active), and when it first did.
    pub active_ns: Nanos,
    pub first_active: Option<Nanos>,
    /// How many times the rule turned active, and idle by reason code.
    pub activations: u64,
    pub releases: BTreeMap<&'static str, u64>,
}

/// Whether a scheduler acted over a run, as the lab reports a real middleware's.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct MwActivity {
    /// The share of the measured window in which it acted, 0..=1.
    pub share: f64,
    /// When it first acted, in seconds from the start; `None`: never.
    pub first_s: Option<f64>,
    /// How many times it started acting (once, from the start, with activation `always`).
    pub activations: u64,
    /// How many times it turned idle, by the rule's reason code.
    pub releases: BTreeMap<&'static str, u64>,
}

impl Gate {
    /// A gate by `mode`, with the moirai engine's windows (`activity::config_for`).
    pub(crate) fn new(mode: ActivationMode, cpu_threshold: f64, lag: Option<std::time::Duration>) -> Gate {
        let rule =
            (mode == ActivationMode::Auto).then(|| Activation::new(config_for("moirai", cpu_threshold, lag, None)));
        Gate { rule, cpu_mark: None, active_ns: 0, first_active: None, activations: 0, releases: BTreeMap::new() }
    }

    /// What it did over the run, with the measured window `warm_end..end`.
    fn activity(&self, warm_end: Nanos, end: Nanos) -> MwActivity {
        let share = self.active_ns as f64 / end.saturating_sub(warm_end).max(1) as f64;
        let activations = if self.rule.is_some() { self.activations } else { u64::from(self.first_active.is_some()) };
        MwActivity {
            share: share.min(1.0),
            first_s: self.first_active.map(|t| t as f64 / 1e9),
            activations,
            releases: self.releases.clone(),
        }
    }
}

/// A round of a [`Gate`]: whether it acts now, and whether it just turned idle.
struct GateRound {
    active: bool,
    turned_idle: bool,
}

impl Simulation<'_> {
    /// The middleware's round at the OS level: observe, decide whether to act (the activation
    /// rule), run the due policy, set nice values or cgroups while acting.
    pub(crate) fn os_round(&mut self) {
        let at = ns(self.now);
        let snapshots = self.snapshots();
        let mut mw = self.middleware.take().expect("has a middleware");
        let round = self.gate_round(&mut mw.gate, &snapshots);
        self.middleware = Some(mw);
        if round.turned_idle {
            // Every thread gets its original value back: nice 0, the root cgroup.
            for t in 0..self.threads.len() {
                if self.nices[t] != 0 {
                    self.nices[t] = 0;
                    self.rq.renice(t, &mut self.entities[t], 0);
                    self.rq.regroup(t, &mut self.entities);
                }
                if !self.cgroups.is_empty() {
                    self.rq.move_to_group(t, None, &mut self.entities);
                }
            }
        }
        if !round.active {
            return;
        }
        let mut topology = adapter::spe_topology(&self.topology);
        for (i, p) in topology.physical.iter_mut().enumerate() {
            if let Some(t) = self.ops[i].thread {
                p.threads = vec![ThreadRef { tid: TID_BASE + t as i32, start_ticks: 0 }];
            }
        }
        let observation = Observation { topology, samples: adapter::samples(&self.topology, &snapshots) };
        let controller = &mut self.middleware.as_mut().expect("has a middleware").controller;
        let due = controller.due(at);
        if due.is_empty() {
            return;
        }
        let round = match controller.round(&due, at, vec![observation]) {
            Ok(r) => r,
            Err(e) => {
                self.policy_errors = (self.policy_errors.0 + 1, Some(e.to_string()));
                return;
            }
        };
        for decision in controller.decide_all(&round) {
            match decision.schedule {
                Ok(schedule) => match self.config.translator {
                    Translator::Nice => {
                        let values = moirai_middleware::translate::nice_values(
                            &schedule,
                            &round.cluster,
                            Normalization::Ratio,
                            moirai_sched::NiceRange::default(),
                        );
                        for (target, nice) in values {
                            let t = (target.tid - TID_BASE) as usize;
                            self.nices[t] = nice;
                            self.rq.renice(t, &mut self.entities[t], nice);
                            self.rq.regroup(t, &mut self.entities);
                        }
                    }
                    Translator::Cgroup(version) => {
                        let range = match version {
                            CgroupVersion::V1 => WeightRange::CPU_SHARES,
                            CgroupVersion::V2 => WeightRange::CPU_WEIGHT,
                        };
                        // `moirai schedule --translator cgroup` normalises logarithmically.
                        let (weights, targets) = moirai_middleware::translate::cgroup_weights(
                            &schedule,
                            &round.cluster,
                            Normalization::Logarithmic,
                            range,
                        );
                        for (name, value) in &weights {
                            let weight = group_weight(version, *value);
                            let g = match self.cgroups.get(name) {
                                Some(&g) => g,
                                None => {
                                    let g = self.rq.add_group(weight);
                                    self.cgroups.insert(name.clone(), g);
                                    g
                                }
                            };
                            self.rq.set_group_weight(g, weight, &mut self.entities);
                        }
                        for target in targets {
                            let t = (target.tid - TID_BASE) as usize;
                            let g = self.cgroups.get(&target.group).copied();
                            self.rq.move_to_group(t, g, &mut self.entities);
                        }
                    }
                },
                Err(e) => self.policy_errors = (self.policy_errors.0 + 1, Some(e.to_string())),
            }
        }
    }

    /// Feeds `gate`'s activation rule what a scheduler sees of the engine and the machine (as
    /// `moirai schedule` and the engine's policy executor do: the cores' busy share since the
    /// last round, the sources' backlog and input, the other operators' queues).
    fn gate_round(&self, gate: &mut Gate, snapshots: &[moirai_engine::metrics::OperatorSnapshot]) -> GateRound {
        let (now, busy_total, cores) = (self.now, self.measure.cpu_total_ns, self.config.cores);
        let mut load = SourceLoad::default();
        for (op, s) in snapshots.iter().enumerate() {
            if self.ops[op].source.is_some() {
                load.add(Some(s.backlog as f64), s.tuples_in as f64);
            } else {
                load.add_queued(s.queue_len as f64);
            }
        }
        let busy = gate
            .cpu_mark
            .filter(|&(t0, _)| now > t0)
            .map(|(t0, b0)| (busy_total.saturating_sub(b0) as f64 / ((now - t0) as f64 * cores as f64)).min(1.0));
        // The time since the last round counts as acted when that round found it active, within
        // the measured window, as the lab counts a real middleware's.
        if let Some((t0, _)) = gate.cpu_mark.filter(|_| gate.rule.as_ref().is_none_or(Activation::is_active)) {
            let (from, to) = (t0.max(self.measure.warm_end), now.min(self.config.duration_ns));
            gate.active_ns += to.saturating_sub(from);
        }
        gate.cpu_mark = Some((now, busy_total));
        let Some(rule) = gate.rule.as_mut() else {
            gate.first_active.get_or_insert(now);
            return GateRound { active: true, turned_idle: false };
        };
        let sample = LoadSample {
            at: ns(now),
            cpu_busy: busy,
            backlog: load.waiting(),
            source_backlog: load.backlog,
            ingested: Some(load.ingested),
        };
        let turned = rule.update(sample);
        match &turned {
            Some(t) if t.active => gate.activations += 1,
            Some(t) => *gate.releases.entry(t.reason.code()).or_default() += 1,
            None => {}
        }
        let active = rule.is_active();
        if active {
            gate.first_active.get_or_insert(now);
        }
        GateRound { active, turned_idle: turned.is_some_and(|t| !t.active) }
    }

    /// What the middleware did (the share of the measured window in which its rounds found the
    /// rule active, when it first did, how often it started and stopped) — without a middleware,
    /// the policy executor's levels; `None` with neither.
    pub fn middleware_activity(&self) -> Option<MwActivity> {
        let gate = match (&self.middleware, &self.user_policy) {
            (Some(mw), _) => &mw.gate,
            (None, Some(user)) => &user.gate,
            (None, None) => return None,
        };
        Some(gate.activity(self.measure.warm_end, self.config.duration_ns))
    }

    /// The policy executor's round: the engine's prioritizer ranks the operators into levels,
    /// which apply while its activation rule is active (every operator at level 0 otherwise), as
    /// in the engine's policy controller.
    pub(crate) fn user_round(&mut self) {
        let snapshots = self.snapshots();
        let at = ns(self.now);
        let mut user = self.user_policy.take().expect("has a user-level policy");
        let round = self.gate_round(&mut user.gate, &snapshots);
        match user.prioritizer.priorities(&self.topology, &snapshots, at) {
            Ok(p) if round.active => {
                for (op, level) in levels(&p).into_iter().enumerate() {
                    self.ops[op].level = level;
                }
            }
            Ok(_) => {}
            Err(e) => self.policy_errors = (self.policy_errors.0 + 1, Some(e.to_string())),
        }
        if round.turned_idle || !round.active {
            self.ops.iter_mut().for_each(|o| o.level = 0);
        }
        self.user_policy = Some(user);
    }
}

/// The controller `moirai schedule --policy NAME --period P` runs for one moirai engine.
pub(crate) fn os_controller(name: &str, period_ns: Nanos) -> Result<Controller, SimError> {
    let spec = adapter::policy_spec(name).map_err(|e| SimError::Config(e.to_string()))?;
    let policy = spec.build(name).map_err(|e| SimError::Config(format!("policy '{name}': {e}")))?;
    let run = PolicyRun { name: name.to_string(), period: ns(period_ns), scope: Scope::all() };
    let caps = Capabilities { spe: "engine".into(), driver: "moirai".into(), provides: adapter::PROVIDES.into() };
    Controller::new(vec![(run, policy)], vec![caps]).map_err(|e| SimError::Config(format!("policy '{name}': {e}")))
}

//! The simulator's scheduling policies, on the simulated clock: the middleware at the OS level
//! (its [`Controller`] and nice or cgroup translator → CFS weights or cpu cgroups) and the policy executor's prioritizer at
//! the user level (→ ready-queue levels). Both observe the simulated counters through the engine's
//! adapter, as they would observe a live engine.

use moirai_engine::adapter;
use moirai_engine::user_level::levels;
use moirai_engine::Prioritizer;
use moirai_sched::{Capabilities, Controller, Observation, PolicyRun, Scope, ThreadRef};

use moirai_sched::normalize::WeightRange;
use moirai_sched::Normalization;

use crate::cfs::{group_weight, CgroupVersion};
use crate::event::Nanos;
use crate::sim::{ns, Simulation, Translator, TID_BASE};
use crate::SimError;

/// The middleware at the OS level: its controller and how it normalises to nice values.
pub(crate) struct Middleware {
    pub controller: Controller,
}

impl Simulation<'_> {
    /// The middleware's round at the OS level: observe, run the due policy, set nice values.
    pub(crate) fn os_round(&mut self) {
        let at = ns(self.now);
        let snapshots = self.snapshots();
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

    /// The policy executor's round: the engine's prioritizer ranks the operators into levels.
    pub(crate) fn user_round(&mut self) {
        let snapshots = self.snapshots();
        let at = ns(self.now);
        let (prioritizer, _) = self.prioritizer.as_mut().expect("has a prioritizer");
        match prioritizer.priorities(&self.topology, &snapshots, at) {
            Ok(p) => {
                for (op, level) in levels(&p).into_iter().enumerate() {
                    self.ops[op].level = level;
                }
            }
            Err(e) => self.policy_errors = (self.policy_errors.0 + 1, Some(e.to_string())),
        }
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

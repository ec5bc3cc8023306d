//! The discrete-event core: operators that take tuples from bounded channels and spend CPU on
//! them, threads that run operators, cores that run threads under the CFS model.
//!
//! **Tuples and channels.** A channel holds up to `channel_capacity` tuples, each stamped with
//! its intended send time, the time it entered the engine (ingress) and the time it was queued.
//! A source takes in the tuples that are due by its [`Rate`] — the ones it has not taken yet are
//! its external queue (the stand-in for Kafka: unbounded, never dropped). An operator whose output
//! channel is full cannot run (backpressure), which in turn fills its input channel, up to the
//! source, whose external queue then grows. A tuple's copies may overshoot a channel's capacity,
//! as the engine's sends (which always enqueue) do.
//!
//! **Steps.** A thread on a core runs one *step* of an operator at a time, like the engine's
//! non-blocking `step`: up to `batch_size` tuples, no more than fit in the thread's remaining
//! slice (at least one), each costing the operator's `cost_ns` (drawn by `cost_dist`) plus
//! `tuple_overhead_ns`. The step's outputs become visible to the consumers when the step ends
//! (the engine sends batches); a sink's tuple leaves at the end of its own processing within the
//! step, which is its egress time. Selectivity and blocking are drawn per tuple from the run's seeded generator.
//!
//! **Threads.** Under `dedicated` every physical operator has a thread, a CFS entity that sleeps
//! when its operator cannot run and is woken (after `wakeup_ns`) when it can. Under `dynamic:N`
//! and `policy:NAME:N`, N worker threads take ready operators from the engine's own ready queue
//! ([`moirai_engine::ready`]: FIFO for the dynamic pool, least recently run first; priority
//! levels for the policy executor, with its source interval) and keep one for a turn (a batch of
//! steps, at most a quantum when one is set), as the engine's pools do.
//!
//! **Policies.** At the OS level (`qs`, `hr`, … as `moirai schedule` runs them) a [`Controller`](moirai_sched::Controller)
//! runs the policy every period on the simulated clock and the middleware's nice translator
//! ([`moirai_middleware::translate::nice_values`]) turns the schedule into nice values, which
//! set the threads' CFS weights — or, with [`Translator::Cgroup`], its cgroup translator
//! ([`moirai_middleware::translate::cgroup_weights`]) puts each group's threads in a simulated
//! cpu cgroup with the translated weight. At the user level (`policy:NAME`) the engine's own
//! [`PolicyPrioritizer`] ranks the operators into ready-queue levels. Both get their samples
//! through the engine's adapter ([`moirai_engine::adapter`]) from snapshots of the simulated
//! counters, exactly as from a live engine.
//!
//! Limits: step granularity (a preemption or wake-up preemption takes effect at the end of the
//! running step, which never outlasts the thread's slice); the middleware acts at the instant of
//! its period, with no sampling delay; a wake-up costs the same whether a core was idle or busy
//! (no cache effects besides the costs of switching, waking and notifying).
//!
//! **Costs of a hop** (`docs/sim.md`, measured): a woken thread pays a context switch and
//! `wakeup_cpu_ns` when it next runs; the thread whose step woke it pays `notify_ns` per woken
//! thread after the step, before its core does anything else; a tuple's cost is drawn by
//! `cost_dist` around its operator's mean.
//!
//! **Files.** [`Simulation`] and its event loop are here; `channel` (bounded channels),
//! `operator` (operators, sources, whether an operator can run), `step` (a step of an operator),
//! `thread` (threads as CFS entities, waking), `cpu` (cores and dispatch), `executor` (dedicated
//! threads and the pools' ready queue), `policy` (the OS- and user-level policies) and `observe`
//! (snapshots and the run summary) hold the rest.

mod channel;
mod cpu;
mod executor;
mod observe;
mod operator;
mod policy;
pub use policy::MwActivity;
mod step;
mod thread;

use std::collections::VecDeque;
use std::time::Duration;

use moirai_engine::adapter::PolicyPrioritizer;
use moirai_engine::graph::NodeKind;
use moirai_engine::ready::{ReadyDiscipline, ReadyQueue};
use moirai_engine::topology::PoolThread;
use moirai_engine::topology::Topology;
use moirai_engine::Threading;

use crate::cfs::{Entity, RunQueue};
pub use crate::config::{
    CostDist, SimConfig, Translator, MEASURED_CONTEXT_SWITCH_NS, MEASURED_NOTIFY_NS, MEASURED_TUPLE_OVERHEAD_NS,
    MEASURED_WAKEUP_CPU_NS, MEASURED_WAKEUP_NS,
};
use crate::event::{EventQueue, Nanos};
use crate::model::{Model, Rate};
use crate::SimError;
use channel::Channel;
use cpu::Core;
use executor::Pool;
use observe::Measure;
use operator::{exponential, Op, SourceState};
use policy::{os_controller, Gate, Middleware, UserPolicy};
use thread::Thread;

/// The thread id the first simulated thread gets (the rest follow), as the scheduling core sees
/// them.
pub const TID_BASE: i32 = 1000;

/// What happens at an instant of the simulated clock.
#[derive(Clone, Copy, Debug)]
pub(crate) enum Event {
    StepEnd(usize),
    Wake { thread: usize, from: Option<usize> },
    SourceDue(usize),
    OsPolicy,
    UserPolicy,
    Sample,
}

/// One simulated run; see the module docs. Build with [`Simulation::new`], then
/// [`Simulation::run`].
pub struct Simulation<'m> {
    pub(crate) model: &'m Model,
    pub(crate) config: SimConfig,
    pub(crate) now: Nanos,
    pub(crate) events: EventQueue<Event>,
    rng: fastrand::Rng,
    pub(crate) channels: Vec<Channel>,
    pub(crate) ops: Vec<Op>,
    pub(crate) threads: Vec<Thread>,
    pub(crate) entities: Vec<Entity>,
    pub(crate) rq: RunQueue,
    cores: Vec<Core>,
    idle_cores: Vec<usize>,
    pool: Option<Pool>,
    pub(crate) middleware: Option<Middleware>,
    pub(crate) user_policy: Option<UserPolicy>,
    pub(crate) topology: Topology,
    pub(crate) measure: Measure,
    /// Tuples in channels or promised to them, and steps running: zero when drained.
    in_flight: u64,
    steps_running: usize,
    pub(crate) context_switches: u64,
    /// Sleeping threads woken (by a tuple, a drained channel, a timer or the end of a sleep).
    pub(crate) wakeups: u64,
    /// Policy rounds that failed (skipped), with the last reason.
    pub(crate) policy_errors: (u64, Option<String>),
    /// Every nice value the middleware set, by thread, last one (for tests and reports).
    pub(crate) nices: Vec<i32>,
    /// The cpu cgroups the middleware's cgroup translator made, by the schedule's group name.
    pub(crate) cgroups: std::collections::BTreeMap<String, usize>,
}

impl<'m> Simulation<'m> {
    /// Prepares a run of `model` under `config`.
    pub fn new(model: &'m Model, config: SimConfig) -> Result<Simulation<'m>, SimError> {
        config.validate()?;
        if model.is_empty() {
            return Err(SimError::Model("the model has no operator".into()));
        }
        let channels = (model.topology.channels.iter())
            .map(|c| Channel {
                queue: VecDeque::new(),
                reserved: 0,
                capacity: config.channel_capacity,
                from: c.from,
                to: c.to,
                pushed: 0,
                popped: 0,
            })
            .collect();
        let ops: Vec<Op> = (model.operators.iter().enumerate())
            .map(|(i, o)| Op {
                kind: o.kind,
                cost: (o.cost_ns + config.tuple_overhead_ns).max(1),
                work: o.cost_ns,
                selectivity: if o.kind == NodeKind::Sink { 0.0 } else { o.selectivity },
                block: o.block,
                source: (o.kind == NodeKind::Source).then(|| SourceState {
                    rate: o.rate,
                    taken: 0,
                    timer: false,
                    poisson: match o.rate {
                        Rate::Poisson(r) => {
                            let mut rng = fastrand::Rng::with_seed(
                                config.seed ^ (i as u64 + 1).wrapping_mul(0x9E37_79B9_7F4A_7C15),
                            );
                            let first = exponential(&mut rng, r);
                            Some((VecDeque::new(), rng, first))
                        }
                        _ => None,
                    },
                }),
                next_out: vec![0; model.outputs[i].len()],
                tuples_in: 0,
                tuples_out: 0,
                cpu_ns: 0,
                busy: false,
                queued: false,
                level: 0,
                thread: None,
            })
            .collect();
        let mut topology = model.topology.clone();
        topology.threading = config.threading.to_string();
        let workers = match &config.threading {
            Threading::Dedicated => 0,
            Threading::Dynamic { threads } => *threads,
            Threading::Policy(p) => p.threads,
            _ => unreachable!("validated"),
        };
        // The engine's discipline of this threading model: levels, turns, a source interval.
        let sources: Vec<bool> = model.operators.iter().map(|o| o.kind == NodeKind::Source).collect();
        let pool = ReadyDiscipline::of(&config.threading).map(|d| Pool {
            ready: ReadyQueue::new(&d, sources),
            turn: d.turn,
            idle: Vec::new(),
        });
        let mut sim = Simulation {
            model,
            rq: RunQueue::new(config.cores, config.cfs),
            cores: (0..config.cores).map(|_| Core::default()).collect(),
            idle_cores: (0..config.cores).rev().collect(),
            events: EventQueue::default(),
            rng: fastrand::Rng::with_seed(config.seed),
            now: 0,
            channels,
            ops,
            threads: Vec::new(),
            entities: Vec::new(),
            pool,
            middleware: None,
            user_policy: None,
            measure: Measure::new(model, &config),
            topology,
            in_flight: 0,
            steps_running: 0,
            context_switches: 0,
            wakeups: 0,
            policy_errors: (0, None),
            nices: Vec::new(),
            cgroups: std::collections::BTreeMap::new(),
            config,
        };
        if workers == 0 {
            for op in 0..sim.ops.len() {
                let t = sim.spawn(Some(op));
                sim.ops[op].thread = Some(t);
                sim.topology.physical[op].tid = TID_BASE + t as i32;
            }
        } else {
            for w in 0..workers {
                let t = sim.spawn(None);
                sim.topology.threads.push(PoolThread { name: format!("moirai-worker-{w}"), tid: TID_BASE + t as i32 });
            }
            sim.topology.thread_level = workers;
        }
        sim.nices = vec![0; sim.threads.len()];
        if let Some(name) = &sim.config.os_policy {
            let controller = os_controller(name, sim.config.policy_period_ns)?;
            let gate = Gate::new(sim.config.activation, sim.config.activation_threshold, sim.config.activation_lag);
            sim.middleware = Some(Middleware { controller, gate });
            sim.events.push(0, Event::OsPolicy);
        }
        if let Threading::Policy(p) = &sim.config.threading {
            let prioritizer = PolicyPrioritizer::new(&p.policy).map_err(|e| SimError::Config(e.to_string()))?;
            let gate = Gate::new(p.activation, p.activation_threshold, p.activation_lag);
            sim.user_policy = Some(UserPolicy { prioritizer, period_ns: p.period.as_nanos() as Nanos, gate });
            sim.events.push(0, Event::UserPolicy);
        }
        for op in 0..sim.ops.len() {
            if sim.ops[op].source.is_some() {
                sim.events.push(0, Event::SourceDue(op));
            }
        }
        sim.events.push(sim.measure.warm_end, Event::Sample);
        Ok(sim)
    }

    /// Runs to the end: the sources offer tuples for the duration, then the queries drain (up to
    /// the drain limit). Returns the number of events handled.
    pub fn run(&mut self) -> u64 {
        let duration = self.config.duration_ns;
        let horizon = duration.saturating_add(self.config.drain_limit_ns);
        let mut handled = 0;
        while let Some((at, event)) = self.events.pop() {
            if at > horizon {
                break;
            }
            self.now = at;
            handled += 1;
            match event {
                Event::StepEnd(core) => self.finish_step(core),
                Event::Wake { thread, from } => self.wake(thread, from),
                Event::SourceDue(op) => {
                    self.arrive(op);
                    self.notify(op, None);
                }
                Event::OsPolicy => {
                    self.os_round();
                    if self.now < duration {
                        let next =
                            self.middleware.as_ref().expect("has a middleware").controller.next_due(ns(self.now));
                        self.events.push(next.as_nanos() as Nanos, Event::OsPolicy);
                    }
                }
                Event::UserPolicy => {
                    self.user_round();
                    let period = self.user_policy.as_ref().expect("has a user-level policy").period_ns;
                    if self.now < duration {
                        self.events.push(self.now + period, Event::UserPolicy);
                    }
                }
                Event::Sample => {
                    self.measure.sample_queues(self.now, &self.channels, &self.model.inputs);
                    let next = self.now + self.config.sample_period_ns;
                    if next < duration {
                        self.events.push(next, Event::Sample);
                    }
                }
            }
            if self.now >= duration && self.in_flight == 0 && self.steps_running == 0 {
                break;
            }
        }
        handled
    }

    /// The engine's view of the topology, with the simulated thread ids.
    pub fn topology(&self) -> &Topology {
        &self.topology
    }

    /// The nice value the middleware last set on each thread (all 0 without a middleware).
    pub fn nices(&self) -> &[i32] {
        &self.nices
    }

    /// The cpu cgroups the middleware made: each group's name, kernel weight and threads.
    pub fn cgroups(&self) -> Vec<(String, u64, Vec<usize>)> {
        (self.cgroups.iter())
            .map(|(name, &g)| {
                let group = &self.rq.groups()[g];
                (name.clone(), group.weight, group.members.clone())
            })
            .collect()
    }

    /// CPU time each thread got so far, ns.
    pub fn thread_cpu(&self) -> Vec<u64> {
        self.threads.iter().map(|t| t.cpu_ns).collect()
    }

    /// Simulated time now.
    pub fn now(&self) -> Nanos {
        self.now
    }
}

/// A duration of `n` ns.
pub(crate) fn ns(n: Nanos) -> Duration {
    Duration::from_nanos(n)
}

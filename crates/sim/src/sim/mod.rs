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

mod observe;
mod policy;

use std::collections::VecDeque;
use std::time::Duration;

use moirai_engine::adapter::PolicyPrioritizer;
use moirai_engine::graph::{NodeKind, Partitioning};
use moirai_engine::ready::{wakes_a_worker, LocalFifo, ReadyDiscipline, ReadyQueue, Turn as EngineTurn};
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
use observe::Measure;
use policy::{os_controller, Middleware};

/// The thread id the first simulated thread gets (the rest follow), as the scheduling core sees
/// them.
pub const TID_BASE: i32 = 1000;

/// A tuple in a channel.
#[derive(Clone, Copy, Debug)]
pub(crate) struct Stamp {
    /// Intended send time.
    pub sent: Nanos,
    /// When a source took it in.
    pub ingress: Nanos,
    /// When it was queued in this channel.
    pub queued: Nanos,
}

pub(crate) struct Channel {
    pub queue: VecDeque<Stamp>,
    /// Slots promised to steps in progress.
    pub reserved: usize,
    pub capacity: usize,
    pub from: usize,
    pub to: usize,
    pub pushed: u64,
    pub popped: u64,
}

impl Channel {
    fn free(&self) -> usize {
        self.capacity.saturating_sub(self.queue.len() + self.reserved)
    }
}

pub(crate) struct SourceState {
    pub rate: Rate,
    /// A Poisson source's arrivals that are due and not taken in, and its generator with the
    /// time of its next arrival.
    pub poisson: Option<(VecDeque<Nanos>, fastrand::Rng, Nanos)>,
    /// Tuples taken in.
    pub taken: u64,
    /// A timer for the next due tuple is pending.
    pub timer: bool,
}

pub(crate) struct Op {
    pub kind: NodeKind,
    /// Mean CPU per tuple, overhead included (at least 1 ns).
    pub cost: Nanos,
    /// The operator's own mean CPU per tuple (what `cost_dist` draws around).
    pub work: Nanos,
    pub selectivity: f64,
    pub block: Option<(f64, Nanos)>,
    pub source: Option<SourceState>,
    /// Round-robin position per output group.
    pub next_out: Vec<usize>,
    pub tuples_in: u64,
    pub tuples_out: u64,
    pub cpu_ns: u64,
    /// A worker holds it (pools) — it is in a turn.
    pub busy: bool,
    /// It waits in the ready queue (pools).
    pub queued: bool,
    /// Its ready-queue level (policy executor).
    pub level: u8,
    /// Its thread (dedicated).
    pub thread: Option<usize>,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum State {
    Running,
    Runnable,
    /// Sleeping; `waiting` says whether for work (woken by a notification) or a timer.
    Sleeping,
    /// Woken, runnable after the wake-up latency.
    Waking,
}

#[derive(Clone, Copy, Debug)]
pub(crate) struct Turn {
    op: usize,
    steps_left: usize,
    until: Nanos,
}

pub(crate) struct Thread {
    /// The operator it runs (dedicated), or `None` for a pool worker.
    pub op: Option<usize>,
    pub state: State,
    /// It sleeps until its operator (or, for a worker, any operator) can run.
    pub waiting: bool,
    pub slice_end: Nanos,
    pub turn: Option<Turn>,
    /// Turns this worker started (the ready queue's source interval counts them).
    pub turns: u64,
    pub cpu_ns: u64,
    /// It was woken and has not run since: it owes the wake-up's CPU (`wakeup_cpu_ns`).
    pub woken: bool,
}

/// A pool: the engine's ready queue ([`moirai_engine::ready`], over single-threaded FIFOs), its
/// turn, and its idle workers.
pub(crate) struct Pool {
    ready: ReadyQueue<LocalFifo>,
    turn: EngineTurn,
    idle: Vec<usize>,
}

/// A step in progress on a core.
struct Step {
    thread: usize,
    op: usize,
    start: Nanos,
    tuples: usize,
    /// Output tuples (channel, intended time, ingress), pushed at the end.
    outputs: Vec<(usize, Nanos, Nanos)>,
    /// What a sink consumed: (intended time, ingress, egress) of its i-th tuple.
    consumed: Vec<(Nanos, Nanos, Nanos)>,
    /// CPU the step's tuples took.
    ran: Nanos,
    emitted: u64,
    sleep: Option<Nanos>,
}

#[derive(Default)]
struct Core {
    current: Option<usize>,
    last: Option<usize>,
    resched: bool,
    step: Option<Step>,
    /// The core pays the notifications of its last step until then (`notify_ns` each).
    busy_until: Nanos,
    /// Sleeping threads the core's current step woke (each costs `notify_ns`).
    notified: u64,
}

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
    pub(crate) prioritizer: Option<(PolicyPrioritizer, Nanos)>,
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
            prioritizer: None,
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
            sim.middleware = Some(Middleware { controller: os_controller(name, sim.config.policy_period_ns)? });
            sim.events.push(0, Event::OsPolicy);
        }
        if let Threading::Policy(p) = &sim.config.threading {
            let prioritizer = PolicyPrioritizer::new(&p.policy).map_err(|e| SimError::Config(e.to_string()))?;
            sim.prioritizer = Some((prioritizer, p.period.as_nanos() as Nanos));
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

    /// A thread, asleep until its work arrives.
    fn spawn(&mut self, op: Option<usize>) -> usize {
        let mut e = Entity::new(0);
        self.rq.place_new(&mut e);
        self.entities.push(e);
        self.threads.push(Thread {
            op,
            state: State::Sleeping,
            waiting: true,
            slice_end: 0,
            turn: None,
            turns: 0,
            cpu_ns: 0,
            woken: false,
        });
        if op.is_none() {
            let t = self.threads.len() - 1;
            self.pool.as_mut().expect("workers belong to a pool").idle.push(t);
        }
        self.threads.len() - 1
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
                    let period = self.prioritizer.as_ref().expect("has a prioritizer").1;
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

    // ---- operators ------------------------------------------------------------------------

    /// A source's timer went off: a Poisson source draws its arrivals up to now and sets the
    /// timer for the next one.
    fn arrive(&mut self, op: usize) {
        let (now, duration) = (self.now, self.config.duration_ns);
        let Some(s) = self.ops[op].source.as_mut() else { return };
        s.timer = false;
        let Rate::Poisson(rate) = s.rate else { return };
        let (arrived, rng, next) = s.poisson.as_mut().expect("a Poisson source has its generator");
        while *next <= now && *next < duration {
            arrived.push_back(*next);
            *next += exponential(rng, rate);
        }
        if *next < duration {
            let at = (*next).max(now + 1);
            s.timer = true;
            self.events.push(at, Event::SourceDue(op));
        }
    }

    /// Tuples a source may take in now (none once the run's duration is over).
    pub(crate) fn due(&self, op: usize) -> u64 {
        match &self.ops[op].source {
            Some(SourceState { poisson: Some((arrived, _, _)), .. }) if self.now < self.config.duration_ns => {
                arrived.len() as u64
            }
            Some(s) if self.now < self.config.duration_ns => s.rate.due(self.now).saturating_sub(s.taken),
            _ => 0,
        }
    }

    /// A source's external queue: the tuples due that it has not taken in (what the sources
    /// left behind once the run is over; 0 for an unlimited source, which has no schedule).
    pub(crate) fn backlog(&self, op: usize) -> u64 {
        match &self.ops[op].source {
            Some(SourceState { poisson: Some((arrived, _, _)), .. }) => arrived.len() as u64,
            Some(s) if s.rate != Rate::Unlimited => {
                let t = self.now.min(self.config.duration_ns.saturating_sub(1));
                s.rate.due(t).saturating_sub(s.taken)
            }
            _ => 0,
        }
    }

    /// Whether `op` has a tuple to take and room for what it sends.
    fn can_run(&self, op: usize) -> bool {
        let has_input = match self.ops[op].source {
            Some(_) => self.due(op) > 0,
            None => self.model.inputs[op].iter().any(|&c| !self.channels[c].queue.is_empty()),
        };
        has_input && self.model.outputs[op].iter().all(|g| g.channels.iter().all(|&c| self.channels[c].free() > 0))
    }

    /// Arms a source's timer for its next due tuple when nothing is due now.
    fn arm_source(&mut self, op: usize) {
        let duration = self.config.duration_ns;
        let Some(s) = self.ops[op].source.as_ref() else { return };
        if s.timer || s.poisson.is_some() || self.now >= duration || self.due(op) > 0 {
            return;
        }
        // The engine's source sleeps until its next tuple is due, at least `source_min_sleep_ns`,
        // and its timer fires `timer_slack_ns` late; then it takes all that is due.
        let at = s.rate.time_of(s.taken);
        if at < duration {
            self.ops[op].source.as_mut().expect("a source").timer = true;
            let at = at.max(self.now + self.config.source_min_sleep_ns.max(1)) + self.config.timer_slack_ns;
            self.events.push(at, Event::SourceDue(op));
        }
    }

    /// `op` may have become runnable: wake its thread, or queue it for the pool's workers.
    /// `from` is the core whose step caused it.
    fn notify(&mut self, op: usize, from: Option<usize>) {
        if self.ops[op].busy || !self.can_run(op) {
            self.arm_source(op);
            return;
        }
        if let Some(t) = self.ops[op].thread {
            if self.threads[t].waiting {
                self.threads[t].waiting = false;
                self.threads[t].state = State::Waking;
                self.events.push(self.now + self.config.cfs.wakeup_ns, Event::Wake { thread: t, from });
                self.woke_one(from);
            }
            return;
        }
        if self.ops[op].queued {
            return;
        }
        // A worker that readies an operator in its own turn, with nothing else queued, takes it
        // after the turn itself: no other worker is woken for it (the engine's rule).
        let own_turn = from.and_then(|c| self.cores[c].current).is_some_and(|t| self.threads[t].op.is_none());
        let was_empty = self.pool.as_ref().expect("a pool operator").ready.is_empty();
        self.enqueue(op);
        if !wakes_a_worker(own_turn, was_empty) {
            return;
        }
        let pool = self.pool.as_mut().expect("a pool operator");
        if let Some(w) = pool.idle.pop() {
            self.threads[w].waiting = false;
            self.threads[w].state = State::Waking;
            self.events.push(self.now + self.config.cfs.wakeup_ns, Event::Wake { thread: w, from });
            self.woke_one(from);
        }
    }

    /// Counts a wake-up; the step running on `from` (if any) pays its notification.
    fn woke_one(&mut self, from: Option<usize>) {
        self.wakeups += 1;
        if let Some(c) = from {
            self.cores[c].notified += 1;
        }
    }

    fn enqueue(&mut self, op: usize) {
        self.pool.as_ref().expect("a pool operator").ready.push(op, self.ops[op].level);
        self.ops[op].queued = true;
    }

    /// Starts a step of `op` on `core` by `thread` at `start`; false if not even one tuple fits.
    fn start_step(&mut self, core: usize, thread: usize, op: usize, start: Nanos) -> bool {
        let cost = self.ops[op].cost;
        let budget = self.threads[thread].slice_end.saturating_sub(start) / cost;
        let mut limit = budget.clamp(1, self.config.batch_size as u64);
        if self.ops[op].source.is_some() {
            limit = limit.min(self.due(op));
        }
        let mut step = self.cores[core].step.take().unwrap_or_else(|| Step {
            thread,
            op,
            start,
            tuples: 0,
            outputs: Vec::new(),
            consumed: Vec::new(),
            ran: 0,
            emitted: 0,
            sleep: None,
        });
        let (work, overhead, dist) = (self.ops[op].work, cost - self.ops[op].work, self.config.cost_dist);
        step.thread = thread;
        step.op = op;
        step.start = start;
        step.tuples = 0;
        step.outputs.clear();
        step.consumed.clear();
        step.emitted = 0;
        step.ran = 0;
        step.sleep = None;
        let mut route: Vec<usize> = Vec::new();
        let model = self.model;
        let groups = &model.outputs[op];
        let mut popped_from: Vec<usize> = Vec::new();
        while (step.tuples as u64) < limit {
            let is_source = self.ops[op].source.is_some();
            if !is_source && model.inputs[op].iter().all(|&c| self.channels[c].queue.is_empty()) {
                break;
            }
            // Copies of this tuple and where each goes; committed only if all fit.
            let copies = {
                let s = self.ops[op].selectivity;
                let whole = s.floor() as u64;
                whole + u64::from(self.rng.f64() < s - whole as f64)
            };
            route.clear();
            for (g, group) in groups.iter().enumerate() {
                for k in 0..copies {
                    match group.partitioning {
                        Partitioning::Broadcast => route.extend(&group.channels),
                        Partitioning::Forward | Partitioning::Rebalance => {
                            let turn = self.ops[op].next_out[g] + k as usize;
                            route.push(group.channels[turn % group.channels.len()]);
                        }
                        Partitioning::Shuffle | Partitioning::KeyBy => {
                            route.push(group.channels[self.rng.usize(..group.channels.len())])
                        }
                    }
                }
            }
            // A slot per channel, not per copy: so the first tuple after `can_run` always goes
            // (two copies never fit a channel of one slot, and its thread would sleep for good).
            if !route.iter().all(|&c| self.channels[c].free() > 0) {
                break;
            }
            step.ran += match dist {
                CostDist::Const => cost,
                _ => (dist.draw(work, &mut self.rng) + overhead).max(1),
            };
            let done = start + step.ran;
            let (sent, ingress) = match self.ops[op].source.as_mut() {
                Some(s) => {
                    let ingress = done;
                    let sent = match (&mut s.poisson, s.rate) {
                        (Some((arrived, _, _)), _) => arrived.pop_front().expect("a due arrival"),
                        (None, Rate::Unlimited) => ingress,
                        (None, rate) => rate.time_of(s.taken),
                    };
                    s.taken += 1;
                    self.measure.ingress(ingress);
                    (sent, ingress)
                }
                None => {
                    let c = (model.inputs[op].iter().copied())
                        .filter(|&c| !self.channels[c].queue.is_empty())
                        .min_by_key(|&c| self.channels[c].queue.front().map(|t| t.queued))
                        .expect("an input is not empty");
                    let t = self.channels[c].queue.pop_front().expect("non-empty");
                    self.channels[c].popped += 1;
                    self.in_flight -= 1;
                    if popped_from.last() != Some(&c) {
                        popped_from.push(c);
                    }
                    (t.sent, t.ingress)
                }
            };
            for (g, group) in groups.iter().enumerate() {
                if matches!(group.partitioning, Partitioning::Forward | Partitioning::Rebalance) {
                    self.ops[op].next_out[g] += copies as usize;
                }
            }
            for &c in &route {
                self.channels[c].reserved += 1;
                self.in_flight += 1;
                step.outputs.push((c, sent, ingress));
            }
            step.emitted += copies;
            if self.ops[op].kind == NodeKind::Sink {
                step.consumed.push((sent, ingress, done));
            }
            step.tuples += 1;
            if let Some((p, max)) = self.ops[op].block {
                if self.rng.f64() < p {
                    step.sleep = Some(self.rng.u64(0..max.max(1)));
                    break;
                }
            }
        }
        if step.tuples == 0 {
            debug_assert!(!self.can_run(op), "operator {op} can run but took no tuple: a lost wake-up");
            self.cores[core].step = Some(step);
            return false;
        }
        let end = start + step.ran;
        self.cores[core].step = Some(step);
        self.steps_running += 1;
        self.events.push(end, Event::StepEnd(core));
        // Room freed upstream: a producer blocked on these channels may go on.
        popped_from.sort_unstable();
        popped_from.dedup();
        for c in popped_from {
            let producer = self.channels[c].from;
            self.notify(producer, Some(core));
        }
        true
    }

    fn finish_step(&mut self, core: usize) {
        let now = self.now;
        let step = self.cores[core].step.take().expect("a step ends on its core");
        self.steps_running -= 1;
        let (op, thread) = (step.op, step.thread);
        let ran = step.ran;
        for &(c, sent, ingress) in &step.outputs {
            let ch = &mut self.channels[c];
            ch.reserved -= 1;
            ch.queue.push_back(Stamp { sent, ingress, queued: now });
            ch.pushed += 1;
        }
        for &(sent, ingress, egress) in &step.consumed {
            self.measure.egress(egress, sent, ingress);
        }
        let o = &mut self.ops[op];
        if o.kind != NodeKind::Source {
            o.tuples_in += step.tuples as u64;
        }
        o.tuples_out += if o.kind == NodeKind::Sink { step.tuples as u64 } else { step.emitted };
        o.cpu_ns += ran;
        self.threads[thread].cpu_ns += ran;
        self.measure.cpu(step.start, now);
        self.rq.charge(&mut self.entities[thread], ran);
        let mut touched: Vec<usize> = step.outputs.iter().map(|&(c, _, _)| self.channels[c].to).collect();
        let sleep = step.sleep;
        self.cores[core].step = Some(step);
        touched.sort_unstable();
        touched.dedup();
        for consumer in touched {
            self.notify(consumer, Some(core));
        }
        if self.ops[op].source.is_some() {
            self.arm_source(op);
        }
        // The step's thread pays for the sleeping threads it woke (at its start or its end)
        // before the core does anything else.
        let notified = std::mem::take(&mut self.cores[core].notified) * self.config.notify_ns;
        if notified > 0 {
            self.cores[core].busy_until = now + notified;
            self.threads[thread].cpu_ns += notified;
            self.ops[op].cpu_ns += notified;
            self.rq.charge(&mut self.entities[thread], notified);
            self.measure.cpu(now, now + notified);
        }
        if let Some(s) = sleep {
            // A blocking operator sleeps in its thread (a pool worker keeps its turn meanwhile).
            self.threads[thread].state = State::Sleeping;
            self.rq.sleep(&mut self.entities[thread]);
            self.rq.regroup(thread, &mut self.entities);
            self.cores[core].current = None;
            self.events.push(now + s + self.config.cfs.wakeup_ns, Event::Wake { thread, from: None });
        } else if now >= self.threads[thread].slice_end || self.cores[core].resched {
            self.cores[core].resched = false;
            if self.rq.has_waiting() {
                self.threads[thread].state = State::Runnable;
                self.rq.put_prev(thread, &mut self.entities[thread]);
                self.cores[core].current = None;
            } else {
                self.threads[thread].slice_end = now + self.rq.slice(&self.entities[thread]);
            }
        }
        self.dispatch(core);
    }

    // ---- threads and cores ----------------------------------------------------------------

    fn wake(&mut self, thread: usize, from: Option<usize>) {
        if !matches!(self.threads[thread].state, State::Sleeping | State::Waking) {
            return;
        }
        self.threads[thread].state = State::Runnable;
        self.threads[thread].woken = true;
        self.rq.wake(thread, &mut self.entities[thread]);
        self.rq.regroup(thread, &mut self.entities);
        if let Some(core) = self.idle_cores.pop() {
            self.dispatch(core);
        } else if let Some(c) = from {
            if let Some(current) = self.cores[c].current {
                if self.rq.should_preempt(&self.entities[thread], &self.entities[current]) {
                    self.cores[c].resched = true;
                }
            }
        }
    }

    /// Gives `core` a thread with work, or leaves it idle.
    fn dispatch(&mut self, core: usize) {
        loop {
            let base = self.now.max(self.cores[core].busy_until);
            let mut start = base;
            let thread = match self.cores[core].current {
                Some(t) => t,
                None => {
                    let Some(t) = self.rq.pick(&mut self.entities) else {
                        self.idle_cores.push(core);
                        return;
                    };
                    // A woken thread always switches in (from the idle task at least) and pays
                    // its wake-up's CPU.
                    let woken = std::mem::take(&mut self.threads[t].woken);
                    if self.cores[core].last != Some(t) || woken {
                        start += self.config.cfs.context_switch_ns;
                        self.context_switches += 1;
                    }
                    if woken && self.config.wakeup_cpu_ns > 0 {
                        let w = self.config.wakeup_cpu_ns;
                        start += w;
                        self.threads[t].cpu_ns += w;
                        if let Some(op) = self.threads[t].op {
                            self.ops[op].cpu_ns += w;
                        }
                        self.rq.charge(&mut self.entities[t], w);
                    }
                    self.measure.cpu(base, start);
                    self.cores[core].current = Some(t);
                    self.cores[core].last = Some(t);
                    self.threads[t].state = State::Running;
                    self.threads[t].slice_end = start + self.rq.slice(&self.entities[t]);
                    t
                }
            };
            if self.plan(thread, core, start) {
                return;
            }
            // Nothing to do: the thread sleeps until notified.
            self.threads[thread].state = State::Sleeping;
            self.threads[thread].waiting = true;
            self.rq.sleep(&mut self.entities[thread]);
            self.rq.regroup(thread, &mut self.entities);
            self.cores[core].current = None;
            if self.threads[thread].op.is_none() {
                self.pool.as_mut().expect("a worker's pool").idle.push(thread);
            }
        }
    }

    /// Starts the thread's next step; false if it has nothing to run.
    fn plan(&mut self, thread: usize, core: usize, start: Nanos) -> bool {
        if let Some(op) = self.threads[thread].op {
            if self.can_run(op) && self.start_step(core, thread, op, start) {
                return true;
            }
            self.arm_source(op);
            return false;
        }
        loop {
            if let Some(mut turn) = self.threads[thread].turn {
                if turn.steps_left > 0 && start < turn.until && self.can_run(turn.op) {
                    turn.steps_left -= 1;
                    self.threads[thread].turn = Some(turn);
                    if self.start_step(core, thread, turn.op, start) {
                        return true;
                    }
                }
                self.threads[thread].turn = None;
                self.ops[turn.op].busy = false;
                if self.can_run(turn.op) {
                    self.enqueue(turn.op);
                } else {
                    self.arm_source(turn.op);
                }
            }
            let pool = self.pool.as_mut().expect("a worker's pool");
            let turn = pool.turn;
            let Some(op) = pool.ready.pop(self.threads[thread].turns) else { return false };
            self.threads[thread].turns += 1;
            self.ops[op].queued = false;
            self.ops[op].busy = true;
            let until = turn.ends_at(start).unwrap_or(Nanos::MAX);
            self.threads[thread].turn = Some(Turn { op, steps_left: turn.steps, until });
        }
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

/// An exponential gap of a Poisson process of `rate` per second, in ns (at least 1).
fn exponential(rng: &mut fastrand::Rng, rate: f64) -> Nanos {
    ((-(1.0 - rng.f64()).ln() / rate * 1e9).round() as Nanos).max(1)
}

/// A duration of `n` ns.
pub(crate) fn ns(n: Nanos) -> Duration {
    Duration::from_nanos(n)
}

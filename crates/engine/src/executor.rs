//! Threading models: how physical operators get CPU time (IBM Streams' naming).
//!
//! - [`Threading::Dedicated`]: one OS thread per physical operator, sleeping on its [`Signal`]
//!   when idle or blocked, left to the OS scheduler — as Storm and Flink run, and the baseline the
//!   middleware steers.
//! - [`Threading::Dynamic`]: a pool of N worker threads, any worker runs any operator (IBM
//!   Streams 4.2's dynamic model); [`Threading::Elastic`] sizes that pool at run time by the
//!   paper's trust-and-trend algorithm ([`crate::elastic`]).
//! - [`Threading::Fused`]: every operator on one thread, or on the named threads the query's
//!   thread hints place them on (manual placement).
//!
//! All of them drive the same non-blocking [`Task`]s: a step never waits, so a worker that finds
//! an operator blocked on a full output or idle moves on to another one.
//!
//! ## The pool
//!
//! Every operator of a pool has a state word: idle, queued, running, running-and-notified, or
//! finished. Waking an operator ([`Signal::notify`] through its hook: input arrived, a full output
//! drained, a timer fired, a stop was requested) moves it from idle to queued and appends it to
//! the pool's lock-free ready queue, or marks a running one as notified so that its worker queues
//! it again when it lets go of it. A worker pops the operator that has waited longest (the queue
//! is FIFO, so operators run in least-recently-run order: IBM's LRU free list), claims it with a
//! compare-and-swap from queued to running (the consumer try-lock: one operator instance never
//! runs on two threads at once, and its input channels are read in order by one thread at a time,
//! so per-channel FIFO order holds), steps it a few times, and then lets go of it: queued at the
//! back if it still has work, idle on the timer heap if it waits for a time, idle if it waits for
//! input or for room. No wake-up is lost: a notification that arrives while the operator runs
//! leaves it notified, and letting go of a notified operator queues it again. Idle workers sleep
//! on one event count and cost no CPU: one of them keeps the timers (sleeps until the next one is
//! due), the others sleep until work arrives. An operator that a worker readies during its own
//! turn, while nothing else is queued, is left for that worker to take after the turn instead of
//! waking another: at a low rate a tuple then crosses a pipeline on one thread, with one wake-up
//! (its source's timer) instead of one per hop.
//!
//! A producer that finds a consumer's channel full does what IBM's producers do: instead of
//! waiting, its worker claims the queued consumer and runs it at once, draining the channel while
//! it is still in the cache.

use std::cell::Cell;
use std::cmp::Reverse;
use std::collections::BinaryHeap;
use std::fmt;
use std::panic::{catch_unwind, AssertUnwindSafe};
use std::sync::atomic::{AtomicBool, AtomicI32, AtomicU64, AtomicU8, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::thread::JoinHandle;
use std::time::Duration;

use crossbeam_queue::SegQueue;
use serde::{Serialize, Serializer};

use crate::channel::{lock, AbortFlag, Signal};
use crate::elastic::{Elastic, ElasticConfig};
use crate::metrics::OperatorMetrics;
use crate::task::{Step, Task};
use crate::tuple::now_ns;
use crate::user_level::{PolicyThreading, PRIORITY_LEVELS};

/// The most worker threads a pool may have.
pub const MAX_POOL_THREADS: usize = 1024;

/// The threading models.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub enum Threading {
    /// One OS thread per physical operator.
    #[default]
    Dedicated,
    /// A pool of `threads` workers; any worker runs any operator.
    Dynamic {
        /// Worker threads.
        threads: usize,
    },
    /// A dynamic pool whose thread level adapts to the throughput it observes.
    Elastic(ElasticConfig),
    /// Operators on named threads: those with a thread hint on the thread it names, all others
    /// on the first. `threads` is never empty.
    Fused {
        /// The threads' names.
        threads: Vec<String>,
    },
    /// A pool whose workers run the runnable operator a scheduling policy ranks highest
    /// ([`crate::user_level`]).
    Policy(PolicyThreading),
}

impl Threading {
    /// The name without parameters: `dedicated`, `dynamic`, `elastic` or `fused`.
    pub fn model(&self) -> &'static str {
        match self {
            Threading::Dedicated => "dedicated",
            Threading::Dynamic { .. } => "dynamic",
            Threading::Elastic(_) => "elastic",
            Threading::Fused { .. } => "fused",
            Threading::Policy(_) => "policy",
        }
    }

    /// True for the models where a thread runs many operators (nice on one of its threads
    /// affects every operator it runs).
    pub fn is_pool(&self) -> bool {
        *self != Threading::Dedicated
    }
}

impl fmt::Display for Threading {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Threading::Dedicated => f.write_str("dedicated"),
            Threading::Dynamic { threads } => write!(f, "dynamic:{threads}"),
            Threading::Elastic(c) => write!(f, "elastic:{c}"),
            Threading::Fused { threads } if threads.len() == 1 && threads[0] == "fused" => f.write_str("fused"),
            Threading::Fused { threads } => write!(f, "fused:{}", threads.join("+")),
            Threading::Policy(c) => write!(f, "policy:{c}"),
        }
    }
}

impl Serialize for Threading {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        s.collect_str(self)
    }
}

/// The cores this process may run on (its affinity mask), at least 1.
pub fn available_cores() -> usize {
    std::thread::available_parallelism().map_or(1, |n| n.get())
}

const THREADING_HELP: &str =
    "threading models: dedicated, dynamic[:N], elastic[:MIN-MAX][:start=N][:period=DURATION], \
fused[:NAME+NAME...], policy:NAME[:N][:batch=B][:quantum=DURATION][:period=DURATION]";

impl std::str::FromStr for Threading {
    type Err = String;
    fn from_str(s: &str) -> Result<Self, String> {
        let (model, params) = match s.split_once(':') {
            Some((m, p)) => (m, Some(p)),
            None => (s, None),
        };
        let count = |what: &str, text: &str| -> Result<usize, String> {
            match text.trim().parse::<usize>() {
                Ok(n) if (1..=MAX_POOL_THREADS).contains(&n) => Ok(n),
                Ok(n) => Err(format!("'{s}': {what} {n} is out of range; use 1 to {MAX_POOL_THREADS}")),
                Err(_) => Err(format!("'{s}': {what} '{text}' is not a whole number; e.g. dynamic:2")),
            }
        };
        match (model, params) {
            ("dedicated", None) => Ok(Threading::Dedicated),
            ("dynamic", None) => Ok(Threading::Dynamic { threads: available_cores() }),
            ("dynamic", Some(n)) => Ok(Threading::Dynamic { threads: count("the thread count", n)? }),
            ("elastic", params) => Ok(Threading::Elastic(ElasticConfig::parse(params.unwrap_or(""), s)?)),
            ("fused", None) => Ok(Threading::Fused { threads: vec!["fused".into()] }),
            ("fused", Some(names)) => {
                let threads: Vec<String> = names.split('+').map(|n| n.trim().to_string()).collect();
                if threads.iter().any(|n| n.is_empty()) {
                    return Err(format!("'{s}': an empty thread name; name each thread, e.g. fused:io+work"));
                }
                let mut sorted = threads.clone();
                sorted.sort();
                if let Some(w) = sorted.windows(2).find(|w| w[0] == w[1]) {
                    return Err(format!("'{s}': thread '{}' is named twice", w[0]));
                }
                Ok(Threading::Fused { threads })
            }
            ("policy", Some(p)) => Ok(Threading::Policy(PolicyThreading::parse(p, s)?)),
            ("policy", None) => Err(format!("'{s}': name a policy, e.g. policy:qs:2; {THREADING_HELP}")),
            ("dedicated", Some(_)) => Err(format!("'{s}': dedicated takes no parameters")),
            (other, _) => Err(format!("unknown threading model '{other}'; {THREADING_HELP}")),
        }
    }
}

/// A physical operator handed to an executor.
pub struct Runnable {
    /// Physical name, for the thread and for error reports.
    pub name: String,
    /// The task.
    pub task: Box<dyn Task>,
    /// Its counters (the executor records the thread it runs on and its CPU time there).
    pub metrics: Arc<OperatorMetrics>,
    /// The signal that wakes it (the same as `task.signal()`).
    pub signal: Arc<Signal>,
    /// Indices (into the executor's list) of the operators it sends to.
    pub downstream: Vec<usize>,
    /// The thread it was placed on by a thread hint, for [`Threading::Fused`].
    pub thread_hint: Option<String>,
    /// Whether it is a source (the policy executor may schedule sources at a fixed interval).
    pub source: bool,
}

/// Called by an executor when a task panics: with the operator's name and the panic message.
pub type OnPanic = Arc<dyn Fn(&str, String) + Send + Sync>;

/// A worker thread of a pool, as `/topology` lists it.
#[derive(Clone, Debug, Serialize)]
pub struct PoolThread {
    /// Thread name.
    pub name: String,
    /// Linux thread id (0 before it started).
    pub tid: i32,
}

/// What a running executor exposes while it runs.
#[derive(Default)]
pub struct Observed {
    /// Worker threads (pools only): name and tid.
    pub threads: Mutex<Vec<(String, Arc<AtomicI32>)>>,
    /// The pools' thread level now (the sum over pools; 0 for dedicated).
    pub thread_level: AtomicUsize,
    /// Every change of the elastic level.
    pub level_changes: Mutex<Vec<LevelChange>>,
    /// Print every elastic decision on stderr.
    pub verbose: AtomicBool,
}

/// One decision of the elastic controller.
#[derive(Clone, Debug, Serialize)]
pub struct LevelChange {
    /// Seconds since the pool started.
    pub at_s: f64,
    /// Level before.
    pub from: usize,
    /// Level after.
    pub to: usize,
    /// Throughput observed at `from`, tuples/s over all operators.
    pub throughput: f64,
    /// The rule that decided.
    pub reason: String,
}

/// What an executor started.
pub struct Started {
    /// The threads to join.
    pub threads: Vec<JoinHandle<()>>,
    /// Signals to notify when the engine aborts, so that sleeping workers see the abort.
    pub wake_on_abort: Vec<Arc<Signal>>,
}

/// A threading model.
pub trait Executor {
    /// Starts running `tasks`.
    fn start(
        &self,
        tasks: Vec<Runnable>,
        abort: Arc<AbortFlag>,
        on_panic: OnPanic,
        observed: Arc<Observed>,
    ) -> std::io::Result<Started>;
}

/// The executor of a threading model.
pub fn executor(threading: &Threading) -> Box<dyn Executor> {
    match threading {
        Threading::Dedicated => Box::new(Dedicated),
        Threading::Dynamic { threads } => Box::new(Pools::one("dynamic", *threads, None)),
        Threading::Elastic(config) => Box::new(Pools::one("elastic", config.max, Some(config.clone()))),
        Threading::Fused { threads } => Box::new(Pools { names: threads.clone(), ..Pools::one("fused", 1, None) }),
        Threading::Policy(c) => Box::new(Pools {
            levels: PRIORITY_LEVELS,
            turn: Turn { steps: c.batch, quantum: c.quantum },
            source_every: c.source_every,
            ..Pools::one("policy", c.threads, None)
        }),
    }
}

fn panic_message(payload: Box<dyn std::any::Any + Send>) -> String {
    payload
        .downcast_ref::<&str>()
        .map(|s| s.to_string())
        .or_else(|| payload.downcast_ref::<String>().cloned())
        .unwrap_or_else(|| "non-string panic payload".into())
}

/// One OS thread per physical operator.
pub struct Dedicated;

impl Executor for Dedicated {
    fn start(
        &self,
        tasks: Vec<Runnable>,
        abort: Arc<AbortFlag>,
        on_panic: OnPanic,
        _observed: Arc<Observed>,
    ) -> std::io::Result<Started> {
        let mut threads = Vec::with_capacity(tasks.len());
        for Runnable { name, mut task, metrics, .. } in tasks {
            let (abort_flag, report) = (abort.clone(), on_panic.clone());
            let spawned = std::thread::Builder::new().name(name.clone()).spawn(move || {
                metrics.tid.store(moirai_os::current_tid(), Ordering::SeqCst);
                let result = catch_unwind(AssertUnwindSafe(|| run_dedicated(&mut *task, &abort_flag)));
                metrics.final_cpu_ns.store(moirai_os::proc::current_thread_cpu_ns().max(1), Ordering::SeqCst);
                if let Err(payload) = result {
                    report(&name, panic_message(payload));
                }
            });
            match spawned {
                Ok(t) => threads.push(t),
                Err(e) => {
                    // Stop what was started; the caller joins `threads` through the error path.
                    abort.raise();
                    on_panic("executor", format!("cannot spawn a thread: {e}"));
                    for t in threads {
                        let _ = t.join();
                    }
                    return Err(e);
                }
            }
        }
        Ok(Started { threads, wake_on_abort: Vec::new() })
    }
}

/// The dedicated loop: step while there is work; sleep on the task's signal while it is idle or
/// its outputs are full.
fn run_dedicated(task: &mut dyn Task, abort: &AbortFlag) {
    let signal = task.signal().clone();
    loop {
        if abort.is_raised() {
            return;
        }
        if signal.is_blocked() {
            signal.wait_unless(None, || !signal.is_blocked() || abort.is_raised());
            continue;
        }
        match task.step() {
            Step::Worked | Step::Blocked => {}
            Step::Finished => return,
            Step::Idle { until } => {
                let timeout = until.map(|t| Duration::from_nanos(t.saturating_sub(now_ns())));
                if timeout == Some(Duration::ZERO) {
                    continue;
                }
                signal.wait_unless(timeout, || task.has_input() || abort.is_raised());
            }
        }
    }
}

/// Steps a worker takes on an operator before it lets go of it under `dynamic`, `elastic` and
/// `fused` (fewer: fairer; more: warmer caches and less queueing).
const STEPS_PER_RUN: usize = 8;

/// How long a worker keeps an operator before it lets go of it: at most `steps` steps (a step
/// handles one input batch), and at most `quantum` of wall time when one is set.
#[derive(Clone, Copy, Debug, PartialEq)]
pub(crate) struct Turn {
    pub(crate) steps: usize,
    pub(crate) quantum: Option<Duration>,
}

thread_local! {
    /// While this thread is a pool worker in the middle of a turn: the address of its pool's
    /// ready queue (0 otherwise). A push to another pool's queue (`fused` has one per thread)
    /// always wakes that pool.
    static IN_TURN: Cell<usize> = const { Cell::new(0) };
}

const IDLE: u8 = 0;
const QUEUED: u8 = 1;
const RUNNING: u8 = 2;
const NOTIFIED: u8 = 3;
const FINISHED: u8 = 4;

/// The ready queue of a pool and the event count its idle workers sleep on: one FIFO per
/// priority level (one level for `dynamic`, `elastic` and `fused`; [`PRIORITY_LEVELS`] for
/// `policy`). A worker takes from the highest level that has an operator.
///
/// With a source interval K (STAFiLOS' QBS), sources wait in a FIFO of their own instead of at
/// their level: a worker takes a source first on every K-th turn it starts, and otherwise only
/// when no other operator is ready, so sources run at a fixed interval whatever their priority.
struct Ready {
    levels: Vec<SegQueue<usize>>,
    /// With a source interval: K, the sources' own FIFO, and which operators are sources.
    sources: Option<(u64, SegQueue<usize>, Vec<bool>)>,
    idle: Signal,
}

impl Ready {
    fn new(levels: usize) -> Ready {
        Ready { levels: (0..levels.max(1)).map(|_| SegQueue::new()).collect(), sources: None, idle: Signal::default() }
    }

    /// A ready queue that takes a source every `every`-th turn; `is_source` by operator.
    fn with_sources(levels: usize, every: u32, is_source: Vec<bool>) -> Ready {
        Ready { sources: Some((u64::from(every.max(1)), SegQueue::new(), is_source)), ..Ready::new(levels) }
    }

    /// Queues `id` at `level` (capped at the highest level) and wakes an idle worker — unless
    /// a worker queues it in the middle of a turn while nothing else waits: that worker takes it
    /// itself when its turn ends, so a tuple passing down a pipeline at a low rate costs no
    /// wake-up and no context switch per hop (at most one operator waits for the end of a turn
    /// without a worker woken for it).
    fn push(&self, id: usize, level: u8) {
        let top = self.levels.len() - 1;
        // Only a worker in its own turn looks at the queue (before the push): the others wake one.
        let own_turn = IN_TURN.with(Cell::get) == self as *const Ready as usize;
        let wake = !own_turn || !self.is_empty();
        match &self.sources {
            Some((_, sources, is_source)) if is_source.get(id) == Some(&true) => sources.push(id),
            _ => self.levels[usize::from(level).min(top)].push(id),
        }
        if wake {
            self.idle.notify_one();
        }
    }

    /// The operator that waited longest at the highest non-empty level; with a source interval,
    /// a source first when `turn` (the worker's count of turns started) is a multiple of it.
    fn pop(&self, turn: u64) -> Option<usize> {
        let levels = || self.levels.iter().rev().find_map(SegQueue::pop);
        match &self.sources {
            None => levels(),
            Some((every, sources, _)) if turn % every == 0 => sources.pop().or_else(levels),
            Some((_, sources, _)) => levels().or_else(|| sources.pop()),
        }
    }

    fn is_empty(&self) -> bool {
        self.levels.iter().all(SegQueue::is_empty) && self.sources.as_ref().is_none_or(|(_, s, _)| s.is_empty())
    }
}

/// Makes operator `id` runnable: idle → queued (and on the ready queue at the priority level its
/// metrics carry), running → notified.
fn schedule(state: &AtomicU8, id: usize, ready: &Ready, metrics: &OperatorMetrics) {
    let mut s = state.load(Ordering::SeqCst);
    loop {
        let next = match s {
            IDLE => QUEUED,
            RUNNING => NOTIFIED,
            _ => return,
        };
        match state.compare_exchange(s, next, Ordering::SeqCst, Ordering::SeqCst) {
            Ok(_) => {
                if next == QUEUED {
                    ready.push(id, metrics.priority_level.load(Ordering::Relaxed));
                }
                return;
            }
            Err(now) => s = now,
        }
    }
}

struct Slot {
    name: String,
    task: Mutex<Box<dyn Task>>,
    metrics: Arc<OperatorMetrics>,
    signal: Arc<Signal>,
    state: Arc<AtomicU8>,
    /// Operators of this pool it sends to.
    downstream: Vec<usize>,
}

/// One pool: its operators, ready queue, timers and thread level.
struct Pool {
    name: String,
    slots: Vec<Slot>,
    ready: Arc<Ready>,
    /// (when, operator) of operators waiting for a time.
    timers: Mutex<BinaryHeap<Reverse<(u64, usize)>>>,
    /// The earliest timer, or `u64::MAX`: lets workers skip the heap's lock.
    next_timer: AtomicU64,
    /// The idle worker that sleeps until the next timer (the others sleep until work arrives, so
    /// a timer wakes one thread, not all), and the time it will wake (`u64::MAX`: none sleeps).
    keeper: AtomicBool,
    keeper_wakes_at: AtomicU64,
    /// Operators not finished yet.
    live: AtomicUsize,
    /// Workers with an index below the level run operators; the others wait.
    level: AtomicUsize,
    /// Where workers above the level (and the controller) wait.
    parked: Signal,
    /// How long a worker keeps an operator.
    turn: Turn,
    abort: Arc<AbortFlag>,
    on_panic: OnPanic,
}

impl Pool {
    fn done(&self) -> bool {
        self.live.load(Ordering::SeqCst) == 0 || self.abort.is_raised()
    }

    fn wake_all(&self) {
        self.ready.idle.notify();
        self.parked.notify();
    }

    fn add_timer(&self, at: u64, id: usize) {
        let mut timers = lock(&self.timers);
        timers.push(Reverse((at, id)));
        self.next_timer.fetch_min(at, Ordering::SeqCst);
        // Only a timer keeper that sleeps past it needs waking: with no keeper asleep, the worker
        // adding the timer (always a worker, in a turn) keeps it when it goes idle.
        if at < self.keeper_wakes_at.load(Ordering::SeqCst) && self.keeper_wakes_at.load(Ordering::SeqCst) != u64::MAX {
            self.ready.idle.notify();
        }
    }

    /// Queues every operator whose time has come; returns when the next one is due.
    fn fire_timers(&self, now: u64) -> Option<u64> {
        if self.next_timer.load(Ordering::SeqCst) > now {
            let next = self.next_timer.load(Ordering::SeqCst);
            return (next != u64::MAX).then_some(next);
        }
        let mut timers = lock(&self.timers);
        while let Some(&Reverse((at, id))) = timers.peek() {
            if at > now {
                break;
            }
            timers.pop();
            let slot = &self.slots[id];
            schedule(&slot.state, id, &self.ready, &slot.metrics);
        }
        let next = timers.peek().map_or(u64::MAX, |Reverse((at, _))| *at);
        self.next_timer.store(next, Ordering::SeqCst);
        (next != u64::MAX).then_some(next)
    }

    /// Puts queued operator `id` on the ready queue at its priority level.
    fn queue(&self, id: usize) {
        self.ready.push(id, self.slots[id].metrics.priority_level.load(Ordering::Relaxed));
    }

    /// Lets go of a running operator: idle, or queued again if it was notified meanwhile.
    fn release(&self, id: usize) {
        let state = &self.slots[id].state;
        if state.compare_exchange(RUNNING, IDLE, Ordering::SeqCst, Ordering::SeqCst).is_err() {
            // Notified while it ran: it has something to do.
            state.store(QUEUED, Ordering::SeqCst);
            self.queue(id);
        }
    }

    /// Runs claimed operator `id` for a few steps, then lets go of it. Returns true if it ended
    /// blocked on a full output.
    fn run(&self, id: usize, tid: i32) -> bool {
        let slot = &self.slots[id];
        let Ok(mut task) = slot.task.try_lock() else {
            // Cannot happen while the state word is respected; never wait for it.
            self.release(id);
            return false;
        };
        slot.metrics.tid.store(tid, Ordering::Relaxed);
        let cpu_start = moirai_os::proc::current_thread_cpu_ns();
        let mut outcome = Step::Worked;
        let quantum_end = self.turn.quantum.map(|q| now_ns() + q.as_nanos() as u64);
        IN_TURN.with(|t| t.set(Arc::as_ptr(&self.ready) as usize));
        for _ in 0..self.turn.steps {
            if slot.signal.is_blocked() {
                outcome = Step::Blocked;
                break;
            }
            outcome = match catch_unwind(AssertUnwindSafe(|| task.step())) {
                Ok(step) => step,
                Err(payload) => {
                    (self.on_panic)(&slot.name, panic_message(payload));
                    Step::Finished
                }
            };
            if outcome != Step::Worked || self.abort.is_raised() || quantum_end.is_some_and(|end| now_ns() >= end) {
                break;
            }
        }
        IN_TURN.with(|t| t.set(0));
        let cpu = moirai_os::proc::current_thread_cpu_ns().saturating_sub(cpu_start);
        slot.metrics.pool_cpu_ns.fetch_add(cpu, Ordering::Relaxed);
        drop(task);
        match outcome {
            Step::Finished => {
                slot.state.store(FINISHED, Ordering::SeqCst);
                if self.live.fetch_sub(1, Ordering::SeqCst) == 1 {
                    self.wake_all();
                }
                false
            }
            Step::Worked => {
                // Still has work: to the back of its level, behind those that waited longer.
                slot.state.store(QUEUED, Ordering::SeqCst);
                self.queue(id);
                false
            }
            Step::Idle { until } => {
                if let Some(at) = until {
                    self.add_timer(at, id);
                }
                self.release(id);
                false
            }
            Step::Blocked => {
                self.release(id);
                true
            }
        }
    }

    fn worker(&self, index: usize, tid: i32) {
        // Turns this worker started (for a source interval).
        let mut turns: u64 = 0;
        loop {
            if self.done() {
                return;
            }
            if index >= self.level.load(Ordering::SeqCst) {
                // What this worker queued during its last turn is for another one now.
                if !self.ready.is_empty() {
                    self.ready.idle.notify_one();
                }
                self.parked.wait_unless(None, || index < self.level.load(Ordering::SeqCst) || self.done());
                continue;
            }
            // Operators whose timer fired are taken by this worker next: no other is woken for
            // them unless more than one waits.
            IN_TURN.with(|t| t.set(Arc::as_ptr(&self.ready) as usize));
            let next_timer = self.fire_timers(now_ns());
            IN_TURN.with(|t| t.set(0));
            if let Some(id) = self.ready.pop(turns) {
                turns += 1;
                // A stale entry (the operator was claimed by a producer's drain, or already ran)
                // fails the claim and is dropped.
                if self.slots[id].state.compare_exchange(QUEUED, RUNNING, Ordering::SeqCst, Ordering::SeqCst).is_ok()
                    && self.run(id, tid)
                {
                    // Blocked on a full output: drain a queued consumer now (IBM's producer
                    // that executes its consumer instead of waiting).
                    for &d in &self.slots[id].downstream {
                        let claimed = self.slots[d]
                            .state
                            .compare_exchange(QUEUED, RUNNING, Ordering::SeqCst, Ordering::SeqCst)
                            .is_ok();
                        if claimed {
                            self.run(d, tid);
                        }
                    }
                }
                continue;
            }
            // One idle worker keeps the timers; the others sleep until work arrives.
            let keeper = next_timer.is_some()
                && self.keeper.compare_exchange(false, true, Ordering::SeqCst, Ordering::SeqCst).is_ok();
            let wakes_at = if keeper { self.next_timer.load(Ordering::SeqCst) } else { u64::MAX };
            if keeper {
                self.keeper_wakes_at.store(wakes_at, Ordering::SeqCst);
            }
            let timeout = keeper.then(|| Duration::from_nanos(wakes_at.saturating_sub(now_ns()).max(1)));
            self.ready.idle.wait_unless(timeout, || {
                !self.ready.is_empty()
                    || self.done()
                    || index >= self.level.load(Ordering::SeqCst)
                    || (keeper && self.next_timer.load(Ordering::SeqCst) < wakes_at)
                    || self.next_timer.load(Ordering::SeqCst) <= now_ns()
            });
            if keeper {
                self.keeper_wakes_at.store(u64::MAX, Ordering::SeqCst);
                self.keeper.store(false, Ordering::SeqCst);
                // Woken for work while timers wait: another idle worker keeps them meanwhile.
                if !self.ready.is_empty() && self.next_timer.load(Ordering::SeqCst) != u64::MAX {
                    self.ready.idle.notify_one();
                }
            }
        }
    }
}

/// One or more pools: `dynamic`, `elastic` and `policy` have one; `fused` one per named thread.
struct Pools {
    names: Vec<String>,
    workers: usize,
    elastic: Option<ElasticConfig>,
    /// Priority levels of the ready queue (1: FIFO).
    levels: usize,
    turn: Turn,
    /// Take a source every this many turns (STAFiLOS' QBS), if set.
    source_every: Option<u32>,
}

impl Pools {
    fn one(name: &str, workers: usize, elastic: Option<ElasticConfig>) -> Pools {
        Pools {
            names: vec![name.to_string()],
            workers,
            elastic,
            levels: 1,
            turn: Turn { steps: STEPS_PER_RUN, quantum: None },
            source_every: None,
        }
    }
}

/// A worker's thread name: `dynamic-0`, `elastic-3`, or a fused thread's own name (Linux keeps 15
/// bytes of it).
fn worker_name(pool: &str, index: usize, pools: usize) -> String {
    if pools == 1 && pool != "fused" {
        format!("{pool}-{index}")
    } else {
        pool.to_string()
    }
}

impl Executor for Pools {
    fn start(
        &self,
        tasks: Vec<Runnable>,
        abort: Arc<AbortFlag>,
        on_panic: OnPanic,
        observed: Arc<Observed>,
    ) -> std::io::Result<Started> {
        // Place each operator on its pool: by thread hint for fused, else the one pool.
        let mut placed: Vec<Vec<Runnable>> = self.names.iter().map(|_| Vec::new()).collect();
        let mut local = Vec::with_capacity(tasks.len());
        let mut pool_of = Vec::with_capacity(tasks.len());
        for t in tasks {
            let p = match (&t.thread_hint, self.names.len()) {
                (Some(hint), n) if n > 1 || self.names[0] == *hint => {
                    self.names.iter().position(|n| n == hint).unwrap_or(0)
                }
                _ => 0,
            };
            local.push(placed[p].len());
            pool_of.push(p);
            placed[p].push(t);
        }
        let mut pools = Vec::new();
        for (p, runnables) in placed.into_iter().enumerate() {
            let ready = Arc::new(match self.source_every {
                Some(every) => Ready::with_sources(self.levels, every, runnables.iter().map(|r| r.source).collect()),
                None => Ready::new(self.levels),
            });
            let live = runnables.len();
            let level = match &self.elastic {
                Some(c) => c.start,
                None => self.workers,
            };
            let slots = runnables
                .into_iter()
                .enumerate()
                .map(|(i, r)| {
                    let state = Arc::new(AtomicU8::new(QUEUED));
                    let (s, q, m) = (state.clone(), ready.clone(), r.metrics.clone());
                    r.signal.set_hook(Arc::new(move || schedule(&s, i, &q, &m)));
                    r.metrics.pooled.store(true, Ordering::SeqCst);
                    let downstream = r.downstream.iter().filter(|&&d| pool_of[d] == p).map(|&d| local[d]).collect();
                    Slot {
                        name: r.name,
                        task: Mutex::new(r.task),
                        metrics: r.metrics,
                        signal: r.signal,
                        state,
                        downstream,
                    }
                })
                .collect::<Vec<_>>();
            // Every operator starts queued, in plan order.
            for (i, slot) in slots.iter().enumerate() {
                ready.push(i, slot.metrics.priority_level.load(Ordering::Relaxed));
            }
            pools.push(Arc::new(Pool {
                name: self.names[p].clone(),
                slots,
                ready,
                timers: Mutex::new(BinaryHeap::new()),
                next_timer: AtomicU64::new(u64::MAX),
                keeper: AtomicBool::new(false),
                keeper_wakes_at: AtomicU64::new(u64::MAX),
                live: AtomicUsize::new(live),
                level: AtomicUsize::new(level),
                parked: Signal::default(),
                turn: self.turn,
                abort: abort.clone(),
                on_panic: on_panic.clone(),
            }));
        }
        let mut threads = Vec::new();
        let mut wake_on_abort = Vec::new();
        let npools = pools.len();
        let total_level: usize = pools.iter().map(|p| p.level.load(Ordering::SeqCst)).sum();
        observed.thread_level.store(total_level, Ordering::SeqCst);
        for pool in &pools {
            // Workers above the level and the pool's ready queue must see an abort.
            let (ready, parked) = (pool.ready.clone(), pool.clone());
            let wake = Arc::new(Signal::default());
            wake.set_hook(Arc::new(move || {
                ready.idle.notify();
                parked.parked.notify();
            }));
            wake_on_abort.push(wake);
            for index in 0..self.workers {
                let name = worker_name(&pool.name, index, npools);
                let tid = Arc::new(AtomicI32::new(0));
                lock(&observed.threads).push((name.clone(), tid.clone()));
                let pool = pool.clone();
                match std::thread::Builder::new().name(name).spawn(move || {
                    let me = moirai_os::current_tid();
                    tid.store(me, Ordering::SeqCst);
                    pool.worker(index, me);
                }) {
                    Ok(t) => threads.push(t),
                    Err(e) => {
                        abort.raise();
                        on_panic("executor", format!("cannot spawn a worker thread: {e}"));
                        for p in &pools {
                            p.wake_all();
                        }
                        for t in threads {
                            let _ = t.join();
                        }
                        return Err(e);
                    }
                }
            }
        }
        if let Some(config) = &self.elastic {
            let (pool, observed, config) = (pools[0].clone(), observed.clone(), config.clone());
            let spawned = std::thread::Builder::new()
                .name("moirai-elastic".into())
                .spawn(move || control_level(&pool, &config, &observed));
            match spawned {
                Ok(t) => threads.push(t),
                Err(e) => {
                    abort.raise();
                    on_panic("executor", format!("cannot spawn the elastic controller: {e}"));
                    pools[0].wake_all();
                    for t in threads {
                        let _ = t.join();
                    }
                    return Err(e);
                }
            }
        }
        Ok(Started { threads, wake_on_abort })
    }
}

/// The elastic controller: every period, the throughput over all operators of the pool (tuples
/// in per second) → [`Elastic::update`] → the pool's level.
fn control_level(pool: &Pool, config: &ElasticConfig, observed: &Observed) {
    let mut elastic = Elastic::new(config.clone());
    let total = || pool.slots.iter().map(|s| s.metrics.tuples_in.load(Ordering::Relaxed)).sum::<u64>();
    let mut cpu = crate::elastic::SystemCpu::new();
    let (mut last_tuples, mut last_ns) = (total(), now_ns());
    let started = last_ns;
    loop {
        let deadline = last_ns + config.period.as_nanos() as u64;
        while !pool.done() && now_ns() < deadline {
            let left = Duration::from_nanos(deadline.saturating_sub(now_ns()));
            pool.parked.wait_unless(Some(left), || pool.done());
        }
        if pool.done() {
            return;
        }
        let (tuples, now) = (total(), now_ns());
        let throughput = (tuples - last_tuples) as f64 * 1e9 / (now - last_ns).max(1) as f64;
        (last_tuples, last_ns) = (tuples, now);
        let cpu_ok = cpu.busy_share().is_none_or(|busy| busy <= config.max_cpu_share());
        let from = elastic.level();
        let decision = elastic.update(throughput, cpu_ok);
        if decision.level != from {
            pool.level.store(decision.level, Ordering::SeqCst);
            observed.thread_level.store(decision.level, Ordering::SeqCst);
            pool.wake_all();
        }
        let at_s = (now - started) as f64 / 1e9;
        let change = LevelChange { at_s, from, to: decision.level, throughput, reason: decision.reason.into() };
        if observed.verbose.load(Ordering::Relaxed) {
            eprintln!(
                "elastic: at {:.1} s, {:.0} tuples/s at level {} -> level {} ({})",
                change.at_s, change.throughput, change.from, change.to, change.reason
            );
        }
        if decision.level != from {
            lock(&observed.level_changes).push(change);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn threading_names_round_trip() {
        for s in [
            "dedicated",
            "dynamic:3",
            "fused",
            "fused:a+b",
            "elastic:1-4:start=2:period=500ms",
            "elastic:3",
            "policy:qs:2",
            "policy:rr:1:quantum=5ms",
            "policy:script:\"queue_size * 2\":2:batch=4",
            "policy:qbs:2:sources=3",
            "policy:qbs:1:sources=off",
            "policy:qs:2:sources=4",
        ] {
            let t: Threading = s.parse().unwrap();
            assert_eq!(t.to_string().parse::<Threading>().unwrap(), t, "{s}");
        }
        assert_eq!("dynamic:2".parse::<Threading>().unwrap(), Threading::Dynamic { threads: 2 });
        assert_eq!(serde_json::to_value(Threading::Dynamic { threads: 2 }).unwrap(), "dynamic:2");
    }

    #[test]
    fn bad_threading_is_explained() {
        for (s, says) in [
            ("dynamic:0", "out of range"),
            ("dynamic:abc", "not a whole number"),
            ("dynamic:99999", "out of range"),
            ("elastic:4-2", "min 4 > max 2"),
            ("elastic:1-2:start=3", "start 3"),
            ("elastic:1-2:period=0s", "period"),
            ("elastic:1-2:speed=3", "unknown"),
            ("fused:a++b", "empty thread name"),
            ("fused:a+a", "named twice"),
            ("dedicated:2", "no parameters"),
            ("pool", "unknown threading model 'pool'"),
            ("policy", "name a policy"),
            ("policy:nope:2", "unknown policy 'nope'"),
            ("policy:qbs:2:sources=0", "sources '0' must be a whole number"),
        ] {
            let err = s.parse::<Threading>().unwrap_err();
            assert!(err.contains(says), "{s}: {err}");
        }
    }

    /// A task with `steps` steps of work that logs its name at each.
    struct Scripted {
        name: &'static str,
        steps: usize,
        log: Arc<Mutex<Vec<&'static str>>>,
        signal: Arc<Signal>,
    }

    impl Task for Scripted {
        fn step(&mut self) -> Step {
            if self.steps == 0 {
                return Step::Finished;
            }
            self.steps -= 1;
            lock(&self.log).push(self.name);
            Step::Worked
        }
        fn has_input(&self) -> bool {
            self.steps > 0
        }
        fn signal(&self) -> &Arc<Signal> {
            &self.signal
        }
    }

    /// Runs tasks `(name, priority level, steps)` to their end on the policy executor with
    /// one worker and turns of `batch` steps; returns the order in which steps ran.
    fn run_policy_pool(tasks: &[(&'static str, u8, usize)], batch: usize) -> Vec<&'static str> {
        run_policy_pool_with(tasks, PolicyThreading { batch, threads: 1, ..PolicyThreading::new("qs") })
    }

    /// [`run_policy_pool`] with the executor's settings given; tasks named `src…` are sources.
    fn run_policy_pool_with(tasks: &[(&'static str, u8, usize)], config: PolicyThreading) -> Vec<&'static str> {
        let log = Arc::new(Mutex::new(Vec::new()));
        let runnables = tasks
            .iter()
            .map(|&(name, level, steps)| {
                let signal = Arc::new(Signal::default());
                let metrics = Arc::new(OperatorMetrics::default());
                metrics.priority_level.store(level, Ordering::SeqCst);
                let task = Scripted { name, steps, log: log.clone(), signal: signal.clone() };
                Runnable {
                    name: name.into(),
                    task: Box::new(task),
                    metrics,
                    signal,
                    downstream: Vec::new(),
                    thread_hint: None,
                    source: name.starts_with("src"),
                }
            })
            .collect();
        let on_panic: OnPanic = Arc::new(|op, msg| panic!("{op}: {msg}"));
        let started = executor(&Threading::Policy(config))
            .start(runnables, Arc::new(AbortFlag::default()), on_panic, Arc::new(Observed::default()))
            .unwrap();
        for t in started.threads {
            t.join().unwrap();
        }
        let order = lock(&log).clone();
        order
    }

    #[test]
    fn the_policy_executor_runs_the_highest_level_first() {
        let order = run_policy_pool(&[("low", 3, 4), ("high", 12, 4), ("mid", 7, 4)], 1);
        assert_eq!(order, ["high"; 4].iter().chain(&["mid"; 4]).chain(&["low"; 4]).copied().collect::<Vec<_>>());
    }

    #[test]
    fn round_robin_gives_each_operator_its_turn_in_order() {
        // Equal priorities (RR): turns of one step each, in turn; with turns of two steps, two.
        assert_eq!(run_policy_pool(&[("a", 0, 3), ("b", 0, 3), ("c", 0, 3)], 1), ["a", "b", "c"].repeat(3));
        assert_eq!(run_policy_pool(&[("a", 5, 4), ("b", 5, 4)], 2), ["a", "a", "b", "b", "a", "a", "b", "b"]);
    }

    #[test]
    fn a_source_interval_runs_the_source_every_kth_turn_whatever_its_level() {
        // QBS: the source is in the low class, the operators in the high one; every 3rd turn is
        // the source's while the others have work. Turns 0..=10: src a b | src a b | src a (b's
        // last turn finds it finished and logs nothing) | src a.
        let config = PolicyThreading { batch: 1, threads: 1, source_every: Some(3), ..PolicyThreading::new("qbs") };
        let order = run_policy_pool_with(&[("src", 1, 4), ("a", 10, 4), ("b", 10, 2)], config);
        assert_eq!(order, ["src", "a", "b", "src", "a", "b", "src", "a", "src", "a"]);
        // Without the interval the low source waits for the high class to finish.
        let config = PolicyThreading { batch: 1, threads: 1, source_every: None, ..PolicyThreading::new("qbs") };
        let order = run_policy_pool_with(&[("src", 1, 2), ("a", 10, 2)], config);
        assert_eq!(order, ["a", "a", "src", "src"]);
    }
}

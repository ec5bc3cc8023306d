//! Executors: who runs the engine's tasks, behind one trait ([`Executor`]) — how physical
//! operators get CPU time (IBM Streams' naming).
//!
//! - [`Dedicated`] ([`Threading::Dedicated`]): one OS thread per physical operator, sleeping on
//!   its [`Signal`] when idle or blocked, left to the OS scheduler — as Storm and Flink run, and
//!   the baseline the middleware steers.
//! - [`Pools`] (`dynamic`, `elastic`, `fused`, `policy`): worker threads that take ready tasks
//!   from a ready queue ([`crate::ready`]), any worker runs any task. `elastic` sizes the pool at
//!   run time and `policy` orders its ready queue by a scheduling policy; both are run-time
//!   controllers ([`crate::control`]) that act on a running pool through [`ThreadLevel`] and the
//!   operators' priority levels.
//!
//! All of them drive the same non-blocking [`Task`]s: a step never waits, so a worker that finds
//! a task blocked on a full output or idle moves on to another one. An executor knows tasks, not
//! queries, channels or types; the threading configuration it runs by is plain data
//! ([`crate::threading`]).

mod affinity;
pub(crate) mod ahead;
mod dedicated;
mod pool;
mod turn_clock;
mod turn_cpu;

use std::sync::atomic::{AtomicI32, AtomicUsize};
use std::sync::{Arc, Mutex};
use std::thread::JoinHandle;

use serde::Serialize;

pub use dedicated::Dedicated;
pub use pool::Pools;

use crate::metrics::OperatorMetrics;
use crate::sync::{AbortFlag, Signal};
use crate::task::Task;
use crate::threading::Threading;

/// A task handed to an executor: the run-time of one physical operator (or of a Hone link), with
/// what the executor needs to place and account for it.
pub struct ExecutorTask {
    /// Physical name, for the thread and for error reports.
    pub name: String,
    /// The task.
    pub task: Box<dyn Task>,
    /// Its counters (the executor records the thread it runs on and its CPU time there).
    pub metrics: Arc<OperatorMetrics>,
    /// The signal that wakes it (the same as `task.signal()`).
    pub signal: Arc<Signal>,
    /// Indices (into the executor's list) of the tasks it sends to.
    pub downstream: Vec<usize>,
    /// The thread it was placed on by a thread hint, for [`Threading::Fused`].
    pub thread_hint: Option<String>,
    /// Its instance index if it is an instance of a parallel operator (parallelism > 1): a pool
    /// with worker affinity keeps it on worker `index mod workers` where it can (the pool's
    /// `affinity` module; `dynamic` sets it to the task's segment where it cuts a graph with a
    /// long path and no task has one).
    pub affinity: Option<usize>,
    /// Whether it is a source (the policy executor may schedule sources at a fixed interval).
    pub source: bool,
}

/// Called by an executor when a task panics: with the task's name and the panic message.
pub type OnPanic = Arc<dyn Fn(&str, String) + Send + Sync>;

pub use moirai_contract::topology::PoolThread;

/// What executors and run-time controllers publish while the engine runs (read through
/// [`crate::view::EngineView`]).
#[derive(Default)]
pub struct Observed {
    /// Worker threads (pools only): name and tid.
    pub threads: Mutex<Vec<(String, Arc<AtomicI32>)>>,
    /// The pools' thread level now (the sum over pools; 0 for dedicated).
    pub thread_level: AtomicUsize,
    /// Every change of the elastic level.
    pub level_changes: Mutex<Vec<LevelChange>>,
    /// Every change of the policy executor's activation (policy model only).
    pub activation_changes: Mutex<Vec<ActivationChange>>,
    /// Executor threads that have ended, for whoever waits for the end of the run.
    pub ended: Ended,
}

/// Counts executor threads as they end and wakes whoever waits for them, so that waiting for
/// the end of a run costs no polling.
#[derive(Default)]
pub struct Ended {
    threads: AtomicUsize,
    signal: Signal,
}

impl Ended {
    /// Called by each executor thread as the last thing it does.
    pub fn thread_ended(&self) {
        self.threads.fetch_add(1, std::sync::atomic::Ordering::SeqCst);
        self.signal.notify();
    }

    /// Sleeps until `threads` executor threads have ended or `timeout` has passed; true if they
    /// have ended.
    pub fn wait(&self, threads: usize, timeout: std::time::Duration) -> bool {
        let all = || self.threads.load(std::sync::atomic::Ordering::SeqCst) >= threads;
        let deadline = std::time::Instant::now() + timeout;
        while !all() {
            let left = deadline.saturating_duration_since(std::time::Instant::now());
            if left.is_zero() {
                return false;
            }
            self.signal.wait_unless(Some(left), all);
        }
        true
    }
}

/// A change of the policy executor's activation: from then on, the policy's priorities order the
/// ready queue (`active`) or every operator waits at one level (see
/// [`crate::threading::PolicyThreading::activation`]).
#[derive(Clone, Debug, Serialize)]
pub struct ActivationChange {
    /// Seconds since the policy controller started (with the engine).
    pub at_s: f64,
    /// Whether the priorities apply from then on.
    pub active: bool,
    /// Why, as a stable code: the activation rule's (`behind`, `no_gain`, `probing`, …), as the
    /// middleware labels it, or `always`.
    pub code: &'static str,
    /// Why, as the activation rule says it.
    pub reason: String,
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

/// The thread level of a running pool: how many of its workers run tasks. A run-time controller
/// (elastic) changes it.
pub trait ThreadLevel: Send + Sync {
    /// Workers allowed to run tasks now.
    fn level(&self) -> usize;
    /// Sets it: workers from `level` up park, those below run.
    fn set_level(&self, level: usize);
    /// True once every task of the pool has finished, or the engine aborted.
    fn is_done(&self) -> bool;
    /// Whether the tasks' priority levels order the ready queue: the policy controller says so
    /// as its activation rule turns (while they do not, the pool runs as the `dynamic` one does,
    /// a worker keeping the task it readies as its next). Pools without levels ignore it.
    fn set_levels_apply(&self, _apply: bool) {}
}

/// What an executor started.
pub struct Started {
    /// The threads to join.
    pub threads: Vec<JoinHandle<()>>,
    /// Signals to notify when the engine aborts, so that sleeping workers see the abort.
    pub wake_on_abort: Vec<Arc<Signal>>,
    /// The pools' thread levels (empty for the dedicated model).
    pub pools: Vec<Arc<dyn ThreadLevel>>,
}

/// A threading model's way of running tasks.
pub trait Executor {
    /// Starts running `tasks`; reports a task's panic through `on_panic`, stops when `abort` is
    /// raised, and publishes its worker threads and thread level in `observed`.
    fn start(
        &self,
        tasks: Vec<ExecutorTask>,
        abort: Arc<AbortFlag>,
        on_panic: OnPanic,
        observed: Arc<Observed>,
    ) -> std::io::Result<Started>;
}

/// The executor of a threading model.
pub fn executor(threading: &Threading) -> Box<dyn Executor> {
    match Pools::of(threading) {
        Some(pools) => Box::new(pools),
        None => Box::new(Dedicated),
    }
}

fn panic_message(payload: Box<dyn std::any::Any + Send>) -> String {
    payload
        .downcast_ref::<&str>()
        .map(|s| s.to_string())
        .or_else(|| payload.downcast_ref::<String>().cloned())
        .unwrap_or_else(|| "non-string panic payload".into())
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::time::{Duration, Instant};

    #[test]
    fn a_wait_for_the_end_wakes_as_the_last_thread_ends_and_times_out_otherwise() {
        let ended = Arc::new(Ended::default());
        let threads: Vec<_> = (0..2)
            .map(|i| {
                let ended = ended.clone();
                std::thread::spawn(move || {
                    std::thread::sleep(Duration::from_millis(20 * (i + 1)));
                    ended.thread_ended();
                })
            })
            .collect();
        let start = Instant::now();
        assert!(ended.wait(2, Duration::from_secs(120)));
        // Woken by the last thread: a lost wake-up would sleep out the whole two minutes.
        assert!(start.elapsed() < Duration::from_secs(60), "{:?}", start.elapsed());
        for t in threads {
            t.join().unwrap();
        }
        assert!(!ended.wait(3, Duration::from_millis(30)), "a third thread never ends");
    }
}

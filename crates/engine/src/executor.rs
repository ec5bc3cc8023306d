//! Threading models: how physical operators get CPU time.
//!
//! Only the dedicated model exists so far: one OS thread per physical operator, blocking on its
//! channels, left to the OS scheduler — as Storm and Flink run, and the baseline the middleware
//! steers. Other models (a dynamic pool, a user-level policy scheduler, micro-batches) implement
//! [`Executor`] over the same [`Task`]s.

use std::panic::{catch_unwind, AssertUnwindSafe};
use std::sync::atomic::Ordering;
use std::sync::Arc;
use std::thread::JoinHandle;
use std::time::Duration;

use serde::Serialize;

use crate::channel::AbortFlag;
use crate::metrics::OperatorMetrics;
use crate::task::{Step, Task};
use crate::tuple::now_ns;

/// The threading models.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum Threading {
    /// One OS thread per physical operator.
    #[default]
    Dedicated,
}

impl std::str::FromStr for Threading {
    type Err = String;
    fn from_str(s: &str) -> Result<Self, String> {
        match s {
            "dedicated" => Ok(Threading::Dedicated),
            other => Err(format!("unknown threading model '{other}'; available: dedicated")),
        }
    }
}

/// A physical operator handed to an executor.
pub struct Runnable {
    /// Physical name, for the thread and for error reports.
    pub name: String,
    /// The task.
    pub task: Box<dyn Task>,
    /// Its counters (the executor records the thread's tid and CPU time there).
    pub metrics: Arc<OperatorMetrics>,
}

/// Called by an executor when a task panics: with the operator's name and the panic message.
pub type OnPanic = Arc<dyn Fn(&str, String) + Send + Sync>;

/// A threading model.
pub trait Executor {
    /// Starts running `tasks`; returns the threads to join.
    fn start(
        &self,
        tasks: Vec<Runnable>,
        abort: Arc<AbortFlag>,
        on_panic: OnPanic,
    ) -> std::io::Result<Vec<JoinHandle<()>>>;
}

/// One OS thread per physical operator.
pub struct Dedicated;

/// Linux keeps 15 bytes of a thread name: keep the operator's name and instance recognisable.
fn thread_name(name: &str) -> String {
    name.to_string()
}

impl Executor for Dedicated {
    fn start(
        &self,
        tasks: Vec<Runnable>,
        abort: Arc<AbortFlag>,
        on_panic: OnPanic,
    ) -> std::io::Result<Vec<JoinHandle<()>>> {
        let mut threads = Vec::with_capacity(tasks.len());
        for Runnable { name, mut task, metrics } in tasks {
            let (abort_flag, report) = (abort.clone(), on_panic.clone());
            let spawned = std::thread::Builder::new().name(thread_name(&name)).spawn(move || {
                metrics.tid.store(moirai_os::current_tid(), Ordering::SeqCst);
                let result = catch_unwind(AssertUnwindSafe(|| run(&mut *task, &abort_flag)));
                metrics.final_cpu_ns.store(moirai_os::proc::current_thread_cpu_ns().max(1), Ordering::SeqCst);
                if let Err(payload) = result {
                    let message = payload
                        .downcast_ref::<&str>()
                        .map(|s| s.to_string())
                        .or_else(|| payload.downcast_ref::<String>().cloned())
                        .unwrap_or_else(|| "non-string panic payload".into());
                    report(&name, message);
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
        Ok(threads)
    }
}

/// The dedicated loop: step while there is work, sleep on the task's signal when idle.
fn run(task: &mut dyn Task, abort: &AbortFlag) {
    loop {
        if abort.is_raised() {
            return;
        }
        match task.step() {
            Step::Worked => {}
            Step::Finished => return,
            Step::Idle { until } => {
                let timeout = until.map(|t| Duration::from_nanos(t.saturating_sub(now_ns())));
                if timeout == Some(Duration::ZERO) {
                    continue;
                }
                let signal = task.signal().clone();
                signal.wait_unless(timeout, || task.has_input() || abort.is_raised());
            }
        }
    }
}

//! The dedicated threading model: one OS thread per task, left to the OS scheduler.

use std::panic::{catch_unwind, AssertUnwindSafe};
use std::sync::atomic::Ordering;
use std::sync::Arc;
use std::time::Duration;

use super::{panic_message, Executor, ExecutorTask, Observed, OnPanic, Started};
use crate::sync::AbortFlag;
use crate::task::{Step, Task};
use crate::tuple::now_ns;

/// One OS thread per physical operator.
pub struct Dedicated;

impl Executor for Dedicated {
    fn start(
        &self,
        tasks: Vec<ExecutorTask>,
        abort: Arc<AbortFlag>,
        on_panic: OnPanic,
        observed: Arc<Observed>,
    ) -> std::io::Result<Started> {
        let mut threads = Vec::with_capacity(tasks.len());
        for ExecutorTask { name, mut task, metrics, .. } in tasks {
            let (abort_flag, report, observed) = (abort.clone(), on_panic.clone(), observed.clone());
            let spawned = std::thread::Builder::new().name(name.clone()).spawn(move || {
                metrics.tid.store(moirai_os::current_tid(), Ordering::SeqCst);
                let result = catch_unwind(AssertUnwindSafe(|| run(&mut *task, &abort_flag)));
                metrics.final_cpu_ns.store(moirai_os::proc::current_thread_cpu_ns().max(1), Ordering::SeqCst);
                if let Err(payload) = result {
                    report(&name, panic_message(payload));
                }
                observed.ended.thread_ended();
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
        Ok(Started { threads, wake_on_abort: Vec::new(), pools: Vec::new() })
    }
}

/// The dedicated loop: step while there is work; sleep on the task's signal while it is idle or
/// its outputs are full.
fn run(task: &mut dyn Task, abort: &AbortFlag) {
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

//! The state word of a task on a worker pool: who may run it, and whether a notification is
//! pending.
//!
//! ```text
//!            notify                claim                 release (not notified)
//!   idle ────────────▶ queued ─────────────▶ running ─────────────────────────▶ idle
//!                        ▲                     │  ▲ notify: running → notified
//!                        │                     │  │
//!                        └─── release (notified), requeue (still has work) ◀──┘
//!   running ── finish ──▶ finished (for good)
//! ```
//!
//! Only the transition idle → queued (by [`TaskState::notify`]) and the releases that find the
//! task notified put it on a ready queue, so a task is queued at most once per notification; only
//! the worker whose [`TaskState::claim`] won runs it, so it never runs on two threads at once.

use super::primitive::atomic::{AtomicU8, Ordering};

const IDLE: u8 = 0;
const QUEUED: u8 = 1;
const RUNNING: u8 = 2;
const NOTIFIED: u8 = 3;
const FINISHED: u8 = 4;

/// The state word of one task on a pool.
pub(crate) struct TaskState(AtomicU8);

impl TaskState {
    /// A task that starts queued (every task of a pool does: it runs once to get going).
    pub(crate) fn queued() -> TaskState {
        TaskState(AtomicU8::new(QUEUED))
    }

    /// Makes the task runnable: idle → queued, and true (the caller puts it on the ready queue);
    /// running → notified (its worker queues it again when it lets go). Queued, notified and
    /// finished tasks need nothing.
    pub(crate) fn notify(&self) -> bool {
        let mut s = self.0.load(Ordering::SeqCst);
        loop {
            let next = match s {
                IDLE => QUEUED,
                RUNNING => NOTIFIED,
                _ => return false,
            };
            match self.0.compare_exchange(s, next, Ordering::SeqCst, Ordering::SeqCst) {
                Ok(_) => return next == QUEUED,
                Err(now) => s = now,
            }
        }
    }

    /// Queued → running: true for the one worker that wins and may run the task. A stale entry of
    /// the ready queue (the task was claimed elsewhere, or ran already) loses.
    pub(crate) fn claim(&self) -> bool {
        self.0.compare_exchange(QUEUED, RUNNING, Ordering::SeqCst, Ordering::SeqCst).is_ok()
    }

    /// Lets go of a running task: idle, or queued again if it was notified while it ran (true:
    /// the caller puts it on the ready queue).
    pub(crate) fn release(&self) -> bool {
        if self.0.compare_exchange(RUNNING, IDLE, Ordering::SeqCst, Ordering::SeqCst).is_ok() {
            return false;
        }
        // Notified while it ran: it has something to do.
        self.0.store(QUEUED, Ordering::SeqCst);
        true
    }

    /// Lets go of a running task that still has work: queued (the caller queues it).
    pub(crate) fn requeue(&self) {
        self.0.store(QUEUED, Ordering::SeqCst);
    }

    /// The task ended: nothing wakes it again.
    pub(crate) fn finish(&self) {
        self.0.store(FINISHED, Ordering::SeqCst);
    }
}

#[cfg(all(test, not(loom)))]
mod tests {
    use super::*;

    #[test]
    fn a_notification_while_running_queues_the_task_again_once() {
        let s = TaskState::queued();
        assert!(!s.notify(), "already queued");
        assert!(s.claim());
        assert!(!s.claim(), "claimed once");
        assert!(!s.notify(), "running: marked, not queued");
        assert!(s.release(), "notified while running: queued again");
        assert!(s.claim());
        assert!(!s.release(), "not notified: idle");
        assert!(s.notify(), "idle: queued");
        assert!(s.claim());
        s.finish();
        assert!(!s.notify() && !s.claim(), "finished for good");
    }
}

//! The event count a task sleeps on, and the engine's abort flag.

use std::sync::{Arc, OnceLock};
use std::time::{Duration, Instant};

use super::primitive::atomic::{fence, AtomicUsize, Ordering};
use super::primitive::{lock, Condvar, Mutex};
use super::TaskState;

/// Makes a task runnable on a worker pool: set by pool threading models, called on every
/// [`Signal::notify`] instead of waking a thread of the task's own, with the task's signal (which
/// holds its state word on a pool) and the index the hook was set with. One hook serves
/// every task of a pool, so that a task has no allocation of its own for it.
pub type Wake = Arc<dyn Fn(&Signal, usize) + Send + Sync>;

/// Wakes one task when any of its input channels gets a message, when one of its full output
/// channels has drained, or when its source is asked to stop (an event count).
///
/// A task on a thread of its own (the dedicated model) sleeps here: it registers as a sleeper
/// *before* it checks its channels one last time; a producer publishes its message *before* it
/// checks for sleepers. With a sequentially consistent fence on both sides, at least one of them
/// sees the other, so a wake-up is never lost, and producers pay only an atomic load when nobody
/// sleeps. A task on a worker pool has a [`Wake`] hook instead, which queues it.
///
/// What a pool's turn and a hop touch (the hook, the task's state word, the full outputs) comes
/// first and the signal starts a cache line, so that they are one line (`TURN_BYTES`): at a low
/// rate on a long pipeline every line a hop touches comes from memory, and the state word and a
/// hook of each task's own were two lines more (no difference in CPU measurable at the spread of
/// `docs/results/2026-12-04/hook-in-signal/`); what only a sleeping thread uses comes after.
#[repr(C, align(64))]
pub struct Signal {
    /// Set once, before any thread runs the task (not part of the protocol loom explores): the
    /// pool's hook and the task's index in its pool.
    hook: OnceLock<(Wake, usize)>,
    /// The state word of a task on a worker pool (unused by a task on a thread of its own).
    task_state: TaskState,
    /// Output channels of this task at or above capacity.
    full_outputs: AtomicUsize,
    sleepers: AtomicUsize,
    epoch: Mutex<u64>,
    wake: Condvar,
}

impl Default for Signal {
    fn default() -> Self {
        Signal {
            hook: OnceLock::new(),
            task_state: TaskState::queued(),
            full_outputs: AtomicUsize::new(0),
            sleepers: AtomicUsize::new(0),
            epoch: Mutex::new(0),
            wake: Condvar::new(),
        }
    }
}

// A turn's part fits one cache line.
const _: () = assert!(Signal::TURN_BYTES <= 64);

impl Signal {
    /// The bytes from the start of a signal that a pool's turn and a hop read or write: its
    /// first cache line (what a pool hints ahead of a turn).
    pub(crate) const TURN_BYTES: usize = std::mem::offset_of!(Signal, epoch);

    /// Wakes the task: its thread if it sleeps here, or through its pool's hook.
    pub fn notify(&self) {
        if let Some((hook, id)) = self.hook.get() {
            hook(self, *id);
            return;
        }
        fence(Ordering::SeqCst);
        if self.sleepers.load(Ordering::Relaxed) > 0 {
            *lock(&self.epoch) += 1;
            self.wake.notify_all();
        }
    }

    /// Wakes one of the threads sleeping here (for a pool's idle workers, which all wait on one
    /// signal and each can take the work).
    pub fn notify_one(&self) {
        fence(Ordering::SeqCst);
        if self.sleepers.load(Ordering::Relaxed) > 0 {
            *lock(&self.epoch) += 1;
            self.wake.notify_one();
        }
    }

    /// Routes every later [`Signal::notify`] to `hook`, called with this signal and `id` (once;
    /// a pool sets it before it starts).
    pub fn set_hook(&self, hook: Wake, id: usize) {
        let _ = self.hook.set((hook, id));
    }

    /// The state word of the task on a worker pool: queued until a worker claims it.
    pub(crate) fn task_state(&self) -> &TaskState {
        &self.task_state
    }

    /// True while some output channel of the task is full: it must not be stepped until then.
    pub fn is_blocked(&self) -> bool {
        self.full_outputs.load(Ordering::SeqCst) > 0
    }

    /// Counts one more full output of the task (a full channel, an exchange's outgoing queue):
    /// it is blocked until [`Signal::release`].
    pub(crate) fn hold(&self) {
        self.full_outputs.fetch_add(1, Ordering::SeqCst);
    }

    /// Undoes one [`Signal::hold`]; true when that was the task's last full output, and the task
    /// must be notified (after the caller released its locks).
    pub(crate) fn release(&self) -> bool {
        self.full_outputs.fetch_sub(1, Ordering::SeqCst) == 1
    }

    /// Blocks until [`Signal::notify`] is called, `timeout` elapses, or `ready()` is true.
    /// `ready` is checked after registering as a sleeper, so a message published concurrently is
    /// never missed.
    pub fn wait_unless(&self, timeout: Option<Duration>, ready: impl FnOnce() -> bool) {
        let mut epoch = lock(&self.epoch);
        self.sleepers.fetch_add(1, Ordering::SeqCst);
        fence(Ordering::SeqCst);
        let start = *epoch;
        if !ready() {
            match timeout {
                None => {
                    while *epoch == start {
                        epoch = self.wake.wait(epoch).unwrap_or_else(|e| e.into_inner());
                    }
                }
                Some(t) => {
                    let deadline = Instant::now() + t;
                    while *epoch == start {
                        let left = deadline.saturating_duration_since(Instant::now());
                        if left.is_zero() {
                            break;
                        }
                        epoch = self.wake.wait_timeout(epoch, left).unwrap_or_else(|e| e.into_inner()).0;
                    }
                }
            }
        }
        self.sleepers.fetch_sub(1, Ordering::SeqCst);
        drop(epoch);
    }
}

/// Set once the engine aborts; every blocking wait checks it.
#[derive(Default)]
pub struct AbortFlag(std::sync::atomic::AtomicBool);

impl AbortFlag {
    /// Raises the flag.
    pub fn raise(&self) {
        self.0.store(true, std::sync::atomic::Ordering::SeqCst);
    }
    /// True once raised.
    pub fn is_raised(&self) -> bool {
        self.0.load(std::sync::atomic::Ordering::Relaxed)
    }
}

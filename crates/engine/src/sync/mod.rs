//! The engine's lock-free structures, in one audited module: the event count every task sleeps
//! on ([`Signal`]), the bounded channels between physical operators ([`channel`]) and the state
//! word of a task on a worker pool (`TaskState`). Everything that synchronises threads without a
//! lock held across the operation lives here, and nothing here is `unsafe` (the crate forbids it).
//!
//! The atomics, mutexes and condition variables these use come from `primitive`, which is
//! `std::sync` in every build and [loom](https://docs.rs/loom)'s model-checked doubles when the
//! crate is compiled with `--cfg loom`. The loom tests (`loom.rs`) explore every interleaving of
//! the protocols that must never lose a wake-up or run a task on two threads at once:
//!
//! ```text
//! RUSTFLAGS="--cfg loom" cargo test -p moirai-engine --release --lib sync::loom
//! ```
//!
//! They are not part of the default test run (a loom build is a build of its own, and only the
//! tests under `sync::loom` may run in it: the rest of the crate then uses loom's types outside a
//! model).
//!
//! The invariants, each with its loom test:
//! - **No lost wake-up** ([`Signal`]): a sleeper registers *before* it checks for work one last
//!   time; a waker publishes its work *before* it checks for sleepers; a sequentially consistent
//!   fence on both sides makes at least one see the other.
//! - **Backpressure is released** ([`channel`]): the consumer that drains a full channel to half
//!   its capacity clears the producer's mark and wakes it.
//! - **One worker per task, no lost notification** (`TaskState`): a notification that arrives
//!   while a task runs leaves it notified, and letting go of a notified task queues it again.

pub mod channel;
mod queue;
mod signal;
mod state;

#[cfg(all(test, loom))]
mod loom;

use std::sync::{Mutex, MutexGuard};

pub use signal::{AbortFlag, Signal, Wake};
pub(crate) use state::TaskState;

/// The synchronisation primitives of this module: `std::sync`, or loom's under `--cfg loom`.
pub(crate) mod primitive {
    #[cfg(loom)]
    pub(crate) use loom::sync::{atomic, Condvar, Mutex, MutexGuard};
    #[cfg(not(loom))]
    pub(crate) use std::sync::{atomic, Condvar, Mutex, MutexGuard};

    /// Locks a mutex of this module, ignoring poisoning (see [`super::lock`]).
    pub(crate) fn lock<T>(m: &Mutex<T>) -> MutexGuard<'_, T> {
        m.lock().unwrap_or_else(|e| e.into_inner())
    }
}

/// Locks a mutex, ignoring poisoning: a panicking operator is reported by the executor, and the
/// queues it leaves behind are still consistent (every critical section in the engine is
/// panic-free).
pub(crate) fn lock<T>(m: &Mutex<T>) -> MutexGuard<'_, T> {
    m.lock().unwrap_or_else(|e| e.into_inner())
}

//! Linux mechanisms used by moirai, kept apart from all scheduling logic.
//!
//! - [`proc`]: threads of a process, their names, start times and CPU time, read from `/proc`.
//! - [`nice`]: per-thread nice values through `getpriority`/`setpriority` (the nice translator's
//!   mechanism).
//! - [`cgroup`]: cgroup v1/v2 layout detection, thread membership, and the cpu groups of one
//!   middleware instance with their `cpu.shares` / `cpu.weight` (the cgroup translator's
//!   mechanism).
//! - [`realtime`]: per-thread scheduling classes (`SCHED_RR`/`SCHED_FIFO`) for the optional
//!   real-time translator, with the safety net it needs.
//! - [`autogroup`]: session groups (`sched_autogroup`): whether the kernel uses them, a
//!   process's group and the group's nice value (a handle across sessions).
//! - [`cache`]: a prefetch hint, for memory an engine's worker will read next.
//! - [`memory`]: huge pages for a process's own memory, where its workers walk more than the
//!   TLB covers.
//! - [`ticks`]: the CPU's time-stamp counter, and whether the kernel keeps time by it (a cheaper
//!   clock for an engine's worker).
//! - [`caps`]: capability and privilege checks, and a [`caps::preflight`] that lists everything
//!   missing before the middleware touches anything.
//! - [`sighting`]: whether a process's thread set changed, and whether a tid still names the
//!   thread first seen, each told by a read of a file kept open.
//! - [`restore`]: the [`RestoreLog`], which records every thread's and group's original state
//!   before the first change, persists it crash-safely and puts everything back — at exit, or
//!   after a crash on the next start.
//! - [`identity`]: who a process is (the listener of a port, its owner and executable) and lock
//!   files that name their holder.
//! - [`process`]: signals to a process or a process group, and the parent-death signal of a child
//!   about to be spawned.
//! - [`lock`]: exclusive `flock` locks on files, waiting or not.
//! - [`limits`]: the descriptor limit, raised to the hard one; a descriptor shortage told apart
//!   from other errors.
//! - [`poll`]: `poll(2)` over several sockets, for servers that keep one thread.
//! - [`file`](mod@file): files another process keeps writing, read without updating their access time.
//! - [`error`]: [`OsError`], one error type whose messages say what to do.
//!
//! This is the only crate of moirai with `unsafe` code: every system call the others need, the
//! CPU's prefetch hint and its time-stamp counter have a thin safe wrapper here (the others
//! `#![forbid(unsafe_code)]`), each `unsafe` block with the reason it is sound.
//!
//! The mechanisms act on threads of *other* processes (Flink JVMs, moirai engines): every call
//! takes the pid and tid explicitly, and the changing ones that the middleware uses go through
//! a [`RestoreLog`] so that nothing is changed without a record of how to undo it.
#![forbid(missing_docs)]

pub mod autogroup;
pub mod cache;
pub mod caps;
pub mod cgroup;
pub mod error;
pub mod file;
pub mod identity;
pub mod limits;
pub mod lock;
pub mod memory;
pub mod nice;
pub mod poll;
pub mod proc;
pub mod process;
pub mod realtime;
pub mod restore;
pub mod sighting;
#[cfg(test)]
mod testutil;
pub mod ticks;

pub use caps::{euid, has_capability, is_root, preflight, Cap, Need};
pub use cgroup::{CgroupLayout, CgroupTree, CgroupVersion, Hierarchy};
pub use error::OsError;
pub use nice::{get_nice, set_nice};
pub use proc::{current_tid, ThreadStat, Tid};
pub use process::Signal;
pub use realtime::SchedClass;
pub use restore::{RestoreLog, RestoreReport};

//! Linux mechanisms used by moirai, kept apart from all scheduling logic.
//!
//! - [`proc`]: threads of a process, their names, start times and CPU time, read from `/proc`.
//!
//! Later modules (nice, cgroups, scheduling classes) live here too, so that the engine, the
//! middleware and the lab share one implementation of each mechanism.
#![forbid(missing_docs)]

pub mod proc;

pub use proc::{current_tid, ThreadStat, Tid};

//! Drizzle's micro-batch execution (SOSP'17) for moirai: the coordination level of scheduling.
//!
//! A **driver** cuts the open-loop source's input into micro-batches of a batch interval and
//! schedules each micro-batch's stages — map-side tasks, a shuffle, reduce-side tasks, a sink —
//! on **executor processes** that it starts on this node and that talk to it and to each other
//! over TCP on loopback. How the crate is organised:
//!
//! - [`job`]: the job cut into tasks (WordCount: map = split and count per window, reduce = merge
//!   counts into window state, emit closed windows), deterministic so that replays repeat outputs.
//! - [`protocol`]: the messages and their framing (JSON lines).
//! - [`driver`]: per-batch scheduling (a decision and a barrier per stage per micro-batch), group
//!   scheduling with pre-scheduling (one decision per group), the exactly-once sink,
//!   checkpoints at group boundaries, recovery from a lost executor.
//! - [`executor`]: the executor process's loop.
//! - [`aimd`]: the pure AIMD controller of the group size.
//!
//! Executors cannot receive closures, so they rebuild the job from its description — the
//! workload's command line — as the driver does.
#![forbid(missing_docs)]

pub mod aimd;
pub mod driver;
pub mod executor;
pub mod job;
pub mod protocol;

pub use aimd::{Aimd, AimdConfig, GroupChange};
pub use driver::{DriverConfig, GroupSize, KillAt, RunReport, Scheduling};
pub use job::WordCountJob;

/// Why a micro-batch run cannot start or failed.
#[derive(Debug, thiserror::Error)]
pub enum Error {
    /// A setting is invalid; the message names it and how to fix it.
    #[error("{0}")]
    Config(String),
    /// The query has an operator micro-batch execution does not support.
    #[error("not supported in micro-batch mode: {0}")]
    Unsupported(String),
    /// A socket or process operation failed.
    #[error("cannot {0}: {1}")]
    Io(String, #[source] std::io::Error),
    /// A peer broke the protocol or the run cannot go on.
    #[error("micro-batch run failed: {0}")]
    Protocol(String),
}

impl Error {
    /// The process exit code: 2 for bad input, 1 for a failed run.
    pub fn exit_code(&self) -> i32 {
        match self {
            Error::Config(_) | Error::Unsupported(_) => 2,
            Error::Io(..) | Error::Protocol(_) => 1,
        }
    }
}

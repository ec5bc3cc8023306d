//! Drizzle's micro-batch execution (SOSP'17) for moirai: the coordination level of scheduling.
//!
//! A **driver** cuts the open-loop source's input into micro-batches of a batch interval and
//! schedules each micro-batch's stages — map-side tasks, a shuffle, reduce-side tasks, a sink —
//! on **executor processes** that it starts on this node and that talk to it and to each other
//! over TCP on loopback. How the crate is organised:
//!
//! - [`job`]: the [`Job`] the driver and executors run: map and reduce tasks per micro-batch,
//!   deterministic so that replays repeat outputs. Two kinds: [`query`] runs an engine `Query`
//!   (YSB, …) by its own operators, [`wordcount`] is WordCount cut by hand with a combiner.
//! - [`protocol`]: the messages and their framing (JSON lines, each read with a bound).
//! - [`secret`], [`gate`]: only the run's own processes talk to each other — a token per run
//!   (and per executor), handed to the executors on their standard input and proven before
//!   anything else is read on a connection.
//! - [`limits`]: the wire's message limits, derived from the job's [`job::OutputBounds`]
//!   (`bounds` computes them), its timeouts and connection caps.
//! - [`driver`]: per-batch scheduling (a decision and a barrier per stage per micro-batch), group
//!   scheduling with pre-scheduling (one decision per group), the exactly-once sink,
//!   checkpoints at group boundaries, recovery from a lost executor; `launch` starts the
//!   executors and admits their connections; [`report`] is what a run did and produced.
//! - [`executor`]: the executor process's loop.
//! - [`aimd`]: the pure AIMD controller of the group size.
//!
//! Executors cannot receive closures, so they rebuild the job from its description — the
//! workload's command line — as the driver does, and run its operators by index.
#![forbid(missing_docs)]
#![forbid(unsafe_code)]

pub mod aimd;
mod bounds;
pub mod driver;
pub mod executor;
pub mod gate;
pub mod job;
mod launch;
pub mod limits;
pub mod protocol;
pub mod query;
pub mod report;
pub mod secret;
pub mod wordcount;

use std::time::Duration;

pub use aimd::{Aimd, AimdConfig, GroupChange};
pub use driver::{DriverConfig, GroupSize, KillAt, RunReport, Scheduling};
pub use job::{Job, OutputBounds};
pub use query::QueryJob;
pub use secret::Secrets;
pub use wordcount::WordCountJob;

/// The longest batch interval accepted.
const MAX_INTERVAL: Duration = Duration::from_secs(60);

/// Checks a batch interval: whole milliseconds in 1 ms..=60 s.
fn check_interval(interval: Duration) -> Result<(), Error> {
    if interval < Duration::from_millis(1) || interval > MAX_INTERVAL || interval.subsec_nanos() % 1_000_000 != 0 {
        return Err(Error::Config(format!(
            "batch interval {interval:?} must be whole milliseconds in 1ms..=60s, e.g. --batch-interval 100ms"
        )));
    }
    Ok(())
}

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

//! The wire's bounds: how long a message may be on each connection, derived from the job's
//! [`OutputBounds`] with a margin, and the timeouts and caps that keep a peer — one that never
//! authenticated, or one that did and misbehaves — from taking an executor's or the driver's
//! memory, threads or time.
//!
//! Every process of a run computes the same limits from the same job. A sender refuses to send a
//! message beyond them (the run fails, naming the bound) rather than have the receiver end the
//! connection: so an estimate that is too small is an error, never a hang.

use std::time::Duration;

use crate::job::{Job, OutputBounds};

/// Times the bound a message may be, for what the bounds do not see (field names, a report
/// that carries two outputs).
const MARGIN: u64 = 2;
/// Added to every limit: the fixed part of a message (names, numbers, a task list).
const SLACK: u64 = 64 << 10;

/// The most executor processes of a run.
pub const MAX_EXECUTORS: usize = 64;

/// Longest hello (the first message of an executor), bytes.
pub const HELLO: usize = 4 << 10;
/// How long a new connection may take to prove the run's token.
pub const AUTH_TIMEOUT: Duration = Duration::from_secs(5);
/// How long a message may stall once its first byte arrived.
pub const STALL_TIMEOUT: Duration = Duration::from_secs(10);
/// Connections an executor keeps waiting for their token at once; a new one beyond closes the
/// one waiting longest.
pub const MAX_PENDING: usize = 32;

/// Message limits of one run, bytes.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct WireLimits {
    /// Executor → executor: one map output.
    pub shuffle: usize,
    /// Executor → driver: a report (tasks finished, their outputs for the sink, checkpoints).
    pub report: usize,
    /// Driver → executor: a decision (its tasks, split over several messages when longer) or a
    /// restore (the checkpoints of the partitions an executor takes over).
    pub control: usize,
}

fn limit(bytes: u64) -> usize {
    usize::try_from(bytes.saturating_mul(MARGIN).saturating_add(SLACK)).unwrap_or(usize::MAX)
}

impl WireLimits {
    /// The limits of `job`'s run.
    pub fn of(job: &dyn Job) -> WireLimits {
        WireLimits::from_bounds(job.output_bounds(), job.reduce_partitions())
    }

    /// The limits for these bounds, with `reduces` reduce partitions (a restore may carry all).
    pub fn from_bounds(b: OutputBounds, reduces: usize) -> WireLimits {
        let one = b.sink_output.saturating_add(b.checkpoint);
        WireLimits {
            shuffle: limit(b.map_output),
            report: limit(one),
            control: limit(b.checkpoint.saturating_mul(reduces.max(1) as u64)),
        }
    }
}

/// Connections an executor accepts from the run's other executors at once: one from each, and
/// as many again for reconnects.
pub fn max_peers(executors: usize) -> usize {
    2 * executors.max(1)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn limits_grow_with_the_bounds_and_have_a_floor() {
        let b = OutputBounds { map_output: 1000, sink_output: 2000, checkpoint: 3000 };
        let l = WireLimits::from_bounds(b, 4);
        assert_eq!(l.shuffle, 2000 + (64 << 10));
        assert_eq!(l.report, 10_000 + (64 << 10));
        assert_eq!(l.control, 24_000 + (64 << 10));
        let huge = OutputBounds { map_output: u64::MAX, sink_output: u64::MAX, checkpoint: u64::MAX };
        assert_eq!(WireLimits::from_bounds(huge, 8).shuffle, usize::MAX);
    }
}

//! How the engine runs its queries (plain data), and the bounds it keeps to.

use std::net::SocketAddr;

use crate::threading::Threading;

/// How the engine runs its queries.
#[derive(Clone, Debug)]
pub struct EngineConfig {
    /// The threading model.
    pub threading: Threading,
    /// Fuse forward-connected operators onto one thread (see [`crate::plan::can_chain`]).
    pub chaining: bool,
    /// Capacity of each channel, in tuples.
    pub channel_capacity: usize,
    /// Tuples per batch sent through a channel (partial batches are sent when a producer idles).
    pub batch_size: usize,
    /// Serve `/metrics` and `/topology` here; off when `None`.
    pub metrics_addr: Option<SocketAddr>,
    /// Ramp every rate-limited source: its rate rises (or falls) linearly from its own rate to
    /// `factor` times it over the given time, then stays there — the papers' increasing-rate runs,
    /// for any workload without changing it.
    pub ramp: Option<(f64, std::time::Duration)>,
    /// Report the threading model's decisions (the elastic level), at `info` level through
    /// `tracing` (the CLI prints them on stderr).
    pub verbose: bool,
    /// How much later than a tuple's due time a rate-limited source may wake for it, so that one
    /// wake-up carries several tuples at low rates ([`crate::slack`]); zero: wake for each.
    pub source_slack: std::time::Duration,
}

impl Default for EngineConfig {
    fn default() -> Self {
        EngineConfig {
            threading: Threading::Dedicated,
            chaining: true,
            channel_capacity: 8192,
            batch_size: 512,
            metrics_addr: None,
            ramp: None,
            verbose: false,
            source_slack: crate::slack::DEFAULT_SOURCE_SLACK,
        }
    }
}

/// The most physical operators one engine runs (each costs a task, its channels and, under the
/// dedicated model, a thread).
pub const MAX_PHYSICAL_OPERATORS: usize = 100_000;

/// The largest channel capacity, in tuples: a channel holds up to this many (times the size of
/// a tuple) in memory.
pub const MAX_CHANNEL_CAPACITY: usize = 1 << 24;

/// The largest channel batch, in tuples: every router buffer and source batch is allocated at
/// this size.
pub const MAX_BATCH_SIZE: usize = 1 << 16;

//! What moirai's processes say to each other, defined once for every writer and reader.
//!
//! - [`topology`]: the document a running engine serves on `/topology` — its logical graph,
//!   physical operators with their Linux thread ids, channels, the pool's worker threads. The
//!   engine writes it; the middleware's moirai driver, `moirai sim --from-engine` and the engine's
//!   own adapter read it.
//! - [`metrics`]: the names of the engine's Prometheus metrics (`/metrics`) and the primitive
//!   counters of one physical operator as a reader gets them ([`metrics::OperatorCounters`]).
//! - [`policies`]: the short names of the scheduling policies (`qs`, `hr`, `rr`, ...), where each
//!   can run (through Linux by the middleware, or inside the engine), in one table.
//! - [`summary`]: the run summary `moirai run <workload> --json` prints in every execution mode
//!   and the simulator writes; the lab reads it.
//! - `sched` (feature `sched`): the one conversion of a topology and its counters into the
//!   scheduling core's model, and of a policy short name into a policy of `moirai-sched`.
//!
//! The crate holds data and pure functions only: no I/O, no threads.
#![forbid(missing_docs)]
#![forbid(unsafe_code)]

pub mod metrics;
pub mod policies;
#[cfg(feature = "sched")]
pub mod sched;
pub mod summary;
pub mod topology;

pub use summary::RunSummary;
pub use topology::Topology;

//! The workloads moirai's lab runs: seeded generators, the queries, and reference
//! implementations to check their output.
//!
//! - [`cost`]: a calibrated busy loop that burns a given CPU time per tuple.
//! - [`syn`]: the synthetic pipelines of Haren and Lachesis.
#![forbid(missing_docs)]

pub mod cost;
pub mod syn;

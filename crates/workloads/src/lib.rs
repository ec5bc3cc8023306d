//! The workloads moirai's lab runs: seeded generators, the queries, and reference
//! implementations to check their output.
//!
//! - [`cost`]: a calibrated busy loop that burns a given CPU time per tuple.
//! - [`linear_road`]: the Linear Road benchmark: a seeded traffic generator, its CSV format,
//!   the faithful query, a reference implementation, and the Lachesis evaluation's load shape.
//! - [`syn`]: the synthetic pipelines of Haren and Lachesis.
//! - [`wordcount`]: Hone's WordCount, with shuffle, key and partial key grouping.
//! - [`ysb`]: the Yahoo Streaming Benchmark (ad events, campaign join, 10 s windows).
#![forbid(missing_docs)]
#![forbid(unsafe_code)]

pub mod check;
pub mod cost;
pub mod linear_road;
pub mod syn;
pub mod wordcount;
pub mod ysb;

//! `moirai sim`: a deterministic discrete-event simulation of stream processing queries on C
//! cores, scheduled by the same policy objects as the middleware and the engine.
//!
//! The lab measures on a small, noisy machine; the papers' questions reach further (176 cores,
//! hundreds of tasks). The simulator answers them without wall-clock noise: a run is a function
//! of its model, its configuration and its seed, and takes the same simulated time on any
//! machine.
//!
//! Organisation, from what is simulated to what is reported:
//!
//! - [`model`] — [`Model`]: the workload's queries planned by the engine's planner, with what each
//!   operator costs ([`NodeCost`]): CPU per tuple, selectivity, blocking, a source's [`Rate`].
//! - [`wordcount`] — WordCount's model: the generator's selectivities, measured costs.
//! - [`event`] — the event queue, ordered by (time, sequence) on an integer nanosecond clock.
//! - [`cfs`] — the Linux scheduler model: the kernel's nice→weight table, virtual runtime, slices,
//!   wake-up placement and preemption, context-switch and wake-up costs.
//! - [`sim`] — [`Simulation`]: sources, bounded channels with backpressure, the external source
//!   queue, operators as steps, the threading models (dedicated, dynamic pool, policy executor),
//!   and the policies: the middleware's [`moirai_sched::Controller`] at the OS level (nice
//!   values), the engine's prioritizer at the user level.
//! - `observe` — snapshots of the simulated counters as the engine gives them, and the run
//!   summary the lab reads ([`moirai_contract::RunSummary`]).
//! - [`cluster`] — `--nodes N`: whole queries round-robin over N nodes, each with its own
//!   kernel and middleware, simulated one after another and merged into one summary.
//! - [`lab`] — sweeps of rates × configurations written as `results.csv`, `results.json` and
//!   `report.html` by the lab's own code.
//! - [`from_engine`] — a model of a running engine: its `/topology`, and each operator's cost and
//!   selectivity from two reads of its `/metrics` (`moirai sim --from-engine URL`).
//! - [`hone`] — Hone's slotted simulation (its §4.4/§5.1): LBF against round robin over N queues.
//!
//! ```
//! use std::time::Duration;
//! use moirai_sim::{Model, SimConfig, Simulation};
//! use moirai_workloads::syn::SynConfig;
//!
//! // The Lachesis SYN at 1500 tuples/s in all, on 2 cores, for 2 simulated seconds.
//! let model = Model::syn(&SynConfig { rate: 75.0, ..SynConfig::lachesis() }, 0)?;
//! let mut sim = Simulation::new(&model, SimConfig::new(2, Duration::from_secs(2)))?;
//! let events = sim.run();
//! let summary = sim.summary("syn", serde_json::Value::Null, events);
//! assert!(summary.ingress_tps > 1400.0 && summary.egress_tps > 1400.0);
//! # Ok::<(), moirai_sim::SimError>(())
//! ```

#![forbid(missing_docs)]
#![forbid(unsafe_code)]

pub mod cfs;
pub mod cluster;
mod config;
pub mod event;
pub mod from_engine;
pub mod hone;
pub mod lab;
mod linear_road;
pub mod model;
pub mod sim;
pub mod wordcount;

pub use linear_road::LACHESIS_COSTS;
pub use model::{Model, NodeCost, Rate};
pub use sim::{CostDist, MwActivity, SimConfig, Simulation, Translator};
pub use wordcount::WORDCOUNT_COSTS;

/// Why a simulation cannot run. Each message names what was wrong and how to fix it.
#[derive(Debug, thiserror::Error)]
pub enum SimError {
    /// A setting of the run is invalid.
    #[error("{0}")]
    Config(String),
    /// The workload cannot be modelled.
    #[error("{0}")]
    Model(String),
    /// The results cannot be written.
    #[error(transparent)]
    Output(#[from] moirai_bench::BenchError),
}

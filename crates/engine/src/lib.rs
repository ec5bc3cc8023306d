//! moirai's embedded stream processing engine.
//!
//! How the crate is organised, in layers from what a user writes down to what runs (a module
//! uses only modules of its own layer or below, never one above):
//!
//! 1. **Queries.** [`query`]: the typed query API — sources, map/filter/flat_map, key_by,
//!    windows, joins, union, sinks — building a [`graph::LogicalGraph`] plus the code of each
//!    operator (type-erased in `code`); [`graph`]: the logical graph and its validation
//!    ([`BuildError`]); [`plan`]: logical → physical planning, pure functions: fusion
//!    ([`plan::can_chain`]) and fission into instances and channels; [`operator`]: the
//!    [`Operator`] trait users implement, and chains of fused operators; [`ops`], [`window`],
//!    [`join`], [`source`] (its rate: [`offered`]), [`sink`] are the built-in operators;
//!    [`stages`]: a query cut into map side, shuffle, reduce side and sink for micro-batch
//!    execution (`moirai-microbatch`).
//! 2. **Tasks.** [`task`]: the run-time of one physical operator, whose steps never block;
//!    [`router`]: partitioning; [`exchange`]: Hone's tuple scheduler; [`sync`]: the lock-free
//!    structures every task relies on — channels with backpressure, the event count a task
//!    sleeps on, a pooled task's state word — in one audited module with loom tests.
//! 3. **Threading.** [`threading`]: the threading models as plain data (`--threading`);
//!    [`ready`]: the pools' ready-queue discipline, clock-free (the simulator uses it too);
//!    [`executor`]: who runs the tasks, behind one trait (dedicated threads, worker pools);
//!    [`control`]: run-time controllers behind one trait — the elastic thread level ([`elastic`]:
//!    the algorithm) and the user-level policy ([`user_level`]; `adapter`, feature `policies`:
//!    the scheduling core's policies in-process).
//! 4. **The engine.** [`engine`]: [`Engine::start`] in three steps (validate, wire, launch),
//!    stop, wait, report; [`view`]: the read-only [`EngineView`] of a running engine that the
//!    metrics endpoint and the controllers read; [`metrics`] and the HTTP endpoint (`/metrics`,
//!    `/topology`, whose document is [`topology`], shared with its readers) through which the
//!    middleware sees the engine.
//!
//! One name per concept: a *physical operator* is one instance of a chain of fused logical
//! operators ([`plan::PhysicalOperator`] in the plan, [`topology::PhysicalOperator`] in the
//! `/topology` document); its *task* ([`task::Task`]) is its run-time code, handed to an
//! executor as an [`executor::ExecutorTask`].
//!
//! ```
//! use moirai_engine::{Engine, EngineConfig, Query, Source};
//!
//! let q = Query::new("q");
//! let out = q.source("numbers", Source::new(|_, _| 1..=3u64)).map("square", |x| x * x).collect("out");
//! Engine::start(EngineConfig::default(), vec![q.build().unwrap()]).unwrap().wait().unwrap();
//! assert_eq!(out.take().iter().map(|t| t.data).sum::<u64>(), 14);
//! ```
#![forbid(missing_docs)]
#![forbid(unsafe_code)]

#[cfg(feature = "policies")]
pub mod adapter;
mod code;
pub mod config;
pub mod control;
mod cursor;
pub mod elastic;
pub mod engine;
mod erase;
mod error;
pub mod exchange;
pub mod executor;
pub mod graph;
mod http;
pub mod join;
pub mod metrics;
pub mod offered;
pub mod operator;
pub mod ops;
pub mod plan;
pub mod query;
pub mod ready;
pub mod router;
pub mod sink;
pub mod slack;
pub mod source;
pub mod stages;
pub mod sync;
pub mod task;
pub mod threading;
pub mod tuple;
pub mod user_level;
pub mod view;
pub mod window;
mod wire;

pub use moirai_contract::topology;

/// The README, whose Rust examples `cargo test` compiles and runs as doctests.
#[cfg(doctest)]
#[doc = include_str!("../../../README.md")]
pub struct ReadmeDoctests;

pub use config::EngineConfig;
pub use elastic::ElasticConfig;
pub use engine::{Engine, EngineError, RunTotals, Topology};
pub use error::InvalidSetting;
pub use exchange::Hone;
pub use graph::{BuildError, Partitioning};
pub use operator::{Operator, Output, TwoInputOperator};
pub use query::{BuiltQuery, Collected, KeyedStream, Query, Stream};
pub use source::Source;
pub use threading::Threading;
pub use tuple::{now_ns, Data, Tuple};
pub use user_level::{PolicyError, PolicyThreading, Prioritizer};
pub use view::EngineView;
pub use window::{Agg, Aggregate, Window, WindowResult};
pub use wire::WireError;

//! moirai's embedded stream processing engine.
//!
//! How the crate is organised, from what a user writes down to what runs:
//!
//! - [`query`]: the typed query API — sources, map/filter/flat_map, key_by, windows, joins,
//!   union, sinks — building a [`graph::LogicalGraph`] plus the code of each operator.
//! - [`graph`]: the logical graph and its validation ([`BuildError`]).
//! - [`plan`]: logical → physical planning, pure functions: fusion ([`plan::can_chain`]) and
//!   fission into instances and channels.
//! - [`operator`]: the [`Operator`] trait users implement, and chains of fused operators;
//!   [`ops`], [`window`], [`join`], [`source`], [`sink`] are the built-in operators.
//! - [`channel`]: bounded, batched channels with backpressure; [`router`]: partitioning;
//!   [`exchange`]: Hone's tuple scheduler, a shared link whose scheduler picks whose tuples cross.
//! - [`task`]: the runtime of one physical operator, whose steps never block; [`executor`]:
//!   threading models that run tasks (dedicated threads, a dynamic or elastic worker pool, fused
//!   threads); [`elastic`]: the elastic thread-level algorithm.
//! - [`stages`]: a query cut into map side, shuffle, reduce side and sink, for micro-batch
//!   execution (`moirai-microbatch`).
//! - [`metrics`] and the HTTP endpoint (`/metrics`, `/topology`) through which the middleware
//!   sees the engine; [`engine`]: starting, stopping and reporting.
#![forbid(missing_docs)]

#[cfg(feature = "policies")]
pub mod adapter;
pub mod channel;
pub mod elastic;
pub mod engine;
pub mod exchange;
pub mod executor;
pub mod graph;
mod http;
pub mod join;
pub mod metrics;
pub mod operator;
pub mod ops;
pub mod plan;
pub mod query;
pub mod router;
pub mod sink;
pub mod source;
pub mod stages;
pub mod task;
pub mod tuple;
pub mod user_level;
pub mod window;

pub use elastic::ElasticConfig;
pub use engine::{Engine, EngineConfig, EngineError, RunSummary, Topology};
pub use exchange::Hone;
pub use executor::Threading;
pub use graph::{BuildError, Partitioning};
pub use operator::{Operator, Output, TwoInputOperator};
pub use query::{BuiltQuery, Collected, KeyedStream, Query, Stream};
pub use source::Source;
pub use tuple::{now_ns, Data, Tuple};
pub use user_level::{PolicyThreading, Prioritizer};
pub use window::{Agg, Aggregate, Window, WindowResult};

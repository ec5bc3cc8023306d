//! moirai's scheduling core: the vocabulary and the decisions of Lachesis (Middleware '21), with no
//! I/O and no threads, so that the same policy objects drive the middleware (→ nice, cgroup
//! weights), the engine's user-level scheduler and the simulator.
//!
//! A round goes: a driver reports each SPE's topology ([`SpeTopology`]) and samples primitive
//! metrics ([`Samples`]); [`Cluster::new`] validates and indexes the topologies; the
//! [`MetricProvider`] derives the metrics the policies need (Algorithm 3); each due policy
//! ([`Policy`], timed by [`Clock`], Algorithm 1) turns them into a [`Schedule`] for the operators
//! in its scope; a translator outside this crate normalises the priorities ([`normalize`]) into
//! OS parameters.
//!
//! Organisation, one concept per module:
//!
//! - [`entity`] — what a driver reports: [`SpeTopology`], operators, threads, [`OpRef`].
//! - [`cluster`] — [`Cluster`]: validated topologies with upstream/downstream, sources, sinks,
//!   topological order, fission and fusion indexed.
//! - [`metric`] — [`Metric`]: names, dependencies, aggregation; the formulas live in `derive`.
//! - [`provider`] — [`MetricProvider`], [`Samples`], [`Capabilities`], [`Requirement`]: resolution
//!   and per-round computation; [`values`] — [`MetricValues`], what policies read.
//! - [`policy`] — the [`Policy`] trait, [`PolicyContext`], [`Level`], [`Scope`];
//!   [`policies`] — QS, HR, FCFS, RANDOM, constants, user scripts (Rhai), grouping, and
//!   [`PolicySpec`] to build them from a config.
//! - [`schedule`] — [`Schedule`]: single-priority or grouping.
//! - [`transform`] — transformation rules logical ↔ physical (Algorithm 2).
//! - [`normalize`] — linear, logarithmic and ratio (nice formula) normalisation to nice values and
//!   cgroup weights.
//! - [`clock`] — [`Clock`]: the GCD tick and which policies are due, without drift.
//! - [`controller`] — [`Controller`]: a whole round (observations → metric provider → due
//!   policies → schedules), with the time passed in, for the middleware and the engine alike.
//! - [`activation`] — [`Activation`]: whether scheduling can help an SPE now (the machine
//!   saturated and the SPE falling behind), with hysteresis; time passed in.
//!
//! ```
//! use std::time::Duration;
//! use moirai_sched::*;
//!
//! // A driver reports a 2-operator query and can sample queue lengths.
//! let topology = SpeTopology {
//!     name: "engine".into(), pid: 42, queries: vec!["q".into()],
//!     logical: vec![
//!         LogicalOperator { name: "source".into(), query: "q".into(), kind: OpKind::Source },
//!         LogicalOperator { name: "sink".into(), query: "q".into(), kind: OpKind::Sink },
//!     ],
//!     logical_edges: vec![(0, 1)],
//!     physical: vec![
//!         PhysicalOperator { name: "source (1/1)".into(), query: "q".into(), logical: vec![0], instance: 0,
//!                            threads: vec![ThreadRef { tid: 100, start_ticks: 5 }] },
//!         PhysicalOperator { name: "sink (1/1)".into(), query: "q".into(), logical: vec![1], instance: 0,
//!                            threads: vec![ThreadRef { tid: 101, start_ticks: 5 }] },
//!     ],
//!     physical_edges: vec![(0, 1)],
//! };
//! let cluster = Cluster::new(vec![topology])?;
//!
//! let mut policy = MetricPolicy::queue_size("qs", Level::Physical);
//! let caps = Capabilities { spe: "engine".into(), driver: "moirai".into(), provides: [Metric::QueueLen].into() };
//! let need = Requirement { policy: policy.name().into(), metrics: policy.metrics(), spes: None };
//! let mut provider = MetricProvider::new(&[need], &[caps])?;
//!
//! let mut samples = Samples::new(&cluster, Duration::from_secs(1));
//! samples.set(OpRef { spe: 0, op: 0 }, Metric::QueueLen, 0.0);
//! samples.set(OpRef { spe: 0, op: 1 }, Metric::QueueLen, 800.0);
//! let metrics = provider.update(&cluster, &samples)?;
//!
//! let scope = Scope::all().resolve(&cluster);
//! let Schedule::Single(priorities) = policy.schedule(&PolicyContext { cluster: &cluster, metrics: &metrics, scope: &scope })?
//! else { unreachable!() };
//! let nice = normalize::to_nice(&priorities.values().copied().collect::<Vec<_>>(), Normalization::Linear, NiceRange::default());
//! assert_eq!(nice, vec![19, -20]); // the sink, with the long queue, gets the best nice
//! # Ok::<(), Box<dyn std::error::Error>>(())
//! ```

#![forbid(missing_docs)]
#![forbid(unsafe_code)]

pub mod activation;
pub mod clock;
pub mod cluster;
pub mod controller;
mod derive;
pub mod entity;
pub mod metric;
pub mod normalize;
pub mod policies;
pub mod policy;
pub mod provider;
pub mod schedule;
pub mod transform;
pub mod values;

#[cfg(test)]
mod fixtures;

pub use activation::{Activation, ActivationConfig, LoadSample};
pub use clock::{Clock, ClockError};
pub use cluster::{Cluster, Spe};
pub use controller::{Controller, ControllerError, Decision, Due, Observation, PolicyRun, Round, SkippedRound};
pub use entity::{LogicalOperator, LogicalRef, OpKind, OpRef, PhysicalOperator, SpeTopology, ThreadRef, TopologyError};
pub use metric::{Aggregation, Metric};
pub use normalize::{NiceRange, Normalization, WeightRange};
pub use policies::{
    Combine, ConstantKey, ConstantPolicy, GroupBy, GroupPolicy, GroupPriority, MetricPolicy, PolicySpec, RandomPolicy,
    ScriptPolicy,
};
pub use policy::{Level, Operator, OperatorView, Policy, PolicyContext, PolicyError, Scope};
pub use provider::{Capabilities, MetricError, MetricProvider, Requirement, RoundError, Samples};
pub use schedule::{Group, Schedule};
pub use values::MetricValues;

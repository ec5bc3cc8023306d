//! A read-only view of a running engine: its plan and configuration, which do not change while it
//! runs, and the live counters its tasks, executors and controllers publish. The metrics
//! endpoint's handlers, the run-time controllers ([`crate::control`]) and [`crate::Engine`]'s own
//! reports read the engine through it; none of them can stop, abort or rewire it.

use std::sync::atomic::Ordering;
use std::sync::Arc;

use moirai_contract::topology::{PhysicalOperator, PoolThread, Topology};

use crate::config::EngineConfig;
use crate::exchange::{ExchangeMetrics, ExchangeSnapshot};
use crate::executor::{ActivationChange, LevelChange, Observed};
use crate::graph::{LogicalGraph, NodeKind};
use crate::metrics::{snapshot, OperatorMetrics, OperatorSnapshot, SinkMetrics};
use crate::plan::PhysicalPlan;
use crate::sync::channel::Observe;
use crate::sync::lock;
use crate::threading::Threading;
use crate::tuple::now_ns;

/// A running engine's tuple counts ([`EngineView::counts`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct RunCounts {
    /// Tuples that entered the engine (all sources).
    pub tuples_in: u64,
    /// Tuples that left it (all sinks).
    pub tuples_out: u64,
    /// Tuples the sources are behind their offered rates by (their backlog).
    pub backlog: u64,
}

/// What a running engine is and does, read-only (see the module docs).
pub struct EngineView {
    pub(crate) config: EngineConfig,
    pub(crate) graph: LogicalGraph,
    pub(crate) queries: Vec<String>,
    pub(crate) plan: PhysicalPlan,
    /// Counters of each physical operator, by physical id.
    pub(crate) operators: Vec<Arc<OperatorMetrics>>,
    /// (physical id, latency histograms) of each physical operator that ends in a sink.
    pub(crate) sinks: Vec<(usize, Arc<SinkMetrics>)>,
    /// The physical id of each physical operator that starts with a source.
    pub(crate) sources: Vec<usize>,
    /// Every operator's input channels in one list, with the operator's physical id: what
    /// [`EngineView::queue_lengths`] reads, one channel after another.
    pub(crate) inputs: Vec<(usize, Arc<dyn Observe>)>,
    pub(crate) start_ns: u64,
    pub(crate) observed: Arc<Observed>,
    pub(crate) exchanges: Vec<Arc<ExchangeMetrics>>,
}

impl EngineView {
    /// How the engine was configured.
    pub fn config(&self) -> &EngineConfig {
        &self.config
    }

    /// The threading model.
    pub fn threading(&self) -> &Threading {
        &self.config.threading
    }

    /// The logical graph of all queries, merged.
    pub fn graph(&self) -> &LogicalGraph {
        &self.graph
    }

    /// The physical plan.
    pub fn plan(&self) -> &PhysicalPlan {
        &self.plan
    }

    /// The live counters of each physical operator, by physical id (the policy controller
    /// publishes priority levels into them).
    pub fn operators(&self) -> &[Arc<OperatorMetrics>] {
        &self.operators
    }

    /// The latency histograms of each physical operator that ends in a sink, with its id.
    pub fn sinks(&self) -> &[(usize, Arc<SinkMetrics>)] {
        &self.sinks
    }

    /// When the engine started, on the engine clock ([`crate::now_ns`]).
    pub fn start_ns(&self) -> u64 {
        self.start_ns
    }

    /// The kind of the logical operator at the head of physical operator `id`.
    pub fn head_kind(&self, id: usize) -> NodeKind {
        self.graph.nodes[self.plan.operators[id].logical[0]].kind
    }

    /// Every physical operator's counters and gauges now.
    pub fn snapshot(&self) -> Vec<OperatorSnapshot> {
        let now = now_ns();
        self.plan.operators.iter().map(|o| snapshot(o.id, &o.query, &o.name, &self.operators[o.id], now)).collect()
    }

    /// The tuples the sources have taken in, the sinks have given out and the sources are behind
    /// their offered rates by, now: what a per-second timeline reads, from the sources' and the
    /// sinks' counters alone. A [`EngineView::snapshot`] reads every operator, names and clocks
    /// included: on 10 000 operators at 10 tuples/s, one each second was about half of what
    /// `moirai run`'s main thread spent.
    pub fn counts(&self) -> RunCounts {
        let now = now_ns();
        let sources = self.sources.iter().map(|&id| &self.operators[id]);
        let (tuples_in, backlog) = sources.fold((0, 0), |(tuples_in, backlog), m| {
            (tuples_in + m.tuples_in.load(Ordering::Relaxed), backlog + m.backlog(now))
        });
        let tuples_out = self.sinks.iter().map(|(id, _)| self.operators[*id].tuples_out.load(Ordering::Relaxed)).sum();
        RunCounts { tuples_in, tuples_out, backlog }
    }

    /// Every physical operator's queue length now (tuples at its inputs), by physical id, into
    /// `into` (cleared first): what a sampler reads many times a second, without the names,
    /// clocks and counters a [`EngineView::snapshot`] gathers.
    pub fn queue_lengths(&self, into: &mut Vec<u64>) {
        into.clear();
        into.resize(self.operators.len(), 0);
        for (id, input) in &self.inputs {
            into[*id] += input.queue_len() as u64;
        }
    }

    /// Every Hone exchange's counters now.
    pub fn exchanges(&self) -> Vec<ExchangeSnapshot> {
        self.exchanges.iter().map(|m| m.snapshot()).collect()
    }

    /// Per exchange, the largest backlog since the last call (a per-interval time series).
    pub fn exchange_window_max(&self) -> Vec<u64> {
        self.exchanges.iter().map(|m| m.take_window_max()).collect()
    }

    /// Worker threads running operators now (pool models; 0 under the dedicated model).
    pub fn thread_level(&self) -> usize {
        self.observed.thread_level.load(Ordering::SeqCst)
    }

    /// Every change of the elastic thread level so far.
    pub fn level_changes(&self) -> Vec<LevelChange> {
        lock(&self.observed.level_changes).clone()
    }

    /// Every change of the policy executor's activation so far (empty under other models).
    pub fn activation_changes(&self) -> Vec<ActivationChange> {
        lock(&self.observed.activation_changes).clone()
    }

    /// Whether the policy executor's priorities apply now: `None` under other models.
    pub fn policy_active(&self) -> Option<bool> {
        let Threading::Policy(_) = self.threading() else { return None };
        Some(lock(&self.observed.activation_changes).last().is_some_and(|change| change.active))
    }

    /// The `/topology` document: the plan with the Linux thread ids of now.
    pub fn topology(&self) -> Topology {
        let physical = (self.plan.operators.iter())
            .map(|o| PhysicalOperator {
                id: o.id,
                query: o.query.clone(),
                name: o.name.clone(),
                logical: o.logical.clone(),
                logical_names: o.logical.iter().map(|&n| self.graph.nodes[n].name.clone()).collect(),
                instance: o.instance,
                parallelism: o.parallelism,
                kind: self.graph.nodes[o.logical[0]].kind,
                tid: self.operators[o.id].tid.load(Ordering::SeqCst),
            })
            .collect();
        let threads = (lock(&self.observed.threads).iter())
            .map(|(name, tid)| PoolThread { name: name.clone(), tid: tid.load(Ordering::SeqCst) })
            .collect();
        Topology {
            pid: std::process::id(),
            threading: self.config.threading.to_string(),
            threads,
            thread_level: self.thread_level(),
            chaining: self.config.chaining,
            queries: self.queries.clone(),
            logical: self.graph.document(),
            physical,
            channels: self.plan.channels.clone(),
        }
    }
}

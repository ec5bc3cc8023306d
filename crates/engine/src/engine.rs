//! The engine: plans queries, wires channels, starts the threading model, reports.

use std::net::SocketAddr;
use std::sync::atomic::Ordering;
use std::sync::{Arc, Mutex};
use std::thread::JoinHandle;

use serde::Serialize;

use crate::channel::{lock, AbortFlag, Observe, Signal};
use crate::exchange::{ExchangeMetrics, ExchangeSnapshot};
use crate::executor::{executor, LevelChange, Observed, PoolThread, Runnable, Threading};
use crate::graph::{BuildError, LogicalGraph, NodeKind};
use crate::http::MetricsServer;
use crate::metrics::{latency_histogram, snapshot, LatencySummary, OperatorMetrics, OperatorSnapshot, SinkMetrics};
use crate::plan::{PhysicalChannel, PhysicalPlan};
use crate::query::{AnyBox, BuiltQuery, InstanceContext, NodeEntry, RouteParts};
use crate::task::StopFlag;
use crate::tuple::now_ns;
use crate::user_level::{self, Controller};

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
    /// Print the threading model's decisions (the elastic level) on stderr.
    pub verbose: bool,
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

/// Why the engine failed.
#[derive(Debug, thiserror::Error)]
pub enum EngineError {
    /// A query or setting is invalid.
    #[error(transparent)]
    Build(#[from] BuildError),
    /// An operator panicked; the engine shut down.
    #[error("operator '{operator}' panicked: {message}; the engine shut down")]
    OperatorPanicked {
        /// Physical name of the operator.
        operator: String,
        /// The panic message.
        message: String,
    },
    /// The metrics endpoint could not listen.
    #[error("cannot serve metrics on {addr}: {message}; choose another address with --metrics-addr")]
    Listen {
        /// The address.
        addr: SocketAddr,
        /// Why.
        message: String,
    },
    /// Threads could not be started.
    #[error("cannot start operator threads: {0}")]
    Spawn(std::io::Error),
}

/// A physical operator in the topology, with its thread.
#[derive(Clone, Debug, Serialize)]
pub struct TopologyOperator {
    /// Physical id.
    pub id: usize,
    /// Query.
    pub query: String,
    /// Physical name, `"a -> b (i/n)"`.
    pub name: String,
    /// Ids of the fused logical operators, upstream first.
    pub logical: Vec<usize>,
    /// Their names.
    pub logical_names: Vec<String>,
    /// Instance index, from 0.
    pub instance: usize,
    /// Instances of this chain.
    pub parallelism: usize,
    /// Kind of the chain head.
    pub kind: NodeKind,
    /// Linux thread id of the thread it runs on: its own under the dedicated model; under a
    /// pool model, the worker that ran it last (0 before it ran).
    pub tid: i32,
}

/// What `/topology` serves.
#[derive(Clone, Debug, Serialize)]
pub struct Topology {
    /// The engine's process id.
    pub pid: u32,
    /// The threading model.
    pub threading: Threading,
    /// The worker threads of a pool model (empty under the dedicated model).
    pub threads: Vec<PoolThread>,
    /// Worker threads running operators now (pool models; 0 under the dedicated model).
    pub thread_level: usize,
    /// Whether chaining is on.
    pub chaining: bool,
    /// Query names.
    pub queries: Vec<String>,
    /// Logical operators and streams of all queries (node ids index `logical.nodes`).
    pub logical: LogicalGraph,
    /// Physical operators.
    pub physical: Vec<TopologyOperator>,
    /// Channels between physical operators.
    pub channels: Vec<PhysicalChannel>,
}

/// What a run produced.
#[derive(Clone, Debug, Serialize)]
pub struct RunSummary {
    /// Wall time from start to the end of the last thread, seconds.
    pub elapsed_s: f64,
    /// Tuples that entered the engine (all sources).
    pub tuples_in: u64,
    /// Tuples that left it (all sinks).
    pub tuples_out: u64,
    /// Processing latency over all sinks.
    pub latency_ms: LatencySummary,
    /// End-to-end latency over all sinks.
    pub e2e_latency_ms: LatencySummary,
    /// Every physical operator at the end.
    pub operators: Vec<OperatorSnapshot>,
    /// Every change of the elastic thread level.
    pub level_changes: Vec<LevelChange>,
    /// Every Hone exchange: its backlogs.
    pub exchanges: Vec<ExchangeSnapshot>,
}

pub(crate) struct Shared {
    pub(crate) config: EngineConfig,
    pub(crate) graph: LogicalGraph,
    pub(crate) queries: Vec<String>,
    pub(crate) plan: PhysicalPlan,
    pub(crate) operators: Vec<Arc<OperatorMetrics>>,
    pub(crate) sinks: Vec<(usize, Arc<SinkMetrics>)>,
    pub(crate) start_ns: u64,
    pub(crate) observed: Arc<Observed>,
    pub(crate) exchanges: Vec<Arc<ExchangeMetrics>>,
    abort: Arc<AbortFlag>,
    channels: Vec<Arc<dyn Observe>>,
    signals: Mutex<Vec<Arc<Signal>>>,
    stop: Arc<StopFlag>,
    failures: Mutex<Vec<(String, String)>>,
}

impl Shared {
    /// Every physical operator now.
    pub(crate) fn snapshot(&self) -> Vec<OperatorSnapshot> {
        let now = now_ns();
        self.plan.operators.iter().map(|o| snapshot(o.id, &o.query, &o.name, &self.operators[o.id], now)).collect()
    }

    pub(crate) fn topology(&self) -> Topology {
        let physical = self
            .plan
            .operators
            .iter()
            .map(|o| TopologyOperator {
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
        let threads = lock(&self.observed.threads)
            .iter()
            .map(|(name, tid)| PoolThread { name: name.clone(), tid: tid.load(Ordering::SeqCst) })
            .collect();
        Topology {
            pid: std::process::id(),
            threading: self.config.threading.clone(),
            threads,
            thread_level: self.observed.thread_level.load(Ordering::SeqCst),
            chaining: self.config.chaining,
            queries: self.queries.clone(),
            logical: self.graph.clone(),
            physical,
            channels: self.plan.channels.clone(),
        }
    }

    /// Stops everything now: raised on a panic or by [`Engine::abort`].
    fn abort(&self) {
        self.abort.raise();
        self.stop.request();
        for c in &self.channels {
            c.close();
        }
        for s in lock(&self.signals).iter() {
            s.notify();
        }
    }
}

/// A running engine.
pub struct Engine {
    shared: Arc<Shared>,
    threads: Vec<JoinHandle<()>>,
    server: Option<MetricsServer>,
    /// The policy controller of the `policy` threading model.
    controller: Option<Controller>,
}

impl Engine {
    /// Plans `queries`, starts their operators, and (if configured) the metrics endpoint.
    pub fn start(config: EngineConfig, queries: Vec<BuiltQuery>) -> Result<Engine, EngineError> {
        if config.channel_capacity == 0 || config.batch_size == 0 {
            return Err(BuildError::Config("channel capacity and batch size must be at least 1".into()).into());
        }
        if config.channel_capacity > MAX_CHANNEL_CAPACITY || config.batch_size > MAX_BATCH_SIZE {
            return Err(BuildError::Config(format!(
                "channel capacity {} and batch size {} must be at most {MAX_CHANNEL_CAPACITY} and \
                 {MAX_BATCH_SIZE} tuples",
                config.channel_capacity, config.batch_size
            ))
            .into());
        }
        if queries.is_empty() {
            return Err(BuildError::Config("no query to run".into()).into());
        }
        if let Some((factor, over)) = config.ramp {
            if !(factor.is_finite() && factor > 0.0) || over.is_zero() {
                return Err(BuildError::Config(format!(
                    "ramp to {factor} x the rate over {over:?}: the factor must be positive and the time too"
                ))
                .into());
            }
        }
        // Merge the queries into one graph, shifting node ids.
        let mut graph = LogicalGraph::default();
        let mut entries: Vec<NodeEntry> = Vec::new();
        let mut edges = Vec::new();
        let mut names: Vec<String> = Vec::new();
        for q in queries {
            if names.contains(&q.name) {
                return Err(BuildError::DuplicateQuery { query: q.name }.into());
            }
            names.push(q.name.clone());
            let offset = graph.nodes.len();
            graph.nodes.extend(q.graph.nodes);
            for mut e in q.edges {
                e.edge.from += offset;
                e.edge.to += offset;
                graph.edges.push(e.edge.clone());
                edges.push(e);
            }
            entries.extend(q.nodes);
        }
        // A ramp multiplies every rate-limited source's rate: the target must be schedulable too.
        if let Some((factor, over)) = config.ramp {
            for (n, e) in graph.nodes.iter().zip(&entries) {
                if let Some(crate::source::Offered::Constant(r)) = e.code.offered() {
                    let ramp = crate::source::Offered::Ramp { from: r, to: r * factor, over };
                    if let Err(e) = ramp.validate() {
                        return Err(BuildError::Config(format!("query '{}', source '{}': {e}", n.query, n.name)).into());
                    }
                }
            }
        }
        graph.validate()?;
        let physical: usize = graph.nodes.iter().map(|n| n.parallelism).sum();
        if physical > MAX_PHYSICAL_OPERATORS {
            return Err(BuildError::Config(format!(
                "{physical} operator instances (sum of parallelisms) exceed the engine's bound of \
                 {MAX_PHYSICAL_OPERATORS}; use fewer operators or lower parallelism"
            ))
            .into());
        }
        if let Threading::Fused { threads } = &config.threading {
            if let Some(n) = graph.nodes.iter().find(|n| n.thread.as_ref().is_some_and(|t| !threads.contains(t))) {
                return Err(BuildError::Config(format!(
                    "query '{}': operator '{}' is placed on thread '{}', which --threading {} does not declare; \
                     declare it (fused:{}+{}) or remove the thread hint",
                    n.query,
                    n.name,
                    n.thread.as_deref().unwrap_or_default(),
                    config.threading,
                    threads.join("+"),
                    n.thread.as_deref().unwrap_or_default()
                ))
                .into());
            }
        }
        let plan = PhysicalPlan::new(&graph, config.chaining);

        // Channels: create each by the producer's output type; the consumer's signal wakes it,
        // the producer's holds it back while the channel is full.
        let signals: Vec<Arc<Signal>> = plan.operators.iter().map(|_| Arc::new(Signal::default())).collect();
        // A Hone exchange's link is a task of its own, after the physical operators: the producer
        // of the exchange edge's channels, each producer instance queueing into it.
        let exchange_edges: Vec<usize> =
            (0..graph.edges.len()).filter(|&e| graph.edges[e].exchange.is_some()).collect();
        let link_of = |e: usize| exchange_edges.iter().position(|&x| x == e);
        let link_signals: Vec<Arc<Signal>> = exchange_edges.iter().map(|_| Arc::new(Signal::default())).collect();
        let mut senders: Vec<Option<AnyBox>> = Vec::new();
        let mut receivers: Vec<Option<AnyBox>> = Vec::new();
        let mut observers = Vec::new();
        // Channels into and out of each physical operator, and of each logical edge per producer.
        let mut channels_in: Vec<Vec<usize>> = vec![Vec::new(); plan.operators.len()];
        let mut channels_out: Vec<Vec<usize>> = vec![Vec::new(); plan.operators.len()];
        for (i, ch) in plan.channels.iter().enumerate() {
            let output = entries[graph.edges[ch.edge].from].output.as_ref().expect("producer has an output");
            let producer = match link_of(ch.edge) {
                Some(k) => link_signals[k].clone(),
                None => signals[ch.from].clone(),
            };
            let (tx, rx, obs) = output.channel(config.channel_capacity, signals[ch.to].clone(), producer);
            senders.push(Some(tx));
            receivers.push(Some(rx));
            observers.push(obs);
            channels_in[ch.to].push(i);
            channels_out[ch.from].push(i);
        }
        let mut edges_out: Vec<Vec<usize>> = vec![Vec::new(); graph.nodes.len()];
        for (e, edge) in graph.edges.iter().enumerate() {
            edges_out[edge.from].push(e);
        }

        let mut metrics = Vec::new();
        for op in &plan.operators {
            metrics.push(Arc::new(OperatorMetrics {
                inputs: channels_in[op.id].iter().map(|&i| observers[i].clone()).collect(),
                outputs: channels_out[op.id].iter().map(|&i| observers[i].clone()).collect(),
                ..OperatorMetrics::default()
            }));
        }

        // The links: each takes its edge's channels, grouped by producer instance.
        let mut link_outs: std::collections::HashMap<(usize, usize), Vec<AnyBox>> = std::collections::HashMap::new();
        let mut links = Vec::new();
        let mut exchange_metrics = Vec::new();
        for (k, &e) in exchange_edges.iter().enumerate() {
            let edge = &graph.edges[e];
            let hone = edge.exchange.clone().expect("an exchange edge");
            let mut by_producer: std::collections::BTreeMap<usize, Vec<(usize, AnyBox)>> = Default::default();
            for (i, ch) in plan.channels.iter().enumerate() {
                if ch.edge == e {
                    by_producer
                        .entry(ch.from)
                        .or_default()
                        .push((ch.to, senders[i].take().expect("each sender used once")));
                }
            }
            let producers: Vec<usize> = by_producer.keys().copied().collect();
            let consumers: Vec<usize> = {
                let mut c: Vec<usize> = plan.channels.iter().filter(|ch| ch.edge == e).map(|ch| ch.to).collect();
                c.sort_unstable();
                c.dedup();
                c
            };
            let grouped: Vec<Vec<AnyBox>> = by_producer
                .into_values()
                .map(|mut targets| {
                    targets.sort_by_key(|(to, _)| *to);
                    targets.into_iter().map(|(_, s)| s).collect()
                })
                .collect();
            let name = format!("{} -> {}", graph.nodes[edge.from].name, graph.nodes[edge.to].name);
            let metrics = Arc::new(ExchangeMetrics {
                name: name.clone(),
                hone: Some(hone.clone()),
                queues: producers.len(),
                backlogs: producers.iter().map(|_| Default::default()).collect(),
                ..ExchangeMetrics::default()
            });
            let output = entries[edge.from].output.as_ref().expect("producer has an output");
            let (outs, task) = output.exchange(
                &hone,
                hone.queue.unwrap_or(config.channel_capacity),
                producers.iter().map(|&p| signals[p].clone()).collect(),
                grouped,
                link_signals[k].clone(),
                metrics.clone(),
            );
            for (&p, o) in producers.iter().zip(outs) {
                link_outs.insert((e, p), o);
            }
            exchange_metrics.push(metrics);
            links.push(Runnable {
                name: format!("exchange {} ({})", name, hone.policy),
                task,
                metrics: Arc::new(OperatorMetrics::default()),
                signal: link_signals[k].clone(),
                downstream: consumers,
                thread_hint: producers
                    .first()
                    .and_then(|&p| plan.operators[p].logical.iter().find_map(|&n| graph.nodes[n].thread.clone())),
                source: false,
            });
        }

        let stop = Arc::new(StopFlag::default());
        let mut sinks = Vec::new();
        let mut tasks = Vec::new();
        for op in &plan.operators {
            let tail = *op.logical.last().expect("a chain has operators");
            let sink = (graph.nodes[tail].kind == NodeKind::Sink).then(|| Arc::new(SinkMetrics::default()));
            if let Some(s) = &sink {
                sinks.push((op.id, s.clone()));
            }
            let ctx = InstanceContext {
                instance: op.instance,
                parallelism: op.parallelism,
                batch_size: config.batch_size,
                metrics: metrics[op.id].clone(),
                sink,
                signal: signals[op.id].clone(),
                stop: stop.clone(),
                ramp: config.ramp,
            };
            // The router, over this instance's channels of each outgoing logical edge.
            let mut down: Option<AnyBox> = None;
            if graph.nodes[tail].kind != NodeKind::Sink {
                let mut routes = Vec::new();
                for &e in &edges_out[tail] {
                    let edge = &graph.edges[e];
                    if let Some(outs) = link_outs.remove(&(e, op.id)) {
                        routes.push(RouteParts {
                            partitioning: edge.partitioning,
                            key_hash: edges[e].key_hash.clone(),
                            senders: outs,
                        });
                        continue;
                    }
                    let mut targets: Vec<(usize, AnyBox)> = Vec::new();
                    for &i in &channels_out[op.id] {
                        let ch = &plan.channels[i];
                        if ch.edge == e {
                            targets.push((ch.to, senders[i].take().expect("each sender used once")));
                        }
                    }
                    targets.sort_by_key(|(to, _)| *to);
                    routes.push(RouteParts {
                        partitioning: edge.partitioning,
                        key_hash: edges[e].key_hash.clone(),
                        senders: targets.into_iter().map(|(_, s)| s).collect(),
                    });
                }
                let output = entries[tail].output.as_ref().expect("non-sink has an output");
                down = Some(output.router(routes, config.batch_size, metrics[op.id].clone()));
            }
            for &n in op.logical[1..].iter().rev() {
                down = Some(entries[n].code.link(&ctx, down));
            }
            let head = op.logical[0];
            let mut ports: Vec<Vec<(usize, AnyBox)>> = (0..graph.nodes[head].ports).map(|_| Vec::new()).collect();
            for &i in &channels_in[op.id] {
                let ch = &plan.channels[i];
                ports[ch.port].push((ch.from, receivers[i].take().expect("each receiver used once")));
            }
            let ports = ports
                .into_iter()
                .map(|mut p| {
                    p.sort_by_key(|(from, _)| *from);
                    p.into_iter().map(|(_, r)| r).collect()
                })
                .collect();
            let task = entries[head].code.task(&ctx, ports, down);
            let mut downstream: Vec<usize> = channels_out[op.id]
                .iter()
                .map(|&i| {
                    let ch = &plan.channels[i];
                    link_of(ch.edge).map_or(ch.to, |k| plan.operators.len() + k)
                })
                .collect();
            downstream.dedup();
            tasks.push(Runnable {
                name: op.name.clone(),
                task,
                metrics: metrics[op.id].clone(),
                signal: signals[op.id].clone(),
                downstream,
                thread_hint: op.logical.iter().find_map(|&n| graph.nodes[n].thread.clone()),
                source: graph.nodes[op.logical[0]].kind == NodeKind::Source,
            });
        }
        tasks.extend(links);
        let mut signals = signals;
        signals.extend(link_signals);
        let observed = Arc::new(Observed::default());
        observed.verbose.store(config.verbose, Ordering::SeqCst);
        let prioritizer = match &config.threading {
            Threading::Policy(c) => Some(user_level::prioritizer(&c.policy).map_err(BuildError::Config)?),
            _ => None,
        };

        let shared = Arc::new(Shared {
            config: config.clone(),
            graph,
            queries: names,
            plan,
            operators: metrics,
            sinks,
            start_ns: now_ns(),
            observed: observed.clone(),
            exchanges: exchange_metrics,
            abort: Arc::new(AbortFlag::default()),
            channels: observers,
            signals: Mutex::new(signals),
            stop,
            failures: Mutex::new(Vec::new()),
        });

        let server = match config.metrics_addr {
            Some(addr) => Some(
                MetricsServer::start(addr, shared.clone())
                    .map_err(|e| EngineError::Listen { addr, message: e.to_string() })?,
            ),
            None => None,
        };

        let weak = Arc::downgrade(&shared);
        let on_panic = Arc::new(move |operator: &str, message: String| {
            if let Some(shared) = weak.upgrade() {
                lock(&shared.failures).push((operator.to_string(), message));
                shared.abort();
            }
        });
        let started = executor(&config.threading)
            .start(tasks, shared.abort.clone(), on_panic, observed)
            .map_err(EngineError::Spawn)?;
        lock(&shared.signals).extend(started.wake_on_abort);
        if shared.abort.is_raised() {
            // An operator failed before the pool's own signals were registered: wake them too.
            shared.abort();
        }
        let mut engine = Engine { shared, threads: started.threads, server, controller: None };
        if let (Some(p), Threading::Policy(c)) = (prioritizer, &config.threading) {
            engine.controller = Some(Controller::start(engine.shared.clone(), p, c).map_err(EngineError::Spawn)?);
        }
        Ok(engine)
    }

    /// Worker threads running operators now (pool models; 0 under the dedicated model).
    pub fn thread_level(&self) -> usize {
        self.shared.observed.thread_level.load(Ordering::SeqCst)
    }

    /// The topology with thread ids (as `/topology` serves it).
    pub fn topology(&self) -> Topology {
        self.shared.topology()
    }

    /// Every physical operator's metrics now.
    pub fn snapshot(&self) -> Vec<OperatorSnapshot> {
        self.shared.snapshot()
    }

    /// Every Hone exchange's counters now.
    pub fn exchanges(&self) -> Vec<ExchangeSnapshot> {
        self.shared.exchanges.iter().map(|m| m.snapshot()).collect()
    }

    /// Per exchange, the largest backlog since the last call (a per-interval time series).
    pub fn exchange_window_max(&self) -> Vec<u64> {
        self.shared.exchanges.iter().map(|m| m.take_window_max()).collect()
    }

    /// Where the metrics endpoint listens, if it does.
    pub fn metrics_addr(&self) -> Option<SocketAddr> {
        self.server.as_ref().map(|s| s.addr())
    }

    /// Asks the sources to stop; the queries then drain and finish. Call [`Engine::wait`] after.
    pub fn stop(&self) {
        self.shared.stop.request();
    }

    /// Stops everything at once, dropping tuples in flight.
    pub fn abort(&self) {
        self.shared.abort();
    }

    /// Clears the sinks' latency histograms (to discard a warm-up).
    pub fn reset_latency(&self) {
        for (_, m) in &self.shared.sinks {
            lock(&m.processing).reset();
            lock(&m.e2e).reset();
        }
    }

    /// True once every operator thread has ended.
    pub fn is_finished(&self) -> bool {
        self.threads.iter().all(|t| t.is_finished())
    }

    /// Waits for every operator to finish (sources end or [`Engine::stop`]), then reports.
    pub fn wait(mut self) -> Result<RunSummary, EngineError> {
        for t in self.threads.drain(..) {
            // A panic inside an operator is caught in its thread; join cannot fail otherwise.
            let _ = t.join();
        }
        if let Some(mut c) = self.controller.take() {
            c.stop();
        }
        if let Some(server) = self.server.take() {
            server.stop();
        }
        if let Some((operator, message)) = lock(&self.shared.failures).first().cloned() {
            return Err(EngineError::OperatorPanicked { operator, message });
        }
        Ok(self.summary())
    }

    /// A summary of the run so far.
    pub fn summary(&self) -> RunSummary {
        let s = &self.shared;
        let operators = s.snapshot();
        let (mut processing, mut e2e) = (latency_histogram(), latency_histogram());
        for (_, m) in &s.sinks {
            let _ = processing.add(&*lock(&m.processing));
            let _ = e2e.add(&*lock(&m.e2e));
        }
        let kind = |id: usize| s.graph.nodes[s.plan.operators[id].logical[0]].kind;
        let is_sink_chain = |id: usize| s.sinks.iter().any(|(i, _)| *i == id);
        RunSummary {
            elapsed_s: (now_ns() - s.start_ns) as f64 / 1e9,
            tuples_in: operators.iter().filter(|o| kind(o.id) == NodeKind::Source).map(|o| o.tuples_in).sum(),
            tuples_out: operators.iter().filter(|o| is_sink_chain(o.id)).map(|o| o.tuples_out).sum(),
            latency_ms: LatencySummary::of(&processing),
            e2e_latency_ms: LatencySummary::of(&e2e),
            operators,
            level_changes: lock(&s.observed.level_changes).clone(),
            exchanges: s.exchanges.iter().map(|m| m.snapshot()).collect(),
        }
    }
}

impl Drop for Engine {
    fn drop(&mut self) {
        if !self.threads.is_empty() {
            self.shared.abort();
            for t in self.threads.drain(..) {
                let _ = t.join();
            }
        }
    }
}

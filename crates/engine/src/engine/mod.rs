//! The engine: starts queries in three steps — validate (`validate.rs`: checks, merging, planning),
//! wire (`wire.rs`: channels, links, tasks) and launch (the metrics endpoint, the executor, the
//! run-time controllers) — then stops, waits for and reports them.

mod validate;
mod wire;

use std::net::SocketAddr;
use std::sync::{Arc, Mutex};
use std::thread::JoinHandle;

use serde::Serialize;

pub use crate::config::{EngineConfig, MAX_BATCH_SIZE, MAX_CHANNEL_CAPACITY, MAX_PHYSICAL_OPERATORS};
use crate::control;
use crate::exchange::ExchangeSnapshot;
use crate::executor::{executor, ActivationChange, LevelChange, Observed};
use crate::graph::{BuildError, NodeKind};
use crate::http::MetricsServer;
use crate::metrics::{latency_histogram, latency_of, Latency, OperatorSnapshot};
use crate::query::BuiltQuery;
use crate::sync::channel::Observe;
use crate::sync::{lock, AbortFlag, Signal};
use crate::task::StopFlag;
use crate::tuple::now_ns;
use crate::user_level::PolicyError;
use crate::view::EngineView;
pub use moirai_contract::topology::Topology;

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
    /// The policy of the `policy` threading model gave no priorities.
    #[error(transparent)]
    Policy(#[from] PolicyError),
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

/// What a run produced.
#[derive(Clone, Debug, Serialize)]
pub struct RunTotals {
    /// Wall time from start to the end of the last thread, seconds.
    pub elapsed_s: f64,
    /// Tuples that entered the engine (all sources).
    pub tuples_in: u64,
    /// Tuples that left it (all sinks).
    pub tuples_out: u64,
    /// Processing latency over all sinks.
    pub latency_ms: Latency,
    /// End-to-end latency over all sinks.
    pub e2e_latency_ms: Latency,
    /// Every physical operator at the end.
    pub operators: Vec<OperatorSnapshot>,
    /// Every change of the elastic thread level.
    pub level_changes: Vec<LevelChange>,
    /// Every change of the policy executor's activation.
    pub activation_changes: Vec<ActivationChange>,
    /// Every Hone exchange: its backlogs.
    pub exchanges: Vec<ExchangeSnapshot>,
}

/// What stops a running engine: its abort flag, channels and signals, and the failures that
/// made it abort.
struct Lifecycle {
    abort: Arc<AbortFlag>,
    channels: Vec<Arc<dyn Observe>>,
    signals: Mutex<Vec<Arc<Signal>>>,
    stop: Arc<StopFlag>,
    failures: Mutex<Vec<(String, String)>>,
}

impl Lifecycle {
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
    view: Arc<EngineView>,
    life: Arc<Lifecycle>,
    threads: Vec<JoinHandle<()>>,
    server: Option<MetricsServer>,
    /// The run-time controllers of the threading model (elastic, policy).
    controllers: Option<control::Running>,
}

impl Engine {
    /// Plans `queries`, starts their operators, and (if configured) the metrics endpoint.
    ///
    /// ```
    /// use moirai_engine::{Engine, EngineConfig, Query, Source};
    ///
    /// let q = Query::new("q");
    /// q.source("numbers", Source::new(|_, _| 0..100u64)).map("double", |x| 2 * x).discard("out");
    /// let summary = Engine::start(EngineConfig::default(), vec![q.build()?])?.wait()?;
    /// assert_eq!(summary.tuples_out, 100);
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    pub fn start(config: EngineConfig, queries: Vec<BuiltQuery>) -> Result<Engine, EngineError> {
        let mut validated = validate::validate(&config, queries)?;
        let wired = wire::wire(&config, &validated);
        let prioritizer = validated.prioritizer.take();
        Engine::launch(config, validated, wired, prioritizer)
    }

    /// Starts the metrics endpoint, the executor and the run-time controllers.
    fn launch(
        config: EngineConfig,
        validated: validate::Validated,
        wired: wire::Wired,
        prioritizer: Option<Box<dyn crate::user_level::Prioritizer>>,
    ) -> Result<Engine, EngineError> {
        let observed = Arc::new(Observed::default());
        let sources = (validated.plan.operators.iter())
            .filter(|o| validated.graph.nodes[o.logical[0]].kind == NodeKind::Source)
            .map(|o| o.id)
            .collect();
        let inputs = (wired.metrics.iter().enumerate())
            .flat_map(|(id, m)| m.inputs.iter().map(move |input| (id, input.clone())))
            .collect();
        let view = Arc::new(EngineView {
            config: config.clone(),
            graph: validated.graph,
            queries: validated.names,
            plan: validated.plan,
            operators: wired.metrics,
            sinks: wired.sinks,
            sources,
            inputs,
            start_ns: now_ns(),
            observed: observed.clone(),
            exchanges: wired.exchanges,
        });
        let life = Arc::new(Lifecycle {
            abort: Arc::new(AbortFlag::default()),
            channels: wired.channels,
            signals: Mutex::new(wired.signals),
            stop: wired.stop,
            failures: Mutex::new(Vec::new()),
        });
        let server = match config.metrics_addr {
            Some(addr) => Some(
                MetricsServer::start(addr, view.clone())
                    .map_err(|e| EngineError::Listen { addr, message: e.to_string() })?,
            ),
            None => None,
        };
        let weak = Arc::downgrade(&life);
        let on_panic = Arc::new(move |operator: &str, message: String| {
            if let Some(life) = weak.upgrade() {
                lock(&life.failures).push((operator.to_string(), message));
                life.abort();
            }
        });
        let started = executor(&config.threading)
            .start(wired.tasks, life.abort.clone(), on_panic, observed.clone())
            .map_err(EngineError::Spawn)?;
        lock(&life.signals).extend(started.wake_on_abort);
        if life.abort.is_raised() {
            // An operator failed before the pool's own signals were registered: wake them too.
            life.abort();
        }
        let mut engine = Engine { view: view.clone(), life, threads: started.threads, server, controllers: None };
        let controllers =
            control::for_threading(&config.threading, &started.pools, &observed, prioritizer, config.verbose);
        if !controllers.is_empty() {
            engine.controllers = Some(control::start(controllers, view).map_err(EngineError::Spawn)?);
        }
        Ok(engine)
    }

    /// The engine, read-only: what the metrics endpoint and the run-time controllers see.
    pub fn view(&self) -> &Arc<EngineView> {
        &self.view
    }

    /// Worker threads running operators now (pool models; 0 under the dedicated model).
    pub fn thread_level(&self) -> usize {
        self.view.thread_level()
    }

    /// The topology with thread ids (as `/topology` serves it).
    pub fn topology(&self) -> Topology {
        self.view.topology()
    }

    /// Every physical operator's metrics now.
    pub fn snapshot(&self) -> Vec<OperatorSnapshot> {
        self.view.snapshot()
    }

    /// Every Hone exchange's counters now.
    pub fn exchanges(&self) -> Vec<ExchangeSnapshot> {
        self.view.exchanges()
    }

    /// Per exchange, the largest backlog since the last call (a per-interval time series).
    pub fn exchange_window_max(&self) -> Vec<u64> {
        self.view.exchange_window_max()
    }

    /// Where the metrics endpoint listens, if it does.
    pub fn metrics_addr(&self) -> Option<SocketAddr> {
        self.server.as_ref().map(|s| s.addr())
    }

    /// Asks the sources to stop; the queries then drain and finish. Call [`Engine::wait`] after.
    pub fn stop(&self) {
        self.life.stop.request();
    }

    /// Stops everything at once, dropping tuples in flight.
    pub fn abort(&self) {
        self.life.abort();
    }

    /// Clears the sinks' latency histograms (to discard a warm-up).
    pub fn reset_latency(&self) {
        for (_, m) in self.view.sinks() {
            m.reset();
        }
    }

    /// True once every operator thread has ended.
    pub fn is_finished(&self) -> bool {
        self.threads.iter().all(|t| t.is_finished())
    }

    /// Sleeps until every operator thread has ended or `timeout` has passed; true if they have
    /// ended. Wakes as the last thread ends, so a run that ends early (its input ended, an
    /// operator failed) is seen at once, without polling.
    pub fn wait_finished(&self, timeout: std::time::Duration) -> bool {
        self.view.observed.ended.wait(self.threads.len(), timeout)
    }

    /// Waits for every operator to finish (sources end or [`Engine::stop`]), then reports.
    pub fn wait(mut self) -> Result<RunTotals, EngineError> {
        for t in self.threads.drain(..) {
            // A panic inside an operator is caught in its thread; join cannot fail otherwise.
            let _ = t.join();
        }
        if let Some(mut c) = self.controllers.take() {
            c.stop();
        }
        if let Some(server) = self.server.take() {
            server.stop();
        }
        if let Some((operator, message)) = lock(&self.life.failures).first().cloned() {
            return Err(EngineError::OperatorPanicked { operator, message });
        }
        Ok(self.totals())
    }

    /// The run's totals so far.
    pub fn totals(&self) -> RunTotals {
        let v = &self.view;
        let operators = v.snapshot();
        let (mut processing, mut e2e) = (latency_histogram(), latency_histogram());
        for (_, m) in v.sinks() {
            let _ = processing.add(&*lock(&m.processing));
            let _ = e2e.add(&*lock(&m.e2e));
        }
        RunTotals {
            elapsed_s: (now_ns() - v.start_ns()) as f64 / 1e9,
            tuples_in: v.sources.iter().map(|&id| operators[id].tuples_in).sum(),
            tuples_out: v.sinks().iter().map(|(id, _)| operators[*id].tuples_out).sum(),
            latency_ms: latency_of(&processing),
            e2e_latency_ms: latency_of(&e2e),
            operators,
            level_changes: v.level_changes(),
            activation_changes: v.activation_changes(),
            exchanges: v.exchanges(),
        }
    }
}

impl Drop for Engine {
    fn drop(&mut self) {
        if !self.threads.is_empty() {
            self.life.abort();
            for t in self.threads.drain(..) {
                let _ = t.join();
            }
        }
    }
}

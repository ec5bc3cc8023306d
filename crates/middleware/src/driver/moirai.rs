//! The driver for moirai's own engine: its public HTTP endpoint (`docs/metrics-endpoint.md`).
//!
//! `/topology` gives operators, fusion, channels and thread ids; `/metrics` gives the primitive
//! metrics (counters and gauges per physical operator). Both are read every round, so threads
//! that come and go are followed.

use std::collections::{BTreeMap, BTreeSet};
use std::time::Duration;

use moirai_sched::{LogicalOperator, Metric, OpKind, PhysicalOperator, SpeTopology, ThreadRef};
use serde::Deserialize;

use super::{Driver, Observation};
use crate::prometheus;

/// `/topology`, as far as the driver needs it.
#[derive(Clone, Debug, Deserialize)]
pub struct EngineTopology {
    /// The engine's process id.
    pub pid: u32,
    /// Query names.
    pub queries: Vec<String>,
    /// Logical operators and streams.
    pub logical: EngineLogical,
    /// Physical operators.
    pub physical: Vec<EnginePhysical>,
    /// Channels between physical operators.
    pub channels: Vec<EngineChannel>,
}

/// Logical part of `/topology`.
#[derive(Clone, Debug, Deserialize)]
pub struct EngineLogical {
    /// Operators.
    pub nodes: Vec<EngineNode>,
    /// Streams.
    pub edges: Vec<EngineEdge>,
}

/// A logical operator.
#[derive(Clone, Debug, Deserialize)]
pub struct EngineNode {
    /// Query.
    pub query: String,
    /// Name.
    pub name: String,
    /// `source`, `operator` or `sink`.
    pub kind: String,
}

/// A logical stream.
#[derive(Clone, Debug, Deserialize)]
pub struct EngineEdge {
    /// Producer.
    pub from: usize,
    /// Consumer.
    pub to: usize,
}

/// A physical operator.
#[derive(Clone, Debug, Deserialize)]
pub struct EnginePhysical {
    /// Physical id.
    pub id: usize,
    /// Query.
    pub query: String,
    /// Physical name.
    pub name: String,
    /// Fused logical operators.
    pub logical: Vec<usize>,
    /// Instance index.
    pub instance: usize,
    /// Its thread (0 before it started).
    pub tid: i32,
}

/// A channel.
#[derive(Clone, Debug, Deserialize)]
pub struct EngineChannel {
    /// Producer.
    pub from: usize,
    /// Consumer.
    pub to: usize,
}

/// Primitive metrics of one physical operator, from `/metrics`.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct EngineCounters {
    /// `moirai_operator_tuples_in_total`.
    pub tuples_in: f64,
    /// `moirai_operator_tuples_out_total`.
    pub tuples_out: f64,
    /// `moirai_operator_queue_len`.
    pub queue_len: f64,
    /// `moirai_operator_head_wait_seconds`.
    pub head_wait_s: f64,
    /// `moirai_operator_cpu_seconds_total`, in ns.
    pub cpu_ns: f64,
    /// `moirai_operator_backlog`: how far a source is behind its schedule.
    pub backlog: f64,
}

/// An HTTP client for one engine.
pub struct EngineClient {
    base: String,
    agent: ureq::Agent,
}

impl EngineClient {
    /// A client for the engine at `base` (e.g. `http://127.0.0.1:9464`).
    pub fn new(base: &str) -> Result<Self, String> {
        let base = base.trim_end_matches('/').to_string();
        if !(base.starts_with("http://") || base.starts_with("https://")) {
            return Err(format!("engine URL {base:?} must start with http://, e.g. http://127.0.0.1:9464"));
        }
        // A fresh connection per request: on a reused one, the server's split writes meet the
        // client's delayed ACK (Nagle) and each request stalls ~40 ms.
        let agent = ureq::AgentBuilder::new().timeout(Duration::from_secs(2)).max_idle_connections(0).build();
        Ok(EngineClient { base, agent })
    }

    /// The base URL.
    pub fn url(&self) -> &str {
        &self.base
    }

    fn get(&self, path: &str) -> Result<String, String> {
        let url = format!("{}{path}", self.base);
        match self.agent.get(&url).call() {
            Ok(r) => r.into_string().map_err(|e| format!("reading {url}: {e}")),
            Err(ureq::Error::Status(code, _)) => Err(format!("{url} answered HTTP {code}")),
            Err(e) => Err(format!("cannot reach {url}: {e}")),
        }
    }

    /// Reads `/topology`.
    pub fn topology(&self) -> Result<EngineTopology, String> {
        let text = self.get("/topology")?;
        serde_json::from_str(&text).map_err(|e| format!("{}/topology is not a moirai topology: {e}", self.base))
    }

    /// Reads `/metrics`: counters per physical operator id.
    pub fn counters(&self) -> Result<BTreeMap<usize, EngineCounters>, String> {
        let text = self.get("/metrics")?;
        let samples = prometheus::parse(&text).map_err(|e| format!("{}/metrics: {e}", self.base))?;
        let mut out: BTreeMap<usize, EngineCounters> = BTreeMap::new();
        for s in samples {
            let Ok(id) = s.label("id").parse::<usize>() else { continue };
            let c = out.entry(id).or_default();
            match s.name.as_str() {
                "moirai_operator_tuples_in_total" => c.tuples_in = s.value,
                "moirai_operator_tuples_out_total" => c.tuples_out = s.value,
                "moirai_operator_queue_len" => c.queue_len = s.value,
                "moirai_operator_head_wait_seconds" => c.head_wait_s = s.value,
                "moirai_operator_cpu_seconds_total" => c.cpu_ns = s.value * 1e9,
                "moirai_operator_backlog" => c.backlog = s.value,
                _ => {}
            }
        }
        Ok(out)
    }
}

/// The driver for a moirai engine.
pub struct MoiraiDriver {
    name: String,
    client: EngineClient,
}

impl MoiraiDriver {
    /// A driver for the engine at `url`, known as `name`.
    pub fn new(name: &str, url: &str) -> Result<Self, String> {
        Ok(MoiraiDriver { name: name.to_string(), client: EngineClient::new(url)? })
    }
}

fn kind_of(kind: &str) -> OpKind {
    match kind {
        "source" => OpKind::Source,
        "sink" => OpKind::Sink,
        _ => OpKind::Operator,
    }
}

/// Converts an engine topology; threads not started yet, or already gone from /proc, are left
/// out (their operator has no thread this round).
pub fn to_spe_topology(name: &str, t: &EngineTopology) -> SpeTopology {
    let logical = t
        .logical
        .nodes
        .iter()
        .map(|n| LogicalOperator { name: n.name.clone(), query: n.query.clone(), kind: kind_of(&n.kind) })
        .collect();
    let physical = t
        .physical
        .iter()
        .map(|p| {
            let threads = match moirai_os::proc::thread_stat(t.pid, p.tid) {
                Ok(stat) if p.tid > 0 => vec![ThreadRef { tid: p.tid, start_ticks: stat.start_ticks }],
                _ => Vec::new(),
            };
            PhysicalOperator {
                name: p.name.clone(),
                query: p.query.clone(),
                logical: p.logical.clone(),
                instance: p.instance,
                threads,
            }
        })
        .collect();
    let dedup = |pairs: Vec<(usize, usize)>| pairs.into_iter().collect::<BTreeSet<_>>().into_iter().collect();
    // Physical ids are indices: the engine numbers its physical operators 0..n in order.
    SpeTopology {
        name: name.to_string(),
        pid: t.pid,
        queries: t.queries.clone(),
        logical,
        logical_edges: dedup(t.logical.edges.iter().map(|e| (e.from, e.to)).collect()),
        physical,
        physical_edges: dedup(t.channels.iter().map(|c| (c.from, c.to)).collect()),
    }
}

impl Driver for MoiraiDriver {
    fn spe(&self) -> &str {
        &self.name
    }

    fn kind(&self) -> &'static str {
        "moirai"
    }

    fn provides(&self) -> BTreeSet<Metric> {
        [Metric::TuplesIn, Metric::TuplesOut, Metric::QueueLen, Metric::HeadWait, Metric::CpuNs].into()
    }

    fn observe(&mut self, needed: &[Metric]) -> Result<Observation, String> {
        let engine = self.client.topology()?;
        if engine.physical.iter().enumerate().any(|(i, p)| p.id != i) {
            return Err(format!("{}/topology: physical ids are not 0..n in order", self.client.url()));
        }
        let topology = to_spe_topology(&self.name, &engine);
        let is_source: Vec<bool> = engine
            .physical
            .iter()
            .map(|p| p.logical.first().and_then(|&n| engine.logical.nodes.get(n)).is_some_and(|n| n.kind == "source"))
            .collect();
        let mut samples = Vec::new();
        if !needed.is_empty() {
            let counters = self.client.counters()?;
            for (op, c) in counters {
                if op >= topology.physical.len() {
                    continue;
                }
                for &m in needed {
                    let v = match m {
                        Metric::TuplesIn => c.tuples_in,
                        Metric::TuplesOut => c.tuples_out,
                        // A source's input queue is the external one (Kafka, or the engine's own
                        // open-loop source lagging behind its schedule), as lachesis-mod's
                        // external-queue metrics had it: without it a source always looks idle to
                        // queue-size scheduling and gets the lowest priority, starving the query.
                        Metric::QueueLen if is_source[op] => c.backlog,
                        Metric::QueueLen => c.queue_len,
                        Metric::HeadWait => c.head_wait_s,
                        Metric::CpuNs => c.cpu_ns,
                        _ => continue,
                    };
                    samples.push((op, m, v));
                }
            }
        }
        Ok(Observation { topology, samples })
    }
}

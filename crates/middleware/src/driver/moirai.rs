//! The driver for moirai's own engine: its public HTTP endpoint (`docs/metrics-endpoint.md`).
//!
//! `/topology` gives operators, fusion, channels and thread ids; `/metrics` gives the primitive
//! metrics (counters and gauges per physical operator). Both are read every round, so threads
//! that come and go are followed.
//!
//! What an endpoint says is not taken on trust (the middleware runs as root): every round, the
//! process the topology names must be the one listening on the endpoint's port (loopback URLs),
//! must match the pins of its `[[spe]]` table (`pid`, `uid`, `exe`), and must have the owner the
//! engine had when first attached unless `allow_owner_change`; only its own threads
//! (`/proc/<pid>/task/<tid>`) are touched, and a thread id listed for two operators is refused.
//! While attached it holds a lock keyed by the engine's pid, so no second middleware schedules
//! the same process.

use std::collections::{BTreeMap, BTreeSet};
use std::path::PathBuf;
use std::time::Duration;

use moirai_os::identity::{self, LockFile};

use moirai_sched::{LogicalOperator, Metric, OpKind, PhysicalOperator, SpeTopology, ThreadRef};
use serde::Deserialize;

use super::threads::ThreadCensus;
use super::{Driver, Observation, SourceLoad};
use crate::prometheus;

/// `/topology`, as far as the driver needs it.
#[derive(Clone, Debug, Deserialize)]
pub struct EngineTopology {
    /// The engine's process id.
    pub pid: u32,
    /// The threading model (`dedicated`, `dynamic:2`, ...; absent from older engines).
    #[serde(default)]
    pub threading: String,
    /// Whether forward edges were fused (chaining).
    #[serde(default)]
    pub chaining: bool,
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
    /// Input ports (0 for a source, 2 for a join).
    #[serde(default)]
    pub ports: usize,
    /// Instances (fission).
    #[serde(default = "one")]
    pub parallelism: usize,
}

fn one() -> usize {
    1
}

/// A logical stream.
#[derive(Clone, Debug, Deserialize)]
pub struct EngineEdge {
    /// Producer.
    pub from: usize,
    /// Consumer.
    pub to: usize,
    /// The consumer's input port.
    #[serde(default)]
    pub port: usize,
    /// `forward`, `rebalance`, `shuffle`, `key_by` or `broadcast`.
    #[serde(default)]
    pub partitioning: String,
    /// A Hone exchange on this stream, as the engine describes it (absent: none).
    #[serde(default)]
    pub exchange: Option<serde_json::Value>,
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
        let table = self.counter_table()?;
        Ok(table.into_iter().enumerate().filter_map(|(id, c)| Some((id, c?))).collect())
    }

    /// Reads `/metrics`: counters per physical operator id (the index), `None` for an id
    /// without samples.
    pub fn counter_table(&self) -> Result<Vec<Option<EngineCounters>>, String> {
        let text = self.get("/metrics")?;
        let mut out: Vec<Option<EngineCounters>> = Vec::new();
        let wanted = |name: &str| {
            matches!(
                name,
                "moirai_operator_tuples_in_total"
                    | "moirai_operator_tuples_out_total"
                    | "moirai_operator_queue_len"
                    | "moirai_operator_head_wait_seconds"
                    | "moirai_operator_cpu_seconds_total"
                    | "moirai_operator_backlog"
            )
        };
        prometheus::scan(&text, wanted, |s| {
            let Some(id) = s.label("id").and_then(|id| id.parse::<usize>().ok()) else { return };
            // Ids are the engine's physical operators, 0..n; a wild one is not worth a gap.
            if id >= MAX_OPERATORS {
                return;
            }
            if out.len() <= id {
                out.resize(id + 1, None);
            }
            let c = out[id].get_or_insert_with(EngineCounters::default);
            match s.name {
                "moirai_operator_tuples_in_total" => c.tuples_in = s.value,
                "moirai_operator_tuples_out_total" => c.tuples_out = s.value,
                "moirai_operator_queue_len" => c.queue_len = s.value,
                "moirai_operator_head_wait_seconds" => c.head_wait_s = s.value,
                "moirai_operator_cpu_seconds_total" => c.cpu_ns = s.value * 1e9,
                "moirai_operator_backlog" => c.backlog = s.value,
                _ => {}
            }
        })
        .map_err(|e| format!("{}/metrics: {e}", self.base))?;
        Ok(out)
    }
}

/// The most physical operators an engine has (`moirai run` accepts 100 000 in all).
const MAX_OPERATORS: usize = 1 << 20;

/// The driver for a moirai engine.
pub struct MoiraiDriver {
    name: String,
    client: EngineClient,
    pins: Pins,
    /// Where this middleware keeps its originals (named in the engine's lock).
    state_file: PathBuf,
    /// The engine process attached to: (pid, owner uid), and the lock held on it.
    attached: Option<(u32, u32, LockFile)>,
    /// The socket the engine was last found listening on (loopback URLs).
    listener: Option<identity::Listener>,
    /// The engine's threads, listed every round.
    census: ThreadCensus,
    /// The topology last read, kept while the engine's thread set stays the same.
    cached: Option<Cached>,
    /// The sources as the last observation saw them.
    sources: Option<SourceLoad>,
    /// Warnings already shown.
    warnings: BTreeSet<String>,
}

/// What the operator of the middleware expects of an engine's process (`[[spe]]` keys `pid`,
/// `uid`, `exe`, `allow_owner_change`).
#[derive(Clone, Debug, Default, PartialEq)]
pub struct Pins {
    /// Its process id.
    pub pid: Option<u32>,
    /// The uid that owns it.
    pub uid: Option<u32>,
    /// Its executable.
    pub exe: Option<PathBuf>,
    /// Attach again to an engine of another owner than the first one (off: refused).
    pub allow_owner_change: bool,
}

/// Where the per-engine locks are: one file per scheduled process, `spe-<pid>.lock`.
pub const LOCK_DIR: &str = "/run/moirai";

/// What a middleware writes into the per-engine locks it holds.
fn lock_holder(state_file: &std::path::Path) -> String {
    format!("middleware pid {} with state file {}", std::process::id(), state_file.display())
}

/// Removes the per-engine locks of middlewares that were killed (nobody holds them any more).
pub fn remove_stale_locks() -> usize {
    identity::remove_stale_locks(std::path::Path::new(LOCK_DIR), "spe-")
}

/// Removes the per-engine locks this process holds, for an exit that skips the drivers' drop
/// (the stop watchdog); the flocks end with the process.
pub fn remove_own_locks(state_file: &std::path::Path) {
    let me = lock_holder(state_file);
    let Ok(entries) = std::fs::read_dir(LOCK_DIR) else { return };
    for path in entries.flatten().map(|e| e.path()) {
        let name = path.file_name().and_then(|n| n.to_str()).unwrap_or("");
        if name.starts_with("spe-") && std::fs::read_to_string(&path).is_ok_and(|t| t.trim() == me) {
            let _ = std::fs::remove_file(&path);
        }
    }
}

impl MoiraiDriver {
    /// A driver for the engine at `url`, known as `name`, of a middleware keeping its originals
    /// in `state_file`.
    pub fn new(name: &str, url: &str, pins: Pins, state_file: PathBuf) -> Result<Self, String> {
        Ok(MoiraiDriver {
            name: name.to_string(),
            client: EngineClient::new(url)?,
            pins,
            state_file,
            attached: None,
            listener: None,
            census: ThreadCensus::new(),
            cached: None,
            sources: None,
            warnings: BTreeSet::new(),
        })
    }

    fn warn_once(&mut self, text: String) {
        if self.warnings.insert(text.clone()) {
            eprintln!("moirai schedule: warning: SPE '{}': {text}", self.name);
        }
    }

    /// Checks that the process `/topology` names is the engine this middleware may schedule, and
    /// holds the lock on it; the error says what was refused and why.
    fn verify(&mut self, pid: u32) -> Result<(), String> {
        let url = self.client.url().to_string();
        let refuse = |why: String| Err(format!("refusing to schedule the process {url} names (pid {pid}): {why}"));
        match super::loopback_port(&url) {
            // The socket found in an earlier round, still held by this very process: the port is
            // still its own (one readlink instead of a scan of every socket and process).
            Some(_) if self.listener.as_ref().is_some_and(|l| l.pid == pid && l.still_listening()) => {}
            Some(port) => match identity::listener(port) {
                Some(listener) if listener.pid == pid => self.listener = Some(listener),
                Some(listener) => {
                    self.listener = None;
                    return refuse(format!(
                        "the port is served by process {}, not by {pid}; another process answers on the engine's \
                         port",
                        listener.pid
                    ));
                }
                None => {
                    self.listener = None;
                    return refuse(
                        "no process visible to this middleware listens on that port (run it as root or as the \
                         engine's user)"
                            .into(),
                    );
                }
            },
            None => self.warn_once(format!(
                "{url} is not a loopback address: which process serves it cannot be checked, only the pins of its \
                 [[spe]] table (pid, uid, exe) are"
            )),
        }
        let Some((uid, _)) = identity::owner(pid) else {
            return refuse("no such process on this machine".into());
        };
        if self.pins.pid.is_some_and(|p| p != pid) {
            return refuse(format!("the [[spe]] table pins pid {}", self.pins.pid.unwrap_or_default()));
        }
        if self.pins.uid.is_some_and(|u| u != uid) {
            return refuse(format!(
                "it belongs to uid {uid}; the [[spe]] table pins uid {}",
                self.pins.uid.unwrap_or_default()
            ));
        }
        if let Some(exe) = &self.pins.exe {
            let actual = identity::executable(pid).map_err(|e| format!("cannot read /proc/{pid}/exe: {e}"))?;
            if &actual != exe {
                return refuse(format!(
                    "its executable is {}; the [[spe]] table pins {}",
                    actual.display(),
                    exe.display()
                ));
            }
        }
        match &self.attached {
            Some((p, _, _)) if *p == pid => return Ok(()),
            Some((p, u, _)) if *u != uid && !self.pins.allow_owner_change => {
                return refuse(format!(
                    "the engine was process {p} of uid {u}; this one belongs to uid {uid}. Set allow_owner_change = \
                     true in its [[spe]] table if that is expected"
                ))
            }
            _ => {}
        }
        // A new process: release the old lock, take the new one.
        self.attached = None;
        let dir = std::path::Path::new(LOCK_DIR);
        std::fs::create_dir_all(dir).map_err(|e| format!("cannot create {}: {e} (run as root)", dir.display()))?;
        let me = lock_holder(&self.state_file);
        let lock = match LockFile::try_acquire(&dir.join(format!("spe-{pid}.lock")), &me) {
            Ok(lock) => lock,
            Err(Ok(holder)) => {
                return refuse(format!(
                    "another moirai schedule already schedules it ({holder}); stop that one first: two middlewares \
                     would each take the other's values for the originals"
                ))
            }
            Err(Err(e)) => return refuse(e),
        };
        self.attached = Some((pid, uid, lock));
        Ok(())
    }
}

/// True when the engine runs a pool threading model: a worker thread runs whichever operator is
/// queued next, so no thread belongs to one operator.
fn is_pool(threading: &str) -> bool {
    !threading.is_empty() && threading != "dedicated"
}

fn kind_of(kind: &str) -> OpKind {
    match kind {
        "source" => OpKind::Source,
        "sink" => OpKind::Sink,
        _ => OpKind::Operator,
    }
}

/// Converts an engine topology; threads not started yet, or already gone from /proc, are left
/// out (their operator has no thread this round). Under a pool threading model no operator has
/// a thread of its own (its `tid` is only the worker that ran it last): operators get none, and
/// nothing of the engine is reniced or moved.
pub fn to_spe_topology(name: &str, t: &EngineTopology) -> SpeTopology {
    to_spe_topology_with(name, t, |pid, tid| moirai_os::proc::thread_stat(pid, tid).ok().map(|s| s.start_ticks))
}

/// [`to_spe_topology`] with the threads' start times from `start_ticks(pid, tid)` (`None`: gone).
pub fn to_spe_topology_with(
    name: &str,
    t: &EngineTopology,
    mut start_ticks: impl FnMut(u32, i32) -> Option<u64>,
) -> SpeTopology {
    let pool = is_pool(&t.threading);
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
            let threads = match (p.tid > 0 && !pool).then(|| start_ticks(t.pid, p.tid)).flatten() {
                Some(start_ticks) => vec![ThreadRef { tid: p.tid, start_ticks }],
                None => Vec::new(),
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
        // `/topology` is read again only when the engine's threads changed (or it is another
        // process): an engine's queries are fixed for its life, and an operator thread that
        // starts, ends or is replaced changes the thread set.
        let cached = match self.cached.take() {
            Some(c) if !self.census.refresh(c.topology.pid) => c,
            _ => self.read_topology()?,
        };
        let result = self.verify(cached.topology.pid);
        let topology = cached.topology.clone();
        let is_source = cached.is_source.clone();
        if cached.complete {
            self.cached = Some(cached);
        }
        result?;
        let mut samples = Vec::new();
        if !needed.is_empty() {
            let counters = self.client.counter_table()?;
            let mut sources = SourceLoad::default();
            for (op, c) in counters.into_iter().enumerate() {
                if op >= topology.physical.len() {
                    break;
                }
                let Some(c) = c else { continue };
                if is_source[op] {
                    sources.add(Some(c.backlog), c.tuples_in);
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
            self.sources = Some(sources);
        }
        Ok(Observation { topology, samples })
    }

    fn sources(&self) -> Option<SourceLoad> {
        self.sources
    }
}

/// A topology as read from `/topology`, with what the rounds need of it.
struct Cached {
    topology: SpeTopology,
    /// Per physical operator: whether it is a source.
    is_source: Vec<bool>,
    /// Whether every operator had its thread (else it is read again next round).
    complete: bool,
}

impl MoiraiDriver {
    /// Reads `/topology` and converts it (thread ids checked against `/proc`).
    fn read_topology(&mut self) -> Result<Cached, String> {
        let engine = self.client.topology()?;
        if engine.physical.iter().enumerate().any(|(i, p)| p.id != i) {
            return Err(format!("{}/topology: physical ids are not 0..n in order", self.client.url()));
        }
        self.census.refresh(engine.pid);
        let census = &mut self.census;
        let mut topology = to_spe_topology_with(&self.name, &engine, |pid, tid| census.start_ticks(pid, tid));
        // Under the dedicated model each thread runs one operator: a tid listed twice is a lie.
        let mut seen = BTreeMap::new();
        for (i, op) in topology.physical.iter().enumerate() {
            for t in &op.threads {
                seen.entry(t.tid).or_insert_with(Vec::new).push(i);
            }
        }
        for (tid, ops) in seen.into_iter().filter(|(_, ops)| ops.len() > 1) {
            let names: Vec<String> = ops.iter().map(|&i| topology.physical[i].name.clone()).collect();
            self.warn_once(format!(
                "thread {tid} is listed for several operators ({}); none of them gets it",
                names.join(", ")
            ));
            for i in ops {
                topology.physical[i].threads.retain(|t| t.tid != tid);
            }
        }
        let pool = is_pool(&engine.threading);
        if pool {
            self.warn_once(format!(
                "the engine runs the pool threading model '{}': a worker thread runs many operators, so \
                 per-operator nice values and cgroups do not apply and none of its threads is changed (see \
                 docs/threading.md)",
                engine.threading
            ));
        }
        let is_source = engine
            .physical
            .iter()
            .map(|p| p.logical.first().and_then(|&n| engine.logical.nodes.get(n)).is_some_and(|n| n.kind == "source"))
            .collect();
        let complete = pool || topology.physical.iter().all(|p| !p.threads.is_empty());
        Ok(Cached { topology, is_source, complete })
    }
}

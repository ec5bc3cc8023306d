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
//!
//! A `/proc` read that fails for lack of descriptors says nothing about the engine: it is an
//! error (reported once per shortage), never "no process listens"; an engine verified before
//! stays attached and its threads keep the mapping of the last round.

use std::collections::{BTreeMap, BTreeSet};
use std::path::PathBuf;
use std::time::Duration;

use moirai_os::identity::{self, LockFile};

use moirai_contract::metrics::names;
use moirai_contract::sched as contract;
use moirai_contract::topology::NodeKind;
use moirai_sched::{Metric, SpeTopology, ThreadRef};

use super::threads::ThreadCensus;
use super::{Driver, DriverError, Observation, SourceLoad};
use crate::prometheus;

/// `/topology` and the counters of `/metrics`: the engine's own document types
/// ([`moirai_contract`]), so that writer and reader cannot drift apart.
pub use moirai_contract::metrics::OperatorCounters as EngineCounters;
pub use moirai_contract::topology::Topology as EngineTopology;

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
        // One connection kept open between rounds (the engine's server answers in one write,
        // without Nagle, and keeps an idle connection 60 s, longer than the longest quiet
        // period): a fresh connection per request was a tenth of an idle round's CPU.
        let agent = ureq::AgentBuilder::new()
            .timeout(Duration::from_secs(2))
            .max_idle_connections(1)
            .max_idle_connections_per_host(1)
            .build();
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
        // Only these families (`?name[]=`): the engine then skips its sink summaries, most of a
        // full scrape's CPU (an engine that ignores the query sends everything; the scan below
        // keeps these anyway).
        const FAMILIES: [&str; 6] =
            [names::TUPLES_IN, names::TUPLES_OUT, names::QUEUE_LEN, names::HEAD_WAIT, names::CPU, names::BACKLOG];
        let query: Vec<String> = FAMILIES.iter().map(|f| format!("name[]={f}")).collect();
        let text = self.get(&format!("/metrics?{}", query.join("&")))?;
        let mut out: Vec<Option<EngineCounters>> = Vec::new();
        let wanted = |name: &str| FAMILIES.contains(&name);
        prometheus::scan(&text, wanted, |s| {
            let Some(id) = s.label("id").and_then(|id| id.parse::<usize>().ok()) else { return };
            // Ids are the engine's physical operators, 0..n; a wild one is not worth a gap.
            if id >= MAX_OPERATORS {
                return;
            }
            if out.len() <= id {
                out.resize(id + 1, None);
            }
            out[id].get_or_insert_with(EngineCounters::default).set(s.name, s.value);
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
    /// The threads of the attached engine in the last round, by tid: kept for a round in which
    /// `/proc` cannot be read.
    mapping: BTreeMap<i32, ThreadRef>,
    /// Errors for [`Driver::take_errors`]; whether a `/proc` shortage is going on (reported when
    /// it starts, not every round), and whether this round met it.
    errors: Vec<String>,
    shortage: bool,
    short_now: bool,
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
    pub fn new(name: &str, url: &str, pins: Pins, state_file: PathBuf) -> Result<Self, DriverError> {
        Ok(MoiraiDriver {
            name: name.to_string(),
            client: EngineClient::new(url).map_err(DriverError::Config)?,
            pins,
            state_file,
            attached: None,
            listener: None,
            census: ThreadCensus::new(),
            cached: None,
            sources: None,
            warnings: BTreeSet::new(),
            mapping: BTreeMap::new(),
            errors: Vec::new(),
            shortage: false,
            short_now: false,
        })
    }

    fn warn_once(&mut self, text: String) {
        if self.warnings.insert(text.clone()) {
            eprintln!("moirai schedule: warning: SPE '{}': {text}", self.name);
        }
    }

    /// A `/proc` read failed this round and the driver went on with what it knew: an error when
    /// the shortage starts, silence while it lasts.
    fn short_of(&mut self, text: String) {
        if !self.shortage {
            self.errors.push(text);
        }
        self.shortage = true;
        self.short_now = true;
    }

    /// Checks that the process `/topology` names is the engine this middleware may schedule, and
    /// holds the lock on it; the error says what was refused and why.
    fn verify(&mut self, pid: u32) -> Result<(), String> {
        let url = self.client.url().to_string();
        let refuse = |why: String| Err(format!("refusing to schedule the process {url} names (pid {pid}): {why}"));
        let mut same_socket = false;
        match super::loopback_port(&url) {
            // The socket found in an earlier round, still held by this very process: the port is
            // still its own (one readlink instead of a scan of every socket and process).
            Some(_) if self.listener.as_ref().is_some_and(|l| l.pid == pid && l.still_listening()) => {
                same_socket = true
            }
            Some(port) => match identity::listener(port) {
                Ok(Some(listener)) if listener.pid == pid => self.listener = Some(listener),
                Ok(Some(listener)) => {
                    self.listener = None;
                    return refuse(format!(
                        "the port is served by process {}, not by {pid}; another process answers on the engine's \
                         port",
                        listener.pid
                    ));
                }
                Ok(None) => {
                    self.listener = None;
                    return refuse(
                        "no process visible to this middleware listens on that port (run it as root or as the \
                         engine's user)"
                            .into(),
                    );
                }
                // Not knowing is not "nobody listens": an engine checked before stays attached.
                Err(e) => match &self.attached {
                    Some((p, _, _)) if *p == pid => self.short_of(format!(
                        "cannot check which process listens on port {port}: {e}; keeping engine process {pid}, \
                         verified before, and its threads of the last round"
                    )),
                    _ => {
                        return Err(format!(
                            "cannot check which process serves {url} (its topology names pid {pid}): {e}; not \
                             scheduled until it can be checked"
                        ))
                    }
                },
            },
            None => self.warn_once(format!(
                "{url} is not a loopback address: which process serves it cannot be checked, only the pins of its \
                 [[spe]] table (pid, uid, exe) are"
            )),
        }
        // The engine attached before, still holding its socket, is the same process: its owner
        // was read when it was attached (`/proc/<pid>/status` is among the dearer files to read).
        let attached_uid = self.attached.as_ref().filter(|(p, _, _)| same_socket && *p == pid).map(|a| a.1);
        let Some(uid) = attached_uid.or_else(|| identity::owner(pid).map(|o| o.0)) else {
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
        self.mapping.clear();
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
    let pool = t.is_pool();
    contract::spe_topology(name, t, |p| match (p.tid > 0 && !pool).then(|| start_ticks(t.pid, p.tid)).flatten() {
        Some(start_ticks) => vec![ThreadRef { tid: p.tid, start_ticks }],
        None => Vec::new(),
    })
}

impl Driver for MoiraiDriver {
    fn spe(&self) -> &str {
        &self.name
    }

    fn kind(&self) -> &'static str {
        "moirai"
    }

    fn provides(&self) -> BTreeSet<Metric> {
        contract::PROVIDES.into()
    }

    fn observe(&mut self, needed: &[Metric]) -> Result<Observation, DriverError> {
        // `/topology` is read again only when the engine's threads changed (or it is another
        // process): an engine's queries are fixed for its life, and an operator thread that
        // starts, ends or is replaced changes the thread set.
        // A census that could not list the threads for lack of descriptors says "no change": the
        // topology and its thread mapping of the last round stay.
        self.short_now = false;
        let cached = match self.cached.take() {
            Some(c) if !self.census.refresh(c.topology.pid) => c,
            _ => self.read_topology().map_err(DriverError::Interface)?,
        };
        if let Some(e) = self.census.take_shortage() {
            self.short_of(format!(
                "cannot read the threads of engine process {} in /proc: {e}; keeping their mapping of the last round",
                cached.topology.pid
            ));
        }
        let result = self.verify(cached.topology.pid);
        let topology = cached.topology.clone();
        let mut samples = Vec::new();
        // The engine is asked something every round, even when the topology is cached and no
        // metric is needed (a constant policy): an engine that stopped answering must show as
        // down, so that nothing stays raised (or real-time) on its behalf.
        let counted = match (result.is_ok(), needed.is_empty()) {
            (true, false) => self.client.counter_table().map(Some),
            (true, true) => self.client.get("/").map(|_| None),
            (false, _) => Ok(None),
        };
        if let Ok(Some(counters)) = &counted {
            let counters = counters.iter().enumerate().filter_map(|(op, c)| Some((op, c.as_ref()?)));
            let mut sources = SourceLoad::default();
            for (op, c) in counters.clone() {
                if cached.engine.head_kind(op) == Some(NodeKind::Source) {
                    sources.add(Some(c.backlog), c.tuples_in);
                } else {
                    sources.add_queued(c.queue_len);
                }
            }
            samples = contract::samples(&cached.engine, counters, needed);
            self.sources = Some(sources);
        }
        if cached.complete {
            self.cached = Some(cached);
        }
        result.map_err(DriverError::Identity)?;
        counted.map_err(DriverError::Interface)?;
        // A round that read `/proc` whole ends the shortage: the next one is reported again.
        self.shortage &= self.short_now;
        Ok(Observation { topology, samples })
    }

    fn sources(&self) -> Option<SourceLoad> {
        self.sources
    }

    fn take_errors(&mut self) -> Vec<String> {
        std::mem::take(&mut self.errors)
    }

    fn idle_wait(&self) -> super::IdleWait {
        // A dedicated operator thread waits on its channels' condition variable; pool threads
        // (which the driver never reports) are not scheduled per operator anyway.
        super::IdleWait::Blocks
    }
}

/// A topology as read from `/topology`, with what the rounds need of it.
struct Cached {
    /// As the scheduling core sees it.
    topology: SpeTopology,
    /// As the engine wrote it (which operators are sources).
    engine: EngineTopology,
    /// Whether every operator had its thread (else it is read again next round).
    complete: bool,
}

impl MoiraiDriver {
    /// Reads `/topology` and converts it (thread ids checked against `/proc`).
    fn read_topology(&mut self) -> Result<Cached, String> {
        let engine = self.client.topology()?;
        engine.check_ids().map_err(|e| format!("{}/topology: {e}", self.client.url()))?;
        self.census.refresh(engine.pid);
        let (census, last) = (&mut self.census, &self.mapping);
        let mut topology = to_spe_topology_with(&self.name, &engine, |pid, tid| {
            // Out of descriptors: the thread's entry of the last round.
            census
                .start_ticks(pid, tid)
                .or_else(|| census.short().then(|| last.get(&tid).map(|t| t.start_ticks)).flatten())
        });
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
        let pool = engine.is_pool();
        if pool {
            self.warn_once(format!(
                "the engine runs the pool threading model '{}': a worker thread runs many operators, so \
                 per-operator nice values and cgroups do not apply and none of its threads is changed (see \
                 docs/threading.md)",
                engine.threading
            ));
        }
        self.mapping = topology.physical.iter().flat_map(|p| &p.threads).map(|t| (t.tid, *t)).collect();
        // Read again next round while threads are missing, or their mapping is the last round's.
        let complete = (pool || topology.physical.iter().all(|p| !p.threads.is_empty())) && !self.census.short();
        Ok(Cached { topology, engine, complete })
    }
}

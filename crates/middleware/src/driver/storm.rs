//! The driver for Apache Storm 2.x: executors and their Linux threads from a thread dump of the
//! worker JVM, counters and queues from Storm's own metrics (metrics v2, `CsvStormReporter`).
//!
//! - **Metrics.** Storm writes every metric of a topology into a directory of CSV files when the
//!   topology (or the cluster) configures the CSV reporter:
//!
//!   ```yaml
//!   topology.metrics.reporters:
//!     - class: org.apache.storm.metrics2.reporters.CsvStormReporter
//!       report.period: 1
//!       report.period.units: SECONDS
//!       csv.log.dir: /var/lib/storm/metrics      # the driver's metrics_dir
//!   ```
//!
//!   One file per metric and task, a line `epoch_seconds,value` appended every period:
//!   `storm.worker.<topology id>.<host>.<component>.<task>.<port>-receive-queue-population.csv`
//!   (gauge: tuples in the executor's receive queue), `storm.worker.….<component>.<stream>.<task>.
//!   <port>-__execute-count-<source component>:<source stream>.csv`, `…-__emit-count-<stream>.csv`,
//!   `…-__transfer-count-<stream>.csv` (cumulative counters), and the gauges a topology registers
//!   itself, `storm.topology.<topology id>.<host>.<component>.<task>.<port>-<name>.csv` — a spout's
//!   backlog as `pendingRecords` (FLIP-33's name, as moirai's Storm jobs report it). Storm counts
//!   every 1/`topology.stats.sample.rate`-th tuple (20 by default) and scales up; set the rate to 1
//!   for exact counts.
//! - **Topology.** Every topology with files written in the last [`LIVE`] is a query; its
//!   components are logical operators, an edge `S → C` wherever `C` reports an execute count from
//!   `S` (so edges appear once tuples flow). Components whose id starts with `__` (Storm's system
//!   executors) are left out.
//! - **Threads.** An executor runs on one thread, named `Thread-<n>-<component>-executor[<first
//!   task>, <last task>]` (Storm 1.x: `[a b]`); each executor is a physical operator, named
//!   `"<component> (i/n)"`, whose metrics are those of its tasks. The JVM belongs to the owner of the
//!   metrics directory and runs threads named so ([`choose_worker`] when several do); files in
//!   the directory written by another user are ignored, so a local user cannot steer a root-owned
//!   Storm.
//! - **Metrics per executor.** `tuples_in`: Σ execute counts (a spout: Σ emit counts); `tuples_out`:
//!   Σ transfer counts, once per receiving task as [`Metric::TuplesOut`] asks (a sink: its tuples
//!   in); `queue_len`: the receive queue's population (a spout: Σ `pendingRecords` where it
//!   reports them, capped at the fullest receive queue of its topology unless
//!   [`SourceQueue::Backlog`]); `cpu_ns` from `/proc`.

use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};
use std::sync::atomic::AtomicBool;
use std::sync::Arc;
use std::time::{Duration, Instant};

use moirai_os::sighting::SeenThreads;
use moirai_sched::{LogicalOperator, Metric, OpKind, PhysicalOperator, SpeTopology, ThreadRef};

use super::cpu_clocks::CpuClocks;
use super::jvm::{any_gone, java_processes, parse_thread_dump, stamp, thread_dump};
use super::storm_files::MetricDir;
pub use super::storm_files::{
    last_value, parse_metric_file, LiveFiles, MetricFile, StormMetric, LIVE, PENDING_RECORDS,
};
use super::threads::ThreadCensus;
use super::{cap_source_queues, Driver, DriverError, IdleWait, Observation, SourceLoad};
use crate::config::SourceQueue;

/// The least time between two dumps while a live component has no executor thread yet.
const DUMP_RETRY: Duration = Duration::from_secs(5);
/// The least time between two dumps while no executor was seen idle (how they wait is unknown).
const IDLE_RETRY: Duration = Duration::from_secs(30);

/// Which of the JVMs running Storm executors (pid, command line) is the worker of the metrics
/// directory `dir`, whose live topologies are `topologies`: the only one; else the only one
/// whose command line names a live topology (a cluster's worker is started with its topology's
/// id) or, failing that, the directory itself (as moirai's Storm jobs are). A thread name carries
/// no topology id, so anything else would be a guess — and a guess could steer another
/// topology's threads: refused, asking for `pid`.
pub fn choose_worker(candidates: Vec<(u32, String)>, topologies: &BTreeSet<String>, dir: &Path) -> Result<u32, String> {
    if let [(pid, _)] = candidates.as_slice() {
        return Ok(*pid);
    }
    let dir = dir.display().to_string();
    let by_topology: Vec<u32> =
        candidates.iter().filter(|(_, cmd)| topologies.iter().any(|t| cmd.contains(t.as_str()))).map(|c| c.0).collect();
    let by_dir: Vec<u32> = candidates.iter().filter(|(_, cmd)| cmd.contains(&dir)).map(|c| c.0).collect();
    match (by_topology.as_slice(), by_dir.as_slice()) {
        ([pid], _) | ([], [pid]) => Ok(*pid),
        _ if candidates.is_empty() => Err(format!(
            "no JVM on this machine runs Storm executors for {dir}; is the worker on another node, or run by another \
             user?"
        )),
        _ => Err(format!(
            "several JVMs run Storm executors (pids {:?}) and none is told apart as the worker writing {dir}; set \
             `pid` in the [[spe]] table (one table per worker JVM)",
            candidates.iter().map(|c| c.0).collect::<Vec<_>>()
        )),
    }
}

/// The topology's name from its id: `moirai-syn-1-1795534864` → `moirai-syn`.
pub fn topology_name(id: &str) -> &str {
    let mut parts = id.rsplitn(3, '-');
    match (parts.next(), parts.next(), parts.next()) {
        (Some(t), Some(n), Some(name))
            if t.bytes().all(|b| b.is_ascii_digit()) && n.bytes().all(|b| b.is_ascii_digit()) =>
        {
            name
        }
        _ => id,
    }
}

/// An executor thread's name taken apart: `Thread-40-busy-executor[1, 2]` → (`busy`, 1, 2).
pub fn parse_executor_thread(name: &str) -> Option<(&str, i64, i64)> {
    let rest = name.strip_prefix("Thread-")?;
    let (n, rest) = rest.split_once('-')?;
    n.parse::<u64>().ok()?;
    let (component, tasks) = rest.rsplit_once("-executor[")?;
    let tasks = tasks.strip_suffix(']')?;
    let (a, b) = tasks.split_once(", ").or_else(|| tasks.split_once(' '))?;
    let (a, b) = (a.trim().parse().ok()?, b.trim().parse().ok()?);
    (!component.is_empty() && a <= b).then_some((component, a, b))
}

/// One executor found in the dump.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Executor {
    /// Its component.
    pub component: String,
    /// Its first and last task.
    pub tasks: (i64, i64),
    /// Its thread.
    pub thread: ThreadRef,
}

/// The worker JVM's executors as of the last dump.
#[derive(Clone)]
struct ExecutorMap {
    pid: u32,
    executors: Vec<Executor>,
    /// The live topologies then.
    topologies: BTreeSet<String>,
    taken: Instant,
    /// How the executors waited then.
    idle: IdleWait,
}

/// The driver for the Storm workers on this machine that report into one metrics directory.
pub struct StormDriver {
    name: String,
    /// The metrics directory and its last listing.
    dir: MetricDir,
    /// The worker JVM's pid when configured; found from the thread names otherwise.
    pid: Option<u32>,
    map: Option<ExecutorMap>,
    warnings: BTreeSet<String>,
    /// The spouts as the last observation saw them.
    sources: Option<SourceLoad>,
    /// The worker's threads, listed every round: a mapped thread gone shows as a change.
    census: ThreadCensus,
    /// The mapped threads' CPU clocks, kept open.
    clocks: CpuClocks,
    /// The mapped threads' start times, each confirmed by a file kept open.
    seen: SeenThreads,
    /// The topology last built from the executor map and the listing.
    built: Option<Built>,
    /// Thread dumps taken so far.
    dumps: u64,
    /// Raised when the middleware stops: a dump under way gives up ([`Driver::give_up_on`]).
    stop: Arc<AtomicBool>,
    /// Whether the user was told that the reporter writes too seldom ([`slow_reporter`]).
    warned_period: bool,
    /// What a spout's `queue_len` reports.
    source_queue: SourceQueue,
}

/// An [`SpeTopology`] built from the executor map taken at `taken` and the listing `files`, and
/// per physical operator its tasks' files.
struct Built {
    taken: Instant,
    files: Arc<LiveFiles>,
    topology: SpeTopology,
    task_files: Vec<Vec<usize>>,
}

impl StormDriver {
    /// A driver reading Storm's CSV metrics from `dir`, known as `name`; `pid` is the worker JVM
    /// (found by its threads' names when `None`).
    pub fn new(name: &str, dir: &Path, pid: Option<u32>) -> Result<Self, DriverError> {
        if !dir.is_dir() {
            return Err(DriverError::Config(format!(
                "the metrics directory {} does not exist; give the csv.log.dir of Storm's CsvStormReporter \
                 (topology.metrics.reporters)",
                dir.display()
            )));
        }
        Ok(StormDriver {
            name: name.to_string(),
            dir: MetricDir::new(dir),
            pid,
            map: None,
            warnings: BTreeSet::new(),
            sources: None,
            census: ThreadCensus::new(),
            clocks: CpuClocks::new(),
            seen: SeenThreads::new(),
            built: None,
            dumps: 0,
            stop: Arc::default(),
            warned_period: false,
            source_queue: SourceQueue::default(),
        })
    }

    /// Reports a spout's backlog as its `queue_len` as `source_queue` says (capped by default).
    pub fn source_queue(self, source_queue: SourceQueue) -> Self {
        StormDriver { source_queue, ..self }
    }

    fn warn_once(&mut self, text: String) {
        if self.warnings.insert(text.clone()) {
            eprintln!("moirai schedule: warning: SPE '{}': {text}", self.name);
        }
    }

    /// The worker JVM: configured, or the one of the owner's `java` processes that runs Storm
    /// executors (threads named `Thread-<n>-…`; the kernel keeps 15 bytes of a name) — when
    /// several do, the one started for a live topology of the directory ([`choose_worker`]).
    fn find_jvm(&self, owner: u32, topologies: &BTreeSet<String>) -> Result<u32, String> {
        if let Some(pid) = self.pid {
            return Ok(pid);
        }
        let candidates = java_processes()?
            .into_iter()
            .filter(|(pid, _)| moirai_os::identity::owner(*pid).is_some_and(|(uid, _)| uid == owner))
            .filter(|(_, names)| {
                names.iter().any(|n| {
                    n.strip_prefix("Thread-")
                        .and_then(|r| r.split_once('-'))
                        .is_some_and(|(d, _)| !d.is_empty() && d.bytes().all(|b| b.is_ascii_digit()))
                })
            })
            .map(|(pid, _)| {
                let cmdline = std::fs::read(format!("/proc/{pid}/cmdline")).unwrap_or_default();
                (pid, String::from_utf8_lossy(&cmdline).replace('\0', " "))
            })
            .collect();
        choose_worker(candidates, topologies, self.dir.path())
            .map_err(|e| format!("{e} (user {owner} owns the directory)"))
    }

    fn take_map(
        &mut self,
        owner: u32,
        topologies: &BTreeSet<String>,
    ) -> Result<(u32, Vec<Executor>, IdleWait), String> {
        let pid = self.find_jvm(owner, topologies)?;
        let dump = thread_dump(pid, &self.stop)?;
        self.dumps += 1;
        let idle = idle_wait_in_dump(&dump);
        // The files of the last map's threads are closed: only this map's are followed.
        self.seen = SeenThreads::new();
        let mut executors = Vec::new();
        for (name, tid) in parse_thread_dump(&dump) {
            let Some((component, a, b)) = parse_executor_thread(&name) else { continue };
            if component.starts_with("__") {
                continue;
            }
            if let Some(thread) = stamp(&mut self.seen, pid, [tid]).pop() {
                executors.push(Executor { component: component.to_string(), tasks: (a, b), thread });
            }
        }
        executors.sort_by(|x, y| (&x.component, x.tasks).cmp(&(&y.component, y.tasks)));
        Ok((pid, executors, idle))
    }
}

/// How the topology's executors wait when idle, from the stacks of a thread dump: executors of
/// the topology's own components (not Storm's `__system` & co.) seen inside
/// `WaitStrategyProgressive.idle` (Storm's default: after every tuple it returns at once, then
/// naps in `parkNanos(1)` a thousand times before it sleeps) spin; inside `WaitStrategyPark.idle`
/// they park. A dump in which no executor was idle says nothing.
pub fn idle_wait_in_dump(dump: &str) -> IdleWait {
    let (mut progressive, mut park) = (0, 0);
    let mut executor = false;
    for line in dump.lines() {
        if let Some(header) = line.strip_prefix('"') {
            let name = header.rsplit_once('"').map_or("", |(n, _)| n);
            executor = parse_executor_thread(name).is_some_and(|(c, _, _)| !c.starts_with("__"));
        } else if executor {
            let frame = line.trim_start();
            if frame.starts_with("at org.apache.storm.policy.WaitStrategyProgressive.idle(") {
                progressive += 1;
            } else if frame.starts_with("at org.apache.storm.policy.WaitStrategyPark.idle(") {
                park += 1;
            }
        }
    }
    if progressive > 0 {
        IdleWait::Spins(format!(
            "a thread dump shows {progressive} executor(s) idling in Storm's default WaitStrategyProgressive, which \
             polls after naps of a few microseconds; set topology.bolt.wait.strategy, topology.spout.wait.strategy and \
             topology.backpressure.wait.strategy to org.apache.storm.policy.WaitStrategyPark (moirai's Storm jobs: \
             --wait-strategy park)"
        ))
    } else if park > 0 {
        IdleWait::Parks
    } else {
        IdleWait::Unknown(format!(
            "no executor was idle in the last thread dump, so how they wait is not known yet (read again within {}s)",
            IDLE_RETRY.as_secs()
        ))
    }
}

/// The executors and live metric files as an [`SpeTopology`], and per physical operator its
/// tasks' files.
pub fn to_spe_topology(
    name: &str,
    pid: u32,
    executors: &[Executor],
    files: &[(PathBuf, MetricFile)],
) -> (SpeTopology, Vec<Vec<usize>>, Vec<String>) {
    // Component → topology, from the files; a component in two live topologies is ambiguous
    // (their threads carry no topology id) and left out.
    let mut topology_of: BTreeMap<&str, BTreeSet<&str>> = BTreeMap::new();
    for (_, f) in files {
        topology_of.entry(f.component.as_str()).or_default().insert(f.topology.as_str());
    }
    let mut ambiguous = Vec::new();
    let mut queries: BTreeSet<&str> = BTreeSet::new();
    let component_topology: BTreeMap<&str, &str> = topology_of
        .iter()
        .filter_map(|(c, ts)| {
            if ts.len() > 1 {
                ambiguous.push(format!(
                    "component '{c}' runs in {} topologies of this worker ({}); its executors are not scheduled",
                    ts.len(),
                    ts.iter().copied().collect::<Vec<_>>().join(", ")
                ));
                return None;
            }
            let t = *ts.first()?;
            queries.insert(t);
            Some((*c, t))
        })
        .collect();
    // Edges between components, from execute counts.
    let mut inputs: BTreeMap<&str, BTreeSet<&str>> = BTreeMap::new();
    for (_, f) in files {
        if let StormMetric::Executed { from } = &f.metric {
            if component_topology.get(from.as_str()) == component_topology.get(f.component.as_str()) {
                inputs.entry(f.component.as_str()).or_default().insert(from.as_str());
            }
        }
    }
    let has_consumer: BTreeSet<&str> = inputs.values().flatten().copied().collect();
    let query_names: Vec<String> = queries.iter().map(|t| topology_name(t).to_string()).collect();
    let query_of = |c: &str| -> Option<String> {
        let t = component_topology.get(c)?;
        let i = queries.iter().position(|q| q == t)?;
        Some(query_names[i].clone())
    };
    let mut t = SpeTopology {
        name: name.to_string(),
        pid,
        queries: query_names.clone(),
        logical: Vec::new(),
        logical_edges: Vec::new(),
        physical: Vec::new(),
        physical_edges: Vec::new(),
    };
    let mut logical: BTreeMap<&str, usize> = BTreeMap::new();
    let mut physical_of: BTreeMap<&str, Vec<usize>> = BTreeMap::new();
    let mut task_files = Vec::new();
    let per_component: BTreeMap<&str, Vec<&Executor>> = executors.iter().fold(BTreeMap::new(), |mut m, e| {
        m.entry(e.component.as_str()).or_insert_with(Vec::new).push(e);
        m
    });
    for (component, execs) in &per_component {
        let Some(query) = query_of(component) else { continue };
        let kind = if !inputs.contains_key(component) {
            OpKind::Source
        } else if !has_consumer.contains(component) {
            OpKind::Sink
        } else {
            OpKind::Operator
        };
        let l = t.logical.len();
        t.logical.push(LogicalOperator { name: component.to_string(), query: query.clone(), kind });
        logical.insert(component, l);
        for (i, e) in execs.iter().enumerate() {
            physical_of.entry(component).or_default().push(t.physical.len());
            t.physical.push(PhysicalOperator {
                name: format!("{component} ({}/{})", i + 1, execs.len()),
                query: query.clone(),
                logical: vec![l],
                instance: i,
                threads: vec![e.thread],
            });
            let (a, b) = e.tasks;
            task_files.push(
                files
                    .iter()
                    .enumerate()
                    .filter(|(_, (_, f))| f.component == *component && (a..=b).contains(&f.task))
                    .map(|(k, _)| k)
                    .collect(),
            );
        }
    }
    for (to, froms) in &inputs {
        for from in froms {
            if let (Some(&u), Some(&v)) = (logical.get(from), logical.get(to)) {
                t.logical_edges.push((u, v));
                for &a in &physical_of[from] {
                    for &b in &physical_of[to] {
                        t.physical_edges.push((a, b));
                    }
                }
            }
        }
    }
    t.logical_edges.sort_unstable();
    t.physical_edges.sort_unstable();
    (t, task_files, ambiguous)
}

/// An executor's counters, from its tasks' files.
#[derive(Clone, Copy, Debug, Default, PartialEq)]
pub struct ExecutorCounters {
    /// Σ execute counts.
    pub executed: f64,
    /// Σ emit counts.
    pub emitted: f64,
    /// Σ transfer counts.
    pub transferred: f64,
    /// The receive queue's population (the largest of its tasks' reports: they share it).
    pub receive_queue: f64,
    /// Σ `pendingRecords`, when any task reports it.
    pub pending: Option<f64>,
}

/// What to tell the user when Storm's reporter writes its files every `period` (as the times in
/// them show), if that is too seldom for the middleware: longer than a second, the policies see
/// queues that old and the activation rule rates that coarse. Storm's reporters write every
/// 10 s unless `report.period` says otherwise. The times are whole seconds, so a period of 1 s
/// can read up to 1.5 s ([`CsvTail`](super::csv_tail::CsvTail::period)): only more is named.
pub fn slow_reporter(period: Duration) -> Option<String> {
    (period > Duration::from_millis(1500)).then(|| {
        format!(
            "Storm's metrics reporter writes every {:.0} s (Storm's default is 10 s), so the policies see queues \
             that old and the activation rule cannot tell a fall of the input from the reporter's steps before \
             it has seen several; set report.period: 1 and report.period.units: SECONDS for the \
             CsvStormReporter in topology.metrics.reporters",
            period.as_secs_f64()
        )
    })
}

/// Sums an executor's files, whose values `value` reads by their index in `files`.
pub fn executor_counters(
    files: &[(PathBuf, MetricFile)],
    own: &[usize],
    mut value: impl FnMut(usize) -> Option<f64>,
) -> ExecutorCounters {
    let mut c = ExecutorCounters::default();
    for &k in own {
        let f = &files[k].1;
        let Some(v) = value(k) else { continue };
        match f.metric {
            StormMetric::ReceiveQueue => c.receive_queue = c.receive_queue.max(v),
            StormMetric::Executed { .. } => c.executed += v,
            StormMetric::Emitted => c.emitted += v,
            StormMetric::Transferred => c.transferred += v,
            StormMetric::Pending => *c.pending.get_or_insert(0.0) += v,
        }
    }
    c
}

impl Driver for StormDriver {
    fn spe(&self) -> &str {
        &self.name
    }

    fn kind(&self) -> &'static str {
        "storm"
    }

    fn provides(&self) -> BTreeSet<Metric> {
        [Metric::TuplesIn, Metric::TuplesOut, Metric::QueueLen, Metric::CpuNs].into()
    }

    fn idle_wait(&self) -> IdleWait {
        match &self.map {
            Some(m) => m.idle.clone(),
            None => IdleWait::Unknown("no thread dump taken yet".into()),
        }
    }

    fn observe(&mut self, needed: &[Metric]) -> Result<Observation, DriverError> {
        let dir = self.dir.owner().map_err(DriverError::Interface)?;
        let owner = dir.0;
        // Threads first: the component ids they name are what the file names are parsed against.
        let components: BTreeSet<String> =
            self.map.iter().flat_map(|m| m.executors.iter().map(|e| e.component.clone())).collect();
        // The worker's threads changed: a mapped one may be gone (looked for below). The files
        // are listed again only if so (after the new dump), or when the directory changed.
        let threads_changed = self.map.as_ref().is_some_and(|m| self.census.refresh(m.pid));
        let (mut topologies, mut files) = self
            .dir
            .live(dir, &components.iter().map(String::as_str).collect(), false)
            .map_err(DriverError::Interface)?;
        // The dump is taken again when a mapped thread is gone, when topologies came or went, and
        // (every few seconds) while a live topology has no executor mapped — deploying, or the
        // files of another topology of this owner in the directory.
        let stale = match &self.map {
            None => true,
            Some(m) => {
                let mapped: BTreeSet<&str> = files.iter().map(|(_, f)| f.topology.as_str()).collect();
                // Looked for (one stat per executor) only when the JVM's thread set changed.
                (threads_changed && any_gone(&mut self.seen, m.pid, m.executors.iter().map(|e| &e.thread)))
                    || m.topologies != topologies
                    || (mapped.len() < topologies.len() && m.taken.elapsed() >= DUMP_RETRY)
                    || (matches!(m.idle, IdleWait::Unknown(_)) && m.taken.elapsed() >= IDLE_RETRY)
            }
        };
        if stale {
            let (pid, executors, idle) = match self.take_map(owner, &topologies) {
                Ok(found) => found,
                Err(e) => {
                    self.warn_once(format!("{e}; its executors are not scheduled until a thread dump succeeds"));
                    (self.pid.unwrap_or(0), Vec::new(), IdleWait::Unknown(format!("no thread dump: {e}")))
                }
            };
            let components = executors.iter().map(|e| e.component.as_str()).collect();
            (topologies, files) = self.dir.live(dir, &components, true).map_err(DriverError::Interface)?;
            self.map = Some(ExecutorMap { pid, executors, topologies, taken: Instant::now(), idle });
        }
        let map = self.map.as_ref().expect("set above");
        let pid = map.pid;
        // Built again only when the dump or the listing is new (the same listing is the same Arc).
        let reuse = self.built.as_ref().is_some_and(|b| b.taken == map.taken && Arc::ptr_eq(&b.files, &files));
        if !reuse {
            let (topology, task_files, ambiguous) = to_spe_topology(&self.name, pid, &map.executors, &files);
            self.built = Some(Built { taken: map.taken, files: Arc::clone(&files), topology, task_files });
            for w in ambiguous {
                self.warn_once(w);
            }
        }
        let built = self.built.as_ref().expect("set above");
        let (topology, task_files) = (built.topology.clone(), &built.task_files);
        let mut samples = Vec::new();
        let mut sources = SourceLoad::default();
        for (op, own) in task_files.iter().enumerate() {
            let dir = &mut self.dir;
            let c = executor_counters(&files, own, |k| dir.value(k));
            let kind = topology.logical[topology.physical[op].logical[0]].kind;
            if kind == OpKind::Source {
                sources.add(c.pending, c.emitted);
            } else {
                sources.add_queued(c.receive_queue);
            }
            for &m in needed {
                let value = match m {
                    Metric::TuplesIn if kind == OpKind::Source => c.emitted,
                    Metric::TuplesIn => c.executed,
                    Metric::TuplesOut if kind == OpKind::Sink => c.executed,
                    Metric::TuplesOut => c.transferred,
                    Metric::QueueLen if kind == OpKind::Source => c.pending.unwrap_or(0.0),
                    Metric::QueueLen => c.receive_queue,
                    Metric::CpuNs => self.clocks.cpu_ns(pid, &topology.physical[op].threads),
                    _ => continue,
                };
                samples.push((op, m, value));
            }
        }
        sources.counter_period = self.dir.period();
        if let Some(w) = sources.counter_period.and_then(slow_reporter) {
            if !self.warned_period {
                self.warned_period = true;
                self.warn_once(w);
            }
        }
        self.sources = Some(sources);
        self.clocks.sweep();
        let mut observation = Observation { topology, samples };
        if self.source_queue == SourceQueue::Capped {
            cap_source_queues(&mut observation);
        }
        Ok(observation)
    }

    fn thread_dumps(&self) -> u64 {
        self.dumps
    }
    fn give_up_on(&mut self, stop: &Arc<AtomicBool>) {
        self.stop = stop.clone();
    }

    fn sources(&self) -> Option<SourceLoad> {
        self.sources
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A directory of its own under the system's temporary directory, removed when dropped.
    struct Scratch(PathBuf);

    impl Scratch {
        fn new(tag: &str) -> Scratch {
            let dir = std::env::temp_dir().join(format!("moirai-storm-{tag}-{}", std::process::id()));
            let _ = std::fs::remove_dir_all(&dir);
            std::fs::create_dir_all(&dir).unwrap();
            Scratch(dir)
        }

        fn path(&self) -> &Path {
            &self.0
        }
    }

    impl Drop for Scratch {
        fn drop(&mut self) {
            let _ = std::fs::remove_dir_all(&self.0);
        }
    }

    const COMPONENTS: [&str; 4] = ["src", "busy", "sink", "my.dotted"];

    fn parse(file: &str) -> Option<MetricFile> {
        parse_metric_file(file, COMPONENTS)
    }

    fn file(topology: &str, component: &str, task: i64, metric: StormMetric) -> MetricFile {
        MetricFile { topology: topology.into(), component: component.into(), task, metric }
    }

    #[test]
    fn metric_file_names_of_storm_2_8_are_taken_apart() {
        let t = "probe-1-1795534864";
        assert_eq!(
            parse(&format!("storm.worker.{t}.localhost.busy.1.1024-receive-queue-population.csv")),
            Some(file(t, "busy", 1, StormMetric::ReceiveQueue))
        );
        assert_eq!(
            parse(&format!("storm.worker.{t}.localhost.busy.default.2.1024-__execute-count-src:default.csv")),
            Some(file(t, "busy", 2, StormMetric::Executed { from: "src".into() }))
        );
        assert_eq!(
            parse(&format!("storm.worker.{t}.node-1.example.org.src.default.4.6700-__emit-count-default.csv")),
            Some(file(t, "src", 4, StormMetric::Emitted))
        );
        assert_eq!(
            parse(&format!("storm.worker.{t}.h.sink.default.3.1024-__transfer-count-default.csv")),
            Some(file(t, "sink", 3, StormMetric::Transferred))
        );
        assert_eq!(
            parse(&format!("storm.topology.{t}.localhost.src.4.1024-pendingRecords.csv")),
            Some(file(t, "src", 4, StormMetric::Pending))
        );
        assert_eq!(
            parse(&format!("storm.worker.{t}.h.my.dotted.7.1024-receive-queue-population.csv")),
            Some(file(t, "my.dotted", 7, StormMetric::ReceiveQueue)),
            "dotted component ids are matched against the known ones"
        );
        for other in [
            format!("storm.worker.{t}.localhost.busy.default.1.1024-__execute-count-src:default.m1_rate.csv"),
            format!("storm.worker.{t}.localhost.busy.1.1024-receive-queue-pct_full.csv"),
            format!("storm.worker.{t}.localhost.__system.-1.1024-receive-queue-population.csv"),
            format!("storm.worker.{t}.localhost.busy.__ack_init.1.1024-__emit-count-__ack_init.csv"),
            format!("storm.worker.{t}.localhost.sink.default.3.1024-__execute-count-__system:__tick.csv"),
            format!("storm.worker.{t}.localhost.unknown.1.1024-receive-queue-population.csv"),
            format!("storm.topology.{t}.localhost.__system.-1.1024-CGroupCpu.sys-ms.csv"),
            "notes.txt".to_string(),
        ] {
            assert_eq!(parse(&other), None, "{other}");
        }
    }

    #[test]
    fn executor_threads_of_storm_1_and_2_are_taken_apart() {
        assert_eq!(parse_executor_thread("Thread-40-busy-executor[2, 2]"), Some(("busy", 2, 2)));
        assert_eq!(parse_executor_thread("Thread-7-syn0-op1-executor[3, 5]"), Some(("syn0-op1", 3, 5)));
        assert_eq!(parse_executor_thread("Thread-37-__system-executor[-1, -1]"), Some(("__system", -1, -1)));
        assert_eq!(parse_executor_thread("Thread-12-bolt-executor[2 2]"), Some(("bolt", 2, 2)), "Storm 1.x");
        for other in ["Thread-13", "Thread-x-busy-executor[1, 1]", "main", "Thread-4-busy-executor[3, 1]"] {
            assert_eq!(parse_executor_thread(other), None, "{other}");
        }
    }

    #[test]
    fn how_executors_wait_is_read_from_their_stacks() {
        let dump = |strategy: &str, system: &str| {
            format!(
                "\"Thread-33-__system-executor[-1, -1]\" #206 prio=5 nid=0x3c51 waiting on condition\n\
                 \tat jdk.internal.misc.Unsafe.park(java.base@17/Native Method)\n\
                 \tat org.apache.storm.policy.{system}.idle(WaitStrategy.java:55)\n\
                 \"Thread-38-syn0-op1-executor[1, 1]\" #211 prio=5 nid=0x3c56 runnable\n\
                 \tat jdk.internal.misc.Unsafe.park(java.base@17/Native Method)\n\
                 \tat java.util.concurrent.locks.LockSupport.parkNanos(java.base@17/LockSupport.java:410)\n\
                 \tat org.apache.storm.policy.{strategy}.idle(WaitStrategy.java:66)\n\
                 \tat org.apache.storm.executor.bolt.BoltExecutor$1.call(BoltExecutor.java:180)\n\
                 \"main\" #1 prio=5 nid=0x1 waiting\n"
            )
        };
        let spins = idle_wait_in_dump(&dump("WaitStrategyProgressive", "WaitStrategyPark"));
        assert!(
            matches!(&spins, IdleWait::Spins(why) if why.contains("1 executor(s)") && why.contains("--wait-strategy park")),
            "{spins:?}"
        );
        assert_eq!(
            idle_wait_in_dump(&dump("WaitStrategyPark", "WaitStrategyProgressive")),
            IdleWait::Parks,
            "the system executor does not count"
        );
        let busy = dump("Other", "WaitStrategyPark");
        assert!(matches!(idle_wait_in_dump(&busy), IdleWait::Unknown(_)), "no executor idle: unknown");
    }

    #[test]
    fn topology_names_drop_the_counter_and_the_epoch() {
        assert_eq!(topology_name("moirai-syn-1-1795534864"), "moirai-syn");
        assert_eq!(topology_name("probe-12-1795534864"), "probe");
        assert_eq!(topology_name("odd"), "odd");
    }

    #[test]
    fn the_last_line_of_a_csv_is_read() {
        let dir = Scratch::new("csv");
        let path = dir.path().join("m.csv");
        let mut text = "t,count\n".to_string();
        for i in 0..100 {
            text.push_str(&format!("{},{}\n", 1795534869 + i, i * 20));
        }
        std::fs::write(&path, &text).unwrap();
        assert_eq!(last_value(&path), Some(1980.0));
        std::fs::write(&path, "t,value\n").unwrap();
        assert_eq!(last_value(&path), None, "a header only");
        std::fs::write(&path, "t,value\n1795534868,0.5\n").unwrap();
        assert_eq!(last_value(&path), Some(0.5));
    }

    fn executor(component: &str, a: i64, b: i64, tid: i32) -> Executor {
        Executor { component: component.into(), tasks: (a, b), thread: ThreadRef { tid, start_ticks: 1 } }
    }

    #[test]
    fn executors_and_files_become_a_topology_with_edges_from_execute_counts() {
        let dir = Scratch::new("topology");
        let t = "moirai-syn-1-1795534864";
        let mut files = Vec::new();
        let mut add = |component: &str, task: i64, metric: StormMetric, value: f64| {
            let path = dir.path().join(format!("{}.csv", files.len()));
            std::fs::write(&path, format!("t,v\n1,{value}\n")).unwrap();
            files.push((path, file(t, component, task, metric)));
        };
        add("src", 4, StormMetric::Emitted, 1000.0);
        add("src", 4, StormMetric::Transferred, 1000.0);
        add("src", 4, StormMetric::Pending, 70.0);
        for task in [1, 2] {
            add("busy", task, StormMetric::Executed { from: "src".into() }, 400.0);
            add("busy", task, StormMetric::Transferred, 380.0);
            add("busy", task, StormMetric::ReceiveQueue, 30.0 + task as f64);
        }
        add("sink", 3, StormMetric::Executed { from: "busy".into() }, 760.0);
        add("sink", 3, StormMetric::ReceiveQueue, 5.0);
        // busy: one executor with tasks 1 and 2; another component's executor with no files.
        let executors = [
            executor("busy", 1, 2, 11),
            executor("sink", 3, 3, 12),
            executor("src", 4, 4, 13),
            executor("gone", 5, 5, 14),
        ];
        let (top, task_files, ambiguous) = to_spe_topology("storm", 42, &executors, &files);
        assert!(ambiguous.is_empty());
        assert_eq!(top.queries, vec!["moirai-syn"]);
        let names: Vec<(&str, OpKind)> = top.logical.iter().map(|l| (l.name.as_str(), l.kind)).collect();
        assert_eq!(names, vec![("busy", OpKind::Operator), ("sink", OpKind::Sink), ("src", OpKind::Source)]);
        assert_eq!(top.logical_edges, vec![(0, 1), (2, 0)]);
        assert_eq!(top.physical_edges, vec![(0, 1), (2, 0)]);
        assert_eq!(top.physical[0].name, "busy (1/1)");
        assert_eq!(top.physical[0].threads[0].tid, 11);
        let value = |k: usize| last_value(&files[k].0);
        let busy = executor_counters(&files, &task_files[0], value);
        assert_eq!((busy.executed, busy.transferred, busy.receive_queue), (800.0, 760.0, 32.0));
        assert_eq!(busy.pending, None);
        assert_eq!(executor_counters(&files, &task_files[2], value).pending, Some(70.0));
    }

    #[test]
    fn a_component_in_two_live_topologies_is_left_out() {
        let dir = Scratch::new("ambiguous");
        let path = dir.path().join("x.csv");
        std::fs::write(&path, "t,v\n1,1\n").unwrap();
        let files = vec![
            (path.clone(), file("a-1-1", "busy", 1, StormMetric::ReceiveQueue)),
            (path.clone(), file("b-1-1", "busy", 1, StormMetric::ReceiveQueue)),
            (path, file("b-1-1", "src", 2, StormMetric::Emitted)),
        ];
        let (top, _, ambiguous) =
            to_spe_topology("storm", 1, &[executor("busy", 1, 1, 5), executor("src", 2, 2, 6)], &files);
        assert_eq!(top.physical.len(), 1);
        assert_eq!(top.physical[0].name, "src (1/1)");
        assert!(ambiguous[0].contains("component 'busy' runs in 2 topologies"), "{ambiguous:?}");
    }

    #[test]
    fn the_worker_is_the_only_jvm_or_the_one_started_for_the_directory() {
        let topologies: BTreeSet<String> = ["moirai-syn-1-17".to_string()].into();
        let dir = Path::new("/tmp/m1");
        let choose =
            |c: &[(u32, &str)]| choose_worker(c.iter().map(|(p, s)| (*p, s.to_string())).collect(), &topologies, dir);
        assert_eq!(choose(&[(7, "java -cp x Other")]), Ok(7), "the only one");
        let worker = "java -Dstorm.id=moirai-syn-1-17 org.apache.storm.daemon.worker.Worker moirai-syn-1-17 s 6700";
        assert_eq!(choose(&[(7, "java Other"), (8, worker)]), Ok(8), "a cluster's worker names its topology");
        let job = "java -cp j moirai.storm.Run syn --metrics-dir /tmp/m1";
        assert_eq!(choose(&[(7, "java moirai.storm.Run syn --metrics-dir /tmp/m2"), (8, job)]), Ok(8));
        let e = choose(&[(7, "java A"), (8, "java B")]).unwrap_err();
        assert!(e.contains("several JVMs") && e.contains("[7, 8]") && e.contains("set `pid`"), "{e}");
        let e = choose(&[(7, worker), (8, worker)]).unwrap_err();
        assert!(e.contains("several JVMs"), "two workers of one topology on this node: {e}");
        assert!(choose(&[]).unwrap_err().contains("no JVM on this machine runs Storm executors for /tmp/m1"));
    }

    #[test]
    fn a_reporter_slower_than_a_second_is_named_with_the_setting_to_change() {
        assert_eq!(slow_reporter(Duration::from_secs(1)), None, "as moirai's jobs set it");
        assert_eq!(slow_reporter(Duration::from_millis(1400)), None, "1 s read in whole seconds over two steps");
        let w = slow_reporter(Duration::from_secs(10)).expect("Storm's default period");
        assert!(w.contains("every 10 s") && w.contains("report.period: 1"), "{w}");
    }

    #[test]
    fn a_missing_metrics_directory_is_named() {
        let e = StormDriver::new("storm", Path::new("/nonexistent/metrics"), None).err().unwrap();
        assert!(matches!(e, DriverError::Config(_)), "{e:?}");
        let e = e.to_string();
        assert!(e.contains("/nonexistent/metrics does not exist") && e.contains("csv.log.dir"), "{e}");
    }
}

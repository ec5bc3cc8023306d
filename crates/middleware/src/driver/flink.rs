//! The driver for Apache Flink (1.x and 2.x): jobs, vertices and metrics from its REST API, and the
//! Linux thread of every subtask from a thread dump of the TaskManager's JVM.
//!
//! - **Topology.** Every RUNNING job is a query. A job vertex is a chain of one or more operators
//!   (`"A -> B"`, split into logical operators); each subtask is a physical operator named as Flink
//!   names its task, `"<vertex> (i/n)"`. Job edges connect vertices; a FORWARD edge links subtask i to
//!   subtask i, every other ship strategy links all to all.
//! - **Threads.** `jcmd <pid> Thread.print` lists every Java thread with its native id (`nid=0x…`,
//!   the Linux tid). A subtask runs on its task thread `"<vertex> (i/n)#attempt"` and on helper
//!   threads named after it: `"OutputFlusher for …"`, `"System Time Trigger for …"`, and for a
//!   source either `"Time Trigger for …"` (a FLIP-27 source, the only kind in Flink 2.x: its reader
//!   works in the task thread itself) or `"Legacy Source Thread - …"` (where a legacy
//!   `SourceFunction` works, Flink 1.x). The names are the same in 1.20 and 2.3 (checked on live
//!   jobs of both); a Sink v2 vertex is `"<name>: Writer"`. A dump costs ~0.3 s of CPU, so the map
//!   is kept and taken again only when the jobs change or a mapped thread is gone.
//! - **Metrics.** Raw counters, never Flink's 60 s moving averages: `numRecordsIn`/`numRecordsOut`
//!   per subtask, from which the middleware takes its own rates; a source's backlog from its
//!   `pendingRecords` gauge (FLIP-33's name for it, as Kafka and other FLIP-27 sources report it);
//!   CPU time of the mapped threads from `/proc`. `queue_len` is, by default, Flink's own
//!   `inputQueueLength`: network buffers queued at the subtask's inputs (for a source, its
//!   `pendingRecords` in buffers of the size it sends), also
//!   the primitive `input_buffers`. With `queue = "records"` it is in *records* instead: what the
//!   upstream subtasks sent this subtask (per the edge's ship strategy) minus what it took in, and a
//!   source's `pendingRecords`. Buffers are coarse and saturate at a channel's credit, which keeps
//!   QS's priority spread small; measured on a pipeline with one heavy operator, QS gained more
//!   with them (docs/schedule.md). In either unit, a source's queue counts at most as much as the
//!   fullest queue of the job's other operators ([`cap_source_queues`]) unless
//!   [`SourceQueue::Backlog`].
//!
//! With a TaskManager's Prometheus reporter named (`prometheus` in the `[[spe]]` table), the
//! counters come from one scrape of it per round instead ([`super::flink_prometheus`]); the REST
//! API is then read only when the scrape's set of subtasks changes (a job submitted or ended, a
//! subtask restarted), or every [`TOPOLOGY_REFRESH`].
//!
//! The REST calls, their fields and the metric names the driver reads are the same in Flink 1.20
//! and 2.3 (2.x adds fields, e.g. `job-type`, `pending-operators`, which are ignored).
//!
//! The JobManager fetches metrics from the TaskManagers lazily, at most every
//! `metrics.fetcher.update-interval` (10 s by default): set it to `1000` on the cluster (in
//! `flink-conf.yaml` up to 1.x, `config.yaml` in 2.x), or the policies see values up to 10 s old.
//! The driver warns once when the cluster's setting is above 1 s.
//!
//! In a cluster of several nodes, [`super::flink_node`] restricts the driver to the subtasks of
//! this node's TaskManager (`taskmanager` in the `[[spe]]` table).
//!
//! The parts: the REST API's documents and client in [`super::flink_rest`], thread names in
//! [`super::flink_threads`], the topology and the record accounting in
//! [`super::flink_topology`]; this file keeps the driver's state between rounds.

use std::collections::{BTreeMap, BTreeSet, HashMap};
use std::sync::atomic::AtomicBool;
use std::sync::Arc;
use std::time::{Duration, Instant};

use moirai_os::sighting::SeenThreads;
use moirai_sched::Metric;

use super::cpu_clocks::CpuClocks;
use super::flink_node::{Node, NodeState};
use super::flink_prometheus::{FlinkScrape, Scrape};
use super::jvm::{any_gone, comm_matches, java_processes, parse_thread_dump, pick_jvm, stamp, thread_dump};
use super::threads::ThreadCensus;
use super::{cap_source_queues, Driver, DriverError, Observation, SourceLoad};
use crate::config::{FlinkQueue, SourceQueue};

/// The gauge a source reports its backlog in (FLIP-33).
pub const PENDING_RECORDS: &str = "pendingRecords";

/// The least time between two dumps while some subtask has no thread yet (a job deploying).
const DUMP_RETRY: Duration = Duration::from_secs(5);
/// The least time between two listings of a source's metric names while none is a backlog.
const LIST_RETRY: Duration = Duration::from_secs(10);
/// With a Prometheus reporter: the longest time the topology is kept without reading the REST
/// API, however steady the scrape.
pub const TOPOLOGY_REFRESH: Duration = Duration::from_secs(30);

pub use super::flink_rest::*;
pub use super::flink_threads::*;
pub use super::flink_topology::*;

/// The JVM running the subtasks, and its threads as of the last dump.
struct ThreadMap {
    pid: u32,
    /// Jobs and vertices the map was taken for: (job id, vertex id, parallelism).
    signature: Vec<(String, String, usize)>,
    threads: SubtaskThreads,
    taken: Instant,
    /// A subtask's helper thread was born after the dump: the next dump maps it.
    unmapped_helpers: bool,
}

/// How the names of a subtask's helper threads begin in `/proc` (`comm`, 15 bytes at most):
/// `OutputFlusher for …`, `System Time Trigger for …`, `Time Trigger for …`, `Legacy Source Thread - …`.
const HELPER_PREFIXES: [&str; 4] = ["OutputFlusher f", "System Time Tri", "Time Trigger fo", "Legacy Source T"];

fn signature(jobs: &[Job]) -> Vec<(String, String, usize)> {
    jobs.iter().flat_map(|j| j.vertices.iter().map(|v| (j.id.clone(), v.id.clone(), v.parallelism))).collect()
}

/// Finds the JVM on this machine that runs the jobs' task threads, by the (cut) thread names in
/// `/proc`: `preferred` (the JVM serving the REST API, which in a local or MiniCluster setup is
/// the TaskManager too) if it runs any, else the `java` process with the most threads named like
/// a task `"<vertex> (i/n)#"`.
pub fn find_jvm(jobs: &[Job], preferred: Option<u32>) -> Result<u32, String> {
    find_jvm_of(jobs, preferred, &|_, _| true)
}

/// [`find_jvm`] by the threads of the subtasks `mine` accepts (vertex, subtask index) alone.
pub fn find_jvm_of(jobs: &[Job], preferred: Option<u32>, mine: &dyn Fn(&Vertex, usize) -> bool) -> Result<u32, String> {
    let expected: Vec<String> = jobs
        .iter()
        .flat_map(|j| j.vertices.iter())
        .flat_map(|v| {
            (1..=v.parallelism).filter(|i| mine(v, i - 1)).map(move |i| format!("{} ({i}/{})#", v.name, v.parallelism))
        })
        .collect();
    let scores = java_processes()?
        .into_iter()
        .map(|(pid, names)| (names.iter().filter(|n| expected.iter().any(|e| comm_matches(n, e))).count(), pid))
        .collect();
    let what =
        format!("a task of the running jobs ({})", jobs.iter().map(|j| j.name.as_str()).collect::<Vec<_>>().join(", "));
    pick_jvm(
        scores,
        preferred,
        &what,
        "is the TaskManager on another node? Run one middleware per node, or set `pid` in the [[spe]] table (one \
         table per TaskManager)",
    )
}

/// The process listening on the port of a loopback `url` (`http://127.0.0.1:8081`); `None` for
/// other hosts, or when it cannot be told (another user's process without root, `/proc`
/// unreadable: it is only a preference among the JVMs).
pub fn rest_port_owner(url: &str) -> Option<u32> {
    super::loopback_port(url).and_then(|port| moirai_os::identity::listening_pid(port).ok().flatten())
}

/// The driver for a Flink cluster's TaskManager on this machine.
pub struct FlinkDriver {
    name: String,
    rest: FlinkRest,
    /// The TaskManager's pid when configured; found from the thread names otherwise.
    pid: Option<u32>,
    map: Option<ThreadMap>,
    /// Per (job id, vertex id): the names of its `pendingRecords` gauges per subtask, once found,
    /// and when they were last looked for.
    pending: HashMap<(String, String), (BTreeMap<usize, String>, Instant)>,
    warnings: BTreeSet<String>,
    /// What `queue_len` reports.
    queue: FlinkQueue,
    /// What a source's `queue_len` reports.
    source_queue: SourceQueue,
    /// The JobManager's metric fetcher interval, once read (how old the REST API's counters
    /// can be; not read where a Prometheus reporter is).
    fetcher_interval: Option<Duration>,
    /// The sources as the last observation that read counters saw them.
    sources: Option<SourceLoad>,
    /// The running jobs' graphs, by job id (read once per job).
    jobs: HashMap<String, Job>,
    /// The TaskManager's threads, listed every round: a mapped thread gone shows as a change.
    census: ThreadCensus,
    /// The mapped threads' start times, each confirmed by a file kept open.
    seen: SeenThreads,
    /// The mapped threads' CPU clocks, kept open.
    clocks: CpuClocks,
    /// In a cluster of several nodes: this node's TaskManager, whose subtasks alone are scheduled.
    node: Option<Node>,
    /// The TaskManager's Prometheus reporter, read instead of the REST API's vertex metrics.
    scrape: Option<FlinkScrape>,
    /// With a reporter: the jobs as the REST API last listed them (after the node's filter), the
    /// scrape's subtask signature then, and when.
    topology: Option<(Vec<Job>, u64, Instant)>,
    /// Thread dumps taken so far.
    dumps: u64,
    /// Raised when the middleware stops: a dump under way gives up ([`Driver::give_up_on`]).
    stop: Arc<AtomicBool>,
}

impl FlinkDriver {
    /// A driver for the Flink cluster whose REST API is at `url`, known as `name`; `pid` is the
    /// TaskManager JVM on this machine (found by its thread names when `None`).
    pub fn new(name: &str, url: &str, pid: Option<u32>) -> Result<Self, DriverError> {
        Ok(FlinkDriver {
            name: name.to_string(),
            rest: FlinkRest::new(url).map_err(DriverError::Config)?,
            pid,
            map: None,
            pending: HashMap::new(),
            warnings: BTreeSet::new(),
            queue: FlinkQueue::default(),
            source_queue: SourceQueue::default(),
            fetcher_interval: None,
            sources: None,
            jobs: HashMap::new(),
            census: ThreadCensus::new(),
            seen: SeenThreads::new(),
            clocks: CpuClocks::new(),
            node: None,
            scrape: None,
            topology: None,
            dumps: 0,
            stop: Arc::default(),
        })
    }

    /// Reads the subtasks' counters from the TaskManager's Prometheus reporter at `url`
    /// (`http://127.0.0.1:9249/metrics`), one scrape per round; `None`: from the REST API.
    pub fn prometheus(self, url: Option<&str>) -> Result<Self, DriverError> {
        let scrape = url.map(FlinkScrape::new).transpose().map_err(DriverError::Config)?;
        Ok(FlinkDriver { scrape, ..self })
    }

    /// The running jobs (this node's, in a cluster): from the REST API, or with a reporter the
    /// last ones listed while the scrape shows the same subtasks.
    fn running_jobs(&mut self, scraped: Option<&Scrape>) -> Result<Vec<Job>, DriverError> {
        let signature = scraped.map(Scrape::signature);
        if let (Some(sig), Some((jobs, seen, at))) = (signature, &self.topology) {
            if sig == *seen && at.elapsed() < TOPOLOGY_REFRESH {
                return Ok(jobs.clone());
            }
        }
        let mut jobs = self.rest.running_jobs_with(&mut self.jobs).map_err(DriverError::Interface)?;
        if let Some(node) = self.node.as_mut() {
            let name = &self.name;
            let mut say = |line: String| eprintln!("moirai schedule: SPE '{name}': {line}");
            // With this node's reporter, the subtasks it reports are this node's.
            let reported = scraped.map(|s| move |j: &str, v: &str, i: usize| s.has_subtask(j, v, i));
            let reported = reported.as_ref().map(|f| f as &dyn Fn(&str, &str, usize) -> bool);
            if let NodeState::Absent =
                node.refresh(&self.rest, &jobs, reported, &mut say).map_err(DriverError::Interface)?
            {
                // No TaskManager of this node: nothing here to schedule.
                jobs.clear();
            }
        }
        if let (Some(sig), Some(s)) = (signature, scraped) {
            let missing = jobs.iter().filter(|j| !j.vertices.iter().any(|v| s.has_vertex(&j.id, &v.id))).count();
            if missing == jobs.len() && !jobs.is_empty() && !s.is_empty() {
                let url = self.scrape.as_ref().map_or("", |c| c.url()).to_string();
                self.warn_once(format!(
                    "the Prometheus reporter at {url} reports none of the running jobs' subtasks: is it the reporter \
                     of this cluster's TaskManager on this node?"
                ));
            }
            self.topology = Some((jobs.clone(), sig, Instant::now()));
        }
        Ok(jobs)
    }

    /// Schedules only the subtasks of the TaskManager `wanted` names (its id, host or
    /// host:dataPort; see [`super::flink_node`]); `None`: every subtask found on this machine.
    pub fn taskmanager(self, wanted: Option<String>) -> Self {
        FlinkDriver { node: wanted.as_deref().map(Node::new), ..self }
    }

    /// Whether subtask `s` of `v` runs on this node (always, without a configured TaskManager).
    fn is_mine(&self, v: &Vertex, s: usize) -> bool {
        self.node.as_ref().is_none_or(|n| n.hosts(&v.name, s, v.parallelism))
    }

    /// Reports `queue` as `queue_len` (network buffers by default).
    pub fn queue(self, queue: FlinkQueue) -> Self {
        FlinkDriver { queue, ..self }
    }

    /// Reports a source's backlog as its `queue_len` as `source_queue` says (capped by default).
    pub fn source_queue(self, source_queue: SourceQueue) -> Self {
        FlinkDriver { source_queue, ..self }
    }

    fn warn_once(&mut self, text: String) {
        if self.warnings.insert(text.clone()) {
            eprintln!("moirai schedule: warning: SPE '{}': {text}", self.name);
        }
    }

    /// Whether the thread map must be taken again: another set of jobs, a mapped thread gone or
    /// replaced, or (at most every few seconds) a subtask with no thread yet.
    fn map_is_stale(&mut self, jobs: &[Job]) -> bool {
        let Some(map) = &self.map else { return true };
        if map.signature != signature(jobs) {
            return true;
        }
        // A thread that ended, or whose tid the kernel gave to another thread since the dump:
        // looked for (one stat per mapped thread) only when the JVM's thread set changed.
        let changed = self.census.refresh(map.pid);
        let gone = changed && any_gone(&mut self.seen, map.pid, map.threads.values().flatten());
        // A subtask's helper threads start after its task thread, some only when first needed
        // (a timer thread at the first timer): a dump taken in between lacks them. One born
        // since is looked up by its name in /proc (cut to 15 bytes, but the helpers' prefixes
        // fit).
        let helper_born = changed
            && self.census.born().iter().any(|&tid| {
                moirai_os::proc::thread_stat(map.pid, tid)
                    .is_ok_and(|t| HELPER_PREFIXES.iter().any(|p| t.name.starts_with(p)))
            });
        let missing = jobs.iter().flat_map(|j| j.vertices.iter()).any(|v| {
            (0..v.parallelism)
                .any(|s| self.is_mine(v, s) && !map.threads.contains_key(&(v.name.clone(), s, v.parallelism)))
        });
        let Some(map) = self.map.as_mut() else { return true };
        map.unmapped_helpers |= helper_born;
        gone || ((missing || map.unmapped_helpers) && map.taken.elapsed() >= DUMP_RETRY)
    }

    /// Takes the thread map again. When that fails (no JVM found, jcmd refused), the subtasks
    /// stay without threads — nothing of theirs is touched — and the dump is tried again after
    /// [`DUMP_RETRY`], not every tick.
    fn refresh_map(&mut self, jobs: &[Job]) {
        let (pid, threads) = match self.take_map(jobs) {
            Ok(found) => found,
            Err(e) => {
                self.warn_once(format!("{e}; its subtasks are not scheduled until a thread dump succeeds"));
                (self.map.as_ref().map_or(0, |m| m.pid), SubtaskThreads::new())
            }
        };
        self.map = Some(ThreadMap {
            pid,
            signature: signature(jobs),
            threads,
            taken: Instant::now(),
            unmapped_helpers: false,
        });
    }

    fn take_map(&mut self, jobs: &[Job]) -> Result<(u32, SubtaskThreads), String> {
        if self.node.as_ref().is_some_and(Node::runs_nothing) {
            // Every subtask runs on other nodes: no JVM here to look into.
            return Ok((0, SubtaskThreads::new()));
        }
        let pid = match (self.pid, &self.map) {
            (Some(pid), _) => pid,
            (None, Some(map))
                if map.pid != 0
                    && std::path::Path::new(&format!("/proc/{}", map.pid)).exists()
                    && map.signature == signature(jobs) =>
            {
                map.pid
            }
            (None, _) => {
                // This node's TaskManager by its data port first: thread names in /proc are cut
                // to 15 bytes, which may hide the subtask index that tells two TaskManagers apart.
                let by_port = match &self.node {
                    Some(node) => node.jvm(java_processes()?.into_iter().map(|(pid, _)| pid)),
                    None => None,
                };
                match by_port {
                    Some(pid) => pid,
                    None => find_jvm_of(jobs, rest_port_owner(self.rest.url()), &|v, s| self.is_mine(v, s))?,
                }
            }
        };
        let dump = thread_dump(pid, &self.stop)?;
        self.dumps += 1;
        let mut index = index_threads(&parse_thread_dump(&dump));
        if let Some(node) = &self.node {
            // Another TaskManager's subtasks are never this node's, whatever runs in this JVM.
            node.retain(&mut index);
        }
        // The files of the last map's threads are closed: only this map's are followed.
        self.seen = SeenThreads::new();
        let threads = index
            .into_iter()
            .map(|(key, threads)| (key, stamp(&mut self.seen, pid, threads.into_iter().map(|(_, tid)| tid))))
            .collect();
        for job in jobs {
            let mut names = BTreeSet::new();
            for v in &job.vertices {
                if !names.insert(v.name.as_str()) {
                    self.warn_once(format!(
                        "job '{}' has two vertices named '{}': Flink gives their threads the same names, so \
                         neither is scheduled; name the operators apart (.name(...))",
                        job.name, v.name
                    ));
                }
            }
        }
        Ok((pid, threads))
    }

    /// The subtasks' counters of one job, from one snapshot of the JobManager's metric store:
    /// each vertex is a request of its own, so when the store refreshed meanwhile (the first
    /// vertex reads differently at the end), all are read once more.
    fn counters(&mut self, job: &Job) -> Result<Vec<Vec<SubtaskCounters>>, String> {
        let first = self.read_counters(job)?;
        if job.vertices.len() < 2 {
            return Ok(first);
        }
        let again = self.vertex_counters(job, &job.vertices[0])?;
        if again == first[0] {
            Ok(first)
        } else {
            self.read_counters(job)
        }
    }

    fn read_counters(&mut self, job: &Job) -> Result<Vec<Vec<SubtaskCounters>>, String> {
        job.vertices.iter().map(|v| self.vertex_counters(job, v)).collect()
    }

    fn vertex_counters(&mut self, job: &Job, v: &Vertex) -> Result<Vec<SubtaskCounters>, String> {
        let pending = if v.inputs.is_empty() { self.pending_names(job, v)? } else { BTreeMap::new() };
        let mut names = Vec::with_capacity(SUBTASK_COUNTERS.len() * v.parallelism + pending.len());
        for s in 0..v.parallelism {
            names.extend(SUBTASK_COUNTERS.iter().map(|c| format!("{s}.{c}")));
        }
        names.extend(pending.values().cloned());
        let values = self.rest.vertex_metrics(&job.id, &v.id, &names)?;
        let get = |s: usize, c: &str| values.get(&format!("{s}.{c}")).copied().filter(|x| x.is_finite()).unwrap_or(0.0);
        Ok((0..v.parallelism)
            .map(|s| SubtaskCounters {
                records_in: get(s, "numRecordsIn"),
                records_out: get(s, "numRecordsOut"),
                buffers_out: get(s, "numBuffersOut"),
                pending: pending.get(&s).and_then(|n| values.get(n).copied()),
                busy_ns: get(s, "accumulateBusyTimeMs") * 1e6,
                backpressured_ns: get(s, "accumulateBackPressuredTimeMs") * 1e6,
                idle_ns: get(s, "accumulateIdleTimeMs") * 1e6,
                input_buffers: get(s, INPUT_QUEUE_LENGTH),
            })
            .collect())
    }

    /// The `pendingRecords` gauges of a source vertex per subtask (`<i>.<operator>.pendingRecords`),
    /// looked for again every few seconds while there is none.
    fn pending_names(&mut self, job: &Job, v: &Vertex) -> Result<BTreeMap<usize, String>, String> {
        let key = (job.id.clone(), v.id.clone());
        if let Some((names, at)) = self.pending.get(&key) {
            if !names.is_empty() || at.elapsed() < LIST_RETRY {
                return Ok(names.clone());
            }
        }
        let names: BTreeMap<usize, String> = self
            .rest
            .vertex_metric_names(&job.id, &v.id)?
            .into_iter()
            .filter(|n| n.ends_with(&format!(".{PENDING_RECORDS}")))
            .filter_map(|n| Some((n.split('.').next()?.parse().ok()?, n)))
            .collect();
        self.pending.insert(key, (names.clone(), Instant::now()));
        Ok(names)
    }
}

impl Driver for FlinkDriver {
    fn spe(&self) -> &str {
        &self.name
    }

    fn idle_wait(&self) -> super::IdleWait {
        // A task thread waits in its mailbox (a blocking take since Flink 1.10); output flushers
        // and timer threads sleep; a legacy source thread waits in the source's own code.
        super::IdleWait::Blocks
    }

    fn kind(&self) -> &'static str {
        "flink"
    }

    fn provides(&self) -> BTreeSet<Metric> {
        [
            Metric::TuplesIn,
            Metric::TuplesOut,
            Metric::QueueLen,
            Metric::CpuNs,
            Metric::BusyNs,
            Metric::BackpressuredNs,
            Metric::IdleNs,
            Metric::InputBuffers,
        ]
        .into()
    }

    fn observe(&mut self, needed: &[Metric]) -> Result<Observation, DriverError> {
        // With a reporter, the JobManager's metric fetcher is not read: its interval does not matter.
        let text = match &self.scrape {
            Some(client) => Some(client.fetch().map_err(DriverError::Interface)?),
            None => None,
        };
        let scraped = match (&self.scrape, &text) {
            (Some(client), Some(text)) => Some(client.read(text).map_err(DriverError::Interface)?),
            _ => None,
        };
        if self.fetcher_interval.is_none() && scraped.is_none() {
            let interval = self.rest.fetcher_interval_ms().map_err(DriverError::Interface)?;
            self.fetcher_interval = Some(Duration::from_millis(interval));
            if interval > 1000 {
                let version = self.rest.version().ok().flatten();
                self.warn_once(format!(
                    "the cluster fetches metrics every {interval} ms (metrics.fetcher.update-interval), so policies \
                     see values that old; set metrics.fetcher.update-interval: 1000 in its {}",
                    config_file(version.as_deref())
                ));
            }
        }
        let jobs = self.running_jobs(scraped.as_ref())?;
        if jobs.is_empty() {
            self.map = None;
        } else if self.map_is_stale(&jobs) {
            self.refresh_map(&jobs);
        }
        let (topology, refs) = match &self.map {
            Some(m) => to_spe_topology(&self.name, m.pid, &jobs, &m.threads),
            None => to_spe_topology(&self.name, self.pid.unwrap_or(0), &jobs, &SubtaskThreads::new()),
        };
        let pid = topology.pid;
        let mut samples = Vec::new();
        let mut sources = SourceLoad::default();
        if !needed.is_empty() {
            let mut per_job = Vec::with_capacity(jobs.len());
            for job in &jobs {
                let counters = match &scraped {
                    Some(s) => s.job_counters(job),
                    None => self.counters(job).map_err(DriverError::Interface)?,
                };
                let records = job_records(job, &counters);
                per_job.push((counters, records));
            }
            for (op, r) in refs.iter().enumerate() {
                let (counters, records) = &per_job[r.job];
                let c = counters[r.vertex].get(r.subtask).copied().unwrap_or_default();
                let rec = records[r.vertex][r.subtask];
                if jobs[r.job].vertices[r.vertex].inputs.is_empty() {
                    // In records whatever `queue_len` counts: the activation rule compares the
                    // backlog with the input rate.
                    sources.add(c.pending, rec.tuples_in);
                } else {
                    sources.add_queued(rec.queue_len);
                }
                for &m in needed {
                    let value = match m {
                        Metric::TuplesIn => rec.tuples_in,
                        Metric::TuplesOut => rec.tuples_out,
                        Metric::QueueLen => match self.queue {
                            FlinkQueue::Records => rec.queue_len,
                            FlinkQueue::Buffers => rec.queue_buffers,
                        },
                        Metric::BusyNs => c.busy_ns,
                        Metric::BackpressuredNs => c.backpressured_ns,
                        Metric::IdleNs => c.idle_ns,
                        Metric::InputBuffers => c.input_buffers,
                        Metric::CpuNs => self.clocks.cpu_ns(pid, &topology.physical[op].threads),
                        _ => continue,
                    };
                    samples.push((op, m, value));
                }
            }
            // A reporter is read live. The REST API answers from the JobManager's store and starts
            // a fetch when the store is older than the fetcher's interval, without waiting for it:
            // its counters are as old as that interval, and at least a round (1 s on Flink).
            sources.counter_period = if scraped.is_some() {
                Some(Duration::ZERO)
            } else {
                self.fetcher_interval.map(|i| i.max(Duration::from_secs(1)))
            };
            self.sources = Some(sources);
        }
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
        self.rest.give_up_on(stop);
    }

    fn sources(&self) -> Option<SourceLoad> {
        self.sources
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use moirai_sched::{OpKind, ThreadRef};

    const DUMP: &str = r#"12345:
2026-11-21 10:00:00
Full thread dump OpenJDK 64-Bit Server VM (17.0.15+6-Debian-1 mixed mode, sharing):

"Reference Handler" #2 daemon prio=10 os_prio=0 cpu=0.31ms elapsed=30.10s tid=0x00007f nid=0x3001 waiting on condition  [0x00007f]
   java.lang.Thread.State: RUNNABLE

"Source: syn0/source (1/2)#0" #80 prio=5 os_prio=0 cpu=12.00ms elapsed=20.00s tid=0x00007f nid=0x33d8 waiting on condition  [0x00007f]
"Legacy Source Thread - Source: syn0/source (1/2)#0" #90 prio=5 os_prio=0 cpu=900.00ms elapsed=19.00s tid=0x00007f nid=0x33e0 runnable
"OutputFlusher for Source: syn0/source (1/2)#0" #91 daemon prio=5 os_prio=0 cpu=1.00ms elapsed=19.00s tid=0x00007f nid=0x33e1 sleeping
"syn0/op1 (2/2)#1" #95 prio=5 os_prio=0 cpu=1.00ms elapsed=2.00s tid=0x00007f nid=13300 runnable
"syn0/op1 (2/2)#0" #81 prio=5 os_prio=0 cpu=1.00ms elapsed=20.00s tid=0x00007f nid=0x33d9 runnable
"System Time Trigger for syn0/op1 (2/2)#1" #96 daemon prio=5 os_prio=0 tid=0x00007f nid=0x33f5 waiting
"A -> B (1/1)#0" #82 prio=5 os_prio=0 tid=0x00007f nid=0x33da runnable
"GC Thread#0" os_prio=0 cpu=3.00ms elapsed=30.00s tid=0x00007f nid=0x3002 runnable
"VM Periodic Task Thread" os_prio=0 cpu=10.00ms elapsed=30.00s tid=0x00007f nid=0x3003 waiting on condition
"#;

    #[test]
    fn thread_names_are_taken_apart() {
        let t = parse_thread_name("Legacy Source Thread - Source: x (2/3)#4").unwrap();
        assert_eq!(
            (t.task, t.subtask, t.parallelism, t.attempt, t.role),
            ("Source: x", 1, 3, 4, ThreadRole::LegacySource)
        );
        let t = parse_thread_name("Map (1/1)").unwrap();
        assert_eq!((t.task, t.attempt, t.role), ("Map", 0, ThreadRole::Task));
        let t = parse_thread_name("Time Trigger for Window(a) (1/1)").unwrap();
        assert_eq!((t.task, t.role), ("Window(a)", ThreadRole::TimeTrigger));
        let t = parse_thread_name("f (x) -> g (1/2)#0").unwrap();
        assert_eq!(t.task, "f (x) -> g");
        for other in
            ["GC Thread#0", "Flink Netty Server (0) Thread 0", "pool-1-thread-1", "x (0/2)#0", "x (3/2)#0", " (1/1)#0"]
        {
            assert_eq!(parse_thread_name(other), None, "{other}");
        }
    }

    #[test]
    fn a_dump_maps_subtasks_to_the_threads_of_their_newest_attempt() {
        let threads = parse_thread_dump(DUMP);
        assert_eq!(threads.len(), 10, "{threads:?}");
        assert!(threads.contains(&("GC Thread#0".to_string(), 0x3002)));
        let index = index_threads(&threads);
        let source = &index[&("Source: syn0/source".to_string(), 0, 2)];
        assert_eq!(
            source,
            &vec![(ThreadRole::Task, 0x33d8), (ThreadRole::LegacySource, 0x33e0), (ThreadRole::OutputFlusher, 0x33e1)]
        );
        // Attempt 0 of op1 (2/2) is left behind; attempt 1 has its task and timer threads.
        assert_eq!(
            index[&("syn0/op1".to_string(), 1, 2)],
            vec![(ThreadRole::Task, 13300), (ThreadRole::TimeTrigger, 0x33f5)]
        );
        assert_eq!(index[&("A -> B".to_string(), 0, 1)], vec![(ThreadRole::Task, 0x33da)]);
        assert_eq!(index.len(), 3);
    }

    fn job() -> Job {
        // source (p=1) → map (p=2, rebalance) → sink (p=2, forward); map → side (p=1, broadcast)
        let v = |id: &str, name: &str, p: usize, inputs: Vec<(usize, ShipStrategy)>| Vertex {
            id: id.into(),
            name: name.into(),
            parallelism: p,
            inputs,
        };
        Job {
            id: "j1".into(),
            name: "q".into(),
            vertices: vec![
                v("v0", "Source: src -> Map", 1, vec![]),
                v("v1", "Map", 2, vec![(0, ShipStrategy::Partition)]),
                v("v2", "Sink: out", 2, vec![(1, ShipStrategy::Forward)]),
                v("v3", "Sink: side", 1, vec![(1, ShipStrategy::Broadcast)]),
            ],
        }
    }

    #[test]
    fn jobs_become_queries_with_chains_split_and_subtasks_linked_by_ship_strategy() {
        let mut threads = SubtaskThreads::new();
        threads.insert(("Map".into(), 1, 2), vec![ThreadRef { tid: 7, start_ticks: 9 }]);
        let (t, refs) = to_spe_topology("flink", 0, &[job()], &threads);
        assert_eq!(t.physical[2].threads, vec![ThreadRef { tid: 7, start_ticks: 9 }]);
        assert!(t.physical[1].threads.is_empty());
        assert_eq!(t.queries, vec!["q"]);
        let names: Vec<_> = t.logical.iter().map(|l| (l.name.as_str(), l.kind)).collect();
        assert_eq!(
            names,
            vec![
                ("Source: src", OpKind::Source),
                ("Map", OpKind::Operator),
                ("Map [2]", OpKind::Operator),
                ("Sink: out", OpKind::Sink),
                ("Sink: side", OpKind::Sink)
            ]
        );
        assert_eq!(t.logical_edges, vec![(0, 1), (1, 2), (2, 3), (2, 4)]);
        let phys: Vec<_> = t.physical.iter().map(|p| (p.name.as_str(), p.logical.clone(), p.instance)).collect();
        assert_eq!(
            phys,
            vec![
                ("Source: src -> Map (1/1)", vec![0, 1], 0),
                ("Map (1/2)", vec![2], 0),
                ("Map (2/2)", vec![2], 1),
                ("Sink: out (1/2)", vec![3], 0),
                ("Sink: out (2/2)", vec![3], 1),
                ("Sink: side (1/1)", vec![4], 0)
            ]
        );
        assert_eq!(t.physical_edges, vec![(0, 1), (0, 2), (1, 3), (1, 5), (2, 4), (2, 5)]);
        assert_eq!(refs[4], SubtaskRef { job: 0, vertex: 2, subtask: 1 });
        moirai_sched::Cluster::new(vec![t]).expect("a valid topology");
    }

    #[test]
    fn a_sources_backlog_is_counted_in_the_buffers_it_sends() {
        let c = |records_out: f64, buffers_out: f64, pending: Option<f64>, input_buffers: f64| SubtaskCounters {
            records_out,
            buffers_out,
            pending,
            input_buffers,
            ..SubtaskCounters::default()
        };
        // The source sent 1000 records in 10 buffers down its one (rebalance) edge: 100 records
        // per buffer, so a backlog of 250 records is 2.5 buffers' worth. Operators report
        // Flink's own input queue.
        let counters = vec![
            vec![c(1000.0, 10.0, Some(250.0), 0.0)],
            vec![c(0.0, 0.0, None, 4.0), c(0.0, 0.0, None, 1.0)],
            vec![c(0.0, 0.0, None, 2.0), c(0.0, 0.0, None, 0.0)],
            vec![c(0.0, 0.0, None, 9.0)],
        ];
        let m = job_records(&job(), &counters);
        let buffers: Vec<Vec<f64>> = m.iter().map(|v| v.iter().map(|r| r.queue_buffers).collect()).collect();
        assert_eq!(buffers, vec![vec![2.5], vec![4.0, 1.0], vec![2.0, 0.0], vec![9.0]]);
        // A backlog of 250 000 records is 2 500 buffers, whatever the queues downstream (the
        // driver caps it afterwards: `cap_source_queues`).
        let mut behind = counters.clone();
        behind[0][0].pending = Some(250_000.0);
        let m = job_records(&job(), &behind);
        assert_eq!((m[0][0].queue_buffers, m[0][0].queue_len), (2_500.0, 250_000.0), "{m:?}");
        // Before its first buffer left, or without a backlog gauge, a source's queue is 0.
        let mut fresh = counters.clone();
        fresh[0][0].buffers_out = 0.0;
        assert_eq!(job_records(&job(), &fresh)[0][0].queue_buffers, 0.0);
        fresh[0][0] = c(1000.0, 10.0, None, 0.0);
        assert_eq!(job_records(&job(), &fresh)[0][0].queue_buffers, 0.0);
    }

    #[test]
    fn queues_are_counted_in_records_per_ship_strategy() {
        let c = |records_in: f64, records_out: f64, pending: Option<f64>| SubtaskCounters {
            records_in,
            records_out,
            pending,
            ..SubtaskCounters::default()
        };
        let r = |tuples_in: f64, tuples_out: f64, queue_len: f64| SubtaskRecords {
            tuples_in,
            tuples_out,
            queue_len,
            queue_buffers: 0.0,
        };
        // The records only; `queue_buffers` has a test of its own.
        let job_records = |job: &Job, counters: &[Vec<SubtaskCounters>]| -> Vec<Vec<SubtaskRecords>> {
            let mut m = job_records(job, counters);
            m.iter_mut().flatten().for_each(|r| r.queue_buffers = 0.0);
            m
        };
        let counters = vec![
            vec![c(0.0, 1000.0, Some(70.0))],
            vec![c(480.0, 470.0, None), c(500.0, 500.0, None)],
            vec![c(400.0, 0.0, None), c(500.0, 0.0, None)],
            vec![c(900.0, 0.0, None)],
        ];
        let m = job_records(&job(), &counters);
        // The source ingested what it emitted; its queue is its backlog.
        assert_eq!(m[0], vec![r(1000.0, 1000.0, 70.0)]);
        // Rebalanced: each map subtask was sent half of the source's 1000. Each map record goes
        // down two edges, one of them a broadcast to a single subtask: 2 receivers per record.
        assert_eq!(m[1], vec![r(480.0, 940.0, 20.0), r(500.0, 1000.0, 0.0)]);
        // Forward: sink i was sent all of map i's records.
        // A sink's tuples out are what it consumed.
        assert_eq!(m[2], vec![r(400.0, 400.0, 70.0), r(500.0, 500.0, 0.0)]);
        // Broadcast: the side sink was sent every map record.
        assert_eq!(m[3], vec![r(900.0, 900.0, 70.0)]);
        // One buffer's worth per input channel is in flight, not queued: the source sent 1000
        // records in 10 buffers (100 per buffer) to each map subtask's one channel from it.
        let mut with_buffers = counters.clone();
        with_buffers[0][0].buffers_out = 10.0;
        let m = job_records(&job(), &with_buffers);
        assert_eq!(m[1], vec![r(480.0, 940.0, 0.0), r(500.0, 1000.0, 0.0)]);
        with_buffers[1][0].records_in = 300.0;
        assert_eq!(job_records(&job(), &with_buffers)[1][0], r(300.0, 940.0, 100.0));
        // Missing counters (not fetched yet) count as 0, and queues never go below 0.
        let m = job_records(&job(), &[vec![c(0.0, 0.0, None)], vec![], vec![], vec![]]);
        assert_eq!(m[0], vec![r(0.0, 0.0, 0.0)]);
        assert_eq!(m[1], vec![r(0.0, 0.0, 0.0), r(0.0, 0.0, 0.0)]);
    }

    #[test]
    fn the_rest_port_owner_is_found_for_loopback_urls_only() {
        let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
        let port = listener.local_addr().unwrap().port();
        let me = std::process::id();
        assert_eq!(rest_port_owner(&format!("http://127.0.0.1:{port}")), Some(me));
        assert_eq!(rest_port_owner(&format!("http://localhost:{port}/")), Some(me));
        assert_eq!(rest_port_owner(&format!("http://flink-jm:{port}")), None);
        drop(listener);
        assert_eq!(rest_port_owner(&format!("http://127.0.0.1:{port}")), None);
    }
}

//! This node's TaskManager in a Flink cluster of several nodes: which subtasks the middleware on
//! this node schedules (see docs/flink-cluster.md).
//!
//! A cluster runs one TaskManager per node and one `moirai schedule` per node, all reading the
//! same JobManager's REST API. Each is told its node's TaskManager (`taskmanager` in the
//! `[[spe]]` table, `--flink-taskmanager`): its resource id, its host, or `host:dataPort`, as
//! `GET /taskmanagers` lists them. The driver reads where every subtask runs
//! (`GET /jobs/<id>/vertices/<vid>` → `subtasks[].taskmanager-id`) and maps threads only for the
//! subtasks of its TaskManager: a subtask elsewhere is never "waiting for its thread", and no
//! thread of another TaskManager's JVM is ever touched, even when both JVMs run on one machine.
//! When the TaskManager is not (or no longer) registered, the node is idle, and the driver says
//! so each time that changes.

use std::collections::{HashMap, HashSet};
use std::net::Ipv4Addr;
use std::time::{Duration, Instant};

use serde::Deserialize;

use super::flink_rest::{FlinkRest, Job};

/// How often the placement of the subtasks is read again while nothing else changed: a job
/// restarted after a failure keeps its id and vertices, but its subtasks may move.
const PLACEMENT_REFRESH: Duration = Duration::from_secs(5);

/// A TaskManager as `/taskmanagers` lists it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct TaskManagerInfo {
    /// Its resource id (`taskmanager.resource-id`, or a generated one).
    pub id: String,
    /// The host of its RPC address (`pekko.tcp://flink@<host>:<port>/...`).
    pub host: String,
    /// Its data port (shuffles).
    pub data_port: u16,
}

impl TaskManagerInfo {
    /// Whether `wanted` names it: its id, its host, or `host:dataPort`.
    pub fn is(&self, wanted: &str) -> bool {
        wanted == self.id || wanted == self.host || wanted == format!("{}:{}", self.host, self.data_port)
    }
}

#[derive(Deserialize)]
struct TaskManagersDoc {
    taskmanagers: Vec<TaskManagerDoc>,
}

#[derive(Deserialize)]
struct TaskManagerDoc {
    id: String,
    #[serde(default)]
    path: String,
    #[serde(default, rename = "dataPort")]
    data_port: u16,
}

#[derive(Deserialize)]
struct VertexDoc {
    #[serde(default)]
    subtasks: Vec<SubtaskDoc>,
}

#[derive(Deserialize)]
struct SubtaskDoc {
    subtask: usize,
    #[serde(default, rename = "taskmanager-id")]
    taskmanager_id: String,
}

/// The host in a TaskManager's RPC path: `pekko.tcp://flink@10.0.0.2:41234/user/rpc/taskmanager_0`
/// (`akka.tcp://` before Flink 1.18) → `10.0.0.2`.
pub fn rpc_host(path: &str) -> String {
    let Some((_, rest)) = path.split_once('@') else { return String::new() };
    let addr = rest.split('/').next().unwrap_or("");
    addr.rsplit_once(':').map_or(addr, |(h, _)| h).to_string()
}

impl FlinkRest {
    /// The TaskManagers registered now.
    pub fn taskmanagers(&self) -> Result<Vec<TaskManagerInfo>, String> {
        let doc: TaskManagersDoc = self.get("/taskmanagers")?;
        Ok(doc
            .taskmanagers
            .into_iter()
            .map(|t| TaskManagerInfo { host: rpc_host(&t.path), id: t.id, data_port: t.data_port })
            .collect())
    }

    /// The TaskManager id of each subtask of a vertex (empty while not deployed).
    pub fn subtask_taskmanagers(&self, job: &str, vertex: &str) -> Result<Vec<(usize, String)>, String> {
        let doc: VertexDoc = self.get(&format!("/jobs/{job}/vertices/{vertex}"))?;
        Ok(doc.subtasks.into_iter().map(|s| (s.subtask, s.taskmanager_id)).collect())
    }
}

/// What the node knew of its TaskManager in the last round.
#[derive(Clone, Debug, PartialEq, Eq)]
enum Presence {
    Unknown,
    Registered(String),
    Absent,
}

/// This node's TaskManager and the subtasks it runs.
pub struct Node {
    /// As configured: id, host or host:dataPort.
    wanted: String,
    presence: Presence,
    /// The TaskManager, while registered.
    tm: Option<TaskManagerInfo>,
    /// Subtasks on this node's TaskManager: (vertex name, subtask, parallelism), as threads are keyed.
    mine: HashSet<(String, usize, usize)>,
    /// Jobs and TaskManagers the placement was read for, and when.
    read_for: Option<(Vec<String>, Vec<String>, Instant)>,
}

/// What the node's TaskManager is doing this round.
pub enum NodeState {
    /// Registered: schedule its subtasks.
    Present,
    /// Not registered: nothing to schedule on this node.
    Absent,
}

impl Node {
    /// The node whose TaskManager `wanted` names.
    pub fn new(wanted: &str) -> Node {
        Node { wanted: wanted.to_string(), presence: Presence::Unknown, tm: None, mine: HashSet::new(), read_for: None }
    }

    /// Looks for the TaskManager and, when needed, where the jobs' subtasks run; `say` gets a
    /// line whenever the TaskManager comes or goes. `reported` (job id, vertex id, subtask):
    /// whether this node's TaskManager's Prometheus reporter reports the subtask — then the
    /// placement is read off the scrape, not by one REST request per job vertex (a job of 100
    /// vertices took 100 requests, seconds on a JobManager starved past saturation).
    pub fn refresh(
        &mut self,
        rest: &FlinkRest,
        jobs: &[Job],
        reported: Option<&dyn Fn(&str, &str, usize) -> bool>,
        say: &mut dyn FnMut(String),
    ) -> Result<NodeState, String> {
        let tms = rest.taskmanagers()?;
        let mut ids: Vec<String> = tms.iter().map(|t| t.id.clone()).collect();
        ids.sort();
        let Some(tm) = tms.iter().find(|t| t.is(&self.wanted)) else {
            if self.presence != Presence::Absent {
                let was = match &self.presence {
                    Presence::Registered(id) if *id == self.wanted => format!("TaskManager {id} left the cluster"),
                    Presence::Registered(id) => format!("TaskManager {id} ('{}') left the cluster", self.wanted),
                    _ => format!("no TaskManager '{}' in the cluster", self.wanted),
                };
                say(format!(
                    "{was} (registered: {}); nothing to schedule on this node until it registers",
                    if ids.is_empty() { "none".to_string() } else { ids.join(", ") }
                ));
                self.presence = Presence::Absent;
            }
            self.mine.clear();
            self.read_for = None;
            self.tm = None;
            return Ok(NodeState::Absent);
        };
        if self.presence != Presence::Registered(tm.id.clone()) {
            say(format!(
                "TaskManager {} ({}:{}) is this node's: scheduling its subtasks only",
                tm.id, tm.host, tm.data_port
            ));
            self.presence = Presence::Registered(tm.id.clone());
        }
        self.tm = Some(tm.clone());
        if let Some(reported) = reported {
            self.mine = placement_reported(jobs, reported);
            self.read_for = None;
            return Ok(NodeState::Present);
        }
        let job_ids: Vec<String> = jobs.iter().map(|j| j.id.clone()).collect();
        let fresh = self
            .read_for
            .as_ref()
            .is_some_and(|(j, t, at)| *j == job_ids && *t == ids && at.elapsed() < PLACEMENT_REFRESH);
        if !fresh {
            let mut mine = HashSet::new();
            for job in jobs {
                for v in &job.vertices {
                    for (s, on) in rest.subtask_taskmanagers(&job.id, &v.id)? {
                        if on == tm.id {
                            mine.insert((v.name.clone(), s, v.parallelism));
                        }
                    }
                }
            }
            self.mine = mine;
            self.read_for = Some((job_ids, ids, Instant::now()));
        }
        Ok(NodeState::Present)
    }

    /// Whether subtask `s` of the vertex named `vertex` (of `parallelism`) runs on this node.
    pub fn hosts(&self, vertex: &str, s: usize, parallelism: usize) -> bool {
        self.mine.contains(&(vertex.to_string(), s, parallelism))
    }

    /// The JVM of this node's TaskManager among `candidates`: the one process listening on its
    /// data port (at its host, when that is an IPv4 address), seen in each process's own network
    /// namespace. `None` when not exactly one does (the driver then goes by thread names).
    pub fn jvm(&self, candidates: impl IntoIterator<Item = u32>) -> Option<u32> {
        let tm = self.tm.as_ref()?;
        let host = tm.host.parse::<Ipv4Addr>().ok();
        let found: Vec<u32> = candidates.into_iter().filter(|&pid| listens_on(pid, host, tm.data_port)).collect();
        match found[..] {
            [pid] => Some(pid),
            _ => None,
        }
    }

    /// Whether no subtask of the running jobs is this node's.
    pub fn runs_nothing(&self) -> bool {
        self.mine.is_empty()
    }

    /// Keeps only the entries of this node's subtasks.
    pub fn retain<T>(&self, threads: &mut HashMap<(String, usize, usize), T>) {
        threads.retain(|k, _| self.mine.contains(k));
    }
}

/// The subtasks of `jobs` that `reported` (job id, vertex id, subtask) says this node's reporter
/// reports, keyed as threads are: (vertex name, subtask, parallelism).
fn placement_reported(jobs: &[Job], reported: &dyn Fn(&str, &str, usize) -> bool) -> HashSet<(String, usize, usize)> {
    let mut mine = HashSet::new();
    for job in jobs {
        for v in &job.vertices {
            for s in (0..v.parallelism).filter(|&s| reported(&job.id, &v.id, s)) {
                mine.insert((v.name.clone(), s, v.parallelism));
            }
        }
    }
    mine
}

/// Whether process `pid` holds a TCP socket listening on `port` (on `host` or every address), as
/// `/proc/<pid>/net/tcp` shows its network namespace's sockets.
pub fn listens_on(pid: u32, host: Option<Ipv4Addr>, port: u16) -> bool {
    let inodes: HashSet<String> = ["tcp", "tcp6"]
        .iter()
        .filter_map(|f| std::fs::read_to_string(format!("/proc/{pid}/net/{f}")).ok())
        .flat_map(|text| text.lines().skip(1).filter_map(|l| listening_inode(l, host, port)).collect::<Vec<_>>())
        .collect();
    if inodes.is_empty() {
        return false;
    }
    let Ok(fds) = std::fs::read_dir(format!("/proc/{pid}/fd")) else { return false };
    fds.flatten().any(|fd| {
        std::fs::read_link(fd.path()).is_ok_and(|l| {
            let l = l.to_string_lossy();
            l.strip_prefix("socket:[").and_then(|r| r.strip_suffix(']')).is_some_and(|i| inodes.contains(i))
        })
    })
}

/// The inode of a `/proc/net/tcp{,6}` line that listens (state 0A) on `port`, at `host` (IPv4,
/// written little-endian in hex, also mapped into IPv6) or on every address.
fn listening_inode(line: &str, host: Option<Ipv4Addr>, port: u16) -> Option<String> {
    let f: Vec<&str> = line.split_whitespace().collect();
    let (addr, p) = f.get(1)?.rsplit_once(':')?;
    if f.get(3) != Some(&"0A") || u16::from_str_radix(p, 16).ok()? != port {
        return None;
    }
    let any = addr.chars().all(|c| c == '0');
    // An IPv4 address, or one mapped into IPv6 (`::ffff:a.b.c.d`, how a JVM's dual-stack socket
    // bound to an IPv4 address shows in tcp6).
    let v4 = match addr.len() {
        8 => Some(addr),
        32 => addr.strip_prefix("0000000000000000FFFF0000"),
        _ => None,
    };
    let at_host = host.is_some_and(|h| {
        v4.is_some_and(|a| u32::from_str_radix(a, 16).is_ok_and(|a| Ipv4Addr::from(a.swap_bytes()) == h))
    });
    (any || at_host || host.is_none()).then(|| f.get(9).map(|s| s.to_string()))?
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_taskmanager_is_named_by_id_host_or_data_address() {
        let tm = TaskManagerInfo {
            id: "tm-a".into(),
            host: rpc_host("pekko.tcp://flink@10.77.3.11:41234/user/rpc/taskmanager_0"),
            data_port: 38367,
        };
        assert_eq!(tm.host, "10.77.3.11");
        for name in ["tm-a", "10.77.3.11", "10.77.3.11:38367"] {
            assert!(tm.is(name), "{name}");
        }
        for name in ["tm-b", "10.77.3.12", "10.77.3.11:1", "tm"] {
            assert!(!tm.is(name), "{name}");
        }
        assert_eq!(rpc_host("akka.tcp://flink@node-2:6122/user/rpc/taskmanager_0"), "node-2");
        assert_eq!(rpc_host("pekko://flink/user/rpc/taskmanager_0"), "");
    }

    #[test]
    fn listening_sockets_are_read_from_proc_net_tcp() {
        let line =
            "   1: 0B4D030A:B3FF 00000000:0000 0A 00000000:00000000 00:00000000 00000000     0        0 4242 1 0";
        let host = Some(Ipv4Addr::new(10, 3, 77, 11));
        assert_eq!(listening_inode(line, host, 0xB3FF), Some("4242".into()));
        assert_eq!(listening_inode(line, Some(Ipv4Addr::new(10, 3, 77, 12)), 0xB3FF), None);
        assert_eq!(listening_inode(line, host, 80), None);
        let any = line.replace("0B4D030A", "00000000");
        assert_eq!(listening_inode(&any, host, 0xB3FF), Some("4242".into()));
        let mapped = line.replace("0B4D030A", "0000000000000000FFFF00000B4D030A");
        assert_eq!(listening_inode(&mapped, host, 0xB3FF), Some("4242".into()), "an IPv4-mapped IPv6 socket");
        let established = line.replace(" 0A ", " 01 ");
        assert_eq!(listening_inode(&established, host, 0xB3FF), None);
        // This very process, in its own namespace.
        let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
        let port = listener.local_addr().unwrap().port();
        assert!(listens_on(std::process::id(), Some(Ipv4Addr::LOCALHOST), port));
        assert!(!listens_on(std::process::id(), Some(Ipv4Addr::new(10, 1, 1, 1)), port));
    }

    #[test]
    fn only_this_nodes_subtasks_are_kept() {
        let mut node = Node::new("tm-a");
        node.mine.insert(("op".into(), 0, 2));
        let mut threads: HashMap<(String, usize, usize), u32> =
            [(("op".to_string(), 0, 2), 1), (("op".to_string(), 1, 2), 2)].into();
        node.retain(&mut threads);
        assert_eq!(threads.into_keys().collect::<Vec<_>>(), vec![("op".to_string(), 0, 2)]);
        assert!(node.hosts("op", 0, 2) && !node.hosts("op", 1, 2));
    }

    #[test]
    fn a_reporters_subtasks_are_its_nodes() {
        use super::super::flink_rest::Vertex;
        let vertex = |id: &str, name: &str| Vertex { id: id.into(), name: name.into(), parallelism: 2, inputs: vec![] };
        let jobs = [Job { id: "j".into(), name: "q".into(), vertices: vec![vertex("v1", "src"), vertex("v2", "map")] }];
        // This node's reporter has subtask 1 of the source and subtask 0 of the map.
        let reported = |j: &str, v: &str, s: usize| j == "j" && matches!((v, s), ("v1", 1) | ("v2", 0));
        let mine = placement_reported(&jobs, &reported);
        let expected: HashSet<(String, usize, usize)> = [("src".into(), 1, 2), ("map".into(), 0, 2)].into();
        assert_eq!(mine, expected);
    }
}

//! A standalone Flink session cluster as people deploy it, started from the Maven artifacts of
//! `integrations/flink` (`flink-runtime`, `flink-clients`, `flink-runtime-web` are on its
//! classpath; the distribution's scripts are not needed): one JobManager JVM
//! (`StandaloneSessionClusterEntrypoint`) and TaskManager JVMs (`TaskManagerRunner`), each with a
//! configuration directory of its own. With [`ClusterSpec::namespaces`] every TaskManager runs in
//! a network namespace of its own ([`crate::netns`]), a "node" with its own address, and the
//! JobManager in the root namespace on the bridge; without, all listen on 127.0.0.1.
//!
//! Jobs are submitted as a client submits them: `moirai.flink.Run <workload> --jobmanager
//! HOST:PORT`, a remote environment shipping the job's jar ([`FlinkCluster::submit`]). The
//! TaskManagers' classpath is the dependencies' alone, so the job's classes (and their statics)
//! live in a class loader of each job's own.
//!
//! One place starts and stops it: [`FlinkCluster::start`], and the guard's drop, which stops
//! every JVM by its PID (SIGTERM, then SIGKILL), removes the namespaces and the configuration
//! and temporary directories — also when a start fails half way or a test panics.

use std::path::{Path, PathBuf};
use std::process::Command;
use std::sync::atomic::{AtomicU32, Ordering};
use std::time::{Duration, Instant};

use crate::jvm::{JvmJobs, STOP_GRACE};
use crate::netns::Nodes;
use crate::process::{describe, file_tail, free_port, Child};
use moirai_os::Signal;

/// A lost TaskManager is dropped after 15 s instead of Flink's 50 s (shorter timeouts made
/// TaskManagers starved of CPU on a busy 2-core machine look lost).
pub const HEARTBEAT_TIMEOUT: Duration = Duration::from_secs(15);
/// The lab's: a benchmark drives both "nodes" past saturation on two shared cores, where 15 s
/// without a heartbeat answered happened (a job failed at 2× the rate the cluster sustains).
pub const LAB_HEARTBEAT_TIMEOUT: Duration = Duration::from_secs(60);
/// How long one REST request to the JobManager may take (it answers slowly on an overloaded machine).
const REST_TIMEOUT: Duration = Duration::from_secs(10);

/// The configuration file of Flink 1.x (flat `key: value` lines).
pub const FLINK_CONF: &str = "flink-conf.yaml";
/// The configuration file of Flink 2.x (standard YAML; flat `key: value` lines are YAML too).
pub const FLINK2_CONF: &str = "config.yaml";
/// The JobManager's main class.
pub const JOBMANAGER_MAIN: &str = "org.apache.flink.runtime.entrypoint.StandaloneSessionClusterEntrypoint";
/// The TaskManager's main class.
pub const TASKMANAGER_MAIN: &str = "org.apache.flink.runtime.taskexecutor.TaskManagerRunner";
/// How long the JobManager and the TaskManagers may take to come up (JVM start, RPC, registration).
const START_TIMEOUT: Duration = Duration::from_secs(90);

static SEQ: AtomicU32 = AtomicU32::new(0);

/// A TaskManager's JVM flags: heap above framework + task heap, direct memory for framework +
/// task off-heap + network memory (its configuration below).
const TM_FLAGS: [&str; 3] = ["-Xmx512m", "-XX:MaxDirectMemorySize=256m", "-XX:MaxMetaspaceSize=256m"];

/// What cluster to start.
#[derive(Clone, Debug)]
pub struct ClusterSpec {
    /// TaskManagers (one per node).
    pub taskmanagers: usize,
    /// Slots per TaskManager: enough for a whole job (its parallelism, with slot sharing).
    pub slots: usize,
    /// Each TaskManager in a network namespace of its own (needs root).
    pub namespaces: bool,
    /// After how long without a heartbeat the JobManager drops a TaskManager (`heartbeat.timeout`):
    /// [`HEARTBEAT_TIMEOUT`] for tests of failure (a killed node is noticed in time),
    /// [`LAB_HEARTBEAT_TIMEOUT`] in the lab, where two overloaded "nodes" share two cores.
    pub heartbeat_timeout: Duration,
    /// The last `deferred` TaskManagers are configured (node, address, configuration) but not
    /// started: nodes whose TaskManager joins late ([`FlinkCluster::start_taskmanager`]).
    pub deferred: usize,
    /// Each TaskManager serves its subtasks' counters by Flink's Prometheus reporter
    /// (`moirai_middleware::driver::flink_prometheus::reporter_conf`, [`TaskManager::metrics_url`]).
    pub reporter: bool,
}

/// One TaskManager of the cluster.
pub struct TaskManager {
    /// Its resource id: its id in the REST API (`/taskmanagers`, a subtask's `taskmanager-id`).
    pub id: String,
    /// The address it listens on (its node's).
    pub host: String,
    /// Its network namespace, if it has one.
    pub netns: Option<String>,
    /// Its Prometheus reporter (`http://HOST:PORT/metrics`), when the cluster has reporters.
    pub metrics_url: Option<String>,
    child: Option<Child>,
    log: PathBuf,
    /// Its configuration, to start it again.
    conf: Vec<(&'static str, String)>,
}

impl TaskManager {
    /// The TaskManager JVM's PID while it runs.
    pub fn pid(&self) -> Option<u32> {
        self.child.as_ref().map(Child::pid)
    }

    /// The tail of its log.
    pub fn log_tail(&self, lines: usize) -> String {
        file_tail(&self.log, lines)
    }
}

/// A running standalone cluster; stopped, and its namespaces removed, when dropped.
pub struct FlinkCluster {
    taskmanagers: Vec<TaskManager>,
    jobmanager: Option<Child>,
    jm_log: PathBuf,
    /// Dropped after the JVMs (fields drop in order, after [`Drop::drop`] stopped them).
    nodes: Option<Nodes>,
    dir: PathBuf,
    /// Keep `dir` (the logs) when dropped: a start that failed.
    keep: bool,
    host: String,
    rest_port: u16,
    agent: ureq::Agent,
}

/// The major version of the Flink on `classpath` (its `flink-runtime-X.Y.Z.jar`), if it says.
pub fn flink_major(classpath: &str) -> Option<u32> {
    classpath.split(':').find_map(|entry| {
        let file = entry.rsplit('/').next()?;
        let version = file.strip_prefix("flink-runtime-")?.strip_suffix(".jar")?;
        version.split('.').next()?.parse().ok()
    })
}

/// The configuration file the Flink on `classpath` reads: `config.yaml` from 2.0 on,
/// `flink-conf.yaml` before (and when the classpath does not say).
pub fn config_file(classpath: &str) -> &'static str {
    match flink_major(classpath) {
        Some(major) if major >= 2 => FLINK2_CONF,
        _ => FLINK_CONF,
    }
}

/// `key: value` lines of a Flink configuration file.
fn conf_text(entries: &[(&str, String)]) -> String {
    entries.iter().map(|(k, v)| format!("{k}: {v}\n")).collect()
}

/// The settings both kinds of process share: where the JobManager is, and failure detection
/// ([`ClusterSpec::heartbeat_timeout`]). RPCs (a task's deployment among them) may take as long
/// as a heartbeat: past saturation, TaskManagers starved of CPU did not answer a deployment
/// within Flink's default `pekko.ask.timeout` of 10 s and the job failed.
fn common_conf(jm_host: &str, rpc_port: u16, heartbeat_timeout: Duration) -> Vec<(&'static str, String)> {
    vec![
        ("jobmanager.rpc.address", jm_host.to_string()),
        ("jobmanager.rpc.port", rpc_port.to_string()),
        ("heartbeat.interval", "1000".into()),
        ("heartbeat.timeout", heartbeat_timeout.as_millis().to_string()),
        ("pekko.ask.timeout", format!("{} ms", heartbeat_timeout.as_millis())),
    ]
}

impl FlinkCluster {
    /// Starts the JobManager, then the TaskManagers, and waits until all registered.
    pub fn start(jobs: &JvmJobs, spec: &ClusterSpec) -> Result<FlinkCluster, String> {
        if spec.taskmanagers == 0 || spec.slots == 0 {
            return Err("a cluster needs at least one TaskManager with at least one slot".into());
        }
        if spec.deferred > spec.taskmanagers {
            return Err(format!("{} deferred TaskManagers of {}", spec.deferred, spec.taskmanagers));
        }
        let nodes = if spec.namespaces { Some(Nodes::create(spec.taskmanagers)?) } else { None };
        let host = nodes.as_ref().map_or("127.0.0.1".to_string(), |n| n.host().to_string());
        let dir = std::env::temp_dir().join(format!(
            "moirai-flink-cluster-{}x{}",
            std::process::id(),
            SEQ.fetch_add(1, Ordering::SeqCst)
        ));
        std::fs::create_dir_all(&dir).map_err(|e| format!("cannot create {}: {e}", dir.display()))?;
        let port = || free_port().map_err(|e| format!("no free port: {e}"));
        let (rpc_port, rest_port) = (port()?, port()?);
        let mut cluster = FlinkCluster {
            taskmanagers: Vec::new(),
            jobmanager: None,
            jm_log: dir.join("jobmanager.log"),
            nodes,
            dir,
            keep: false,
            host,
            rest_port,
            agent: ureq::AgentBuilder::new().timeout(REST_TIMEOUT).build(),
        };
        let h = cluster.host.clone();
        let mut jm = common_conf(&h, rpc_port, spec.heartbeat_timeout);
        jm.extend([
            // The RPC and blob server on every interface: the REST handler of a job submission
            // hands the job's jar to the blob server through "localhost", whatever the address.
            ("jobmanager.bind-host", "0.0.0.0".into()),
            ("rest.address", h.clone()),
            ("rest.bind-address", h.clone()),
            ("rest.port", rest_port.to_string()),
            ("jobmanager.memory.process.size", "768m".into()),
            // Metrics in the REST API at most 1 s old (10 s by default).
            ("metrics.fetcher.update-interval", "1000".into()),
            // A job's slots spread over the TaskManagers rather than filling the first (the key
            // of 1.18 on; 2.x no longer reads 1.x's `cluster.evenly-spread-out-slots: true`).
            ("taskmanager.load-balance.mode", "SLOTS".into()),
            ("web.tmpdir", cluster.dir.join("jm-web").display().to_string()),
            ("blob.storage.directory", cluster.dir.join("jm-blobs").display().to_string()),
            ("io.tmp.dirs", cluster.dir.join("jm-tmp").display().to_string()),
        ]);
        let child = cluster.spawn("jobmanager", None, &jm, JOBMANAGER_MAIN, &["-Xmx512m"], jobs)?;
        cluster.jobmanager = Some(child);
        cluster.wait("the JobManager's REST API", |c| c.registered().map(|_| ()))?;
        let node_list: Vec<(Option<String>, String)> = match &cluster.nodes {
            Some(n) => n.nodes().iter().map(|n| (Some(n.netns.clone()), n.addr.to_string())).collect(),
            None => vec![(None, "127.0.0.1".to_string()); spec.taskmanagers],
        };
        for (k, (netns, tm_host)) in node_list.into_iter().enumerate() {
            let id = format!("moirai-tm{}", k + 1);
            let mut tm = common_conf(&h, rpc_port, spec.heartbeat_timeout);
            tm.extend([
                ("taskmanager.resource-id", id.clone()),
                ("taskmanager.host", tm_host.clone()),
                ("taskmanager.bind-host", tm_host.clone()),
                ("taskmanager.numberOfTaskSlots", spec.slots.to_string()),
                // Started without Flink's scripts, the TaskManager needs every memory size spelled
                // out (the scripts compute them); heap = framework + task heap, direct memory =
                // framework + task off-heap + network (the JVM flags below).
                ("taskmanager.cpu.cores", spec.slots.to_string()),
                ("taskmanager.memory.framework.heap.size", "128m".into()),
                ("taskmanager.memory.task.heap.size", "384m".into()),
                ("taskmanager.memory.framework.off-heap.size", "128m".into()),
                ("taskmanager.memory.task.off-heap.size", "0m".into()),
                ("taskmanager.memory.network.min", "128m".into()),
                ("taskmanager.memory.network.max", "128m".into()),
                ("taskmanager.memory.managed.size", "32m".into()),
                ("taskmanager.memory.jvm-metaspace.size", "256m".into()),
                ("taskmanager.memory.jvm-overhead.min", "192m".into()),
                ("taskmanager.memory.jvm-overhead.max", "192m".into()),
                ("io.tmp.dirs", cluster.dir.join(format!("{id}-tmp")).display().to_string()),
            ]);
            let metrics_url = if spec.reporter {
                let reporter_port = port()?;
                tm.extend(moirai_middleware::driver::flink_prometheus::reporter_conf(reporter_port));
                Some(format!("http://{tm_host}:{reporter_port}/metrics"))
            } else {
                None
            };
            let child = if k < spec.taskmanagers - spec.deferred {
                Some(cluster.spawn(&id, netns.as_deref(), &tm, TASKMANAGER_MAIN, &TM_FLAGS, jobs)?)
            } else {
                None
            };
            cluster.taskmanagers.push(TaskManager {
                log: cluster.dir.join(format!("{id}.log")),
                id,
                host: tm_host,
                netns,
                metrics_url,
                child,
                conf: tm,
            });
        }
        let ids: Vec<String> =
            cluster.taskmanagers.iter().filter(|t| t.child.is_some()).map(|t| t.id.clone()).collect();
        cluster.wait("every TaskManager to register", |c| {
            let seen = c.registered()?;
            let missing: Vec<&String> = ids.iter().filter(|i| !seen.contains(i)).collect();
            if missing.is_empty() {
                Ok(())
            } else {
                Err(format!("not registered yet: {missing:?}"))
            }
        })?;
        Ok(cluster)
    }

    /// Writes `name`'s configuration directory and starts its JVM (in `netns` if given).
    fn spawn(
        &self,
        name: &str,
        netns: Option<&str>,
        conf: &[(&str, String)],
        main: &str,
        jvm_flags: &[&str],
        jobs: &JvmJobs,
    ) -> Result<Child, String> {
        let conf_dir = self.dir.join(format!("{name}-conf"));
        std::fs::create_dir_all(&conf_dir).map_err(|e| format!("cannot create {}: {e}", conf_dir.display()))?;
        let file = conf_dir.join(config_file(&jobs.classpath));
        std::fs::write(&file, conf_text(conf)).map_err(|e| format!("cannot write {}: {e}", file.display()))?;
        let mut cmd = match netns {
            Some(ns) => {
                let mut c = Command::new("ip");
                c.args(["netns", "exec", ns]).arg(&jobs.java);
                c
            }
            None => Command::new(&jobs.java),
        };
        cmd.args(jvm_flags)
            .arg("-Dorg.slf4j.simpleLogger.defaultLogLevel=warn")
            .arg("-Dorg.slf4j.simpleLogger.showDateTime=true")
            .arg("-cp")
            .arg(&jobs.classpath)
            .arg(main)
            .arg("--configDir")
            .arg(&conf_dir);
        let log = self.dir.join(format!("{name}.log"));
        let file = std::fs::File::create(&log).map_err(|e| format!("cannot create {}: {e}", log.display()))?;
        Child::spawn_logged(cmd, file).map_err(|e| format!("cannot start the {name} JVM: {e}"))
    }

    /// Waits until `ready` passes, the JobManager exits, or [`START_TIMEOUT`] passes; on failure
    /// the logs are kept, and the error says where.
    fn wait(&mut self, what: &str, ready: impl Fn(&FlinkCluster) -> Result<(), String>) -> Result<(), String> {
        let result = self.wait_inner(what, ready);
        if result.is_err() {
            self.keep = true;
        }
        result.map_err(|e| {
            format!(
                "{e}
(the cluster's configuration and logs are kept in {})",
                self.dir.display()
            )
        })
    }

    fn wait_inner(&mut self, what: &str, ready: impl Fn(&FlinkCluster) -> Result<(), String>) -> Result<(), String> {
        let until = Instant::now() + START_TIMEOUT;
        loop {
            let last = match ready(self) {
                Ok(()) => return Ok(()),
                Err(e) => e,
            };
            let mut exited = Vec::new();
            if let Some(s) = self.jobmanager.as_mut().and_then(Child::try_wait) {
                exited.push(format!(
                    "the JobManager exited ({}); its log ends with:\n{}",
                    describe(s),
                    file_tail(&self.jm_log, 15)
                ));
            }
            for tm in &mut self.taskmanagers {
                if let Some(s) = tm.child.as_mut().and_then(Child::try_wait) {
                    exited.push(format!(
                        "TaskManager {} exited ({}); its log ends with:\n{}",
                        tm.id,
                        describe(s),
                        tm.log_tail(15)
                    ));
                }
            }
            if !exited.is_empty() {
                return Err(format!("waiting for {what}: {}", exited.join("\n")));
            }
            if Instant::now() >= until {
                return Err(format!("{what} not ready within {START_TIMEOUT:?}: {last}"));
            }
            std::thread::sleep(Duration::from_millis(200));
        }
    }

    fn get(&self, path: &str) -> Result<serde_json::Value, String> {
        let url = format!("{}{path}", self.rest_url());
        let text = self
            .agent
            .get(&url)
            .call()
            .map_err(|e| format!("{url}: {e}"))?
            .into_string()
            .map_err(|e| format!("{url}: {e}"))?;
        serde_json::from_str(&text).map_err(|e| format!("{url}: {e}"))
    }

    /// The ids of the TaskManagers registered with the JobManager now.
    pub fn registered(&self) -> Result<Vec<String>, String> {
        let v = self.get("/taskmanagers")?;
        Ok(v["taskmanagers"]
            .as_array()
            .map(|a| a.iter().filter_map(|t| t["id"].as_str().map(str::to_string)).collect())
            .unwrap_or_default())
    }

    /// The REST API's URL (`http://10.77.x.1:port`), for the middleware.
    pub fn rest_url(&self) -> String {
        format!("http://{}:{}", self.host, self.rest_port)
    }

    /// The REST address `host:port`, for a client (`moirai.flink.Run --jobmanager`).
    pub fn jobmanager_address(&self) -> String {
        format!("{}:{}", self.host, self.rest_port)
    }

    /// The JobManager JVM's PID while it runs.
    pub fn jobmanager_pid(&self) -> Option<u32> {
        self.jobmanager.as_ref().map(Child::pid)
    }

    /// The TaskManagers, in start order.
    pub fn taskmanagers(&self) -> &[TaskManager] {
        &self.taskmanagers
    }

    /// Kills TaskManager `index` outright (SIGKILL, as a crashed node), by its PID.
    pub fn kill_taskmanager(&mut self, index: usize) {
        if let Some(mut child) = self.taskmanagers.get_mut(index).and_then(|t| t.child.take()) {
            child.terminate(Signal::KILL, STOP_GRACE);
        }
    }

    /// Starts TaskManager `index`: a deferred one ([`ClusterSpec::deferred`], a node joining
    /// late), or one again after [`FlinkCluster::kill_taskmanager`] (a node back), with its
    /// configuration and on its node; its log starts afresh. It registers a moment later
    /// ([`FlinkCluster::registered`]).
    pub fn start_taskmanager(&mut self, index: usize, jobs: &JvmJobs) -> Result<(), String> {
        let tm = self.taskmanagers.get(index).ok_or_else(|| format!("no TaskManager {index}"))?;
        if tm.child.is_some() {
            return Err(format!("TaskManager {} runs", tm.id));
        }
        let child = self.spawn(&tm.id, tm.netns.as_deref(), &tm.conf, TASKMANAGER_MAIN, &TM_FLAGS, jobs)?;
        self.taskmanagers[index].child = Some(child);
        Ok(())
    }

    /// Stops the JobManager (SIGTERM, then SIGKILL), by its PID.
    pub fn stop_jobmanager(&mut self) {
        if let Some(mut child) = self.jobmanager.take() {
            child.terminate(Signal::TERM, STOP_GRACE);
        }
    }

    /// Starts `moirai.flink.Run <workload> <args> --jobmanager HOST:PORT --json` in the root
    /// namespace, its stderr into `log`: the client that submits the job and prints its summary
    /// when the job ends.
    pub fn submit(&self, jobs: &JvmJobs, workload: &str, args: &[String], log: &Path) -> Result<Child, String> {
        let mut cp = jobs.jar.display().to_string();
        cp.push(':');
        cp.push_str(&jobs.classpath);
        let mut cmd = Command::new(&jobs.java);
        cmd.arg("-Xmx512m").arg("-cp").arg(cp).arg(jobs.system.main_class).arg(workload).args(args);
        cmd.arg("--jobmanager").arg(self.jobmanager_address()).arg("--json");
        let file = std::fs::File::create(log).map_err(|e| format!("cannot create {}: {e}", log.display()))?;
        Child::spawn_logged(cmd, file).map_err(|e| format!("cannot start the Flink client: {e}"))
    }

    /// Where every subtask of job `job` runs now: (vertex name, subtask index, attempt status,
    /// TaskManager id), from the REST API.
    pub fn placement(&self, job: &str) -> Result<Vec<(String, usize, String, String)>, String> {
        let detail = self.get(&format!("/jobs/{job}"))?;
        let mut out = Vec::new();
        for v in detail["vertices"].as_array().into_iter().flatten() {
            let (Some(id), Some(name)) = (v["id"].as_str(), v["name"].as_str()) else { continue };
            let vertex = self.get(&format!("/jobs/{job}/vertices/{id}"))?;
            for s in vertex["subtasks"].as_array().into_iter().flatten() {
                out.push((
                    name.to_string(),
                    s["subtask"].as_u64().unwrap_or(0) as usize,
                    s["status"].as_str().unwrap_or("").to_string(),
                    s["taskmanager-id"].as_str().unwrap_or("").to_string(),
                ));
            }
        }
        Ok(out)
    }

    /// The id of the one RUNNING job once every subtask of it runs, else why not: one request
    /// (`/jobs/overview`: each job's state and its tasks by state), cheap on a loaded JobManager.
    pub fn running_job(&self) -> Result<String, String> {
        let jobs = self.get("/jobs/overview")?;
        let running: Vec<&serde_json::Value> =
            jobs["jobs"].as_array().into_iter().flatten().filter(|j| j["state"] == "RUNNING").collect();
        let [job] = running[..] else { return Err(format!("{} running jobs", running.len())) };
        let id = job["jid"].as_str().ok_or("a job without jid in /jobs/overview")?;
        let (total, run) = (job["tasks"]["total"].as_u64(), job["tasks"]["running"].as_u64());
        match (total, run) {
            (Some(t), Some(r)) if t > 0 && r == t => Ok(id.to_string()),
            _ => Err(format!("job {id}: not every subtask runs yet ({:?} of {:?})", run, total)),
        }
    }
}

impl Drop for FlinkCluster {
    /// TaskManagers first, then the JobManager, each by PID; then the directory, unless a panic
    /// unwinds (the namespaces go when `nodes` drops, after this).
    fn drop(&mut self) {
        for tm in &mut self.taskmanagers {
            if let Some(mut c) = tm.child.take() {
                c.terminate(Signal::TERM, STOP_GRACE);
            }
        }
        self.stop_jobmanager();
        if std::thread::panicking() || self.keep {
            // A failing test: its logs explain it.
            eprintln!("the Flink cluster's configuration and logs are kept in {}", self.dir.display());
        } else {
            let _ = std::fs::remove_dir_all(&self.dir);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_configuration_file_follows_the_flink_version_on_the_classpath() {
        let m2 = "/root/.m2/repository/org/apache/flink";
        let v1 = format!("{m2}/flink-runtime-web/1.20.3/flink-runtime-web-1.20.3.jar:{m2}/flink-runtime/1.20.3/flink-runtime-1.20.3.jar");
        let v2 = format!(
            "{m2}/flink-runtime-web/2.3.0/flink-runtime-web-2.3.0.jar:{m2}/flink-runtime/2.3.0/flink-runtime-2.3.0.jar"
        );
        assert_eq!(flink_major(&v1), Some(1));
        assert_eq!(flink_major(&v2), Some(2));
        assert_eq!(config_file(&v1), "flink-conf.yaml");
        assert_eq!(config_file(&v2), "config.yaml");
        assert_eq!(flink_major("/x/flink-runtime-web-2.3.0.jar"), None, "the web UI's jar is not the runtime's");
        assert_eq!(config_file(""), "flink-conf.yaml");
    }
}

//! A point of a standalone-cluster configuration (`flink:qs/cluster=standalone:2`): the lab
//! starts a Flink session cluster for the point ([`crate::flink_cluster`]: a JobManager and N
//! TaskManagers, each in a network namespace of its own), submits the job to it as a client does
//! (`moirai.flink.Run <workload> … --jobmanager HOST:PORT`), and, for a policy, runs one
//! `moirai schedule` per TaskManager (`--flink URL --flink-taskmanager ID`, each with a state file
//! of its own, reading its TaskManager's Prometheus reporter: `--flink-prometheus URL`), whose
//! CPU the lab sums into the point's middleware column.
//!
//! One cluster per point, not per sweep: the sweep interleaves configurations (A B A B …), so a
//! cluster kept for a configuration would sit beside the other configurations' points, its JVMs
//! idle but heart-beating and holding ~3 GB; and a point that failed cannot leave a cluster in a
//! bad state for the next. The price is the cluster's start (~10 s), outside the measurement as a
//! JVM's start is: the job's own clock starts when its sources start.
//!
//! The client's summary has what the job's probes counted and measured in the TaskManagers; its
//! `cpu_cores` (which the client cannot see) is replaced by the CPU of the cluster's JVMs
//! (JobManager and TaskManagers) over the measured window, as the MiniCluster's JVM reports its
//! own. Everything is stopped by PID when the point ends, also on failure (the guards' drops).

use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, Instant};

use moirai_os::Signal;

use crate::flink_cluster::{ClusterSpec, FlinkCluster, LAB_HEARTBEAT_TIMEOUT};
use crate::jvm::{JvmJobs, JvmSystem};
use crate::mw_state::NodeTarget;
use crate::process::{describe, file_tail, Child};

/// The job's parallelism among the sweep's job arguments (`--parallelism P`, 1 by default): each
/// TaskManager gets that many slots, enough to run the whole job alone.
pub fn parallelism(job_args: &[String]) -> usize {
    let mut it = job_args.iter();
    while let Some(a) = it.next() {
        if a == "--parallelism" {
            return it.next().and_then(|v| v.parse().ok()).unwrap_or(1);
        }
        if let Some(v) = a.strip_prefix("--parallelism=") {
            return v.parse().unwrap_or(1);
        }
    }
    1
}

/// A job on a cluster of its own: the cluster, and the client that submitted it and prints its
/// summary.
pub struct ClusterJob {
    system: &'static JvmSystem,
    client: Child,
    log: PathBuf,
    /// Dropped after the client (fields drop in order): the cluster's JVMs and namespaces.
    cluster: FlinkCluster,
    /// CPU of the cluster's JVMs at the measured window's start and end, ns.
    cpu: [Option<(Instant, u64)>; 2],
}

impl ClusterJob {
    /// Starts a cluster of `taskmanagers` nodes and submits `workload args` to it; the client's
    /// stderr goes to `log`.
    pub fn start(
        jobs: &JvmJobs,
        taskmanagers: usize,
        workload: &str,
        args: &[String],
        log: &Path,
    ) -> Result<ClusterJob, String> {
        let spec = ClusterSpec {
            taskmanagers,
            slots: parallelism(args).max(1),
            namespaces: true,
            heartbeat_timeout: LAB_HEARTBEAT_TIMEOUT,
            deferred: 0,
            reporter: true,
        };
        let cluster = FlinkCluster::start(jobs, &spec)?;
        if let Some(dir) = log.parent() {
            std::fs::create_dir_all(dir).map_err(|e| format!("cannot create {}: {e}", dir.display()))?;
        }
        let client = cluster.submit(jobs, workload, args, log)?;
        Ok(ClusterJob { system: jobs.system(), client, log: log.to_path_buf(), cluster, cpu: [None, None] })
    }

    /// Waits until the job runs with every subtask deployed; an error says why not (the client
    /// exited, the timeout passed), `Ok(false)` when `stop` was raised.
    pub fn wait_running(&mut self, timeout: Duration, stop: &AtomicBool) -> Result<bool, String> {
        let until = Instant::now() + timeout;
        loop {
            let last = match self.cluster.running_job() {
                Ok(_) => return Ok(true),
                Err(e) => e,
            };
            if stop.load(Ordering::SeqCst) {
                return Ok(false);
            }
            if let Some(status) = self.client.try_wait() {
                return Err(format!(
                    "the {} client exited before its job ran ({}): {}",
                    self.system.name,
                    describe(status),
                    file_tail(&self.log, 5)
                ));
            }
            if Instant::now() >= until {
                return Err(format!(
                    "the {} job on the standalone cluster did not run within {timeout:?}: {last}; the client's log \
                     ends with: {}",
                    self.system.name,
                    file_tail(&self.log, 5)
                ));
            }
            std::thread::sleep(Duration::from_millis(200));
        }
    }

    /// The middleware's target (`--flink URL`) and each node's TaskManager with its Prometheus
    /// reporter, for one middleware per node (`--flink-taskmanager ID --flink-prometheus URL`).
    pub fn middleware_targets(&self) -> (Vec<String>, Vec<NodeTarget>) {
        let nodes = self
            .cluster
            .taskmanagers()
            .iter()
            .map(|t| NodeTarget { taskmanager: t.id.clone(), prometheus: t.metrics_url.clone() })
            .collect();
        (vec!["--flink".to_string(), self.cluster.rest_url()], nodes)
    }

    /// The client (its exit ends the point; its stdout has the summary).
    pub fn child(&mut self) -> &mut Child {
        &mut self.client
    }

    /// The jobs' system.
    pub fn system(&self) -> &'static JvmSystem {
        self.system
    }

    /// The client's log.
    pub fn log_path(&self) -> &Path {
        &self.log
    }

    /// Stops the client by PID (the cluster's JVMs stop when this is dropped); idempotent.
    pub fn stop(&mut self) {
        self.client.terminate(Signal::TERM, Duration::from_secs(2));
    }

    /// Samples the cluster's CPU at the measured window's `start` and `end` (called every poll).
    pub fn watch(&mut self, start: Instant, end: Instant) {
        let now = Instant::now();
        if now >= start && self.cpu[0].is_none() {
            self.cpu[0] = self.cpu_sample();
        }
        if now >= end && self.cpu[1].is_none() {
            self.cpu[1] = self.cpu_sample();
        }
    }

    /// The cluster's CPU over the window, in cores; `None` unless both ends were sampled.
    pub fn cpu_cores(&mut self) -> Option<f64> {
        if self.cpu[1].is_none() && self.cpu[0].is_some() {
            // The job ended before the window's end as the lab saw it: up to now.
            self.cpu[1] = self.cpu_sample();
        }
        let [Some((a, ca)), Some((b, cb))] = self.cpu else { return None };
        let wall = b.duration_since(a).as_secs_f64();
        (wall > 0.0).then(|| cb.saturating_sub(ca) as f64 / 1e9 / wall)
    }

    fn cpu_sample(&self) -> Option<(Instant, u64)> {
        let pids = self.cluster.taskmanagers().iter().filter_map(|t| t.pid()).chain(self.cluster.jobmanager_pid());
        let mut ns = 0;
        for pid in pids {
            ns += moirai_os::proc::process_and_children_cpu_ns(pid).ok()?;
        }
        Some((Instant::now(), ns))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn slots_follow_the_jobs_parallelism() {
        let args = |s: &str| s.split_whitespace().map(str::to_string).collect::<Vec<_>>();
        assert_eq!(parallelism(&args("--ops 3 --parallelism 2")), 2);
        assert_eq!(parallelism(&args("--parallelism=3 --ops 3")), 3);
        assert_eq!(parallelism(&args("--ops 3")), 1);
    }
}

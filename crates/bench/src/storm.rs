//! Apache Storm jobs of moirai's workloads, for `storm:` configurations of the lab and for tests
//! that need a real Storm topology to schedule.
//!
//! The jobs live in `integrations/storm`, a Maven project like `integrations/flink` ([`crate::jvm`]
//! builds both): one job is one JVM, `java -cp <jar>:<classpath> moirai.storm.Run <workload>
//! [flags] --metrics-dir DIR`, running a Storm `LocalCluster` (Nimbus, a supervisor and the
//! workers as threads of that JVM) with one topology whose metrics Storm's own `CsvStormReporter`
//! writes into DIR every second — what the middleware's Storm driver reads. It ends by itself
//! after `--duration` and, with `--json`, prints the same JSON summary as `moirai run <workload>
//! --json` on its last stdout line (plus `"system": "storm"`).

use std::path::{Path, PathBuf};
use std::process::{Command, ExitStatus};
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::time::{Duration, Instant};

use crate::jvm::{Integration, JobProcess, JvmJobs};
use crate::process::{describe, Child};

/// The Storm job's name of a workload as `moirai run` names it (aliases included), or why Storm
/// cannot run it.
pub fn job_workload(workload: &str) -> Result<&'static str, String> {
    crate::jvm::job_workload(Integration::Storm, workload)
}

/// Checks the flags passed on to a Storm job of `workload` ([`crate::jvm::check_job_args`]).
pub fn check_job_args(workload: &str, args: &[String]) -> Result<(), String> {
    crate::jvm::check_job_args(Integration::Storm, workload, args)
}

/// The built Storm jobs: where the jar and its classpath are, and the `java` that runs them.
#[derive(Clone, Debug)]
pub struct StormJobs(JvmJobs);

impl StormJobs {
    /// The project directory: `$MOIRAI_STORM_JOBS` if set, else `integrations/storm` of the
    /// source tree this crate was built from.
    pub fn project_dir() -> PathBuf {
        Integration::Storm.project_dir()
    }

    /// Locates integrations/storm and builds it with mvn when the jar is missing or older than
    /// its sources ([`JvmJobs::build_in`]).
    pub fn build() -> Result<StormJobs, String> {
        Self::build_in(&Self::project_dir())
    }

    /// [`StormJobs::build`] of the project in `dir`.
    pub fn build_in(dir: &Path) -> Result<StormJobs, String> {
        JvmJobs::build_in(Integration::Storm, dir).map(StormJobs)
    }

    /// Whether the project in `dir` must be (re)built ([`JvmJobs::needs_build`]).
    pub fn needs_build(dir: &Path) -> bool {
        JvmJobs::needs_build(Integration::Storm, dir)
    }

    /// The jobs' jar.
    pub fn jar(&self) -> &Path {
        self.0.jar()
    }

    /// The `java` command for one job (no spawn):
    /// `java -cp <jar>:<classpath> moirai.storm.Run <workload> <args...> --metrics-dir <dir>`.
    pub fn command(&self, workload: &str, args: &[String], metrics_dir: &Path) -> Command {
        let mut cmd = self.0.command(workload, args);
        cmd.arg("--metrics-dir").arg(metrics_dir);
        cmd
    }
}

/// Why [`StormJob::wait_running_unless`] returned without a running topology.
#[derive(Debug)]
pub enum NotRunning {
    /// The JVM exited first.
    Exited {
        /// Its exit status.
        status: ExitStatus,
        /// The message, with the tail of its stderr.
        message: String,
    },
    /// No spout emitted within the timeout; the JVM may still run (stop it, or drop the job).
    Failed(String),
    /// The stop flag was raised.
    Stopped,
}

impl NotRunning {
    /// The message for a person.
    pub fn message(&self) -> String {
        match self {
            NotRunning::Exited { message, .. } | NotRunning::Failed(message) => message.clone(),
            NotRunning::Stopped => "stopped before the Storm topology ran".to_string(),
        }
    }
}

/// A running Storm job: one JVM, its metrics directory (removed with the job), stdout collected
/// on a thread, stderr written to a log file. Dropping it stops the JVM ([`StormJob::stop`]).
pub struct StormJob {
    process: JobProcess,
    metrics_dir: PathBuf,
}

/// Numbers the jobs of this process, for their metrics directories.
static JOBS: AtomicUsize = AtomicUsize::new(0);

impl StormJob {
    /// Spawns the job with a fresh metrics directory in the temp directory, stderr to
    /// `moirai-storm-<workload>-<n>.log` there — removed when the job is dropped, unless an error
    /// message of [`StormJob::wait_running`] or [`StormJob::wait`] named it.
    pub fn start(jobs: &StormJobs, workload: &str, args: &[String]) -> Result<StormJob, String> {
        Self::spawn(jobs, workload, args, None)
    }

    /// [`StormJob::start`] with stderr written to `log` (its directory is created).
    pub fn start_logged(jobs: &StormJobs, workload: &str, args: &[String], log: &Path) -> Result<StormJob, String> {
        Self::spawn(jobs, workload, args, Some(log))
    }

    fn spawn(jobs: &StormJobs, workload: &str, args: &[String], log: Option<&Path>) -> Result<StormJob, String> {
        let tag = format!("{}-{}", std::process::id(), JOBS.fetch_add(1, Ordering::Relaxed));
        let metrics_dir = std::env::temp_dir().join(format!("moirai-storm-metrics-{tag}"));
        let _ = std::fs::remove_dir_all(&metrics_dir);
        std::fs::create_dir_all(&metrics_dir)
            .map_err(|e| format!("cannot create the metrics directory {}: {e}", metrics_dir.display()))?;
        let command = jobs.command(workload, args, &metrics_dir);
        match JobProcess::spawn(&jobs.0, command, workload, &tag, log) {
            Ok(process) => Ok(StormJob { process, metrics_dir }),
            Err(e) => {
                let _ = std::fs::remove_dir_all(&metrics_dir);
                Err(e)
            }
        }
    }

    /// The JVM's PID.
    pub fn pid(&self) -> u32 {
        self.process.pid()
    }

    /// Where Storm writes the topology's metrics (the middleware's `--storm DIR`).
    pub fn metrics_dir(&self) -> &Path {
        &self.metrics_dir
    }

    /// The file the JVM's stderr (Storm's log) goes to.
    pub fn log_path(&self) -> &Path {
        self.process.log_path()
    }

    /// The last `lines` lines of the JVM's stderr.
    pub fn stderr_tail(&self, lines: usize) -> String {
        self.process.stderr_tail(lines)
    }

    /// The last line the job itself wrote about a failure or a bad flag ([`JobProcess::complaint`]).
    pub fn complaint(&self) -> Option<String> {
        self.process.complaint()
    }

    /// The exit status, if the JVM has exited (it is then reaped).
    pub fn try_wait(&mut self) -> Option<ExitStatus> {
        self.process.try_wait()
    }

    /// The child process, for the lab's own waiting loop.
    pub(crate) fn child(&mut self) -> &mut Child {
        self.process.child()
    }

    /// Waits until the topology runs: Storm has reported a spout's emit count (a
    /// `…-__emit-count-<stream>.csv` file in the metrics directory); returns the topology id.
    /// Fails early (with the tail of stderr) if the JVM exits, and after `timeout` (the JVM is
    /// then left running: [`StormJob::stop`] it).
    pub fn wait_running(&mut self, timeout: Duration) -> Result<String, String> {
        self.wait_running_unless(timeout, &AtomicBool::new(false)).map_err(|e| e.message())
    }

    /// [`StormJob::wait_running`] that also returns when `stop` is raised.
    pub fn wait_running_unless(&mut self, timeout: Duration, stop: &AtomicBool) -> Result<String, NotRunning> {
        let until = Instant::now() + timeout;
        loop {
            if let Some(status) = self.process.try_wait() {
                let message = format!(
                    "the Storm job's JVM exited before its topology ran ({}); {}",
                    describe(status),
                    self.process.log_for_message()
                );
                return Err(NotRunning::Exited { status, message });
            }
            if stop.load(Ordering::SeqCst) {
                return Err(NotRunning::Stopped);
            }
            if let Some(id) = emitting_topology(&self.metrics_dir) {
                return Ok(id);
            }
            if Instant::now() >= until {
                let log = self.process.log_for_message();
                return Err(NotRunning::Failed(format!(
                    "no spout of the Storm job reported an emit count in {} within {timeout:?}; {log}",
                    self.metrics_dir.display()
                )));
            }
            std::thread::sleep(Duration::from_millis(200));
        }
    }

    /// Waits for the JVM to exit by itself (up to `timeout`; then stops it) and returns its
    /// stdout, or why it failed.
    pub fn wait(mut self, timeout: Duration) -> Result<String, String> {
        self.process.wait(timeout)
    }

    /// SIGTERM by PID (to the process group the JVM leads), up to
    /// [`STOP_GRACE`](crate::jvm::STOP_GRACE) for it to exit, then SIGKILL; reaps the JVM.
    /// Idempotent.
    pub fn stop(&mut self) {
        self.process.stop();
    }
}

impl Drop for StormJob {
    /// The JVM is stopped (by [`JobProcess`]'s drop, which runs after this), then the metrics
    /// directory goes.
    fn drop(&mut self) {
        self.process.stop();
        let _ = std::fs::remove_dir_all(&self.metrics_dir);
    }
}

/// The id of a topology a spout of which reported an emit count into `dir`, if any.
fn emitting_topology(dir: &Path) -> Option<String> {
    std::fs::read_dir(dir).ok()?.flatten().find_map(|e| {
        let name = e.file_name().into_string().ok()?;
        if !name.contains("-__emit-count-") || name.contains("-__emit-count-__") || name.ends_with(".m1_rate.csv") {
            return None;
        }
        let (id, _) = name.strip_prefix("storm.worker.")?.split_once('.')?;
        Some(id.to_string())
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::output::tests::TempDir;

    fn args(s: &str) -> Vec<String> {
        s.split_whitespace().map(str::to_string).collect()
    }

    #[test]
    fn storm_job_flags_are_checked() {
        assert_eq!(check_job_args("syn", &args("--lachesis --queries 4 --parallelism 2 --seed 3")), Ok(()));
        assert_eq!(check_job_args("linear-road", &args("--shape lachesis --xways 2")), Ok(()));
        assert_eq!(check_job_args("syn", &args("--lachesis --wait-strategy park:100")), Ok(()));
        assert_eq!(check_job_args("linear-road", &args("--shape lachesis --wait-strategy=park")), Ok(()));
        let msg = |w: &str, a: &str| check_job_args(w, &args(a)).unwrap_err();
        assert!(msg("syn", "--metrics-dir /tmp/x").contains("a directory of its own"));
        assert!(msg("syn", "--buffer-timeout-ms 5").contains("the Storm job `syn` does not take --buffer-timeout-ms"));
        assert!(msg("syn", "--rest-port 8081").contains("does not take --rest-port"));
        assert!(msg("syn", "--wait-strategy").contains("--wait-strategy needs a value"));
        assert!(msg("linear-road", "--xways 1").contains("pass -- --shape lachesis"));
        assert!(job_workload("wordcount").unwrap_err().contains("the Storm jobs (integrations/storm) have no"));
    }

    #[test]
    fn a_topology_runs_once_a_spout_reported_emitting() {
        let dir = TempDir::new("storm-emitting");
        let d = &dir.0;
        assert_eq!(emitting_topology(d), None);
        let touch = |name: &str| std::fs::write(d.join(name), "t,count\n").unwrap();
        touch("storm.worker.moirai-syn-1-17.localhost.syn0-source.4.1024-receive-queue-population.csv");
        touch("storm.worker.moirai-syn-1-17.localhost.syn0-source.__ack_init.4.1024-__emit-count-__ack_init.csv");
        touch("storm.worker.moirai-syn-1-17.localhost.syn0-source.default.4.1024-__emit-count-default.m1_rate.csv");
        assert_eq!(emitting_topology(d), None, "queues, system streams and meters are no emit count");
        touch("storm.worker.moirai-syn-1-17.localhost.syn0-source.default.4.1024-__emit-count-default.csv");
        assert_eq!(emitting_topology(d).as_deref(), Some("moirai-syn-1-17"));
    }

    /// Real Storm: flags the job rejects end the JVM with exit code 2, and waiting says so with
    /// the job's own message instead of waiting for the timeout; the metrics directory goes with
    /// the job.
    #[test]
    fn a_real_storm_job_with_bad_flags_fails_waiting_early() {
        if crate::requires::or_skip(
            "a_real_storm_job_with_bad_flags_fails_waiting_early",
            crate::requires::jdk_and_maven(),
        )
        .is_none()
        {
            return;
        }
        let jobs = StormJobs::build().unwrap();
        let mut job = StormJob::start(&jobs, "syn", &args("--ops notanumber")).unwrap();
        let e = job.wait_running(Duration::from_secs(300)).unwrap_err();
        assert!(e.contains("exited before its topology ran (exit code 2)"), "{e}");
        assert!(e.contains("moirai-storm: --ops 'notanumber' is not an integer"), "{e}");
        let (dir, log) = (job.metrics_dir().to_path_buf(), job.log_path().to_path_buf());
        assert!(dir.is_dir());
        drop(job);
        assert!(!dir.exists(), "the metrics directory is removed with the job");
        assert!(log.exists(), "a log an error message names is kept");
        std::fs::remove_file(log).unwrap();
    }

    #[test]
    fn the_command_names_the_metrics_directory_last() {
        let jobs = StormJobs(JvmJobs {
            integration: Integration::Storm,
            dir: "/p".into(),
            jar: "/p/target/moirai-storm-jobs.jar".into(),
            classpath: "/m/a.jar".into(),
            java: "/usr/bin/java".into(),
        });
        let args: Vec<String> = ["--rate", "1000"].iter().map(|s| s.to_string()).collect();
        let cmd = jobs.command("syn", &args, Path::new("/tmp/m"));
        let got: Vec<String> = cmd.get_args().map(|a| a.to_string_lossy().into_owned()).collect();
        assert_eq!(
            got.join(" "),
            "-Xmx1g -cp /p/target/moirai-storm-jobs.jar:/m/a.jar moirai.storm.Run syn --rate 1000 --metrics-dir /tmp/m"
        );
    }
}

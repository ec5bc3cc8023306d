//! Apache Flink jobs of moirai's workloads, for `flink:` configurations of the lab and for tests
//! that need a real Flink job to schedule.
//!
//! The jobs live in `integrations/flink`, a Maven project: `mvn -q -B -f <dir>/pom.xml
//! -DskipTests package` writes `target/moirai-flink-jobs.jar` and `target/classpath.txt` (the
//! dependencies' classpath, one `:`-separated line). One job is one JVM,
//! `java -cp <jar>:<classpath> moirai.flink.Run <workload> [flags] --rest-port N`, running a
//! local Flink environment (a MiniCluster in that JVM, operator chaining off) with the REST API
//! on 127.0.0.1:N; it ends by itself after `--duration` and, with `--json`, prints the same JSON
//! summary as `moirai run <workload> --json` on its last stdout line (plus `"system": "flink"`).
//!
//! [`FlinkJobs`] finds and builds the project; [`FlinkJob`] is one running job JVM, stopped by
//! PID when dropped. [`job_workload`] and [`check_job_args`] say, without starting anything,
//! whether a workload and its flags can run on Flink.

use std::path::{Path, PathBuf};
use std::process::{Command, ExitStatus};
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, Instant};

use crate::jvm::{Integration, JobProcess, JvmJobs};
pub use crate::jvm::{CLASSPATH, JVM_HEAP, STOP_GRACE};
use crate::process::{describe, free_port, Child};

/// Environment variable naming the Flink jobs' project directory instead of the default
/// `integrations/flink` of the source tree the lab was built from.
pub const JOBS_DIR_ENV: &str = "MOIRAI_FLINK_JOBS";
/// The jobs' jar, relative to the project directory.
pub const JAR: &str = "target/moirai-flink-jobs.jar";
/// The main class of every job.
pub const MAIN_CLASS: &str = "moirai.flink.Run";

/// The Flink job's name of a workload as `moirai run` names it (aliases included), or why Flink
/// cannot run it.
pub fn job_workload(workload: &str) -> Result<&'static str, String> {
    crate::jvm::job_workload(Integration::Flink, workload)
}

/// Checks the flags passed on to a Flink job of `workload` ([`crate::jvm::check_job_args`]).
pub fn check_job_args(workload: &str, args: &[String]) -> Result<(), String> {
    crate::jvm::check_job_args(Integration::Flink, workload, args)
}

/// The built Flink jobs: where the jar and its classpath are, and the `java` that runs them.
#[derive(Clone, Debug)]
pub struct FlinkJobs(JvmJobs);

impl FlinkJobs {
    /// The project directory: `$MOIRAI_FLINK_JOBS` if set, else `integrations/flink` of the
    /// source tree this crate was built from.
    pub fn project_dir() -> PathBuf {
        Integration::Flink.project_dir()
    }

    /// Locates integrations/flink ([`FlinkJobs::project_dir`]) and builds it with mvn when the
    /// jar is missing or older than its sources ([`JvmJobs::build_in`]).
    pub fn build() -> Result<FlinkJobs, String> {
        Self::build_in(&Self::project_dir())
    }

    /// [`FlinkJobs::build`] of the project in `dir`.
    pub fn build_in(dir: &Path) -> Result<FlinkJobs, String> {
        JvmJobs::build_in(Integration::Flink, dir).map(FlinkJobs)
    }

    /// Whether the project in `dir` must be (re)built ([`JvmJobs::needs_build`]).
    pub fn needs_build(dir: &Path) -> bool {
        JvmJobs::needs_build(Integration::Flink, dir)
    }

    /// The project directory.
    pub fn dir(&self) -> &Path {
        self.0.dir()
    }

    /// The jobs' jar.
    pub fn jar(&self) -> &Path {
        self.0.jar()
    }

    /// The `java` command for one job (no spawn):
    /// `java -cp <jar>:<classpath> moirai.flink.Run <workload> <args...> --rest-port <rest_port>`.
    pub fn command(&self, workload: &str, args: &[String], rest_port: u16) -> Command {
        let mut cmd = self.0.command(workload, args);
        cmd.args(["--rest-port".to_string(), rest_port.to_string()]);
        cmd
    }
}

/// Why [`FlinkJob::wait_running_unless`] returned without a RUNNING job.
#[derive(Debug)]
pub enum NotRunning {
    /// The JVM exited first.
    Exited {
        /// Its exit status.
        status: ExitStatus,
        /// The message, with the tail of its stderr.
        message: String,
    },
    /// The job failed, finished before it ran, or was not RUNNING within the timeout; the JVM
    /// may still run (stop it, or drop the job).
    Failed(String),
    /// The stop flag was raised.
    Stopped,
}

impl NotRunning {
    /// The message for a person.
    pub fn message(&self) -> String {
        match self {
            NotRunning::Exited { message, .. } | NotRunning::Failed(message) => message.clone(),
            NotRunning::Stopped => "stopped before the Flink job was RUNNING".to_string(),
        }
    }
}

/// A running Flink job: one JVM, its REST API on a loopback port, stdout collected on a thread,
/// stderr written to a log file. Dropping it stops the JVM ([`FlinkJob::stop`]).
pub struct FlinkJob {
    process: JobProcess,
    rest_url: String,
}

impl FlinkJob {
    /// Spawns the job on a free loopback port (bound with port 0 to pick one), stderr to
    /// `moirai-flink-<workload>-<port>.log` in the temp directory — removed when the job is
    /// dropped, unless an error message of [`FlinkJob::wait_running`] or [`FlinkJob::wait`]
    /// named it.
    ///
    /// Another process may take the port before the JVM binds it; the JVM then exits with a
    /// `BindException` that [`FlinkJob::wait_running`] reports: start again.
    pub fn start(jobs: &FlinkJobs, workload: &str, args: &[String]) -> Result<FlinkJob, String> {
        Self::spawn(jobs, workload, args, None)
    }

    /// [`FlinkJob::start`], then [`FlinkJob::wait_running`]; started again (up to three times in
    /// all) when the JVM exited because another process took the REST port between choosing it
    /// and binding it (a `BindException`). Returns the job and its id.
    pub fn start_running(
        jobs: &FlinkJobs,
        workload: &str,
        args: &[String],
        timeout: Duration,
    ) -> Result<(FlinkJob, String), String> {
        let mut attempt = 1;
        loop {
            let mut job = Self::start(jobs, workload, args)?;
            match job.wait_running_unless(timeout, &AtomicBool::new(false)) {
                Ok(id) => return Ok((job, id)),
                Err(NotRunning::Exited { message, .. }) if attempt < 3 && message.contains("BindException") => {
                    attempt += 1;
                }
                Err(e) => return Err(e.message()),
            }
        }
    }

    /// [`FlinkJob::start`] with stderr written to `log` (its directory is created).
    pub fn start_logged(jobs: &FlinkJobs, workload: &str, args: &[String], log: &Path) -> Result<FlinkJob, String> {
        Self::spawn(jobs, workload, args, Some(log))
    }

    fn spawn(jobs: &FlinkJobs, workload: &str, args: &[String], log: Option<&Path>) -> Result<FlinkJob, String> {
        let port = free_port().map_err(|e| format!("no free TCP port on 127.0.0.1 for Flink's REST API: {e}"))?;
        let command = jobs.command(workload, args, port);
        let process = JobProcess::spawn(&jobs.0, command, workload, &port.to_string(), log)?;
        Ok(FlinkJob { process, rest_url: format!("http://127.0.0.1:{port}") })
    }

    /// The JVM's PID.
    pub fn pid(&self) -> u32 {
        self.process.pid()
    }

    /// The REST API, `http://127.0.0.1:N`.
    pub fn rest_url(&self) -> &str {
        &self.rest_url
    }

    /// The file the JVM's stderr (Flink's log) goes to.
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

    /// Polls `GET /jobs` and `GET /jobs/<id>` until the job and all its vertices are RUNNING;
    /// returns the job id. Fails early (with the tail of stderr) if the JVM exits or the job
    /// fails, and after `timeout` (the JVM is then left running: [`FlinkJob::stop`] it).
    pub fn wait_running(&mut self, timeout: Duration) -> Result<String, String> {
        self.wait_running_unless(timeout, &AtomicBool::new(false)).map_err(|e| e.message())
    }

    /// [`FlinkJob::wait_running`] that also returns when `stop` is raised.
    pub fn wait_running_unless(&mut self, timeout: Duration, stop: &AtomicBool) -> Result<String, NotRunning> {
        let agent = ureq::AgentBuilder::new()
            .timeout_connect(Duration::from_millis(500))
            .timeout(Duration::from_secs(3))
            .build();
        let until = Instant::now() + timeout;
        loop {
            if let Some(status) = self.process.try_wait() {
                let message = format!(
                    "the Flink job's JVM exited before the job was RUNNING ({}); {}",
                    describe(status),
                    self.process.log_for_message()
                );
                return Err(NotRunning::Exited { status, message });
            }
            if stop.load(Ordering::SeqCst) {
                return Err(NotRunning::Stopped);
            }
            let last = match self.probe(&agent) {
                Probe::Running(id) => return Ok(id),
                Probe::NotYet(why) => why,
                Probe::Ended(why) => {
                    return Err(NotRunning::Failed(format!("{why}; {}", self.process.log_for_message())))
                }
            };
            if Instant::now() >= until {
                let log = self.process.log_for_message();
                return Err(NotRunning::Failed(format!(
                    "the Flink job at {} was not RUNNING within {timeout:?} ({last}); {log}",
                    self.rest_url
                )));
            }
            std::thread::sleep(Duration::from_millis(200));
        }
    }

    /// One look at the REST API.
    fn probe(&self, agent: &ureq::Agent) -> Probe {
        let get = |path: &str| -> Result<serde_json::Value, String> {
            agent
                .get(&format!("{}{path}", self.rest_url))
                .call()
                .map_err(|e| format!("GET {path}: {e}"))?
                .into_json()
                .map_err(|e| format!("GET {path}: not JSON: {e}"))
        };
        let jobs = match get("/jobs") {
            Ok(v) => v,
            Err(e) => return Probe::NotYet(e),
        };
        let Some(job) = jobs["jobs"].as_array().and_then(|a| a.first()) else {
            return Probe::NotYet("no job submitted yet".into());
        };
        let (Some(id), status) = (job["id"].as_str(), job["status"].as_str().unwrap_or("?")) else {
            return Probe::NotYet(format!("GET /jobs: a job without an id: {job}"));
        };
        if matches!(status, "FAILED" | "CANCELED" | "FINISHED" | "SUSPENDED") {
            return Probe::Ended(format!("the Flink job {id} is {status} before it ran"));
        }
        if status != "RUNNING" {
            return Probe::NotYet(format!("job {id} is {status}"));
        }
        let detail = match get(&format!("/jobs/{id}")) {
            Ok(v) => v,
            Err(e) => return Probe::NotYet(e),
        };
        let vertices = detail["vertices"].as_array().map(Vec::as_slice).unwrap_or_default();
        let running = vertices.iter().filter(|v| v["status"] == "RUNNING").count();
        if running == vertices.len() && !vertices.is_empty() && detail["state"] == "RUNNING" {
            Probe::Running(id.to_string())
        } else {
            Probe::NotYet(format!("job {id}: {running} of {} vertices RUNNING", vertices.len()))
        }
    }

    /// Waits for the JVM to exit by itself (up to `timeout`; then stops it) and returns its
    /// stdout, or why it failed.
    pub fn wait(mut self, timeout: Duration) -> Result<String, String> {
        self.process.wait(timeout)
    }

    /// SIGTERM by PID (to the process group the JVM leads), up to [`STOP_GRACE`] for it to exit,
    /// then SIGKILL; reaps the JVM. Idempotent.
    pub fn stop(&mut self) {
        self.process.stop();
    }
}

/// What one look at the REST API found.
enum Probe {
    Running(String),
    NotYet(String),
    Ended(String),
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::jvm::BUILD_STAMP;
    use crate::output::tests::TempDir;
    use std::fs::File;
    use std::time::SystemTime;

    fn args(s: &str) -> Vec<String> {
        s.split_whitespace().map(str::to_string).collect()
    }

    #[test]
    fn workloads_without_a_flink_job_are_named() {
        assert_eq!(job_workload("syn"), Ok("syn"));
        assert_eq!(job_workload("lr"), Ok("linear-road"));
        assert_eq!(job_workload("linear-road"), Ok("linear-road"));
        for w in ["wordcount", "wc", "ysb", "nosuch"] {
            let e = job_workload(w).unwrap_err();
            assert!(e.contains(&format!("no '{w}' workload")) && e.contains("syn and linear-road"), "{e}");
        }
    }

    #[test]
    fn job_flags_are_checked() {
        assert_eq!(check_job_args("syn", &args("--ops 3 --cost-ns=500 --queries 2 --seed 7 --parallelism 2")), Ok(()));
        assert_eq!(check_job_args("syn", &args("--selectivity 0.5 --ramp-to 9000 --buffer-timeout-ms -1")), Ok(()));
        assert_eq!(check_job_args("linear-road", &args("--shape lachesis --xways 2 --cars-per-second 50")), Ok(()));
        assert_eq!(check_job_args("linear-road", &args("--shape=lachesis --traffic 1h")), Ok(()));
        let msg = |w: &str, a: &str| check_job_args(w, &args(a)).unwrap_err();
        for engine_only in ["--threading", "--chaining", "--channel-capacity", "--batch-size", "--metrics-addr"] {
            let e = msg("syn", &format!("--ops 3 {engine_only} 1"));
            assert!(e.contains(&format!("does not take {engine_only}")) && e.contains("--cost-ns"), "{e}");
        }
        assert_eq!(check_job_args("syn", &args("--lachesis --blocking --queries 4 --seed 3")), Ok(()));
        assert_eq!(check_job_args("syn", &args("--ops 2 --lachesis")), Ok(()));
        assert!(msg("syn", "--lachesis=yes").contains("--lachesis takes no value"));
        assert!(msg("linear-road", "--shape lachesis --lachesis").contains("does not take --lachesis"));
        assert!(msg("syn", "--xways 2").contains("does not take --xways"));
        assert!(msg("linear-road", "--shape lachesis --ops 2").contains("does not take --ops"));
        assert!(msg("syn", "--rest-port 8081").contains("the lab picks a free port"));
        assert!(msg("syn", "--rate=5").contains("--rate cannot be passed"));
        assert!(msg("syn", "--ops").contains("--ops needs a value"));
        assert!(msg("syn", "--ops --queries 2").contains("--ops needs a value"));
        assert!(msg("syn", "--ops 3 4").contains("unexpected argument '4'"));
        assert!(msg("linear-road", "--xways 1").contains("pass -- --shape lachesis"));
        assert!(msg("linear-road", "--shape faithful").contains("--shape faithful was given"));
    }

    #[test]
    fn a_build_is_needed_when_a_source_is_newer_than_the_jar() {
        let dir = TempDir::new("flink-stale");
        let d = &dir.0.join("flink");
        let at = |p: &Path, secs: u64| {
            std::fs::create_dir_all(p.parent().unwrap()).unwrap();
            let f = File::create(p).unwrap();
            f.set_modified(SystemTime::UNIX_EPOCH + Duration::from_secs(secs)).unwrap();
        };
        at(&d.join("pom.xml"), 100);
        at(&d.join("src/main/java/moirai/flink/Run.java"), 200);
        assert!(FlinkJobs::needs_build(d), "no jar yet");
        at(&d.join(JAR), 300);
        assert!(FlinkJobs::needs_build(d), "no classpath.txt yet");
        // Maven leaves a classpath.txt whose content did not change as it was: its age is no matter.
        at(&d.join(CLASSPATH), 50);
        assert!(!FlinkJobs::needs_build(d));
        at(&d.join("src/main/java/moirai/flink/Syn.java"), 400);
        assert!(FlinkJobs::needs_build(d), "a new source");
        at(&d.join(JAR), 500);
        assert!(!FlinkJobs::needs_build(d));
        at(&d.join("pom.xml"), 600);
        assert!(FlinkJobs::needs_build(d), "a changed pom.xml");
        // A build that left the jar as it was (same content) still counts, by the lab's stamp.
        at(&d.join(BUILD_STAMP), 700);
        assert!(!FlinkJobs::needs_build(d));
        // The sources shared with the Storm jobs count too.
        at(&d.join("../common/src/main/java/moirai/jobs/Spin.java"), 800);
        assert!(FlinkJobs::needs_build(d), "a changed shared source");
        at(&d.join(BUILD_STAMP), 900);
        assert!(!FlinkJobs::needs_build(d));
        std::fs::remove_file(d.join(CLASSPATH)).unwrap();
        assert!(FlinkJobs::needs_build(d), "classpath.txt is gone");
    }

    #[test]
    fn a_missing_project_or_a_failing_build_is_explained() {
        if crate::requires::or_skip(
            "a_missing_project_or_a_failing_build_is_explained",
            crate::requires::jdk_and_maven(),
        )
        .is_none()
        {
            return;
        }
        let dir = TempDir::new("flink-build");
        let e = FlinkJobs::build_in(&dir.0.join("nowhere")).unwrap_err();
        assert!(e.contains("no Flink jobs project") && e.contains(JOBS_DIR_ENV), "{e}");
        // A real Maven run on a broken pom: the error carries Maven's own complaint.
        std::fs::write(dir.0.join("pom.xml"), "<project><modelVersion>4.0.0</modelVersion></project>").unwrap();
        let e = FlinkJobs::build_in(&dir.0).unwrap_err();
        assert!(e.contains("building the Flink jobs failed") && e.contains("exit code 1"), "{e}");
        assert!(e.contains("groupId"), "Maven's message about the missing groupId: {e}");
    }

    fn alive(pid: u32) -> bool {
        // A reaped child has no /proc entry.
        Path::new(&format!("/proc/{pid}")).exists()
    }

    /// Real Flink: the job and its vertices become RUNNING, the REST API answers at the URL
    /// given, and `stop` ends the JVM by PID (twice is fine).
    #[test]
    fn a_real_job_becomes_running_and_stops_by_pid() {
        if crate::requires::or_skip("a_real_job_becomes_running_and_stops_by_pid", crate::requires::jdk_and_maven())
            .is_none()
        {
            return;
        }
        let jobs = FlinkJobs::build().unwrap();
        let (mut job, id) = FlinkJob::start_running(
            &jobs,
            "syn",
            &args("--rate 1000 --duration 120s --ops 2"),
            Duration::from_secs(90),
        )
        .unwrap();
        let pid = job.pid();
        assert!(id.len() == 32 && id.chars().all(|c| c.is_ascii_hexdigit()), "a Flink job id: {id}");
        let detail: serde_json::Value =
            ureq::get(&format!("{}/jobs/{id}", job.rest_url())).call().unwrap().into_json().unwrap();
        assert_eq!(detail["state"], "RUNNING");
        // SYN with 2 operators and chaining off: source, 2 operators, sink, each its own vertex.
        assert_eq!(detail["vertices"].as_array().unwrap().len(), 4, "{detail}");
        assert!(alive(pid));
        job.stop();
        assert!(!alive(pid), "the JVM {pid} outlived stop()");
        assert!(job.try_wait().is_some());
        job.stop();
    }

    /// Real Flink: a short job ends by itself and prints its summary, which the lab can read.
    #[test]
    fn a_real_job_ends_by_itself_with_its_summary() {
        if crate::requires::or_skip("a_real_job_ends_by_itself_with_its_summary", crate::requires::jdk_and_maven())
            .is_none()
        {
            return;
        }
        let jobs = FlinkJobs::build().unwrap();
        let job = FlinkJob::start(&jobs, "syn", &args("--rate 500 --duration 4s --ops 1 --json")).unwrap();
        let (pid, log) = (job.pid(), job.log_path().to_path_buf());
        let stdout = job.wait(Duration::from_secs(120)).unwrap();
        assert!(!alive(pid));
        assert!(!log.exists(), "the temp log of a clean run is removed");
        let s = crate::RunSummary::from_stdout(&stdout).unwrap();
        assert_eq!(s.extra["system"], "flink", "{stdout}");
        assert_eq!(s.workload, "syn");
        assert_eq!(s.offered_rate, 500.0);
    }

    /// Real Flink: flags the job rejects end the JVM with exit code 2, and waiting says so
    /// with the job's own message instead of waiting for the timeout.
    #[test]
    fn a_real_job_with_bad_flags_fails_waiting_early() {
        if crate::requires::or_skip("a_real_job_with_bad_flags_fails_waiting_early", crate::requires::jdk_and_maven())
            .is_none()
        {
            return;
        }
        let jobs = FlinkJobs::build().unwrap();
        let mut job = FlinkJob::start(&jobs, "syn", &args("--ops notanumber")).unwrap();
        let e = job.wait_running(Duration::from_secs(300)).unwrap_err();
        assert!(e.contains("exited before the job was RUNNING (exit code 2)"), "{e}");
        assert!(e.contains("it said: moirai-flink: --ops 'notanumber' is not an integer"), "{e}");
        let log = job.log_path().to_path_buf();
        assert!(e.contains("--ops") && e.contains(&log.display().to_string()), "{e}");
        drop(job);
        assert!(log.exists(), "a log an error message names is kept");
        std::fs::remove_file(log).unwrap();
    }

    /// The Java port of `syn::draw` (`moirai.jobs.SynDraw`, shared by the Flink and Storm jobs)
    /// draws bit for bit what moirai draws: the same queries, costs, selectivities (compared by
    /// their IEEE bits) and blocking operators, for several seeds and configurations.
    #[test]
    fn the_java_syn_draw_is_moirais() {
        if crate::requires::or_skip("the_java_syn_draw_is_moirais", crate::requires::jdk_and_maven()).is_none() {
            return;
        }
        use moirai_workloads::syn::{draw, SynConfig};
        let jobs = FlinkJobs::build().unwrap();
        let lachesis = SynConfig::lachesis();
        let simple = SynConfig::default();
        let cases: Vec<(&str, SynConfig)> = vec![
            ("--lachesis", lachesis.clone()),
            ("--lachesis --seed 1", SynConfig { seed: 1, ..lachesis.clone() }),
            ("--lachesis --seed 42 --blocking", SynConfig { seed: 42, blocking: true, ..lachesis.clone() }),
            (
                "--lachesis --seed 18446744073709551615 --blocking --queries 200 --selectivity 0.2",
                SynConfig { seed: u64::MAX, blocking: true, queries: 200, selectivity: 0.2, ..lachesis.clone() },
            ),
            (
                "--lachesis --seed 7 --ops 5 --cost-ns 3000 --selectivity 0.5 --heavy-op 2 --heavy-factor 8",
                SynConfig { seed: 7, ops: 5, cost_ns: 3000, selectivity: 0.5, heavy: Some((2, 8)), ..lachesis.clone() },
            ),
            (
                "--lachesis --seed 99 --queries 50 --selectivity 0.73",
                SynConfig { seed: 99, queries: 50, selectivity: 0.73, ..lachesis },
            ),
            (
                "--queries 3 --ops 4 --cost-ns 500 --selectivity 2.5 --blocking --seed 5 --heavy-op 4",
                SynConfig {
                    queries: 3,
                    ops: 4,
                    cost_ns: 500,
                    selectivity: 2.5,
                    blocking: true,
                    seed: 5,
                    heavy: Some((4, 4)),
                    ..simple
                },
            ),
        ];
        let bits = |v: &mut serde_json::Value| {
            let s = v["selectivity"].as_f64().unwrap();
            v["selectivity"] = s.to_bits().into();
        };
        for (flags, config) in cases {
            let out = std::process::Command::new(&jobs.0.java)
                .arg("-cp")
                .arg(jobs.jar())
                .arg("moirai.jobs.SynDraw")
                .args(args(flags))
                .arg("--bits")
                .output()
                .unwrap();
            assert!(out.status.success(), "SynDraw {flags}: {}", String::from_utf8_lossy(&out.stderr));
            let java: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
            // serde_json writes the shortest digits that read back as the same f64 (ryu), so the
            // bits of what Rust serialises are exactly those of the drawn values.
            let mut rust = serde_json::to_value(draw(&config).unwrap()).unwrap();
            for q in rust.as_array_mut().unwrap() {
                bits(q);
                for op in q["operators"].as_array_mut().unwrap() {
                    bits(op);
                }
            }
            assert_eq!(java, rust, "SynDraw {flags}");
            let n = config.queries * (config.ops + 1);
            assert_eq!(java.to_string().matches("\"cost_ns\"").count(), n, "{flags}: every query and operator");
        }
    }

    #[test]
    fn the_command_runs_the_main_class_with_the_jar_first_on_the_classpath() {
        let jobs = FlinkJobs(JvmJobs {
            integration: Integration::Flink,
            dir: "/p".into(),
            jar: "/p/target/moirai-flink-jobs.jar".into(),
            classpath: "/m/a.jar:/m/b.jar".into(),
            java: "/usr/bin/java".into(),
        });
        let cmd = jobs.command("syn", &args("--rate 1000 --json"), 18081);
        let got: Vec<String> = cmd.get_args().map(|a| a.to_string_lossy().into_owned()).collect();
        assert_eq!(cmd.get_program(), "/usr/bin/java");
        assert_eq!(
            got.join(" "),
            "-Xmx1g -cp /p/target/moirai-flink-jobs.jar:/m/a.jar:/m/b.jar moirai.flink.Run syn --rate 1000 \
             --json --rest-port 18081"
        );
    }
}

//! One running job of a [`JvmSystem`] (Flink or Storm): its JVM as a child process, the endpoint
//! the lab chose for it, its log, waiting until it runs or ends, and stopping it by PID — the
//! same for every system; what differs comes from the system's value ([`crate::flink::FLINK`],
//! [`crate::storm::STORM`]).

use std::ffi::OsString;
use std::path::{Path, PathBuf};
use std::process::{Command, ExitStatus};
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::time::{Duration, Instant};

use crate::jvm::{Endpoint, JvmJobs, JvmSystem, Probe, STOP_GRACE};
use crate::process::{describe, file_tail, free_port, Child};

/// Lines of a log shown in an error message.
const TAIL: usize = 12;
/// How often waiting for a job to run looks at it.
const PROBE_EVERY: Duration = Duration::from_millis(200);
/// Attempts of [`JvmJob::start_running`] whose JVM found its port taken.
const PORT_ATTEMPTS: u32 = 3;

/// Numbers the jobs of this process, for the directories made for them.
static JOBS: AtomicUsize = AtomicUsize::new(0);

/// Why [`JvmJob::wait_running_unless`] returned without a running job.
#[derive(Debug)]
pub enum NotRunning {
    /// The JVM exited first.
    Exited {
        /// Its exit status.
        status: ExitStatus,
        /// The message, with the tail of its stderr.
        message: String,
    },
    /// The job failed, finished before it ran, or did not run within the timeout; the JVM may
    /// still run (stop it, or drop the job).
    Failed(String),
    /// The stop flag was raised.
    Stopped,
}

impl NotRunning {
    /// The message for a person.
    pub fn message(&self) -> String {
        match self {
            NotRunning::Exited { message, .. } | NotRunning::Failed(message) => message.clone(),
            NotRunning::Stopped => "stopped before the job ran".to_string(),
        }
    }
}

/// A job's JVM: stdout collected on a thread, stderr written to a log file, its own temp
/// directory (`java.io.tmpdir`: Flink unpacks a ~20 MB RPC jar there at every start and never
/// removes it), and the endpoint the lab chose for it. Dropping it stops the JVM by PID, then
/// removes the endpoint's directory (if it has one), the temp directory and — unless an error
/// message named it — the log.
pub struct JvmJob {
    system: &'static JvmSystem,
    child: Child,
    endpoint: JobEndpoint,
    log: PathBuf,
    /// Remove the log on drop: a log in the temp directory that no error message named.
    remove_log: bool,
    tmp: PathBuf,
}

/// The endpoint the lab chose for one job ([`Endpoint`]).
struct JobEndpoint {
    /// The value of the job's flag that names it.
    value: OsString,
    /// Where the middleware finds the job: `http://127.0.0.1:N`, or the directory.
    address: String,
    /// The directory made for the job, removed with it.
    dir: Option<PathBuf>,
    /// Names the job's temp log and temp directory.
    tag: String,
    /// The port of the job's metrics ([`JvmSystem::metrics`]).
    metrics: Option<u16>,
}

impl JobEndpoint {
    /// A free loopback port (bound with port 0 to pick one), or a fresh directory in the temp
    /// directory.
    fn choose(system: &JvmSystem) -> Result<JobEndpoint, String> {
        match system.endpoint {
            Endpoint::Port { what, .. } => {
                let port = free_port()
                    .map_err(|e| format!("no free TCP port on 127.0.0.1 for {}'s {what}: {e}", system.name))?;
                Ok(JobEndpoint {
                    value: port.to_string().into(),
                    address: format!("http://127.0.0.1:{port}"),
                    dir: None,
                    tag: port.to_string(),
                    metrics: Self::metrics_port(system)?,
                })
            }
            Endpoint::Directory { what, .. } => {
                let tag = format!("{}-{}", std::process::id(), JOBS.fetch_add(1, Ordering::Relaxed));
                let dir = std::env::temp_dir().join(format!("moirai-{}-{what}-{tag}", system.module));
                let _ = std::fs::remove_dir_all(&dir);
                std::fs::create_dir_all(&dir)
                    .map_err(|e| format!("cannot create the {what} directory {}: {e}", dir.display()))?;
                Ok(JobEndpoint {
                    value: dir.clone().into_os_string(),
                    address: dir.display().to_string(),
                    dir: Some(dir),
                    tag,
                    metrics: Self::metrics_port(system)?,
                })
            }
        }
    }

    /// A free loopback port for the job's metrics, when it serves them apart.
    fn metrics_port(system: &JvmSystem) -> Result<Option<u16>, String> {
        system
            .metrics
            .map(|_| {
                free_port().map_err(|e| format!("no free TCP port on 127.0.0.1 for {}'s metrics: {e}", system.name))
            })
            .transpose()
    }

    /// Removes the directory made for the job, if any.
    fn remove(&self) {
        if let Some(d) = &self.dir {
            let _ = std::fs::remove_dir_all(d);
        }
    }
}

impl JvmJob {
    /// Spawns a job on an endpoint of its own (a free loopback port for Flink's REST API, a fresh
    /// metrics directory in the temp directory for Storm), stderr to
    /// `moirai-<module>-<workload>-<tag>.log` in the temp directory — removed when the job is
    /// dropped, unless an error message of [`JvmJob::wait_running`] or [`JvmJob::wait`] named it.
    ///
    /// Another process may take a port before the JVM binds it; the JVM then exits with a message
    /// that [`JvmJob::wait_running`] reports: start again ([`JvmJob::start_running`] does).
    pub fn start(jobs: &JvmJobs, workload: &str, args: &[String]) -> Result<JvmJob, String> {
        Self::spawn(jobs, workload, args, None)
    }

    /// [`JvmJob::start`] with stderr written to `log` (its directory is created).
    pub fn start_logged(jobs: &JvmJobs, workload: &str, args: &[String], log: &Path) -> Result<JvmJob, String> {
        Self::spawn(jobs, workload, args, Some(log))
    }

    /// [`JvmJob::start`], then [`JvmJob::wait_running`]; started again (up to three times in
    /// all) when the JVM exited because another process took its port between choosing it and
    /// binding it ([`JvmSystem::port_taken`]). Returns the job and its id.
    pub fn start_running(
        jobs: &JvmJobs,
        workload: &str,
        args: &[String],
        timeout: Duration,
    ) -> Result<(JvmJob, String), String> {
        let mut attempt = 1;
        loop {
            let mut job = Self::start(jobs, workload, args)?;
            match job.wait_running_unless(timeout, &AtomicBool::new(false)) {
                Ok(id) => return Ok((job, id)),
                Err(NotRunning::Exited { message, .. }) if attempt < PORT_ATTEMPTS && job.port_taken(&message) => {
                    attempt += 1;
                }
                Err(e) => return Err(e.message()),
            }
        }
    }

    fn spawn(jobs: &JvmJobs, workload: &str, args: &[String], log: Option<&Path>) -> Result<JvmJob, String> {
        let endpoint = JobEndpoint::choose(jobs.system)?;
        let mut command = jobs.command(workload, args, &endpoint.value);
        if let (Some(m), Some(port)) = (jobs.system.metrics, endpoint.metrics) {
            command.arg(m.flag).arg(port.to_string());
        }
        match Self::spawn_command(jobs, command, workload, log, &endpoint.tag) {
            Ok((child, log_path, tmp)) => {
                Ok(JvmJob { system: jobs.system, child, endpoint, log: log_path, remove_log: log.is_none(), tmp })
            }
            Err(e) => {
                endpoint.remove();
                Err(e)
            }
        }
    }

    /// Spawns `command` with stderr to `log`, or, when `None`, to
    /// `moirai-<module>-<workload>-<tag>.log` in the temp directory; returns the child, its log
    /// and its temp directory.
    fn spawn_command(
        jobs: &JvmJobs,
        mut command: Command,
        workload: &str,
        log: Option<&Path>,
        tag: &str,
    ) -> Result<(Child, PathBuf, PathBuf), String> {
        let (spe, module) = (jobs.system.name, jobs.system.module);
        let temp_log = log.is_none();
        let log = match log {
            Some(l) => l.to_path_buf(),
            None => std::env::temp_dir().join(format!(
                "moirai-{module}-{}-{tag}.log",
                workload.replace(|c: char| !c.is_ascii_alphanumeric() && c != '-', "_")
            )),
        };
        if let Some(d) = log.parent() {
            std::fs::create_dir_all(d).map_err(|e| format!("cannot create {}: {e}", d.display()))?;
        }
        let file = std::fs::File::create(&log)
            .map_err(|e| format!("cannot create the {spe} job's log {}: {e}", log.display()))?;
        let tmp = std::env::temp_dir().join(format!("moirai-{module}-tmp-{}-{tag}", std::process::id()));
        std::fs::create_dir_all(&tmp).map_err(|e| format!("cannot create {}: {e}", tmp.display()))?;
        command.env("JAVA_TOOL_OPTIONS", format!("-Djava.io.tmpdir={}", tmp.display()));
        match Child::spawn_logged(command, file) {
            Ok(child) => Ok((child, log, tmp)),
            Err(e) => {
                let _ = std::fs::remove_dir_all(&tmp);
                if temp_log {
                    // Empty, and named by no message.
                    let _ = std::fs::remove_file(&log);
                }
                Err(format!("cannot start the {spe} job ({}): {e}", jobs.java.display()))
            }
        }
    }

    /// The system whose job this is.
    pub fn system(&self) -> &'static JvmSystem {
        self.system
    }

    /// The JVM's PID.
    pub fn pid(&self) -> u32 {
        self.child.pid()
    }

    /// Where the middleware finds the job: Flink's REST API, `http://127.0.0.1:N`; the directory
    /// Storm writes the topology's metrics into.
    pub fn endpoint(&self) -> &str {
        &self.endpoint.address
    }

    /// The arguments of `moirai schedule` that point it at this job: `--flink URL
    /// --flink-prometheus URL/metrics`, `--storm DIR`.
    pub fn middleware_args(&self) -> Vec<String> {
        let mut args = vec![self.system.middleware_flag.to_string(), self.endpoint.address.clone()];
        if let (Some(m), Some(port)) = (self.system.metrics, self.endpoint.metrics) {
            args.extend([m.middleware_flag.to_string(), format!("http://127.0.0.1:{port}/metrics")]);
        }
        args
    }

    /// Where the job serves its metrics apart from its endpoint (Flink's Prometheus reporter),
    /// `http://127.0.0.1:N/metrics`.
    pub fn metrics_url(&self) -> Option<String> {
        self.endpoint.metrics.map(|port| format!("http://127.0.0.1:{port}/metrics"))
    }

    /// Whether an error message says that another process took the job's port.
    pub fn port_taken(&self, message: &str) -> bool {
        self.system.port_taken.iter().any(|m| message.contains(m))
    }

    /// The file the JVM's stderr (the SPE's log) goes to.
    pub fn log_path(&self) -> &Path {
        &self.log
    }

    /// The last `lines` lines of the JVM's stderr.
    pub fn stderr_tail(&self, lines: usize) -> String {
        file_tail(&self.log, lines)
    }

    /// The last line the job itself wrote about a failure or a bad flag (`moirai-flink: ...`, its
    /// prefix), if any: it may be far above the tail of a log (a usage text follows it, whose
    /// first line has the same prefix and is skipped).
    pub fn complaint(&self) -> Option<String> {
        let text = std::fs::read(&self.log).ok()?;
        let text = String::from_utf8_lossy(&text[text.len().saturating_sub(1 << 20)..]).into_owned();
        let prefix = self.system.prefix;
        let usage = format!("{prefix}moirai's workloads");
        text.lines().rev().find(|l| l.starts_with(prefix) && !l.starts_with(&usage)).map(|l| l.trim().to_string())
    }

    /// What the job said, the tail of stderr and where the whole log is, for an error message;
    /// the log is then kept.
    fn log_for_message(&mut self) -> String {
        self.remove_log = false;
        let tail = self.stderr_tail(TAIL);
        let said = match self.complaint() {
            Some(c) if !tail.contains(&c) => format!("it said: {c}\n"),
            _ => String::new(),
        };
        format!("{said}its stderr ends with:\n{tail}\n(full log: {})", self.log.display())
    }

    /// The exit status, if the JVM has exited (it is then reaped).
    pub fn try_wait(&mut self) -> Option<ExitStatus> {
        self.child.try_wait()
    }

    /// The child process, for the lab's own waiting loop.
    pub(crate) fn child(&mut self) -> &mut Child {
        &mut self.child
    }

    /// Waits until the job runs (Flink: the job and all its vertices are RUNNING, by its REST
    /// API; Storm: a spout has reported an emit count into the metrics directory); returns the
    /// job's id. Fails early (with the tail of stderr) if the JVM exits or the job fails, and
    /// after `timeout` (the JVM is then left running: [`JvmJob::stop`] it).
    pub fn wait_running(&mut self, timeout: Duration) -> Result<String, String> {
        self.wait_running_unless(timeout, &AtomicBool::new(false)).map_err(|e| e.message())
    }

    /// [`JvmJob::wait_running`] that also returns when `stop` is raised.
    pub fn wait_running_unless(&mut self, timeout: Duration, stop: &AtomicBool) -> Result<String, NotRunning> {
        let system = self.system;
        let until = Instant::now() + timeout;
        loop {
            if let Some(status) = self.child.try_wait() {
                let message = format!(
                    "the {} job's JVM exited before {} ({}); {}",
                    system.name,
                    system.ready,
                    describe(status),
                    self.log_for_message()
                );
                return Err(NotRunning::Exited { status, message });
            }
            if stop.load(Ordering::SeqCst) {
                return Err(NotRunning::Stopped);
            }
            let last = match (system.probe)(&self.endpoint.address) {
                Probe::Running(id) => return Ok(id),
                Probe::NotYet(why) => why,
                Probe::Ended(why) => return Err(NotRunning::Failed(format!("{why}; {}", self.log_for_message()))),
            };
            if Instant::now() >= until {
                let late = (system.late)(&self.endpoint.address, timeout, &last);
                return Err(NotRunning::Failed(format!("{late}; {}", self.log_for_message())));
            }
            std::thread::sleep(PROBE_EVERY);
        }
    }

    /// Waits for the JVM to exit by itself (up to `timeout`; then stops it) and returns its
    /// stdout, or why it failed.
    pub fn wait(mut self, timeout: Duration) -> Result<String, String> {
        let spe = self.system.name;
        let until = Instant::now() + timeout;
        while Instant::now() < until {
            if let Some(status) = self.child.try_wait() {
                if status.success() {
                    return Ok(self.child.output().0);
                }
                return Err(format!("the {spe} job failed ({}); {}", describe(status), self.log_for_message()));
            }
            std::thread::sleep(crate::process::POLL);
        }
        self.stop();
        Err(format!("the {spe} job did not finish within {timeout:?} and was stopped; {}", self.log_for_message()))
    }

    /// SIGTERM by PID (to the process group the JVM leads), up to [`STOP_GRACE`] for it to exit,
    /// then SIGKILL; reaps the JVM. Idempotent.
    pub fn stop(&mut self) {
        self.child.terminate(moirai_os::Signal::TERM, STOP_GRACE);
    }
}

impl Drop for JvmJob {
    /// A job's JVM never outlives its handle; what was made for it goes with it.
    fn drop(&mut self) {
        self.stop();
        self.endpoint.remove();
        let _ = std::fs::remove_dir_all(&self.tmp);
        if self.remove_log {
            let _ = std::fs::remove_file(&self.log);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::output::tests::TempDir;

    /// A stand-in for the SPEs: a shell script in place of `java`, which the lab passes
    /// `-Xmx1g -cp <jar> <main class> <workload> [args] <flag> <endpoint>`; it behaves as the
    /// workload says and leaves its arguments in `args` beside it.
    const FAKE_JAVA: &str = r#"#!/bin/sh
eval "endpoint=\${$#}"
echo "$@" > "$(dirname "$0")/args"
case "$5" in
  ready) touch "$endpoint/ready"; exec sleep 60 ;;
  reject) echo "moirai-fake: --ops 'x' is not an integer" >&2
          echo "moirai-fake: moirai's workloads, run as fake jobs: ..." >&2; exit 2 ;;
  finish) echo "its summary"; exit 0 ;;
  *) exec sleep 60 ;;
esac
"#;

    /// A system whose endpoint is a directory, where its job runs once a file `ready` is there.
    const FAKE: JvmSystem = JvmSystem {
        name: "Fake",
        module: "fakejvm",
        dir_env: "MOIRAI_FAKE_JOBS",
        jar: "target/fake.jar",
        build_dir: "target",
        mvn_args: &[],
        main_class: "fake.Run",
        prefix: "moirai-fake: ",
        own_flags: &[],
        endpoint: Endpoint::Directory { flag: "--out-dir", what: "out" },
        middleware_flag: "--fake",
        metrics: None,
        ready: "it was ready",
        running: "being ready",
        port_taken: &[],
        probe: |dir| match Path::new(dir).join("ready").exists() {
            true => Probe::Running("fake-1".into()),
            false => Probe::NotYet("no ready file".into()),
        },
        late: |endpoint, timeout, last| format!("the fake job at {endpoint} was not ready within {timeout:?} ({last})"),
    };
    static FAKE_DIR: JvmSystem = FAKE;
    static FAKE_PORT: JvmSystem = JvmSystem { endpoint: Endpoint::Port { flag: "--port", what: "API" }, ..FAKE };
    /// Its own module, so that what its jobs leave in the temp directory is theirs alone.
    static FAKE_GONE: JvmSystem = JvmSystem { module: "fakegone", ..FAKE };

    /// The fake system's jobs, run by [`FAKE_JAVA`] written into `dir`.
    fn jobs(system: &'static JvmSystem, dir: &TempDir) -> JvmJobs {
        let java = dir.0.join("java");
        std::fs::write(&java, FAKE_JAVA).unwrap();
        use std::os::unix::fs::PermissionsExt;
        std::fs::set_permissions(&java, std::fs::Permissions::from_mode(0o755)).unwrap();
        JvmJobs { system, dir: dir.0.clone(), jar: dir.0.join("fake.jar"), classpath: String::new(), java }
    }

    fn alive(pid: u32) -> bool {
        // A reaped child has no /proc entry.
        Path::new(&format!("/proc/{pid}")).exists()
    }

    #[test]
    fn a_job_runs_once_its_system_says_so_and_leaves_nothing_behind() {
        let dir = TempDir::new("jvm-job-ready");
        let mut job = JvmJob::start(&jobs(&FAKE_DIR, &dir), "ready", &["--ops".into(), "2".into()]).unwrap();
        assert_eq!(job.wait_running(Duration::from_secs(30)).unwrap(), "fake-1");
        let endpoint = PathBuf::from(job.endpoint());
        assert!(endpoint.join("ready").is_file(), "the job got its own directory");
        let args = std::fs::read_to_string(dir.0.join("args")).unwrap();
        let expected = format!("fake.Run ready --ops 2 --out-dir {}\n", endpoint.display());
        assert!(args.starts_with("-Xmx1g -cp ") && args.ends_with(&expected), "{args}");
        assert_eq!(job.middleware_args(), ["--fake".to_string(), endpoint.display().to_string()]);
        let (pid, log, tmp) = (job.pid(), job.log_path().to_path_buf(), job.tmp.clone());
        assert!(alive(pid) && log.is_file() && tmp.is_dir());
        job.stop();
        assert!(!alive(pid), "stop() ends the JVM by PID");
        job.stop();
        drop(job);
        assert!(!endpoint.exists() && !log.exists() && !tmp.exists(), "the job's directories and temp log go with it");
    }

    #[test]
    fn a_job_that_rejects_its_flags_says_so_and_keeps_its_log() {
        let dir = TempDir::new("jvm-job-reject");
        let mut job = JvmJob::start(&jobs(&FAKE_DIR, &dir), "reject", &[]).unwrap();
        let e = job.wait_running_unless(Duration::from_secs(30), &AtomicBool::new(false)).unwrap_err();
        let NotRunning::Exited { status, message } = e else { panic!("{e:?}") };
        assert_eq!(status.code(), Some(2));
        assert!(message.starts_with("the Fake job's JVM exited before it was ready (exit code 2); "), "{message}");
        assert!(message.contains(&job.log_path().display().to_string()), "{message}");
        // The job's own line, not the usage text after it.
        assert_eq!(job.complaint().as_deref(), Some("moirai-fake: --ops 'x' is not an integer"));
        let (endpoint, log) = (PathBuf::from(job.endpoint()), job.log_path().to_path_buf());
        drop(job);
        assert!(!endpoint.exists(), "the endpoint's directory goes with the job");
        assert!(log.is_file(), "a log an error message names is kept");
        std::fs::remove_file(log).unwrap();
    }

    #[test]
    fn a_job_late_to_run_is_left_running_until_dropped() {
        let dir = TempDir::new("jvm-job-late");
        let mut job = JvmJob::start(&jobs(&FAKE_PORT, &dir), "hang", &[]).unwrap();
        let port = job.endpoint().strip_prefix("http://127.0.0.1:").expect("a loopback URL").to_string();
        let e = job.wait_running(Duration::from_millis(300)).unwrap_err();
        let late = format!("the fake job at {} was not ready within 300ms (no ready file); ", job.endpoint());
        assert!(e.starts_with(&late), "{e}");
        let args = std::fs::read_to_string(dir.0.join("args")).unwrap();
        assert!(args.ends_with(&format!("fake.Run hang --port {port}\n")), "{args}");
        let (pid, log) = (job.pid(), job.log_path().to_path_buf());
        assert!(alive(pid), "the job is left running");
        drop(job);
        assert!(!alive(pid), "dropping the job ends its JVM");
        std::fs::remove_file(log).unwrap();
    }

    #[test]
    fn waiting_for_a_job_that_ends_returns_its_stdout() {
        let dir = TempDir::new("jvm-job-finish");
        let job = JvmJob::start(&jobs(&FAKE_DIR, &dir), "finish", &[]).unwrap();
        let log = job.log_path().to_path_buf();
        assert_eq!(job.wait(Duration::from_secs(30)).unwrap(), "its summary\n");
        assert!(!log.exists(), "the temp log of a clean run is removed");
    }

    #[test]
    fn a_job_that_cannot_start_leaves_nothing_behind() {
        let dir = TempDir::new("jvm-job-nojava");
        let jobs = JvmJobs { java: dir.0.join("no-java"), ..jobs(&FAKE_GONE, &dir) };
        let e = JvmJob::start(&jobs, "ready", &[]).err().unwrap();
        assert!(e.starts_with(&format!("cannot start the Fake job ({})", jobs.java.display())), "{e}");
        let prefix = "moirai-fakegone-";
        let left: Vec<String> = std::fs::read_dir(std::env::temp_dir())
            .unwrap()
            .flatten()
            .map(|e| e.file_name().to_string_lossy().into_owned())
            .filter(|n| n.starts_with(prefix) && n.contains(&std::process::id().to_string()))
            .collect();
        assert_eq!(left, Vec::<String>::new(), "its endpoint's and temp directories, its temp log");
    }
}

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

use std::fs::File;
use std::path::{Path, PathBuf};
use std::process::{Command, ExitStatus};
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, Instant, SystemTime};

use crate::process::{describe, file_tail, free_port, tail_lines, Child, Outcome};

/// Environment variable naming the Flink jobs' project directory instead of the default
/// `integrations/flink` of the source tree the lab was built from.
pub const JOBS_DIR_ENV: &str = "MOIRAI_FLINK_JOBS";
/// The jobs' jar, relative to the project directory.
pub const JAR: &str = "target/moirai-flink-jobs.jar";
/// The dependencies' classpath, one `:`-separated line, relative to the project directory.
pub const CLASSPATH: &str = "target/classpath.txt";
/// The main class of every job.
pub const MAIN_CLASS: &str = "moirai.flink.Run";
/// How long a job JVM may take to stop after SIGTERM (the MiniCluster shuts down) before it is
/// killed.
pub const STOP_GRACE: Duration = Duration::from_secs(5);
/// Written (relative to the project directory) after each successful build by the lab.
const BUILD_STAMP: &str = "target/.moirai-build.stamp";
/// Longest a Maven build may take (a first build downloads Flink) before it is killed.
const BUILD_TIMEOUT: Duration = Duration::from_secs(15 * 60);
/// Lines of a log shown in an error message.
const TAIL: usize = 12;

/// Flags every job takes that the lab sets itself for a point (`--rate`, ...).
const JOB_LAB_FLAGS: &[(&str, &str)] = &[
    ("--rate", "the lab sets it from --rates"),
    ("--duration", "use the lab's --duration"),
    ("--warmup", "use the lab's --warmup"),
    ("--json", "the lab always asks for JSON"),
    ("--rest-port", "the lab picks a free port per point"),
];
/// Flags every job takes, besides those of [`JOB_LAB_FLAGS`].
const JOB_COMMON_FLAGS: &[&str] = &["--ramp-to", "--seed", "--parallelism", "--buffer-timeout-ms"];
/// Flags of the SYN job.
const SYN_FLAGS: &[&str] =
    &["--lachesis", "--blocking", "--queries", "--ops", "--cost-ns", "--selectivity", "--heavy-op", "--heavy-factor"];
/// Flags (of [`SYN_FLAGS`]) that take no value.
const SWITCHES: &[&str] = &["--lachesis", "--blocking"];
/// Flags of the Linear Road job (the Lachesis shape only).
const LINEAR_ROAD_FLAGS: &[&str] = &["--shape", "--xways", "--cars-per-second", "--traffic"];

/// The Flink job's name of a workload as `moirai run` names it (aliases included), or why Flink
/// cannot run it.
pub fn job_workload(workload: &str) -> Result<&'static str, String> {
    match workload {
        "syn" => Ok("syn"),
        "linear-road" | "lr" => Ok("linear-road"),
        other => Err(format!(
            "the Flink jobs (integrations/flink) have no '{other}' workload; they run syn and linear-road \
             (--shape lachesis)"
        )),
    }
}

/// Checks the flags passed on to a Flink job of `workload` (a name [`job_workload`] returned):
/// each must be one the job takes and not one the lab sets, each takes a value, and Linear Road
/// needs `--shape lachesis`. Both `--flag value` and `--flag=value` are read.
pub fn check_job_args(workload: &str, args: &[String]) -> Result<(), String> {
    let own: &[&str] = if workload == "syn" { SYN_FLAGS } else { LINEAR_ROAD_FLAGS };
    let takes = || own.iter().chain(JOB_COMMON_FLAGS).copied().collect::<Vec<&str>>().join(", ");
    let mut shape = None;
    let mut i = 0;
    while i < args.len() {
        let arg = &args[i];
        let (flag, inline) = match arg.split_once('=') {
            Some((f, v)) if f.starts_with("--") => (f, Some(v.to_string())),
            _ => (arg.as_str(), None),
        };
        if !flag.starts_with('-') || flag.len() < 2 {
            return Err(format!("unexpected argument '{arg}' for the Flink job `{workload}` (a value with no flag)"));
        }
        if let Some((f, why)) = JOB_LAB_FLAGS.iter().find(|(f, _)| *f == flag) {
            return Err(format!("{f} cannot be passed after `--`: {why}"));
        }
        if !own.contains(&flag) && !JOB_COMMON_FLAGS.contains(&flag) {
            return Err(format!(
                "the Flink job `{workload}` does not take {flag} (it takes {}); leave {flag} out, or run the Flink \
                 configurations in a sweep of their own",
                takes()
            ));
        }
        if SWITCHES.contains(&flag) {
            if inline.is_some() {
                return Err(format!("{flag} takes no value: pass {flag} alone"));
            }
            i += 1;
            continue;
        }
        let value = match inline {
            Some(v) => v,
            None => match args.get(i + 1) {
                Some(v) if !v.starts_with("--") => {
                    i += 1;
                    v.clone()
                }
                _ => return Err(format!("{flag} needs a value")),
            },
        };
        if flag == "--shape" {
            shape = Some(value);
        }
        i += 1;
    }
    if workload == "linear-road" && shape.as_deref() != Some("lachesis") {
        return Err(format!(
            "the Flink job runs Linear Road in the Lachesis shape only ({}): pass -- --shape lachesis",
            match &shape {
                Some(s) => format!("--shape {s} was given"),
                None => "moirai's default is --shape faithful".to_string(),
            }
        ));
    }
    Ok(())
}

/// The built Flink jobs: where the jar and its classpath are, and the `java` that runs them.
#[derive(Clone, Debug)]
pub struct FlinkJobs {
    dir: PathBuf,
    jar: PathBuf,
    classpath: String,
    java: PathBuf,
}

impl FlinkJobs {
    /// The project directory: `$MOIRAI_FLINK_JOBS` if set, else `integrations/flink` of the
    /// source tree this crate was built from.
    pub fn project_dir() -> PathBuf {
        let dir = match std::env::var_os(JOBS_DIR_ENV) {
            Some(d) if !d.is_empty() => PathBuf::from(d),
            _ => PathBuf::from(concat!(env!("CARGO_MANIFEST_DIR"), "/../../integrations/flink")),
        };
        std::fs::canonicalize(&dir).unwrap_or(dir)
    }

    /// Locates integrations/flink (env `MOIRAI_FLINK_JOBS` may name another directory; default
    /// `concat!(env!("CARGO_MANIFEST_DIR"), "/../../integrations/flink")`), builds it with mvn
    /// when the jar is missing or older than pom.xml or any file under src/ — under an exclusive
    /// flock on a lock file in target/ so parallel tests build once — and reads classpath.txt.
    /// Clear errors when java or mvn are missing (naming the Debian package to install) or the
    /// build fails (with the tail of mvn's output).
    pub fn build() -> Result<FlinkJobs, String> {
        Self::build_in(&Self::project_dir())
    }

    /// [`FlinkJobs::build`] of the project in `dir`.
    pub fn build_in(dir: &Path) -> Result<FlinkJobs, String> {
        let pom = dir.join("pom.xml");
        if !pom.is_file() {
            return Err(format!(
                "no Flink jobs project at {} ({} is missing); set {JOBS_DIR_ENV} to the directory of moirai's \
                 integrations/flink",
                dir.display(),
                pom.display()
            ));
        }
        let java = find_java().ok_or_else(|| {
            "no `java` on PATH (nor $JAVA_HOME/bin/java): the Flink jobs need a JDK 17; on Debian: apt-get install \
             openjdk-17-jdk-headless"
                .to_string()
        })?;
        if Self::needs_build(dir) {
            build_locked(dir)?;
        }
        let jar = dir.join(JAR);
        if !jar.is_file() {
            return Err(format!("the Flink jobs' build wrote no {}", jar.display()));
        }
        let cp_file = dir.join(CLASSPATH);
        let classpath = std::fs::read_to_string(&cp_file)
            .map_err(|e| {
                format!(
                    "cannot read {} ({e}); rebuild the Flink jobs: mvn -q -B -f {} -DskipTests package",
                    cp_file.display(),
                    pom.display()
                )
            })?
            .trim()
            .to_string();
        Ok(FlinkJobs { dir: dir.to_path_buf(), jar, classpath, java })
    }

    /// Whether the project in `dir` must be (re)built: its jar or classpath.txt is missing, or
    /// the jar is older than pom.xml or a file under src/ or ../common/src/ (the classes shared
    /// with the Storm jobs, compiled in) — unless the lab's last successful
    /// build (its stamp file in target/) is newer: Maven leaves a jar (and classpath.txt) whose
    /// content did not change as it was.
    pub fn needs_build(dir: &Path) -> bool {
        if !dir.join(CLASSPATH).is_file() {
            return true;
        }
        let Some(jar) = modified(&dir.join(JAR)) else { return true };
        let built = modified(&dir.join(BUILD_STAMP)).map_or(jar, |stamp| stamp.max(jar));
        let mut newest = modified(&dir.join("pom.xml"));
        newest_under(&dir.join("src"), &mut newest);
        newest_under(&dir.join("../common/src"), &mut newest);
        newest.is_some_and(|n| n > built)
    }

    /// The project directory.
    pub fn dir(&self) -> &Path {
        &self.dir
    }

    /// The jobs' jar.
    pub fn jar(&self) -> &Path {
        &self.jar
    }

    /// The `java` command for one job (no spawn):
    /// `java -cp <jar>:<classpath> moirai.flink.Run <workload> <args...> --rest-port <rest_port>`.
    pub fn command(&self, workload: &str, args: &[String], rest_port: u16) -> Command {
        let mut cp = self.jar.display().to_string();
        if !self.classpath.is_empty() {
            cp.push(':');
            cp.push_str(&self.classpath);
        }
        let mut cmd = Command::new(&self.java);
        // A bounded heap (the jobs need well under 1 GiB), not a quarter of the machine's memory.
        cmd.arg(JVM_HEAP).arg("-cp").arg(cp).arg(MAIN_CLASS).arg(workload).args(args);
        cmd.args(["--rest-port".to_string(), rest_port.to_string()]);
        cmd
    }
}

/// The heap of a job's JVM.
pub const JVM_HEAP: &str = "-Xmx1g";

/// Modification time of a file, if it exists.
fn modified(path: &Path) -> Option<SystemTime> {
    std::fs::metadata(path).and_then(|m| m.modified()).ok()
}

/// Raises `newest` to the newest modification time of the files under `dir`.
fn newest_under(dir: &Path, newest: &mut Option<SystemTime>) {
    let Ok(entries) = std::fs::read_dir(dir) else { return };
    for e in entries.flatten() {
        let path = e.path();
        match e.file_type() {
            Ok(t) if t.is_dir() => newest_under(&path, newest),
            Ok(_) => {
                if let Some(m) = modified(&path) {
                    *newest = Some(newest.map_or(m, |n| n.max(m)));
                }
            }
            Err(_) => {}
        }
    }
}

/// An executable named `name` on PATH.
fn on_path(name: &str) -> Option<PathBuf> {
    use std::os::unix::fs::PermissionsExt;
    let path = std::env::var_os("PATH")?;
    std::env::split_paths(&path)
        .map(|d| d.join(name))
        .find(|p| std::fs::metadata(p).is_ok_and(|m| m.is_file() && m.permissions().mode() & 0o111 != 0))
}

/// `$JAVA_HOME/bin/java`, else `java` on PATH.
fn find_java() -> Option<PathBuf> {
    std::env::var_os("JAVA_HOME")
        .map(|h| PathBuf::from(h).join("bin/java"))
        .filter(|p| p.is_file())
        .or_else(|| on_path("java"))
}

/// Builds the project under an exclusive lock on `target/.moirai-build.lock`, unless another
/// process built it while this one waited for the lock.
fn build_locked(dir: &Path) -> Result<(), String> {
    let target = dir.join("target");
    std::fs::create_dir_all(&target).map_err(|e| format!("cannot create {}: {e}", target.display()))?;
    let lock_path = target.join(".moirai-build.lock");
    let lock = File::options()
        .create(true)
        .truncate(false)
        .write(true)
        .open(&lock_path)
        .map_err(|e| format!("cannot open the build lock {}: {e}", lock_path.display()))?;
    lock_exclusive(&lock).map_err(|e| format!("cannot lock {}: {e}", lock_path.display()))?;
    if !FlinkJobs::needs_build(dir) {
        return Ok(());
    }
    let pom = dir.join("pom.xml");
    let mvn = on_path("mvn").ok_or_else(|| {
        format!(
            "the Flink jobs in {} need a build, and there is no `mvn` on PATH: on Debian: apt-get install maven \
             (or build them elsewhere: mvn -q -B -f {} -DskipTests package)",
            dir.display(),
            pom.display()
        )
    })?;
    let args: Vec<String> =
        ["-q", "-B", "-Dstyle.color=never", "-f", &pom.display().to_string(), "-DskipTests", "package"]
            .iter()
            .map(|s| s.to_string())
            .collect();
    let shown = format!("mvn {}", args.join(" "));
    let build_start = SystemTime::now();
    let mut child = Child::spawn(&mvn, &args).map_err(|e| format!("cannot start {}: {e}", mvn.display()))?;
    let outcome = child.wait_until(Instant::now() + BUILD_TIMEOUT, &AtomicBool::new(false));
    let (out, err) = child.output();
    let tail = tail_lines(&format!("{out}\n{err}"), 30);
    match outcome {
        Outcome::Exited(s) if s.success() => {
            // The stamp carries the build's start, so a source saved during the build (which it
            // may have missed) counts as newer.
            let stamp = dir.join(BUILD_STAMP);
            File::create(&stamp)
                .and_then(|f| f.set_modified(build_start))
                .map_err(|e| format!("cannot write {}: {e}", stamp.display()))
        }
        Outcome::Exited(s) => {
            Err(format!("building the Flink jobs failed (`{shown}`, {}); its output ends with:\n{tail}", describe(s)))
        }
        _ => Err(format!("building the Flink jobs (`{shown}`) took more than {BUILD_TIMEOUT:?} and was stopped")),
    }
    // The lock is released when `lock` is closed here.
}

/// flock(LOCK_EX) on `file`, waiting for it.
fn lock_exclusive(file: &File) -> std::io::Result<()> {
    use std::os::fd::AsRawFd;
    loop {
        // SAFETY: flock(2) on a descriptor this function borrows; no memory is passed.
        if unsafe { libc::flock(file.as_raw_fd(), libc::LOCK_EX) } == 0 {
            return Ok(());
        }
        let e = std::io::Error::last_os_error();
        if e.kind() != std::io::ErrorKind::Interrupted {
            return Err(e);
        }
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
    child: Child,
    rest_url: String,
    log: PathBuf,
    /// Remove the log on drop: a log in the temp directory that no error message named.
    remove_log: bool,
    /// The JVM's own temp directory (`java.io.tmpdir`): Flink unpacks a ~20 MB RPC jar there at
    /// every start and never removes it; removed on drop, after the JVM.
    tmp: PathBuf,
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

    /// [`FlinkJob::start`] with stderr written to `log` (its directory is created).
    pub fn start_logged(jobs: &FlinkJobs, workload: &str, args: &[String], log: &Path) -> Result<FlinkJob, String> {
        Self::spawn(jobs, workload, args, Some(log))
    }

    fn spawn(jobs: &FlinkJobs, workload: &str, args: &[String], log: Option<&Path>) -> Result<FlinkJob, String> {
        let port = free_port().map_err(|e| format!("no free TCP port on 127.0.0.1 for Flink's REST API: {e}"))?;
        let remove_log = log.is_none();
        let log = match log {
            Some(l) => l.to_path_buf(),
            None => std::env::temp_dir().join(format!(
                "moirai-flink-{}-{port}.log",
                workload.replace(|c: char| !c.is_ascii_alphanumeric() && c != '-', "_")
            )),
        };
        if let Some(d) = log.parent() {
            std::fs::create_dir_all(d).map_err(|e| format!("cannot create {}: {e}", d.display()))?;
        }
        let file =
            File::create(&log).map_err(|e| format!("cannot create the Flink job's log {}: {e}", log.display()))?;
        let tmp = std::env::temp_dir().join(format!("moirai-flink-tmp-{}-{port}", std::process::id()));
        std::fs::create_dir_all(&tmp).map_err(|e| format!("cannot create {}: {e}", tmp.display()))?;
        let mut cmd = jobs.command(workload, args, port);
        cmd.env("JAVA_TOOL_OPTIONS", format!("-Djava.io.tmpdir={}", tmp.display()));
        let child = match Child::spawn_logged(cmd, file) {
            Ok(child) => child,
            Err(e) => {
                let _ = std::fs::remove_dir_all(&tmp);
                return Err(format!("cannot start the Flink job ({}): {e}", jobs.java.display()));
            }
        };
        Ok(FlinkJob { child, rest_url: format!("http://127.0.0.1:{port}"), log, remove_log, tmp })
    }

    /// The JVM's PID.
    pub fn pid(&self) -> u32 {
        self.child.pid()
    }

    /// The REST API, `http://127.0.0.1:N`.
    pub fn rest_url(&self) -> &str {
        &self.rest_url
    }

    /// The file the JVM's stderr (Flink's log) goes to.
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
        text.lines()
            .rev()
            .find(|l| l.starts_with("moirai-flink: ") && !l.starts_with("moirai-flink: moirai's workloads"))
            .map(|l| l.trim().to_string())
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
            if let Some(status) = self.child.try_wait() {
                let message = format!(
                    "the Flink job's JVM exited before the job was RUNNING ({}); {}",
                    describe(status),
                    self.log_for_message()
                );
                return Err(NotRunning::Exited { status, message });
            }
            if stop.load(Ordering::SeqCst) {
                return Err(NotRunning::Stopped);
            }
            let last = match self.probe(&agent) {
                Probe::Running(id) => return Ok(id),
                Probe::NotYet(why) => why,
                Probe::Ended(why) => return Err(NotRunning::Failed(format!("{why}; {}", self.log_for_message()))),
            };
            if Instant::now() >= until {
                let log = self.log_for_message();
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
        let until = Instant::now() + timeout;
        while Instant::now() < until {
            if let Some(status) = self.child.try_wait() {
                if status.success() {
                    return Ok(self.child.output().0);
                }
                return Err(format!("the Flink job failed ({}); {}", describe(status), self.log_for_message()));
            }
            std::thread::sleep(crate::process::POLL);
        }
        self.stop();
        Err(format!("the Flink job did not finish within {timeout:?} and was stopped; {}", self.log_for_message()))
    }

    /// SIGTERM by PID (to the process group the JVM leads), up to [`STOP_GRACE`] for it to exit,
    /// then SIGKILL; reaps the JVM. Idempotent.
    pub fn stop(&mut self) {
        self.child.terminate(libc::SIGTERM, STOP_GRACE);
    }
}

impl Drop for FlinkJob {
    /// A job JVM never outlives its handle.
    fn drop(&mut self) {
        self.stop();
        let _ = std::fs::remove_dir_all(&self.tmp);
        if self.remove_log {
            let _ = std::fs::remove_file(&self.log);
        }
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
    use crate::output::tests::TempDir;

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
        let d = &dir.0;
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
        std::fs::remove_file(d.join(CLASSPATH)).unwrap();
        assert!(FlinkJobs::needs_build(d), "classpath.txt is gone");
    }

    #[test]
    fn a_missing_project_or_a_failing_build_is_explained() {
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
        let jobs = FlinkJobs::build().unwrap();
        let mut job = FlinkJob::start(&jobs, "syn", &args("--rate 1000 --duration 120s --ops 2")).unwrap();
        let pid = job.pid();
        let id = job.wait_running(Duration::from_secs(90)).unwrap();
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
            let out = std::process::Command::new(&jobs.java)
                .arg("-cp")
                .arg(&jobs.jar)
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
        let jobs = FlinkJobs {
            dir: "/p".into(),
            jar: "/p/target/moirai-flink-jobs.jar".into(),
            classpath: "/m/a.jar:/m/b.jar".into(),
            java: "/usr/bin/java".into(),
        };
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

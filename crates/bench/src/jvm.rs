//! What the JVM jobs of moirai's workloads share — `integrations/flink` and `integrations/storm`,
//! each a Maven project: finding and building the project once (under a lock, so parallel tests
//! build it once), the `java` command of a job, and one job's JVM as a child process, stopped by
//! PID when dropped.
//!
//! [`crate::flink`] and [`crate::storm`] add what differs: the flags each job takes, and how to
//! tell that a job runs (Flink's REST API; the metrics files Storm writes).

use std::fs::File;
use std::path::{Path, PathBuf};
use std::process::{Command, ExitStatus};
use std::sync::atomic::AtomicBool;
use std::time::{Duration, Instant, SystemTime};

use crate::process::{describe, file_tail, tail_lines, Child, Outcome};
use crate::requires::on_path;

/// Written (relative to the project directory) after each successful build by the lab.
pub(crate) const BUILD_STAMP: &str = "target/.moirai-build.stamp";
/// Longest a Maven build may take (a first build downloads the SPE) before it is killed.
const BUILD_TIMEOUT: Duration = Duration::from_secs(15 * 60);
/// The dependencies' classpath, one `:`-separated line, relative to the project directory.
pub const CLASSPATH: &str = "target/classpath.txt";
/// How long a job JVM may take to stop after SIGTERM before it is killed.
pub const STOP_GRACE: Duration = Duration::from_secs(5);
/// The heap of a job's JVM.
pub const JVM_HEAP: &str = "-Xmx1g";
/// Lines of a log shown in an error message.
const TAIL: usize = 12;

/// Which SPE's jobs.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Integration {
    /// Apache Flink, `integrations/flink`.
    Flink,
    /// Apache Storm, `integrations/storm`.
    Storm,
}

impl Integration {
    /// The SPE's name in messages.
    pub fn name(self) -> &'static str {
        match self {
            Integration::Flink => "Flink",
            Integration::Storm => "Storm",
        }
    }

    /// The environment variable naming the project directory instead of the default one of the
    /// source tree the lab was built from.
    pub fn dir_env(self) -> &'static str {
        match self {
            Integration::Flink => "MOIRAI_FLINK_JOBS",
            Integration::Storm => "MOIRAI_STORM_JOBS",
        }
    }

    /// The jobs' jar, relative to the project directory.
    pub fn jar(self) -> &'static str {
        match self {
            Integration::Flink => "target/moirai-flink-jobs.jar",
            Integration::Storm => "target/moirai-storm-jobs.jar",
        }
    }

    /// The main class of every job.
    pub fn main_class(self) -> &'static str {
        match self {
            Integration::Flink => "moirai.flink.Run",
            Integration::Storm => "moirai.storm.Run",
        }
    }

    /// What the job's own lines on stderr start with.
    pub fn prefix(self) -> &'static str {
        match self {
            Integration::Flink => "moirai-flink: ",
            Integration::Storm => "moirai-storm: ",
        }
    }

    /// The project directory: `$<dir_env>` if set, else `integrations/<spe>` of the source tree
    /// this crate was built from.
    pub fn project_dir(self) -> PathBuf {
        let dir = match std::env::var_os(self.dir_env()) {
            Some(d) if !d.is_empty() => PathBuf::from(d),
            _ => {
                let sub = match self {
                    Integration::Flink => "flink",
                    Integration::Storm => "storm",
                };
                PathBuf::from(concat!(env!("CARGO_MANIFEST_DIR"), "/../../integrations")).join(sub)
            }
        };
        std::fs::canonicalize(&dir).unwrap_or(dir)
    }
}

/// Flags every job takes that the lab sets itself for a point (`--rate`, ...), besides the one
/// that tells the job where the middleware finds it ([`Integration::lab_flag`]).
const JOB_LAB_FLAGS: &[(&str, &str)] = &[
    ("--rate", "the lab sets it from --rates"),
    ("--duration", "use the lab's --duration"),
    ("--warmup", "use the lab's --warmup"),
    ("--json", "the lab always asks for JSON"),
];
/// Flags every job takes, besides the lab's.
const JOB_COMMON_FLAGS: &[&str] = &["--ramp-to", "--seed", "--parallelism"];
/// Flags of the SYN jobs.
const SYN_FLAGS: &[&str] = &["--queries", "--ops", "--cost-ns", "--selectivity", "--heavy-op", "--heavy-factor"];
/// Flags of the SYN jobs that take no value.
const SYN_SWITCHES: &[&str] = &["--lachesis", "--blocking"];
/// Flags of the Linear Road jobs (the Lachesis shape only).
const LINEAR_ROAD_FLAGS: &[&str] = &["--shape", "--xways", "--cars-per-second", "--traffic"];

impl Integration {
    /// The flag by which the lab tells a job where the middleware will find it.
    fn lab_flag(self) -> (&'static str, &'static str) {
        match self {
            Integration::Flink => ("--rest-port", "the lab picks a free port per point"),
            Integration::Storm => ("--metrics-dir", "the lab gives each point a directory of its own"),
        }
    }

    /// Flags only this SPE's jobs take.
    fn own_flags(self) -> &'static [&'static str] {
        match self {
            Integration::Flink => &["--buffer-timeout-ms"],
            // How idle executors wait: progressive (Storm's default) or park[:MICROS].
            Integration::Storm => &["--wait-strategy"],
        }
    }
}

/// The job's name of a workload as `moirai run` names it (aliases included), or why the SPE's
/// jobs cannot run it.
pub fn job_workload(integration: Integration, workload: &str) -> Result<&'static str, String> {
    match workload {
        "syn" => Ok("syn"),
        "linear-road" | "lr" => Ok("linear-road"),
        other => Err(format!(
            "the {} jobs (integrations/{}) have no '{other}' workload; they run syn and linear-road (--shape lachesis)",
            integration.name(),
            integration.name().to_lowercase()
        )),
    }
}

/// Checks the flags passed on to a job of `workload` (a name [`job_workload`] returned): each
/// must be one the job takes and not one the lab sets, each but `--lachesis` and `--blocking`
/// takes a value, and Linear Road needs `--shape lachesis`. Both `--flag value` and
/// `--flag=value` are read.
pub fn check_job_args(integration: Integration, workload: &str, args: &[String]) -> Result<(), String> {
    let spe = integration.name();
    let (own, switches): (&[&str], &[&str]) =
        if workload == "syn" { (SYN_FLAGS, SYN_SWITCHES) } else { (LINEAR_ROAD_FLAGS, &[]) };
    let common = || JOB_COMMON_FLAGS.iter().chain(integration.own_flags());
    let takes = || own.iter().chain(switches).chain(common()).copied().collect::<Vec<&str>>().join(", ");
    let lab = JOB_LAB_FLAGS.iter().copied().chain([integration.lab_flag()]).collect::<Vec<_>>();
    let mut shape = None;
    let mut i = 0;
    while i < args.len() {
        let arg = &args[i];
        let (flag, inline) = match arg.split_once('=') {
            Some((f, v)) if f.starts_with("--") => (f, Some(v.to_string())),
            _ => (arg.as_str(), None),
        };
        if !flag.starts_with('-') || flag.len() < 2 {
            return Err(format!("unexpected argument '{arg}' for the {spe} job `{workload}` (a value with no flag)"));
        }
        if let Some((f, why)) = lab.iter().find(|(f, _)| *f == flag) {
            return Err(format!("{f} cannot be passed after `--`: {why}"));
        }
        if switches.contains(&flag) {
            if inline.is_some() {
                return Err(format!("{flag} takes no value; write {flag} alone"));
            }
            i += 1;
            continue;
        }
        if !own.contains(&flag) && !common().any(|f| *f == flag) {
            return Err(format!(
                "the {spe} job `{workload}` does not take {flag} (it takes {}); leave {flag} out, or run the {spe} \
                 configurations in a sweep of their own",
                takes()
            ));
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
            "the {spe} job runs Linear Road in the Lachesis shape only ({}): pass -- --shape lachesis",
            match &shape {
                Some(s) => format!("--shape {s} was given"),
                None => "moirai's default is --shape faithful".to_string(),
            }
        ));
    }
    Ok(())
}

/// Built jobs: where the jar and its classpath are, and the `java` that runs them.
#[derive(Clone, Debug)]
pub struct JvmJobs {
    pub(crate) integration: Integration,
    pub(crate) dir: PathBuf,
    pub(crate) jar: PathBuf,
    pub(crate) classpath: String,
    pub(crate) java: PathBuf,
}

impl JvmJobs {
    /// Finds the project in `dir`, builds it with mvn when the jar is missing or older than
    /// pom.xml or any file under src/ (or the shared sources of `../common`), and reads
    /// classpath.txt. Clear errors when java or mvn are missing (naming the Debian package to
    /// install) or the build fails (with the tail of mvn's output).
    pub fn build_in(integration: Integration, dir: &Path) -> Result<JvmJobs, String> {
        let spe = integration.name();
        let pom = dir.join("pom.xml");
        if !pom.is_file() {
            return Err(format!(
                "no {spe} jobs project at {} ({} is missing); set {} to the directory of moirai's integrations/{}",
                dir.display(),
                pom.display(),
                integration.dir_env(),
                spe.to_lowercase()
            ));
        }
        let java = find_java().ok_or_else(|| {
            format!(
                "no `java` on PATH (nor $JAVA_HOME/bin/java): the {spe} jobs need a JDK 17; on Debian: apt-get \
                 install openjdk-17-jdk-headless"
            )
        })?;
        if Self::needs_build(integration, dir) {
            build_locked(integration, dir)?;
        }
        let jar = dir.join(integration.jar());
        if !jar.is_file() {
            return Err(format!("the {spe} jobs' build wrote no {}", jar.display()));
        }
        let cp_file = dir.join(CLASSPATH);
        let classpath = std::fs::read_to_string(&cp_file)
            .map_err(|e| {
                format!(
                    "cannot read {} ({e}); rebuild the {spe} jobs: mvn -q -B -f {} -DskipTests package",
                    cp_file.display(),
                    pom.display()
                )
            })?
            .trim()
            .to_string();
        Ok(JvmJobs { integration, dir: dir.to_path_buf(), jar, classpath, java })
    }

    /// Whether the project in `dir` must be (re)built: its jar or classpath.txt is missing, or
    /// the jar is older than pom.xml, a file under src/ or under the shared `../common/src` —
    /// unless the lab's last successful build (its stamp file in target/) is newer: Maven leaves
    /// a jar (and classpath.txt) whose content did not change as it was.
    pub fn needs_build(integration: Integration, dir: &Path) -> bool {
        if !dir.join(CLASSPATH).is_file() {
            return true;
        }
        let Some(jar) = modified(&dir.join(integration.jar())) else { return true };
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
    /// `java -Xmx1g -cp <jar>:<classpath> <main class> <workload> <args...>`.
    pub fn command(&self, workload: &str, args: &[String]) -> Command {
        let mut cp = self.jar.display().to_string();
        if !self.classpath.is_empty() {
            cp.push(':');
            cp.push_str(&self.classpath);
        }
        let mut cmd = Command::new(&self.java);
        // A bounded heap (the jobs need well under 1 GiB), not a quarter of the machine's memory.
        cmd.arg(JVM_HEAP).arg("-cp").arg(cp).arg(self.integration.main_class()).arg(workload).args(args);
        cmd
    }
}

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

/// `$JAVA_HOME/bin/java`, else `java` on PATH.
fn find_java() -> Option<PathBuf> {
    std::env::var_os("JAVA_HOME")
        .map(|h| PathBuf::from(h).join("bin/java"))
        .filter(|p| p.is_file())
        .or_else(|| on_path("java"))
}

/// Builds the project under an exclusive lock on `target/.moirai-build.lock`, unless another
/// process built it while this one waited for the lock.
fn build_locked(integration: Integration, dir: &Path) -> Result<(), String> {
    let spe = integration.name();
    let target = dir.join("target");
    std::fs::create_dir_all(&target).map_err(|e| format!("cannot create {}: {e}", target.display()))?;
    let lock_path = target.join(".moirai-build.lock");
    let lock = File::options()
        .create(true)
        .truncate(false)
        .write(true)
        .open(&lock_path)
        .map_err(|e| format!("cannot open the build lock {}: {e}", lock_path.display()))?;
    moirai_os::lock::lock_exclusive(&lock).map_err(|e| format!("cannot lock {}: {e}", lock_path.display()))?;
    if !JvmJobs::needs_build(integration, dir) {
        return Ok(());
    }
    let pom = dir.join("pom.xml");
    let mvn = on_path("mvn").ok_or_else(|| {
        format!(
            "the {spe} jobs in {} need a build, and there is no `mvn` on PATH: on Debian: apt-get install maven \
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
            Err(format!("building the {spe} jobs failed (`{shown}`, {}); its output ends with:\n{tail}", describe(s)))
        }
        _ => Err(format!("building the {spe} jobs (`{shown}`) took more than {BUILD_TIMEOUT:?} and was stopped")),
    }
    // The lock is released when `lock` is closed here.
}

/// One job's JVM: stdout collected on a thread, stderr written to a log file, its own temp
/// directory (`java.io.tmpdir`: Flink unpacks a ~20 MB RPC jar there at every start and never
/// removes it). Dropping it stops the JVM by PID, then removes the temp directory and — unless an
/// error message named it — the log.
pub struct JobProcess {
    integration: Integration,
    child: Child,
    log: PathBuf,
    /// Remove the log on drop: a log in the temp directory that no error message named.
    remove_log: bool,
    tmp: PathBuf,
}

impl JobProcess {
    /// Spawns `command` (from [`JvmJobs::command`]) with stderr to `log`, or, when `None`, to
    /// `moirai-<spe>-<workload>-<tag>.log` in the temp directory.
    pub fn spawn(
        jobs: &JvmJobs,
        mut command: Command,
        workload: &str,
        tag: &str,
        log: Option<&Path>,
    ) -> Result<JobProcess, String> {
        let spe = jobs.integration.name().to_lowercase();
        let remove_log = log.is_none();
        let log = match log {
            Some(l) => l.to_path_buf(),
            None => std::env::temp_dir().join(format!(
                "moirai-{spe}-{}-{tag}.log",
                workload.replace(|c: char| !c.is_ascii_alphanumeric() && c != '-', "_")
            )),
        };
        if let Some(d) = log.parent() {
            std::fs::create_dir_all(d).map_err(|e| format!("cannot create {}: {e}", d.display()))?;
        }
        let file = File::create(&log)
            .map_err(|e| format!("cannot create the {} job's log {}: {e}", jobs.integration.name(), log.display()))?;
        let tmp = std::env::temp_dir().join(format!("moirai-{spe}-tmp-{}-{tag}", std::process::id()));
        std::fs::create_dir_all(&tmp).map_err(|e| format!("cannot create {}: {e}", tmp.display()))?;
        command.env("JAVA_TOOL_OPTIONS", format!("-Djava.io.tmpdir={}", tmp.display()));
        let child = match Child::spawn_logged(command, file) {
            Ok(child) => child,
            Err(e) => {
                let _ = std::fs::remove_dir_all(&tmp);
                return Err(format!("cannot start the {} job ({}): {e}", jobs.integration.name(), jobs.java.display()));
            }
        };
        Ok(JobProcess { integration: jobs.integration, child, log, remove_log, tmp })
    }

    /// The JVM's PID.
    pub fn pid(&self) -> u32 {
        self.child.pid()
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
        let prefix = self.integration.prefix();
        let usage = format!("{prefix}moirai's workloads");
        text.lines().rev().find(|l| l.starts_with(prefix) && !l.starts_with(&usage)).map(|l| l.trim().to_string())
    }

    /// What the job said, the tail of stderr and where the whole log is, for an error message;
    /// the log is then kept.
    pub fn log_for_message(&mut self) -> String {
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

    /// Waits for the JVM to exit by itself (up to `timeout`; then stops it) and returns its
    /// stdout, or why it failed.
    pub fn wait(&mut self, timeout: Duration) -> Result<String, String> {
        let spe = self.integration.name();
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

impl Drop for JobProcess {
    /// A job JVM never outlives its handle.
    fn drop(&mut self) {
        self.stop();
        let _ = std::fs::remove_dir_all(&self.tmp);
        if self.remove_log {
            let _ = std::fs::remove_file(&self.log);
        }
    }
}

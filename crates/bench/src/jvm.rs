//! What the JVM jobs of moirai's workloads share — `integrations/flink` and `integrations/storm`,
//! each a Maven project: a [`JvmSystem`] value says what differs between them (the project, the
//! jar and main class, the flags, how a job tells the middleware about itself and how to see
//! that it runs); [`JvmJobs`] finds and builds a project once (under a lock, so parallel tests
//! build it once) and gives the `java` command of a job. One running job is a
//! [`crate::jvm_job::JvmJob`].
//!
//! [`crate::flink::FLINK`] and [`crate::storm::STORM`] are the two systems.

use std::ffi::OsStr;
use std::fs::File;
use std::path::{Path, PathBuf};
use std::process::Command;
use std::sync::atomic::AtomicBool;
use std::time::{Duration, Instant, SystemTime};

use crate::process::{describe, tail_lines, Child, Outcome};
use crate::requires::on_path;

/// Written (in the build directory) after each successful build by the lab.
pub(crate) const BUILD_STAMP: &str = ".moirai-build.stamp";
/// Longest a Maven build may take (a first build downloads the SPE) before it is killed.
const BUILD_TIMEOUT: Duration = Duration::from_secs(15 * 60);
/// The dependencies' classpath, one `:`-separated line, in the build directory.
pub const CLASSPATH: &str = "classpath.txt";
/// How long a job JVM may take to stop after SIGTERM before it is killed.
pub const STOP_GRACE: Duration = Duration::from_secs(5);
/// The heap of a job's JVM.
pub const JVM_HEAP: &str = "-Xmx1g";

/// An SPE whose jobs run in a JVM: everything in which its jobs differ from another's. The
/// start, wait, stop, log and clean-up of a job are [`crate::jvm_job::JvmJob`]'s, the same for
/// every system.
#[derive(Debug)]
pub struct JvmSystem {
    /// Its name in messages: `Flink`.
    pub name: &'static str,
    /// Its name in paths and in a job's summary (`"system"`): the project `integrations/<module>`,
    /// the logs `moirai-<module>-*.log` and `<out>/<module>-logs/`.
    pub module: &'static str,
    /// The environment variable naming the project directory instead of the default one of the
    /// source tree the lab was built from.
    pub dir_env: &'static str,
    /// The jobs' jar, relative to the project directory.
    pub jar: &'static str,
    /// Where the build writes the jar, [`CLASSPATH`] and the lab's stamp, relative to the project
    /// directory: `target`, or `target/flink2` for the Flink 2.x build beside the 1.20 one.
    pub build_dir: &'static str,
    /// Maven's arguments that select this build (`-Pflink2`), before `package`.
    pub mvn_args: &'static [&'static str],
    /// The main class of every job.
    pub main_class: &'static str,
    /// What the job's own lines on stderr start with.
    pub prefix: &'static str,
    /// Flags only this system's jobs take.
    pub own_flags: &'static [&'static str],
    /// Where a job tells the middleware about itself, the lab choosing where.
    pub endpoint: Endpoint,
    /// The flag of `moirai schedule` that names a job's endpoint (its driver).
    pub middleware_flag: &'static str,
    /// A second port where the job serves its metrics for the middleware (Flink's Prometheus
    /// reporter), the lab choosing it too; `None`: the endpoint serves them.
    pub metrics: Option<MetricsPort>,
    /// What [`crate::jvm_job::JvmJob::wait_running`] waits for, after "exited before".
    pub ready: &'static str,
    /// The same as a state, after "within ... of" (the lab's deadline counts from it).
    pub running: &'static str,
    /// Signs in a job's error message that another process took its port between the lab's
    /// choice and the JVM's bind: it is started again.
    pub port_taken: &'static [&'static str],
    /// One look at a job's endpoint: does it run yet?
    pub(crate) probe: fn(endpoint: &str) -> Probe,
    /// Why a job did not run within `timeout`, from its endpoint and the last probe's answer.
    pub(crate) late: fn(endpoint: &str, timeout: Duration, last: &str) -> String,
}

/// How a job tells the middleware about itself; the lab passes the job `<flag> <where>`.
#[derive(Debug)]
pub enum Endpoint {
    /// It serves `what` on a loopback port the lab picks (`<flag> PORT`); the middleware reads
    /// `http://127.0.0.1:PORT`.
    Port {
        /// The job's flag.
        flag: &'static str,
        /// What it serves there, in messages.
        what: &'static str,
    },
    /// It writes `what` into a fresh directory the lab makes for it and removes with it
    /// (`<flag> DIR`); the middleware reads the directory.
    Directory {
        /// The job's flag.
        flag: &'static str,
        /// What it writes there, in names and messages.
        what: &'static str,
    },
}

impl Endpoint {
    /// The job's flag that names it.
    pub fn flag(&self) -> &'static str {
        match *self {
            Endpoint::Port { flag, .. } | Endpoint::Directory { flag, .. } => flag,
        }
    }

    /// The job's flag that names it, and why the lab sets it itself.
    fn lab_flag(&self) -> (&'static str, &'static str) {
        match self {
            Endpoint::Port { .. } => (self.flag(), "the lab picks a free port per point"),
            Endpoint::Directory { .. } => (self.flag(), "the lab gives each point a directory of its own"),
        }
    }
}

/// A port where a job serves its metrics (`<flag> PORT`); the middleware reads
/// `http://127.0.0.1:PORT/metrics` with `<middleware_flag> URL` beside the endpoint's flag.
#[derive(Clone, Copy, Debug)]
pub struct MetricsPort {
    /// The job's flag.
    pub flag: &'static str,
    /// `moirai schedule`'s flag.
    pub middleware_flag: &'static str,
}

/// What one look at a job's endpoint found.
pub(crate) enum Probe {
    /// It runs; its id.
    Running(String),
    /// Not yet, and why.
    NotYet(String),
    /// It ended (failed, or finished) before it ran, and how.
    Ended(String),
}

impl JvmSystem {
    /// The project directory: `$<dir_env>` if set, else `integrations/<module>` of the source
    /// tree this crate was built from.
    pub fn project_dir(&self) -> PathBuf {
        let dir = match std::env::var_os(self.dir_env) {
            Some(d) if !d.is_empty() => PathBuf::from(d),
            _ => PathBuf::from(concat!(env!("CARGO_MANIFEST_DIR"), "/../../integrations")).join(self.module),
        };
        std::fs::canonicalize(&dir).unwrap_or(dir)
    }
}

/// Flags every job takes that the lab sets itself for a point (`--rate`, ...), besides the one
/// that tells the job where the middleware finds it ([`JvmSystem::endpoint`]).
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

impl JvmSystem {
    /// The job's name of a workload as `moirai run` names it (aliases included), or why the
    /// system's jobs cannot run it.
    pub fn job_workload(&self, workload: &str) -> Result<&'static str, String> {
        match workload {
            "syn" => Ok("syn"),
            "linear-road" | "lr" => Ok("linear-road"),
            other => Err(format!(
                "the {} jobs (integrations/{}) have no '{other}' workload; they run syn and linear-road (--shape \
                 lachesis)",
                self.name, self.module
            )),
        }
    }

    /// Checks the flags passed on to a job of `workload` (a name [`JvmSystem::job_workload`] returned): each
    /// must be one the job takes and not one the lab sets, each but `--lachesis` and `--blocking`
    /// takes a value, and Linear Road needs `--shape lachesis`. Both `--flag value` and
    /// `--flag=value` are read.
    pub fn check_job_args(&self, workload: &str, args: &[String]) -> Result<(), String> {
        let spe = self.name;
        let (own, switches): (&[&str], &[&str]) =
            if workload == "syn" { (SYN_FLAGS, SYN_SWITCHES) } else { (LINEAR_ROAD_FLAGS, &[]) };
        let common = || JOB_COMMON_FLAGS.iter().chain(self.own_flags);
        let takes = || own.iter().chain(switches).chain(common()).copied().collect::<Vec<&str>>().join(", ");
        let lab = JOB_LAB_FLAGS
            .iter()
            .copied()
            .chain([self.endpoint.lab_flag()])
            .chain(self.metrics.map(|m| (m.flag, "the lab picks a free port per point")))
            .collect::<Vec<_>>();
        let mut shape = None;
        let mut i = 0;
        while i < args.len() {
            let arg = &args[i];
            let (flag, inline) = match arg.split_once('=') {
                Some((f, v)) if f.starts_with("--") => (f, Some(v.to_string())),
                _ => (arg.as_str(), None),
            };
            if !flag.starts_with('-') || flag.len() < 2 {
                return Err(format!(
                    "unexpected argument '{arg}' for the {spe} job `{workload}` (a value with no flag)"
                ));
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
}

/// Built jobs of one system: where the jar and its classpath are, and the `java` that runs them.
#[derive(Clone, Debug)]
pub struct JvmJobs {
    pub(crate) system: &'static JvmSystem,
    pub(crate) dir: PathBuf,
    pub(crate) jar: PathBuf,
    pub(crate) classpath: String,
    pub(crate) java: PathBuf,
}

impl JvmJobs {
    /// Locates the system's project ([`JvmSystem::project_dir`]) and builds it with mvn when the
    /// jar is missing or older than its sources ([`JvmJobs::build_in`]).
    pub fn build(system: &'static JvmSystem) -> Result<JvmJobs, String> {
        Self::build_in(system, &system.project_dir())
    }

    /// Finds the project in `dir`, builds it with mvn when the jar is missing or older than
    /// pom.xml or any file under src/ (or the shared sources of `../common`), and reads
    /// classpath.txt. Clear errors when java or mvn are missing (naming the Debian package to
    /// install) or the build fails (with the tail of mvn's output).
    pub fn build_in(system: &'static JvmSystem, dir: &Path) -> Result<JvmJobs, String> {
        let spe = system.name;
        let pom = dir.join("pom.xml");
        if !pom.is_file() {
            return Err(format!(
                "no {spe} jobs project at {} ({} is missing); set {} to the directory of moirai's integrations/{}",
                dir.display(),
                pom.display(),
                system.dir_env,
                system.module
            ));
        }
        let java = find_java().ok_or_else(|| {
            format!(
                "no `java` on PATH (nor $JAVA_HOME/bin/java): the {spe} jobs need a JDK 17; on Debian: apt-get \
                 install openjdk-17-jdk-headless"
            )
        })?;
        if Self::needs_build(system, dir) {
            build_locked(system, dir)?;
        }
        let jar = dir.join(system.jar);
        if !jar.is_file() {
            return Err(format!("the {spe} jobs' build wrote no {}", jar.display()));
        }
        let cp_file = dir.join(system.build_dir).join(CLASSPATH);
        let classpath = std::fs::read_to_string(&cp_file)
            .map_err(|e| {
                format!(
                    "cannot read {} ({e}); rebuild the {spe} jobs: mvn -q -B -f {}{} -DskipTests package",
                    cp_file.display(),
                    pom.display(),
                    system.mvn_args.iter().map(|a| format!(" {a}")).collect::<String>()
                )
            })?
            .trim()
            .to_string();
        Ok(JvmJobs { system, dir: dir.to_path_buf(), jar, classpath, java })
    }

    /// Whether the project in `dir` must be (re)built: its jar or classpath.txt is missing, or
    /// the jar is older than pom.xml, a file under src/ or under the shared `../common/src` —
    /// unless the lab's last successful build (its stamp file in target/) is newer: Maven leaves
    /// a jar (and classpath.txt) whose content did not change as it was.
    pub fn needs_build(system: &JvmSystem, dir: &Path) -> bool {
        let out = dir.join(system.build_dir);
        if !out.join(CLASSPATH).is_file() {
            return true;
        }
        let Some(jar) = modified(&dir.join(system.jar)) else { return true };
        let built = modified(&out.join(BUILD_STAMP)).map_or(jar, |stamp| stamp.max(jar));
        let mut newest = modified(&dir.join("pom.xml"));
        newest_under(&dir.join("src"), &mut newest);
        newest_under(&dir.join("../common/src"), &mut newest);
        newest.is_some_and(|n| n > built)
    }

    /// The system whose jobs these are.
    pub fn system(&self) -> &'static JvmSystem {
        self.system
    }

    /// The project directory.
    pub fn dir(&self) -> &Path {
        &self.dir
    }

    /// The jobs' jar.
    pub fn jar(&self) -> &Path {
        &self.jar
    }

    /// The `java` command for one job (no spawn), `endpoint` the value of its endpoint's flag:
    /// `java -Xmx1g -cp <jar>:<classpath> <main class> <workload> <args...> <flag> <endpoint>`.
    pub fn command(&self, workload: &str, args: &[String], endpoint: &OsStr) -> Command {
        let mut cp = self.jar.display().to_string();
        if !self.classpath.is_empty() {
            cp.push(':');
            cp.push_str(&self.classpath);
        }
        let mut cmd = Command::new(&self.java);
        // A bounded heap (the jobs need well under 1 GiB), not a quarter of the machine's memory.
        cmd.arg(JVM_HEAP).arg("-cp").arg(cp).arg(self.system.main_class).arg(workload).args(args);
        cmd.arg(self.system.endpoint.flag()).arg(endpoint);
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

/// Builds the project under an exclusive lock on `target/.moirai-build.lock` (one for every build
/// of the project: Flink 1.20's and 2.x's share the sources and Maven's repository), unless
/// another process built it while this one waited for the lock.
fn build_locked(system: &JvmSystem, dir: &Path) -> Result<(), String> {
    let spe = system.name;
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
    if !JvmJobs::needs_build(system, dir) {
        return Ok(());
    }
    let pom = dir.join("pom.xml");
    let mvn = on_path("mvn").ok_or_else(|| {
        format!(
            "the {spe} jobs in {} need a build, and there is no `mvn` on PATH: on Debian: apt-get install maven \
             (or build them elsewhere: mvn -q -B -f {}{} -DskipTests package)",
            dir.display(),
            pom.display(),
            system.mvn_args.iter().map(|a| format!(" {a}")).collect::<String>()
        )
    })?;
    let pom_arg = pom.display().to_string();
    let args: Vec<String> = ["-q", "-B", "-Dstyle.color=never", "-f", &pom_arg]
        .into_iter()
        .chain(system.mvn_args.iter().copied())
        .chain(["-DskipTests", "package"])
        .map(str::to_string)
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
            let stamp = dir.join(system.build_dir).join(BUILD_STAMP);
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

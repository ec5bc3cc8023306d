//! The orchestrator: runs every (rate, repetition, configuration) point as child processes.
//!
//! Points are interleaved — for each rate, for each repetition, every configuration in turn
//! (A B A B ...) — so that drift of a shared, noisy machine hits all configurations alike
//! (`BENCHMARKING.md`). A point is one run of the same `moirai` binary as the lab:
//! `moirai run <workload> --rate R --duration D --warmup W --json --metrics-addr 127.0.0.1:P
//! [--threading T] [extra args]`, plus, for a configuration with a policy, `moirai schedule
//! --engine http://127.0.0.1:P --policy NAME` started once the engine's endpoint answers. Every
//! configuration gets the metrics endpoint, so that the engine runs the same in all of them. The
//! middleware serves its own metrics, from which the lab reads whether it acted
//! ([`crate::mw_state`]).
//!
//! A `flink:` configuration runs the workload's Apache Flink job instead ([`crate::flink`]): one
//! JVM per point, `java ... moirai.flink.Run <workload> --rate R --duration D --warmup W --json
//! [extra args] --rest-port P`, stderr to `<out>/flink-logs/`. The lab waits until the job and
//! all its vertices are RUNNING (up to [`FLINK_STARTUP`]; the JVM's start-up is outside the
//! measurement, which the job takes from its own start, after its warm-up), then starts the
//! middleware with `--flink http://127.0.0.1:P` for a policy, and lets the job run to its end.
//! The jobs are built once per sweep, at start-up.
//!
//! A `storm:` configuration runs the workload's Apache Storm topology ([`crate::storm`]): one JVM
//! per point (a `LocalCluster`), `java ... moirai.storm.Run <workload> ... --metrics-dir DIR`,
//! stderr to `<out>/storm-logs/`; the lab waits until Storm reports a spout's emit count (up to
//! [`FLINK_STARTUP`] as well), then starts the middleware with `--storm DIR`.
//!
//! A `flink:…/cluster=standalone:N` configuration runs the job on a standalone cluster started
//! for the point, with one middleware per TaskManager ([`crate::cluster_job`]).
//!
//! A point that fails (non-zero exit, no JSON, a hang past the deadline, a middleware that
//! dies) is recorded with the reason and the sweep goes on; only a usage error of the engine or
//! the Flink job (exit code 2: it would repeat at every point) ends the sweep early.

use std::path::PathBuf;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, Instant};

use serde::Serialize;

use crate::cluster_job::ClusterJob;
use crate::jvm::JvmJobs;
use crate::jvm_job::{JvmJob, NotRunning};
use crate::mw_state::{self, MwFailure};
use crate::point::{Point, RunSummary};
use crate::process::{describe, file_tail, free_port, tail_lines, wait_for_port, Child, Outcome, POLL};
use crate::progress::Progress;
use crate::spec::{fmt_rate, Configuration, System};
use crate::summary::Criteria;
use crate::BenchError;

/// Flags of `moirai run` that the lab sets itself and extra arguments must not repeat.
const LAB_FLAGS: &[(&str, &str)] = &[
    ("--rate", "the lab sets it from --rates"),
    ("--duration", "use the lab's --duration"),
    ("--warmup", "use the lab's --warmup"),
    ("--json", "the lab always asks for JSON"),
    ("--metrics-addr", "the lab picks a free port per point"),
    ("--threading", "name it per configuration, e.g. --compare os@dedicated"),
];
/// Attempts of a point whose engine could not listen on the chosen port (another process took
/// it between the lab's probe and the engine's bind).
const PORT_ATTEMPTS: u32 = 3;
/// How long the engine's endpoint may take to answer before the middleware is started.
const ENDPOINT_TIMEOUT: Duration = Duration::from_secs(15);
/// How long a Flink job's JVM may take from its start until the job and all its vertices are
/// RUNNING (a few seconds on an idle machine, more on a loaded one); not part of the point's
/// measurement.
pub const FLINK_STARTUP: Duration = Duration::from_secs(60);

/// Everything a sweep needs to run.
#[derive(Clone, Debug, Serialize)]
pub struct SweepSpec {
    /// The `moirai` binary the points run (the lab's own, `std::env::current_exe()`).
    pub exe: PathBuf,
    /// Workload, as `moirai run <workload>` names it.
    pub workload: String,
    /// Offered rates, tuples/s, ascending.
    pub rates: Vec<f64>,
    /// Length of every point's run (warm-up included).
    #[serde(serialize_with = "crate::seconds::seconds")]
    pub duration: Duration,
    /// Share of each run discarded as warm-up.
    pub warmup: f64,
    /// Repetitions of every (configuration, rate).
    pub reps: u32,
    /// Configurations compared, the first being the baseline of ratios.
    pub configurations: Vec<Configuration>,
    /// Arguments passed on to `moirai run <workload>`.
    pub extra_args: Vec<String>,
    /// How often the middleware's policy runs, for configurations with a policy; `None`: the
    /// middleware's own default for the SPE's kind.
    #[serde(serialize_with = "crate::seconds::optional_seconds")]
    pub policy_period: Option<Duration>,
    /// What "sustainable" means.
    pub criteria: Criteria,
    /// Time a point may take beyond `duration` (start-up, drain) before it is killed; see
    /// [`SweepSpec::default_grace`].
    #[serde(serialize_with = "crate::seconds::seconds")]
    pub grace: Duration,
    /// When the machine's speed is probed ([`crate::speed`]).
    pub speed_probes: crate::speed::Probing,
    /// Where results and the report go.
    pub out_dir: PathBuf,
    /// The lab's own command line, recorded with the results.
    pub command_line: Vec<String>,
}

impl SweepSpec {
    /// Checks the values that need no process: duration, warm-up, repetitions, extra args.
    pub fn validate(&self) -> Result<(), BenchError> {
        let bad = |s: String| Err(BenchError::Spec(s));
        if self.duration < Duration::from_secs(1) {
            return bad(format!(
                "--duration {:?} is too short to measure anything after warm-up; use at least 1s",
                self.duration
            ));
        }
        if !(0.0..0.9).contains(&self.warmup) {
            return bad(format!("--warmup {} must be a share of the run in [0, 0.9), e.g. 0.2", self.warmup));
        }
        if self.reps == 0 {
            return bad("--reps must be at least 1".into());
        }
        if self.rates.is_empty() {
            return bad("--rates names no rate".into());
        }
        if self.configurations.is_empty() {
            return bad("--compare names no configuration".into());
        }
        for arg in &self.extra_args {
            let name = arg.split('=').next().unwrap_or(arg);
            if let Some((flag, why)) = LAB_FLAGS.iter().find(|(f, _)| *f == name) {
                return bad(format!("{flag} cannot be passed to `moirai run` after `--`: {why}"));
            }
        }
        for c in &self.configurations {
            if let (Some(arg), None) = (c.schedule_args.first(), c.policy()) {
                return bad(format!(
                    "configuration {}: {arg} is a flag of the middleware, which runs only for a policy (e.g. \
                     qs/translator=realtime)",
                    c.label
                ));
            }
            for arg in c.run_args.iter().filter(|a| a.starts_with("--")) {
                if let Some((flag, why)) = LAB_FLAGS.iter().find(|(f, _)| f == arg) {
                    return bad(format!("configuration {}: {flag} cannot be a workload argument: {why}", c.label));
                }
                if self.extra_args.iter().any(|a| a == arg || a.starts_with(&format!("{arg}="))) {
                    return bad(format!(
                        "{arg} is set both by configuration {} and after --; set it in one place",
                        c.label
                    ));
                }
            }
        }
        for c in &self.configurations {
            if let Some(jvm) = c.system.jvm() {
                let not = |why: String| BenchError::Unsupported { label: c.label.clone(), why };
                let workload = jvm.job_workload(&self.workload).map_err(not)?;
                jvm.check_job_args(workload, &self.extra_args).map_err(not)?;
            }
        }
        self.criteria.validate()?;
        Ok(())
    }

    /// Points the sweep will run.
    pub fn total_points(&self) -> usize {
        self.rates.len() * self.reps as usize * self.configurations.len()
    }

    /// A generous grace for start-up and drain on a loaded machine: the run's length again, at
    /// least 30 s.
    pub fn default_grace(duration: Duration) -> Duration {
        duration.max(Duration::from_secs(30))
    }

    /// Longest a point may run before it is killed: the run plus the grace.
    pub fn deadline(&self) -> Duration {
        self.duration + self.grace
    }

    /// The part of every point's run that is measured, in seconds from its start: after the
    /// warm-up, to its end.
    pub fn measured_window(&self) -> (f64, f64) {
        let d = self.duration.as_secs_f64();
        (d * self.warmup, d)
    }
}

/// How a sweep ended.
#[derive(Clone, Debug, PartialEq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum SweepEnd {
    /// Every point ran.
    Completed,
    /// Ctrl-C (SIGINT/SIGTERM) stopped it; the point running then is not recorded.
    Interrupted,
    /// The engine rejected its command line; the message says why.
    Aborted(String),
}

/// What [`preflight`] prepared for the points of a sweep.
#[derive(Debug, Default)]
pub struct Prepared {
    /// The built Flink jobs, when a configuration runs Flink.
    pub flink: Option<JvmJobs>,
    /// The built Flink 2.x jobs, when a configuration runs Flink 2.
    pub flink2: Option<JvmJobs>,
    /// The built Storm jobs, when a configuration runs Storm.
    pub storm: Option<JvmJobs>,
}

impl Prepared {
    /// The built jobs of `system`, if it runs on the JVM and they were built.
    fn jobs(&self, system: System) -> Option<&JvmJobs> {
        match system {
            System::Moirai => None,
            System::Flink => self.flink.as_ref(),
            System::Flink2 => self.flink2.as_ref(),
            System::Storm => self.storm.as_ref(),
        }
    }
}

/// Checks, before any point runs, everything that would make every point fail: the output
/// directory, configurations this build cannot run, the workload name; and builds the Flink
/// jobs when a configuration runs Flink.
pub fn preflight(spec: &SweepSpec) -> Result<Prepared, BenchError> {
    spec.validate()?;
    check_out_dir(&spec.out_dir)?;
    for c in &spec.configurations {
        c.check_implemented()?;
    }
    if let Some(c) = spec.configurations.iter().find(|c| c.policy().is_some()) {
        let Some(help) = stdout_of(spec, &["schedule", "--help"]) else {
            return Err(BenchError::NeedsMiddleware { label: c.label.clone() });
        };
        for (system, flag) in [(System::Flink, "--flink"), (System::Flink2, "--flink"), (System::Storm, "--storm")] {
            if let Some(c) = spec.configurations.iter().find(|c| c.policy().is_some() && c.system == system) {
                if !help.contains(flag) {
                    return Err(BenchError::Unsupported {
                        label: c.label.clone(),
                        why: format!(
                            "`moirai schedule` of this build has no {flag} flag (the middleware's {} driver)",
                            system.name()
                        ),
                    });
                }
            }
        }
    }
    if spec.configurations.iter().any(|c| c.system == System::Moirai) {
        let help = ["run".to_string(), spec.workload.clone(), "--help".to_string()];
        let mut child =
            Child::spawn(&spec.exe, &help).map_err(|e| BenchError::Spawn { exe: spec.exe.clone(), source: e })?;
        match child.wait_until(Instant::now() + Duration::from_secs(30), &AtomicBool::new(false)) {
            Outcome::Exited(s) if s.success() => {}
            _ => {
                return Err(BenchError::Workload {
                    workload: spec.workload.clone(),
                    why: tail_lines(&child.output().1, 3),
                })
            }
        }
    }
    Ok(Prepared {
        flink: build_jobs(spec, System::Flink).map_err(BenchError::Flink)?,
        flink2: build_jobs(spec, System::Flink2).map_err(BenchError::Flink)?,
        storm: build_jobs(spec, System::Storm).map_err(BenchError::Storm)?,
    })
}

/// The built jobs of `system`, when a configuration runs it on the JVM.
fn build_jobs(spec: &SweepSpec, system: System) -> Result<Option<JvmJobs>, String> {
    let Some(jvm) = system.jvm().filter(|_| spec.configurations.iter().any(|c| c.system == system)) else {
        return Ok(None);
    };
    let dir = jvm.project_dir();
    if JvmJobs::needs_build(jvm, &dir) {
        eprintln!(
            "moirai bench: building the {spe} jobs in {} with Maven (a first build downloads {spe}: a minute or more)",
            dir.display(),
            spe = jvm.name
        );
    }
    JvmJobs::build_in(jvm, &dir).map(Some)
}

/// The stdout of `moirai <args>` if it exits 0 within 30 s.
fn stdout_of(spec: &SweepSpec, args: &[&str]) -> Option<String> {
    let args: Vec<String> = args.iter().map(|s| s.to_string()).collect();
    let mut c = Child::spawn(&spec.exe, &args).ok()?;
    match c.wait_until(Instant::now() + Duration::from_secs(30), &AtomicBool::new(false)) {
        Outcome::Exited(s) if s.success() => Some(c.output().0),
        _ => None,
    }
}

/// Creates the output directory and proves it writable.
pub fn check_out_dir(dir: &std::path::Path) -> Result<(), BenchError> {
    let err = |e: std::io::Error| BenchError::OutDir { dir: dir.to_path_buf(), source: e };
    std::fs::create_dir_all(dir).map_err(err)?;
    let probe = dir.join(".moirai-bench-probe");
    std::fs::write(&probe, b"probe").map_err(err)?;
    std::fs::remove_file(&probe).map_err(err)
}

/// Runs the sweep with what [`preflight`] prepared. Stops early, keeping what was measured, when
/// `stop` is raised.
pub fn run_sweep(spec: &SweepSpec, prepared: &Prepared, stop: &AtomicBool) -> (Vec<Point>, SweepEnd) {
    let mut points = Vec::with_capacity(spec.total_points());
    let mut progress = Progress::new(spec.total_points(), spec.duration);
    for &rate in &spec.rates {
        for rep in 1..=spec.reps {
            for config in rotated(&spec.configurations, rep) {
                if stop.load(Ordering::SeqCst) {
                    progress.finish();
                    return (points, SweepEnd::Interrupted);
                }
                progress.start(&config.label, rate, rep, spec.reps);
                let ran = run_point(spec, prepared, config, rate, rep, stop);
                match ran {
                    PointRun::Interrupted => {
                        progress.finish();
                        return (points, SweepEnd::Interrupted);
                    }
                    PointRun::Usage(msg) => {
                        progress.finish();
                        return (points, SweepEnd::Aborted(msg));
                    }
                    PointRun::Done(p) => {
                        progress.done(&p);
                        points.push(*p);
                    }
                }
            }
        }
    }
    progress.finish();
    (points, SweepEnd::Completed)
}

/// The configurations in the order repetition `rep` (from 1) runs them: each repetition starts
/// one configuration later than the one before (A B C, B C A, C A B, …), so that no
/// configuration always runs first, right after the previous rate's last point, or always
/// after the same neighbour; over a multiple of the configurations' count of repetitions each
/// runs in every position equally often.
fn rotated(configurations: &[Configuration], rep: u32) -> impl Iterator<Item = &Configuration> {
    let start = (rep as usize).saturating_sub(1) % configurations.len().max(1);
    configurations[start..].iter().chain(&configurations[..start])
}

enum PointRun {
    Done(Box<Point>),
    Interrupted,
    Usage(String),
}

fn run_point(
    spec: &SweepSpec,
    prepared: &Prepared,
    config: &Configuration,
    rate: f64,
    rep: u32,
    stop: &AtomicBool,
) -> PointRun {
    // Before the clock starts: the previous point's processes are gone, this one's not started.
    let speed = spec.speed_probes.before_points().then(crate::speed::probe);
    let started = Instant::now();
    let mut attempt = 1;
    loop {
        let mut point = Point {
            configuration: config.label.clone(),
            rate,
            rep,
            wall_s: 0.0,
            failure: None,
            run: None,
            middleware_cpu: None,
            middleware_active_share: None,
            middleware_first_active_s: None,
            middleware_activations: None,
            middleware_releases: Default::default(),
            middleware_cpu_nodes: Vec::new(),
            speed,
        };
        match attempt_point(spec, prepared, config, stop, &mut point) {
            Attempt::Measured => crate::mw_state::policy_activity(&mut point),
            Attempt::Failed(why) => point.failure = Some(why),
            Attempt::PortTaken(_) if attempt < PORT_ATTEMPTS => {
                attempt += 1;
                continue;
            }
            Attempt::PortTaken(why) => point.failure = Some(why),
            Attempt::Interrupted => return PointRun::Interrupted,
            Attempt::Usage(why) => return PointRun::Usage(why),
        }
        point.wall_s = started.elapsed().as_secs_f64();
        return PointRun::Done(Box::new(point));
    }
}

enum Attempt {
    Measured,
    Failed(String),
    PortTaken(String),
    Interrupted,
    Usage(String),
}

/// The arguments of the engine child of one point.
pub fn engine_args(spec: &SweepSpec, config: &Configuration, rate: f64, port: u16) -> Vec<String> {
    let mut args = vec![
        "run".to_string(),
        spec.workload.clone(),
        "--rate".into(),
        format!("{rate}"),
        "--duration".into(),
        format!("{}ms", spec.duration.as_millis()),
        "--warmup".into(),
        format!("{}", spec.warmup),
        "--json".into(),
        "--metrics-addr".into(),
        format!("127.0.0.1:{port}"),
    ];
    if let Some(t) = &config.threading {
        args.extend(["--threading".to_string(), t.clone()]);
    }
    args.extend(config.run_args.iter().cloned());
    args.extend(spec.extra_args.iter().cloned());
    args
}

/// The arguments of the Flink or Storm job of one point (the lab adds `--rest-port` or
/// `--metrics-dir`).
pub fn flink_args(spec: &SweepSpec, rate: f64) -> Vec<String> {
    let mut args = vec![
        "--rate".to_string(),
        format!("{rate}"),
        "--duration".into(),
        format!("{}ms", spec.duration.as_millis()),
        "--warmup".into(),
        format!("{}", spec.warmup),
        "--json".into(),
    ];
    args.extend(spec.extra_args.iter().cloned());
    args
}

/// The stream processor of one point: a `moirai run` engine, or a Flink or Storm job's JVM.
enum Spe {
    Engine(Child),
    Jvm(JvmJob),
    Cluster(Box<ClusterJob>),
}

impl Spe {
    fn child(&mut self) -> &mut Child {
        match self {
            Spe::Engine(c) => c,
            Spe::Jvm(j) => j.child(),
            Spe::Cluster(c) => c.child(),
        }
    }

    /// Stops it by PID (SIGTERM, then SIGKILL after a grace period); idempotent.
    fn stop(&mut self) {
        match self {
            Spe::Engine(c) => {
                c.terminate(moirai_os::Signal::TERM, Duration::from_secs(2));
            }
            Spe::Jvm(j) => j.stop(),
            Spe::Cluster(c) => c.stop(),
        }
    }

    /// How error messages name it.
    fn name(&self) -> String {
        match self {
            Spe::Engine(_) => "the engine".to_string(),
            Spe::Jvm(j) => format!("the {} job", j.system().name),
            Spe::Cluster(c) => format!("the {} job on a standalone cluster", c.system().name),
        }
    }

    /// The tail of its stderr: `captured` for the engine; for a JVM job, what the job said (a
    /// usage text may follow it) or the log's tail, and where the log is.
    fn stderr_tail(&self, captured: &str, lines: usize) -> String {
        match self {
            Spe::Engine(_) => tail_lines(captured, lines),
            Spe::Jvm(j) => format!(
                "{} (full log: {})",
                j.complaint().unwrap_or_else(|| j.stderr_tail(lines)),
                j.log_path().display()
            ),
            Spe::Cluster(c) => format!("{} (full log: {})", file_tail(c.log_path(), lines), c.log_path().display()),
        }
    }

    /// The `system` its JSON summary must name, for a JVM job.
    fn system(&self) -> Option<&'static str> {
        match self {
            Spe::Engine(_) => None,
            Spe::Jvm(j) => Some(j.system().module),
            Spe::Cluster(c) => Some(c.system().module),
        }
    }
}

/// A started stream processor, ready for the middleware.
struct Started {
    spe: Spe,
    /// When its run began: the engine's start, or the moment the Flink job was RUNNING.
    t0: Instant,
    /// How the middleware finds it: `--engine URL` or `--flink URL`.
    target: Vec<String>,
    /// Why the point already failed (the middleware cannot attach).
    failure: Option<String>,
    /// A standalone cluster's TaskManagers: one middleware each (none: one middleware).
    nodes: Vec<mw_state::NodeTarget>,
}

/// Starts the engine of a point; for a configuration with a policy, waits until its metrics
/// endpoint answers.
fn start_engine(spec: &SweepSpec, config: &Configuration, rate: f64, stop: &AtomicBool) -> Result<Started, Attempt> {
    let port = free_port()
        .map_err(|e| Attempt::Failed(format!("no free TCP port on 127.0.0.1 for the metrics endpoint: {e}")))?;
    let t0 = Instant::now();
    let mut engine = Child::spawn(&spec.exe, &engine_args(spec, config, rate, port))
        .map_err(|e| Attempt::Failed(format!("cannot start {}: {e}", spec.exe.display())))?;
    let mut failure = None;
    if config.policy().is_some()
        && !wait_for_port(port, &mut engine, ENDPOINT_TIMEOUT, stop)
        && engine.try_wait().is_none()
        && !stop.load(Ordering::SeqCst)
    {
        failure =
            Some(format!("the engine's metrics endpoint 127.0.0.1:{port} did not answer within {ENDPOINT_TIMEOUT:?}"));
        engine.terminate(moirai_os::Signal::TERM, Duration::from_secs(2));
    }
    Ok(Started {
        spe: Spe::Engine(engine),
        t0,
        target: vec!["--engine".into(), format!("http://127.0.0.1:{port}")],
        failure,
        nodes: Vec::new(),
    })
}

/// Where the JVM of a point logs: `<out>/<dir>/<configuration>-<rate>-rep<n>.log`.
fn job_log(spec: &SweepSpec, point: &Point, dir: &str) -> PathBuf {
    let label: String =
        point.configuration.chars().map(|c| if c.is_ascii_alphanumeric() || c == '-' { c } else { '_' }).collect();
    spec.out_dir.join(dir).join(format!("{label}-{}-rep{}.log", fmt_rate(point.rate), point.rep))
}

/// Starts the Flink or Storm job of a point and waits until it runs: the job and all its
/// vertices are RUNNING (Flink), a spout of its topology emits (Storm).
fn start_jvm(
    spec: &SweepSpec,
    prepared: &Prepared,
    config: &Configuration,
    point: &Point,
    stop: &AtomicBool,
) -> Result<Started, Attempt> {
    let jobs = prepared.jobs(config.system).ok_or_else(|| {
        Attempt::Failed(format!(
            "the {} jobs were not built (the sweep's start-up did not prepare them)",
            config.system.name()
        ))
    })?;
    let system = jobs.system();
    let workload = system.job_workload(&spec.workload).map_err(Attempt::Failed)?;
    let log = job_log(spec, point, &format!("{}-logs", system.module));
    if let Some(taskmanagers) = config.cluster {
        let mut job = ClusterJob::start(jobs, taskmanagers, workload, &flink_args(spec, point.rate), &log)
            .map_err(Attempt::Failed)?;
        return match job.wait_running(FLINK_STARTUP, stop) {
            Ok(true) => {
                let (target, nodes) = job.middleware_targets();
                Ok(Started { spe: Spe::Cluster(Box::new(job)), t0: Instant::now(), target, failure: None, nodes })
            }
            Ok(false) => Err(Attempt::Interrupted),
            Err(e) => Err(Attempt::Failed(e)),
        };
    }
    let mut job = JvmJob::start_logged(jobs, workload, &flink_args(spec, point.rate), &log).map_err(Attempt::Failed)?;
    match job.wait_running_unless(FLINK_STARTUP, stop) {
        Ok(_) => {
            let target = job.middleware_args();
            Ok(Started { spe: Spe::Jvm(job), t0: Instant::now(), target, failure: None, nodes: Vec::new() })
        }
        Err(NotRunning::Stopped) => Err(Attempt::Interrupted),
        Err(NotRunning::Exited { status, message }) => Err(if status.code() == Some(2) {
            Attempt::Usage(format!(
                "the {} job `{workload}` rejected its arguments: {}",
                system.name,
                job.complaint().unwrap_or_else(|| job.stderr_tail(5))
            ))
        } else if job.port_taken(&message) {
            Attempt::PortTaken(message)
        } else {
            Attempt::Failed(message)
        }),
        Err(NotRunning::Failed(message)) => Err(Attempt::Failed(message)),
    }
    // On every error return the job is dropped here, which stops its JVM.
}

fn attempt_point(
    spec: &SweepSpec,
    prepared: &Prepared,
    config: &Configuration,
    stop: &AtomicBool,
    point: &mut Point,
) -> Attempt {
    let started = match config.system {
        System::Moirai => start_engine(spec, config, point.rate, stop),
        System::Flink | System::Flink2 | System::Storm => start_jvm(spec, prepared, config, point, stop),
    };
    let Started { mut spe, t0, target, mut failure, nodes } = match started {
        Ok(s) => s,
        Err(attempt) => return attempt,
    };
    let mut middlewares = Vec::new();
    // The middleware could not listen on its port: another attempt may.
    let mut port_taken = false;
    if let (Some(policy), None) = (config.policy(), &failure) {
        if !stop.load(Ordering::SeqCst) && spe.child().try_wait().is_none() {
            // Its own state file in the output directory, so the lab never shares one with a
            // middleware the user runs elsewhere on this machine.
            let state = spec.out_dir.join("schedule-state.json");
            let args = mw_state::schedule_args(config, policy, &target, &state, spec.policy_period);
            let log = job_log(spec, point, "middleware-logs");
            match mw_state::spawn_per_node(&spec.exe, args, &state, &log, &nodes) {
                Ok(m) => middlewares = m,
                Err(e) => {
                    failure = Some(e);
                    spe.stop();
                }
            }
        }
    }

    // Wait for the SPE, watching the middleware and sampling its CPU and state at (about) the
    // SPE's measured window: from warm-up to the end of the run.
    let window_start = t0 + spec.duration.mul_f64(spec.warmup);
    let window_end = t0 + spec.duration;
    let deadline = t0 + spec.deadline();
    let outcome = loop {
        if let Some(status) = spe.child().try_wait() {
            break Outcome::Exited(status);
        }
        if stop.load(Ordering::SeqCst) {
            break Outcome::Interrupted;
        }
        if Instant::now() >= deadline {
            break Outcome::TimedOut;
        }
        if let Spe::Cluster(c) = &mut spe {
            c.watch(window_start, window_end);
        }
        if let Some(Err(f)) = middlewares.iter_mut().map(|m| m.watch(window_start, window_end)).find(Result::is_err) {
            port_taken = matches!(f, MwFailure::PortTaken(_));
            failure = Some(match f {
                MwFailure::PortTaken(why) | MwFailure::Failed(why) => why,
            });
            break Outcome::TimedOut;
        }
        std::thread::sleep(POLL);
    };
    if !matches!(outcome, Outcome::Exited(_)) {
        spe.stop();
    }

    // Stop the middleware first thing after the SPE: SIGINT lets it restore what it steered.
    if let (Err(MwFailure::PortTaken(why) | MwFailure::Failed(why)), None) =
        (mw_state::finish_all(middlewares, t0, point), &failure)
    {
        failure = Some(why);
    }

    // The SPE has exited or was stopped; make sure (a Flink JVM is stopped by PID and reaped).
    spe.stop();
    let (stdout, stderr) = spe.child().output();
    if matches!(outcome, Outcome::Interrupted) {
        return Attempt::Interrupted;
    }
    if let Some(f) = failure {
        return if port_taken { Attempt::PortTaken(f) } else { Attempt::Failed(f) };
    }
    let who = spe.name();
    match outcome {
        Outcome::Exited(status) if status.success() => match RunSummary::from_stdout(&stdout) {
            Ok(run) if spe.system().is_some_and(|s| run.extra.get("system").and_then(|v| v.as_str()) != Some(s)) => {
                let jar = prepared.jobs(config.system).map(|j| j.jar().display().to_string());
                Attempt::Failed(format!(
                    "{who}'s summary does not say \"system\": {:?} (it says {:?}); is {} the jobs' jar?",
                    spe.system().unwrap_or_default(),
                    run.extra.get("system"),
                    jar.unwrap_or_default()
                ))
            }
            Ok(mut run) => {
                if let Spe::Cluster(c) = &mut spe {
                    // The client cannot see the cluster's CPU; the lab measured it.
                    run.cpu_cores = c.cpu_cores().unwrap_or(run.cpu_cores);
                }
                point.run = Some(run);
                Attempt::Measured
            }
            Err(e) => Attempt::Failed(format!("{who}: {e}")),
        },
        Outcome::Exited(status) => {
            let tail = spe.stderr_tail(&stderr, 5);
            match &spe {
                _ if status.code() == Some(2) => Attempt::Usage(match spe {
                    Spe::Engine(_) => format!("`moirai run {}` rejected its arguments: {tail}", spec.workload),
                    Spe::Jvm(_) | Spe::Cluster(_) => {
                        format!("{who} `{}` rejected its arguments: {tail}", spec.workload)
                    }
                }),
                Spe::Engine(_) if tail.contains("in use") => Attempt::PortTaken(format!(
                    "the engine could not listen on {}: {tail}",
                    target[1].trim_start_matches("http://")
                )),
                _ => Attempt::Failed(format!("{who} failed ({}): {tail}", describe(status))),
            }
        }
        _ => Attempt::Failed(format!(
            "{who} did not finish within {:?}{} (run {:?} + grace) and was killed; stderr: {}",
            spec.deadline(),
            match &spe {
                Spe::Jvm(j) => format!(" of {}", j.system().running),
                Spe::Cluster(c) => format!(" of {}", c.system().running),
                Spe::Engine(_) => String::new(),
            },
            spec.duration,
            spe.stderr_tail(&stderr, 5)
        )),
    }
}

#[cfg(test)]
#[path = "sweep_tests.rs"]
pub(crate) mod tests;

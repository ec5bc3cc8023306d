//! The orchestrator: runs every (rate, repetition, configuration) point as child processes.
//!
//! Points are interleaved — for each rate, for each repetition, every configuration in turn
//! (A B A B ...) — so that drift of a shared, noisy machine hits all configurations alike
//! (`BENCHMARKING.md`). A point is one run of the same `moirai` binary as the lab:
//! `moirai run <workload> --rate R --duration D --warmup W --json --metrics-addr 127.0.0.1:P
//! [--threading T] [extra args]`, plus, for a configuration with a policy, `moirai schedule
//! --engine http://127.0.0.1:P --policy NAME` started once the engine's endpoint answers. Every
//! configuration gets the metrics endpoint, so that the engine runs the same in all of them.
//!
//! A point that fails (non-zero exit, no JSON, a hang past the deadline, a middleware that
//! dies) is recorded with the reason and the sweep goes on; only a usage error of the engine
//! (exit code 2: it would repeat at every point) ends the sweep early.

use std::path::PathBuf;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, Instant};

use serde::Serialize;

use crate::point::{Point, RunSummary};
use crate::process::{describe, free_port, tail_lines, wait_for_port, Child, Outcome, POLL};
use crate::progress::Progress;
use crate::spec::{fmt_rate, Configuration};
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
/// How long the middleware may take to stop after SIGINT (it restores the threads it steered).
const MIDDLEWARE_GRACE: Duration = Duration::from_secs(5);

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
    #[serde(serialize_with = "seconds")]
    pub duration: Duration,
    /// Share of each run discarded as warm-up.
    pub warmup: f64,
    /// Repetitions of every (configuration, rate).
    pub reps: u32,
    /// Configurations compared, the first being the baseline of ratios.
    pub configurations: Vec<Configuration>,
    /// Arguments passed on to `moirai run <workload>`.
    pub extra_args: Vec<String>,
    /// How often the middleware's policy runs, for configurations with a policy.
    #[serde(serialize_with = "seconds")]
    pub policy_period: Duration,
    /// What "sustainable" means.
    pub criteria: Criteria,
    /// Time a point may take beyond `duration` (start-up, drain) before it is killed; see
    /// [`SweepSpec::default_grace`].
    #[serde(serialize_with = "seconds")]
    pub grace: Duration,
    /// Where results and the report go.
    pub out_dir: PathBuf,
    /// The lab's own command line, recorded with the results.
    pub command_line: Vec<String>,
}

fn seconds<S: serde::Serializer>(d: &Duration, s: S) -> Result<S::Ok, S::Error> {
    s.serialize_f64(d.as_secs_f64())
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

/// Checks, before any point runs, everything that would make every point fail: the output
/// directory, configurations this build cannot run, the workload name.
pub fn preflight(spec: &SweepSpec) -> Result<(), BenchError> {
    spec.validate()?;
    check_out_dir(&spec.out_dir)?;
    for c in &spec.configurations {
        c.check_implemented()?;
    }
    if let Some(c) = spec.configurations.iter().find(|c| c.policy().is_some()) {
        if !exits_zero(spec, &["schedule", "--help"]) {
            return Err(BenchError::NeedsMiddleware { label: c.label.clone() });
        }
    }
    let help = ["run".to_string(), spec.workload.clone(), "--help".to_string()];
    let mut child =
        Child::spawn(&spec.exe, &help).map_err(|e| BenchError::Spawn { exe: spec.exe.clone(), source: e })?;
    match child.wait_until(Instant::now() + Duration::from_secs(30), &AtomicBool::new(false)) {
        Outcome::Exited(s) if s.success() => Ok(()),
        _ => Err(BenchError::Workload { workload: spec.workload.clone(), why: tail_lines(&child.output().1, 3) }),
    }
}

fn exits_zero(spec: &SweepSpec, args: &[&str]) -> bool {
    let args: Vec<String> = args.iter().map(|s| s.to_string()).collect();
    match Child::spawn(&spec.exe, &args) {
        Ok(mut c) => matches!(
            c.wait_until(Instant::now() + Duration::from_secs(30), &AtomicBool::new(false)),
            Outcome::Exited(s) if s.success()
        ),
        Err(_) => false,
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

/// Runs the sweep. Stops early, keeping what was measured, when `stop` is raised.
pub fn run_sweep(spec: &SweepSpec, stop: &AtomicBool) -> (Vec<Point>, SweepEnd) {
    let mut points = Vec::with_capacity(spec.total_points());
    let mut progress = Progress::new(spec.total_points(), spec.duration);
    for &rate in &spec.rates {
        for rep in 1..=spec.reps {
            for config in &spec.configurations {
                if stop.load(Ordering::SeqCst) {
                    progress.finish();
                    return (points, SweepEnd::Interrupted);
                }
                progress.start(&config.label, rate, rep, spec.reps);
                let ran = run_point(spec, config, rate, rep, stop);
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

enum PointRun {
    Done(Box<Point>),
    Interrupted,
    Usage(String),
}

fn run_point(spec: &SweepSpec, config: &Configuration, rate: f64, rep: u32, stop: &AtomicBool) -> PointRun {
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
        };
        match attempt_point(spec, config, rate, stop, &mut point) {
            Attempt::Measured => {}
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
    args.extend(spec.extra_args.iter().cloned());
    args
}

fn attempt_point(spec: &SweepSpec, config: &Configuration, rate: f64, stop: &AtomicBool, point: &mut Point) -> Attempt {
    let port = match free_port() {
        Ok(p) => p,
        Err(e) => return Attempt::Failed(format!("no free TCP port on 127.0.0.1 for the metrics endpoint: {e}")),
    };
    let t0 = Instant::now();
    let mut engine = match Child::spawn(&spec.exe, &engine_args(spec, config, rate, port)) {
        Ok(c) => c,
        Err(e) => return Attempt::Failed(format!("cannot start {}: {e}", spec.exe.display())),
    };
    let mut middleware = None;
    let mut failure = None;
    if let Some(policy) = config.policy() {
        if wait_for_port(port, &mut engine, ENDPOINT_TIMEOUT, stop) {
            // Its own state file in the output directory, so the lab never shares one with a
            // middleware the user runs elsewhere on this machine.
            let state = spec.out_dir.join("schedule-state.json");
            let args: Vec<String> = [
                "schedule",
                "--engine",
                &format!("http://127.0.0.1:{port}"),
                "--policy",
                policy,
                "--period",
                &format!("{}ms", spec.policy_period.as_millis().max(1)),
                "--state-file",
                &state.display().to_string(),
                "--quiet",
            ]
            .iter()
            .map(|s| s.to_string())
            .collect();
            match Child::spawn(&spec.exe, &args) {
                Ok(m) => middleware = Some(m),
                Err(e) => failure = Some(format!("cannot start the middleware: {e}")),
            }
        } else if engine.try_wait().is_none() && !stop.load(Ordering::SeqCst) {
            failure = Some(format!(
                "the engine's metrics endpoint 127.0.0.1:{port} did not answer within {ENDPOINT_TIMEOUT:?}"
            ));
        }
        if failure.is_some() {
            engine.terminate(libc::SIGTERM, Duration::from_secs(2));
        }
    }

    // Wait for the engine, watching the middleware and sampling its CPU at (about) the
    // engine's measured window: from warm-up to the end of the run.
    let window_start = t0 + spec.duration.mul_f64(spec.warmup);
    let window_end = t0 + spec.duration;
    let deadline = t0 + spec.deadline();
    let mut mw_cpu: [Option<(Instant, u64)>; 2] = [None, None];
    let outcome = loop {
        if let Some(status) = engine.try_wait() {
            break Outcome::Exited(status);
        }
        if stop.load(Ordering::SeqCst) {
            break Outcome::Interrupted;
        }
        if Instant::now() >= deadline {
            break Outcome::TimedOut;
        }
        if let Some(m) = middleware.as_mut() {
            if let Some(status) = m.try_wait() {
                let (_, err) = m.output();
                failure = Some(format!(
                    "the middleware exited during the run ({}): {}",
                    describe(status),
                    tail_lines(&err, 5)
                ));
                break Outcome::TimedOut;
            }
            let now = Instant::now();
            if mw_cpu[0].is_none() && now >= window_start {
                mw_cpu[0] = cpu_sample(m.pid());
            }
            if mw_cpu[1].is_none() && now >= window_end {
                mw_cpu[1] = cpu_sample(m.pid());
            }
        }
        std::thread::sleep(POLL);
    };
    if !matches!(outcome, Outcome::Exited(_)) {
        engine.terminate(libc::SIGTERM, Duration::from_secs(2));
    }

    // Stop the middleware first thing after the engine: SIGINT lets it restore what it steered.
    if let Some(mut m) = middleware {
        if mw_cpu[1].is_none() {
            mw_cpu[1] = cpu_sample(m.pid());
        }
        if let [Some((t_a, a)), Some((t_b, b))] = mw_cpu {
            let wall = t_b.duration_since(t_a).as_secs_f64();
            if wall > 0.0 {
                point.middleware_cpu = Some(b.saturating_sub(a) as f64 / 1e9 / wall);
            }
        }
        let was_running = m.try_wait().is_none();
        let status = m.terminate(libc::SIGINT, MIDDLEWARE_GRACE);
        if was_running && failure.is_none() {
            use std::os::unix::process::ExitStatusExt;
            match status {
                Some(s) if s.signal() == Some(libc::SIGKILL) => {
                    failure = Some(format!("the middleware did not stop within {MIDDLEWARE_GRACE:?} of SIGINT"))
                }
                // 130 = 128 + SIGINT, the conventional exit code of a process stopped by Ctrl-C.
                Some(s) if !s.success() && s.signal() != Some(libc::SIGINT) && s.code() != Some(130) => {
                    failure = Some(format!(
                        "the middleware failed on SIGINT ({}): {}",
                        describe(s),
                        tail_lines(&m.output().1, 5)
                    ))
                }
                _ => {}
            }
        }
    }

    let (stdout, stderr) = engine.output();
    if matches!(outcome, Outcome::Interrupted) {
        return Attempt::Interrupted;
    }
    if let Some(f) = failure {
        return Attempt::Failed(f);
    }
    match outcome {
        Outcome::Exited(status) if status.success() => match RunSummary::from_stdout(&stdout) {
            Ok(run) => {
                point.run = Some(run);
                Attempt::Measured
            }
            Err(e) => Attempt::Failed(e),
        },
        Outcome::Exited(status) => {
            let tail = tail_lines(&stderr, 5);
            if status.code() == Some(2) {
                Attempt::Usage(format!("`moirai run {}` rejected its arguments: {tail}", spec.workload))
            } else if tail.contains("in use") {
                Attempt::PortTaken(format!("the engine could not listen on 127.0.0.1:{port}: {tail}"))
            } else {
                Attempt::Failed(format!("the engine failed ({}): {tail}", describe(status)))
            }
        }
        _ => Attempt::Failed(format!(
            "the engine did not finish within {:?} (run {:?} + grace) and was killed; stderr: {}",
            spec.deadline(),
            spec.duration,
            tail_lines(&stderr, 5)
        )),
    }
}

fn cpu_sample(pid: u32) -> Option<(Instant, u64)> {
    moirai_os::proc::process_cpu_ns(pid).ok().map(|ns| (Instant::now(), ns))
}

/// A one-line description of a point, for logs.
pub fn describe_point(p: &Point) -> String {
    let head = format!("{} @ {} tuples/s rep {}", p.configuration, fmt_rate(p.rate), p.rep);
    match (&p.failure, &p.run) {
        (Some(f), _) => format!("{head}: FAILED: {}", f.lines().next().unwrap_or("")),
        (None, Some(r)) => format!(
            "{head}: ingress {:.0}/s, e2e p99 {:.3} ms, engine {:.2} cores{}",
            r.ingress_tps,
            r.e2e_latency_ms.p99,
            r.cpu_cores,
            p.middleware_cpu.map(|c| format!(", middleware {:.1} % of a core", c * 100.0)).unwrap_or_default()
        ),
        (None, None) => head,
    }
}

#[cfg(test)]
#[path = "sweep_tests.rs"]
pub(crate) mod tests;

//! moirai's lab: `moirai bench` sweeps offered rates, runs scheduling configurations side by side,
//! and reports throughput, latency, queue sizes and CPU, as `shared/BENCHMARKING.md` asks.
//!
//! The lab is an orchestrator of processes: every point of a sweep is a child `moirai run
//! <workload> ... --json` (the same binary) — or, for a `flink:` configuration, a JVM running the
//! workload's Apache Flink job — plus a child `moirai schedule` for configurations that name a
//! middleware policy. Measuring in separate processes keeps the lab's own work
//! (parsing, plotting) out of the measured CPU, gives every point a fresh engine, and is how the
//! middleware meets real SPEs: as a separate process pointed at a metrics endpoint.
//!
//! Organisation, in the order data flows:
//!
//! - [`spec`] — what to run: offered rates (`FROM:TO:STEP` or a list) and configurations
//!   (`[SYSTEM:]SCHEDULER[@THREADING][#TAG]`), parsed with errors that say how to fix them.
//! - [`sweep`] — the orchestrator: start-up checks, then every (rate, repetition,
//!   configuration) interleaved, one point at a time.
//! - [`process`] — child processes: capture, deadlines, stopping by PID, free ports.
//! - [`mw_state`] — the middleware of a point: its CPU and whether it acted over the window.
//! - [`jvm`], [`jvm_job`] — the Flink and Storm jobs of `integrations/`: one [`jvm::JvmSystem`]
//!   value for each ([`flink::FLINK`], [`storm::STORM`]); build, start, wait until running, stop.
//! - [`flink_cluster`], [`netns`] — a standalone Flink cluster of separate JVMs, its TaskManagers
//!   on "nodes" (network namespaces on a bridge).
//! - [`point`] — one point, and the engine's JSON summary it is read from.
//! - [`summary`] — medians over repetitions, sustainable rate and saturation point, the
//!   side-by-side table.
//! - [`output`], [`report`], [`plots`] — `results.csv`, `results.json`, `report.html`.
//! - [`speed`] — how fast the machine was at the sweep's start, before each point and at its end.
//! - [`progress`] — the progress line on stderr.
//! - [`requires`] — the tools some tests need (a JDK and Maven, a browser), and how they skip.
//! - [`timeline`] — charts of micro-batch runs over time (`moirai micro-batch-timeline`).
//!
//! [`run`] ties them together; [`stop_on_signals`] gives it a flag that Ctrl-C raises.

#![forbid(missing_docs)]
#![forbid(unsafe_code)]

pub mod cluster_job;
pub mod flink;
pub mod flink_cluster;
pub mod jvm;
pub mod jvm_job;
pub mod mw_state;
pub mod netns;
pub mod output;
pub mod plots;
pub mod point;
pub mod process;
pub mod progress;
pub mod report;
pub mod requires;
mod seconds;
pub mod spec;
pub mod speed;
pub mod storm;
pub mod summary;
pub mod sweep;
pub mod timeline;

use std::path::PathBuf;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;

pub use point::{Latency, Point, RunSummary};
pub use spec::{parse_configurations, parse_rate, parse_rates, vary, Configuration, Scheduler, System};
pub use summary::{Criteria, Summary};
pub use sweep::{Prepared, SweepEnd, SweepSpec};

/// Everything that can stop a sweep before or after its points run. A point that fails is not
/// an error: it is recorded in the results.
#[derive(Debug, thiserror::Error)]
pub enum BenchError {
    /// `--rates` could not be read.
    #[error("--rates '{text}': {why}; write FROM:TO:STEP (e.g. 1M:9M:2M) or a list (e.g. 1000,2000,5000)")]
    Rates {
        /// The text given.
        text: String,
        /// What is wrong with it.
        why: String,
    },
    /// A configuration of `--compare` could not be read.
    #[error("--compare '{text}': {why}")]
    Configuration {
        /// The text given.
        text: String,
        /// What is wrong with it.
        why: String,
    },
    /// A configuration this build of the lab cannot run.
    #[error("configuration '{label}' cannot run: {why}")]
    Unsupported {
        /// The configuration.
        label: String,
        /// Why not.
        why: String,
    },
    /// A configuration names a policy, but the binary has no `schedule` subcommand.
    #[error("configuration '{label}' needs `moirai schedule`, which this build does not have")]
    NeedsMiddleware {
        /// The configuration.
        label: String,
    },
    /// `moirai run <workload> --help` failed.
    #[error("unknown workload '{workload}' (`moirai run {workload} --help` failed: {why}); see `moirai run --help`")]
    Workload {
        /// The workload given.
        workload: String,
        /// The tail of its stderr.
        why: String,
    },
    /// Another value of the sweep is out of range.
    #[error("{0}")]
    Spec(String),
    /// The output directory cannot be created or written.
    #[error("--out {}: cannot write there ({source}); choose a writable directory", dir.display())]
    OutDir {
        /// The directory.
        dir: PathBuf,
        /// The error.
        source: std::io::Error,
    },
    /// The `moirai` binary cannot be started.
    #[error("cannot start {}: {source}", exe.display())]
    Spawn {
        /// The binary.
        exe: PathBuf,
        /// The error.
        source: std::io::Error,
    },
    /// A result file cannot be written.
    #[error("cannot write {}: {source}", path.display())]
    Write {
        /// The file.
        path: PathBuf,
        /// The error.
        source: std::io::Error,
    },
    /// The Ctrl-C handler cannot be installed.
    #[error("cannot install the Ctrl-C handler: {0}")]
    Signals(String),
    /// The Flink jobs cannot be found or built (`flink:` configurations need them).
    #[error("cannot prepare the Flink jobs: {0}")]
    Flink(String),
    /// The Storm jobs cannot be found or built (`storm:` configurations need them).
    #[error("cannot prepare the Storm jobs: {0}")]
    Storm(String),
}

/// What a finished (or stopped) sweep produced.
pub struct Finished {
    /// Every point run, in the order run.
    pub points: Vec<Point>,
    /// How the sweep ended.
    pub end: SweepEnd,
    /// Medians, verdicts, sustainable rates.
    pub summary: Summary,
    /// The files written: results.csv, results.json, report.html.
    pub files: Vec<PathBuf>,
    /// How fast the machine was at the sweep's start and end (each point has its own probe);
    /// `None` with [`speed::Probing::Off`].
    pub speed: Option<speed::SpeedProbes>,
}

/// Runs a sweep: start-up checks, the points, then `results.csv`, `results.json` and
/// `report.html` in the output directory — also when `stop` ends the sweep early, for what was
/// measured by then.
pub fn run(spec: &SweepSpec, stop: &AtomicBool) -> Result<Finished, BenchError> {
    let prepared = sweep::preflight(spec)?;
    let mut machine = output::Machine::now();
    let before = spec.speed_probes.at_ends().then(speed::probe);
    let (points, end) = sweep::run_sweep(spec, &prepared, stop);
    let speed = before.map(|before| speed::SpeedProbes { before, after: speed::probe() });
    machine.speed = speed;
    let labels: Vec<String> = spec.configurations.iter().map(|c| c.label.clone()).collect();
    let summary = summary::summarise(&points, &labels, &spec.rates, &spec.criteria);
    let results = output::Results {
        command_line: &spec.command_line,
        machine: &machine,
        spec,
        end: &end,
        points: &points,
        summary: &summary,
    };
    let files =
        vec![spec.out_dir.join("results.csv"), spec.out_dir.join("results.json"), spec.out_dir.join("report.html")];
    output::write_csv(&files[0], &points)?;
    output::write_json(&files[1], &results)?;
    report::write_report(&files[2], &results)?;
    Ok(Finished { points, end, summary, files, speed })
}

/// A flag raised by SIGINT or SIGTERM (Ctrl-C, `kill`). Installs a process-wide handler, so
/// call it once.
pub fn stop_on_signals() -> Result<Arc<AtomicBool>, BenchError> {
    let stop = Arc::new(AtomicBool::new(false));
    let flag = stop.clone();
    ctrlc::set_handler(move || {
        if !flag.swap(true, Ordering::SeqCst) {
            eprintln!(
                "\nmoirai bench: stopping: the running point is stopped, results are written for what was measured"
            );
        }
    })
    .map_err(|e| BenchError::Signals(e.to_string()))?;
    Ok(stop)
}

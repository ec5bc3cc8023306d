//! Sweeps in the simulator, reported by the lab: every (rate, repetition, configuration) is one
//! simulated run, recorded as a [`Point`] with the summary `moirai run --json` would print, and
//! the sweep is written by `moirai_bench`'s own code — `results.csv`, `results.json`,
//! `report.html` and the side-by-side table — so a simulated sweep reads like a measured one.
//!
//! Configurations are the lab's (`[SYSTEM:]SCHEDULER[@THREADING][#TAG]`, parsed by
//! [`moirai_bench::parse_configurations`]): `os` (CFS alone, a thread per operator), `qs`, `hr`,
//! `fcfs`, `random` (the middleware's policy setting nice values every `--policy-period`),
//! `os@dynamic:N` (the dynamic pool), `qs@policy:N` (the policy at the user level). A pool without
//! a worker count gets one worker per simulated core. Flink cannot be simulated.
//!
//! A point's `wall_s` is the simulated time the run took (sources plus drain): the simulator's
//! wall clock is not part of its results, so that a seed gives the same bytes on any machine.

use std::path::PathBuf;

use moirai_bench::output::{Machine, Results};
use moirai_bench::spec::Scheduler;
use moirai_bench::summary::{summarise, Criteria, Summary};
use moirai_bench::{Configuration, Point, SweepEnd, SweepSpec, System};
use moirai_engine::Threading;

use crate::cluster;
use crate::model::Model;
use crate::sim::SimConfig;
use crate::SimError;

/// A simulated sweep.
#[derive(Clone, Debug)]
pub struct Sweep {
    /// The workload's name, as `moirai run` names it.
    pub workload: String,
    /// Offered rates, tuples/s in total, ascending.
    pub rates: Vec<f64>,
    /// Configurations compared, the first the baseline of ratios.
    pub configurations: Vec<Configuration>,
    /// Repetitions of every (rate, configuration), each with the next seed.
    pub reps: u32,
    /// Everything else of a run: cores, CFS, duration, warm-up, seed, policy period.
    pub base: SimConfig,
    /// Nodes of the simulated cluster, each with `base.cores` cores and its own middleware (1:
    /// one machine).
    pub nodes: usize,
    /// What "sustainable" means.
    pub criteria: Criteria,
    /// Where the files go.
    pub out_dir: PathBuf,
    /// The command line, recorded with the results.
    pub command_line: Vec<String>,
    /// The workload's arguments (after `--`), recorded with the results.
    pub extra_args: Vec<String>,
}

/// The workload's model at an offered rate (tuples/s in total) — one model per node of the
/// cluster, each with that node's queries — with its parameters to record.
pub type ModelAt<'a> = dyn Fn(f64) -> Result<(Vec<Model>, serde_json::Value), SimError> + 'a;

/// What a sweep produced.
pub struct Finished {
    /// Every point, in the order run.
    pub points: Vec<Point>,
    /// Medians, verdicts, sustainable rates.
    pub summary: Summary,
    /// The files written.
    pub files: Vec<PathBuf>,
}

/// The run of configuration `c` on top of `base`; a clear error for what cannot be simulated.
pub fn configure(c: &Configuration, base: &SimConfig) -> Result<SimConfig, SimError> {
    let not = |why: String| SimError::Config(format!("configuration '{}' cannot be simulated: {why}", c.label));
    if c.system != System::Moirai {
        return Err(not("only moirai's engine is simulated, not Flink".into()));
    }
    let mut config = base.clone();
    config.os_policy = match &c.scheduler {
        Scheduler::Os => None,
        Scheduler::Policy(p) => Some(p.clone()),
    };
    config.threading = match c.threading.as_deref() {
        None => Threading::Dedicated,
        Some(text) => {
            let mut t: Threading = text.parse().map_err(|e: moirai_engine::InvalidSetting| not(e.to_string()))?;
            // Without a worker count, one worker per simulated core (not per core of this machine).
            let counted = text.split(':').skip(1).any(|p| !p.is_empty() && p.bytes().all(|b| b.is_ascii_digit()));
            match &mut t {
                Threading::Dynamic { threads } if !counted => *threads = base.cores,
                Threading::Policy(p) if !counted => p.threads = base.cores,
                Threading::Dedicated | Threading::Dynamic { .. } | Threading::Policy(_) => {}
                other => {
                    return Err(not(format!(
                        "threading model '{other}' is not simulated; use dedicated, dynamic or policy"
                    )))
                }
            }
            t
        }
    };
    let mut args = c.schedule_args.iter();
    while let Some(arg) = args.next() {
        let key = arg.as_str();
        if !matches!(key, "--translator" | "--activation" | "--activation-threshold" | "--activation-lag") {
            continue;
        }
        let value = args.next().map(String::as_str).unwrap_or("");
        match key {
            "--translator" => config.translator = value.parse().map_err(not)?,
            "--activation" => config.activation = value.parse().map_err(not)?,
            "--activation-lag" => {
                config.activation_lag = Some(moirai_middleware::config::parse_activation_lag(value).map_err(not)?)
            }
            _ => {
                config.activation_threshold = value.parse().map_err(|_| {
                    not(format!("/activation-threshold={value} is not a share of the CPU (from 0.5 to 1, e.g. 0.9)"))
                })?
            }
        }
        if config.os_policy.is_none() {
            let k = &key[2..];
            return Err(not(format!("/{k}= needs a middleware policy (e.g. qs/{k}={value})")));
        }
    }
    config.validate()?;
    Ok(config)
}

/// Runs every point: for each rate, each repetition, each configuration (the lab's order).
/// `progress` hears of each point as it ends.
pub fn run_points(
    sweep: &Sweep,
    model_at: &ModelAt<'_>,
    mut progress: impl FnMut(&Point),
) -> Result<Vec<Point>, SimError> {
    let configs: Vec<SimConfig> =
        sweep.configurations.iter().map(|c| configure(c, &sweep.base)).collect::<Result<_, _>>()?;
    let mut points = Vec::new();
    for &rate in &sweep.rates {
        let (models, params) = model_at(rate)?;
        if models.len() != sweep.nodes {
            return Err(SimError::Model(format!(
                "the workload gave {} node models for --nodes {}",
                models.len(),
                sweep.nodes
            )));
        }
        for rep in 1..=sweep.reps {
            for (c, config) in sweep.configurations.iter().zip(&configs) {
                let config = SimConfig { seed: config.seed.wrapping_add(u64::from(rep - 1)), ..config.clone() };
                let cluster = cluster::run(&models, &config, &sweep.workload, params.clone())?;
                let point = Point {
                    configuration: c.label.clone(),
                    rate,
                    rep,
                    wall_s: cluster.end as f64 / 1e9,
                    failure: None,
                    run: Some(cluster.summary),
                    middleware_cpu: None,
                    middleware_cpu_nodes: Vec::new(),
                    middleware_active_share: cluster.middleware_activity.as_ref().map(|a| a.share),
                    middleware_first_active_s: cluster.middleware_activity.as_ref().and_then(|a| a.first_s),
                    middleware_activations: cluster.middleware_activity.as_ref().map(|a| a.activations),
                    middleware_releases: cluster
                        .middleware_activity
                        .map(|a| a.releases.into_iter().map(|(r, n)| (r.to_string(), n)).collect())
                        .unwrap_or_default(),
                    speed: None,
                };
                progress(&point);
                points.push(point);
            }
        }
    }
    Ok(points)
}

/// The simulated machine, as recorded in `results.json`: its cores, the model for a kernel, and
/// `date` (pass the time of the run, or a fixed text for byte-identical files).
pub fn simulated_machine(cores: usize, date: String) -> Machine {
    Machine {
        nproc: cores,
        kernel: "simulated: moirai sim's CFS model".into(),
        cpu_model: "simulated".into(),
        hostname: String::new(),
        loadavg: String::new(),
        date,
        moirai_version: env!("CARGO_PKG_VERSION").to_string(),
        speed: None,
    }
}

/// Runs the sweep and writes `results.csv`, `results.json` and `report.html` into its output
/// directory (created if missing).
pub fn run(
    sweep: &Sweep,
    model_at: &ModelAt<'_>,
    machine: &Machine,
    progress: impl FnMut(&Point),
) -> Result<Finished, SimError> {
    let spec = spec(sweep);
    spec.validate()?;
    let points = run_points(sweep, model_at, progress)?;
    let labels: Vec<String> = sweep.configurations.iter().map(|c| c.label.clone()).collect();
    let summary = summarise(&points, &labels, &sweep.rates, &sweep.criteria);
    std::fs::create_dir_all(&sweep.out_dir)
        .map_err(|source| moirai_bench::BenchError::OutDir { dir: sweep.out_dir.clone(), source })?;
    let results = Results {
        command_line: &sweep.command_line,
        machine,
        spec: &spec,
        end: &SweepEnd::Completed,
        points: &points,
        summary: &summary,
    };
    let files =
        vec![sweep.out_dir.join("results.csv"), sweep.out_dir.join("results.json"), sweep.out_dir.join("report.html")];
    moirai_bench::output::write_csv(&files[0], &points)?;
    moirai_bench::output::write_json(&files[1], &results)?;
    moirai_bench::report::write_report(&files[2], &results)?;
    Ok(Finished { points, summary, files })
}

/// The lab's description of the sweep, for its checks and files.
fn spec(sweep: &Sweep) -> SweepSpec {
    let secs = std::time::Duration::from_nanos;
    SweepSpec {
        exe: PathBuf::from("moirai"),
        workload: sweep.workload.clone(),
        rates: sweep.rates.clone(),
        duration: secs(sweep.base.duration_ns),
        warmup: sweep.base.warmup,
        reps: sweep.reps,
        configurations: sweep.configurations.clone(),
        extra_args: sweep.extra_args.clone(),
        policy_period: Some(secs(sweep.base.policy_period_ns)),
        criteria: sweep.criteria.clone(),
        grace: secs(sweep.base.drain_limit_ns),
        // The simulator's sweeps probe nothing: their points do not run on this machine.
        speed_probes: moirai_bench::speed::Probing::Off,
        out_dir: sweep.out_dir.clone(),
        command_line: sweep.command_line.clone(),
    }
}

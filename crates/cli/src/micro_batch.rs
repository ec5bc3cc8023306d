//! `--threading micro-batch`: a workload run as Drizzle's micro-batches by the driver of
//! `moirai-microbatch`, on executor processes that are this same binary started with the hidden
//! `micro-batch-executor` subcommand and the run's own workload arguments. The workload gives its
//! job ([`Workload::micro_batch`]); this file runs it and writes the run's summary.

use std::net::SocketAddr;
use std::time::Duration;

use clap::{Args, Parser};
use moirai_contract::summary::Latency;
use moirai_contract::RunSummary;
use moirai_microbatch::{AimdConfig, DriverConfig, GroupSize, KillAt, RunReport, Scheduling};

use crate::workload::{
    sorted, summary_extra, EngineArgs, GroupFlag, MicroBatch, MicroBatchOutcome, Workload, Workloads,
};

/// `moirai micro-batch-executor` (hidden): an executor process of a micro-batch run.
#[derive(Args, Debug)]
pub struct ExecutorArgs {
    /// The driver's address.
    #[arg(long)]
    driver: SocketAddr,
    /// This executor's id.
    #[arg(long)]
    id: usize,
    /// The job's description: the `moirai run` arguments of the workload (after `--`).
    #[arg(last = true, required = true)]
    job: Vec<String>,
}

#[derive(Parser)]
#[command(name = "moirai run")]
struct JobCommand {
    #[command(subcommand)]
    workload: Workloads,
}

/// `moirai micro-batch-timeline`.
#[derive(Args, Debug)]
pub struct TimelineArgs {
    /// Directory for latency.svg, group-size.svg and overhead.svg (created if missing).
    #[arg(long)]
    out: std::path::PathBuf,
    /// Runs as LABEL=FILE, FILE holding a run's `--json` output.
    #[arg(required = true)]
    runs: Vec<String>,
}

/// Draws the timelines; its exit code.
pub fn timeline(args: TimelineArgs) -> i32 {
    let mut runs = Vec::new();
    for r in &args.runs {
        let Some((label, file)) = r.split_once('=') else {
            eprintln!("moirai: run '{r}' must be LABEL=FILE, e.g. group-10=run.json");
            return 2;
        };
        match std::fs::read_to_string(file)
            .map_err(|e| e.to_string())
            .and_then(|t| moirai_bench::timeline::read_run(&t))
        {
            Ok(v) => runs.push((label.to_string(), v)),
            Err(e) => {
                eprintln!("moirai: {file}: {e}");
                return 2;
            }
        }
    }
    let charts = match moirai_bench::timeline::charts(&runs) {
        Ok(c) => c,
        Err(e) => {
            eprintln!("moirai: {e}");
            return 1;
        }
    };
    if let Err(e) = std::fs::create_dir_all(&args.out) {
        eprintln!("moirai: cannot create {}: {e}", args.out.display());
        return 1;
    }
    for (name, svg) in charts {
        let path = args.out.join(name);
        if let Err(e) = std::fs::write(&path, svg) {
            eprintln!("moirai: cannot write {}: {e}", path.display());
            return 1;
        }
        println!("{}", path.display());
    }
    0
}

/// Runs an executor; its exit code.
pub fn executor(args: ExecutorArgs) -> i32 {
    let job = JobCommand::try_parse_from(std::iter::once("moirai run".to_string()).chain(args.job.iter().cloned()))
        .map_err(|e| e.to_string())
        .and_then(|c| {
            let workload = c.workload.workload();
            match workload.micro_batch() {
                Some(job) => job.map_err(|e| e.to_string()),
                None => Err(format!("{} does not run as micro-batches", workload.name())),
            }
        });
    let job = match job {
        Ok(j) => j,
        Err(e) => {
            eprintln!("moirai micro-batch-executor {}: {e}", args.id);
            return 2;
        }
    };
    // The run's tokens come from the driver on standard input, never on the command line.
    let secrets = match moirai_microbatch::Secrets::read(&mut std::io::stdin().lock()) {
        Ok(s) => s,
        Err(e) => {
            eprintln!("moirai micro-batch-executor {}: {e}", args.id);
            return 2;
        }
    };
    match moirai_microbatch::executor::run(args.driver, args.id, job.into_job(), secrets) {
        Ok(()) => 0,
        Err(e) => {
            eprintln!("moirai micro-batch-executor {}: {e}", args.id);
            1
        }
    }
}

/// Runs `workload` as micro-batches (`job`, its [`Workload::micro_batch`]) and prints its
/// summary; its exit code.
pub fn run(workload: &dyn Workload, job: Result<Box<dyn MicroBatch>, moirai_microbatch::Error>) -> i32 {
    let args = workload.engine_args();
    let result = job.and_then(|job| {
        let config = driver_config(args)?;
        let report = moirai_microbatch::driver::run(&config, job.job())?;
        let outcome = job.finish(&report)?;
        let summary = summary(workload, job.as_ref(), &report, outcome, &config);
        print(&summary, &report, &config, args.json);
        Ok(())
    });
    match result {
        Ok(()) => 0,
        Err(e) => {
            eprintln!("moirai: {e}");
            e.exit_code()
        }
    }
}

fn driver_config(args: &EngineArgs) -> Result<DriverConfig, moirai_microbatch::Error> {
    use moirai_microbatch::Error;
    let group = args.group();
    let (lower, upper) = args.overhead_bounds;
    let scheduling = match group {
        GroupFlag::PerBatch => Scheduling::PerBatch,
        GroupFlag::Fixed(g) => Scheduling::Group(GroupSize::Fixed(g)),
        GroupFlag::Auto => Scheduling::Group(GroupSize::Auto(AimdConfig { lower, upper, ..AimdConfig::default() })),
    };
    let kill = match &args.kill_executor {
        None => None,
        Some(s) => {
            let parsed =
                s.split_once('@').and_then(|(e, b)| Some(KillAt { executor: e.parse().ok()?, batch: b.parse().ok()? }));
            Some(
                parsed
                    .ok_or_else(|| Error::Config(format!("--kill-executor '{s}' must be ID@MICRO-BATCH, e.g. 1@20")))?,
            )
        }
    };
    // The executors get this run's own workload arguments: the job's description.
    let argv: Vec<String> = std::env::args().collect();
    let job_args = argv
        .iter()
        .position(|a| a == "run")
        .map(|i| argv[i + 1..].to_vec())
        .ok_or_else(|| Error::Config("micro-batch runs start from `moirai run <workload>`".into()))?;
    Ok(DriverConfig {
        executors: args.executors(),
        scheduling,
        program: std::env::current_exe().map_err(|e| Error::Io("find the moirai executable".into(), e))?,
        job_args,
        paced: !args.unpaced,
        heartbeat_timeout: Duration::from_secs(2),
        checkpoint_every: 10,
        kill,
        verbose: args.verbose,
    })
}

fn percentile(sorted: &[f64], p: f64) -> f64 {
    if sorted.is_empty() {
        return 0.0;
    }
    sorted[((sorted.len() - 1) as f64 * p).round() as usize]
}

/// The run's summary: the fields every mode writes, the driver's own measurements, the workload's
/// parameters and statistics.
fn summary(
    workload: &dyn Workload,
    job: &dyn MicroBatch,
    report: &RunReport,
    outcome: MicroBatchOutcome,
    config: &DriverConfig,
) -> RunSummary {
    let interval_ms = job.job().interval_ms();
    let commit = sorted(report.commit_ms.clone());
    let latency = Latency::of_sorted(&outcome.e2e_ms);
    let wall_s = report.wall_ms / 1e3;
    let results: usize = report.output_values().map(|(_, v)| v.as_array().map_or(0, Vec::len)).sum();
    let mode = serde_json::json!({
        "executors": config.executors,
        "scheduling": config.scheduling,
        "paced": config.paced,
        "batch_interval_ms": interval_ms,
        "batches": report.batches,
        "decisions": report.decisions,
        "groups": report.groups,
        "wall_ms": report.wall_ms,
        "ms_per_batch": report.ms_per_batch(),
        "coordination_ms_per_batch": report.coordination_ms_per_batch(),
        "compute_ms_per_batch": report.compute_ms_per_batch(),
        "decision_ms_per_batch": report.decision_ms / report.batches.max(1) as f64,
        "stages": if job.job().reduce_partitions() == 0 { 1 } else { 2 },
        "commit_latency_ms": { "p50": percentile(&commit, 0.5), "p99": percentile(&commit, 0.99), "max": percentile(&commit, 1.0) },
        "mean_overhead": report.overheads.iter().sum::<f64>() / report.overheads.len().max(1) as f64,
        "group_changes": report.group_changes,
        "recoveries": report.recoveries,
        "group_sizes": report.group_sizes,
        "overheads": report.overheads,
        "commit_ms": report.commit_ms,
    });
    let extra = summary_extra(mode, workload);
    RunSummary {
        workload: workload.name().to_string(),
        threading: "micro-batch".to_string(),
        offered_rate: job.rate(),
        duration_s: report.batches as f64 * interval_ms as f64 / 1e3,
        measured_s: wall_s,
        ingress_tps: outcome.tuples_in as f64 / wall_s.max(1e-9),
        egress_tps: results as f64 / wall_s.max(1e-9),
        tuples_in: outcome.tuples_in,
        tuples_out: results as u64,
        latency_ms: latency,
        e2e_latency_ms: latency,
        threads: config.executors as u64,
        cpu_cores: report.cpu_cores(),
        queue_len: Default::default(),
        workload_stats: outcome.workload_stats,
        extra,
    }
}

/// Prints the run's summary: as text, or as one JSON line with `json`.
fn print(summary: &RunSummary, report: &RunReport, config: &DriverConfig, json: bool) {
    if json {
        println!("{}", serde_json::to_string(summary).unwrap_or_default());
        return;
    }
    let interval_ms = summary.extra["batch_interval_ms"].as_u64().unwrap_or(0);
    let commit = sorted(report.commit_ms.clone());
    println!(
        "workload          {} (micro-batch, {} executors, {:?})",
        summary.workload, config.executors, config.scheduling
    );
    println!(
        "micro-batches     {} of {} ms, {} groups, {} scheduling decisions",
        report.batches, interval_ms, report.groups, report.decisions
    );
    println!(
        "time per batch    {:.2} ms (wall {:.0} ms): coordination {:.3} ms, compute {:.3} ms",
        report.ms_per_batch(),
        report.wall_ms,
        report.coordination_ms_per_batch(),
        report.compute_ms_per_batch()
    );
    let what = if config.paced { "commit latency" } else { "commit time" };
    println!(
        "{what:<17} p50 {:.1} ms, p99 {:.1} ms, max {:.1} ms",
        percentile(&commit, 0.5),
        percentile(&commit, 0.99),
        percentile(&commit, 1.0)
    );
    println!("coordination      mean overhead {:.3}", summary.extra["mean_overhead"].as_f64().unwrap_or(0.0));
    println!("cpu               {:.2} cores (the driver and its executors)", report.cpu_cores());
    for c in &report.group_changes {
        println!(
            "group change      at {:.1} s: {} -> {} (overhead {:.3})",
            c.at_ms / 1e3,
            c.change.from,
            c.change.to,
            c.change.overhead
        );
    }
    for r in &report.recoveries {
        println!(
            "recovery          at {:.1} s: executor {} lost, replayed from micro-batch {}",
            r.at_ms / 1e3,
            r.executor,
            r.from_batch
        );
    }
    println!("check             {}", summary.check().unwrap_or(""));
}

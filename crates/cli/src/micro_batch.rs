//! `--threading micro-batch`: a workload run as Drizzle's micro-batches by the driver of
//! `moirai-microbatch`, on executor processes that are this same binary started with the hidden
//! `micro-batch-executor` subcommand and the run's own workload arguments.

use std::net::SocketAddr;
use std::time::Duration;

use clap::{Args, Parser};
use moirai_engine::Threading;
use moirai_microbatch::{
    AimdConfig, DriverConfig, GroupSize, Job, KillAt, QueryJob, RunReport, Scheduling, WordCountJob,
};
use moirai_workloads::wordcount::WordCountConfig;
use moirai_workloads::ysb::{self, YsbConfig, YsbHandle};

use crate::run::{EngineArgs, Workload};

/// `--threading`: one of the engine's threading models, or micro-batch execution.
#[derive(Clone, Debug)]
pub enum ThreadingFlag {
    /// The continuous engine with this threading model.
    Engine(Threading),
    /// Micro-batch execution; settings given inside the flag (`micro-batch:group=10`).
    MicroBatch(MicroBatchSpec),
}

/// Settings of `micro-batch[:interval=D][:group=per-batch|auto|G][:executors=E]`.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct MicroBatchSpec {
    /// Batch interval.
    pub interval: Option<Duration>,
    /// Group size.
    pub group: Option<GroupFlag>,
    /// Executor processes.
    pub executors: Option<usize>,
}

/// `--group`.
#[derive(Clone, Copy, Debug, PartialEq)]
pub enum GroupFlag {
    /// Spark Streaming's scheduling: a decision and a barrier per stage per micro-batch.
    PerBatch,
    /// AIMD-tuned group size.
    Auto,
    /// A fixed group size.
    Fixed(u64),
}

pub fn parse_group(s: &str) -> Result<GroupFlag, String> {
    match s {
        "per-batch" => Ok(GroupFlag::PerBatch),
        "auto" => Ok(GroupFlag::Auto),
        g => match g.parse::<u64>() {
            Ok(g) if (1..=100_000).contains(&g) => Ok(GroupFlag::Fixed(g)),
            _ => Err(format!("group '{s}' must be per-batch, auto or a number of micro-batches in 1..=100000")),
        },
    }
}

pub fn parse_threading(s: &str) -> Result<ThreadingFlag, String> {
    let Some(rest) = s.strip_prefix("micro-batch") else {
        return s.parse().map(ThreadingFlag::Engine).map_err(|e| format!("{e}, or micro-batch[:group=G]"));
    };
    let mut spec = MicroBatchSpec::default();
    if rest.is_empty() {
        return Ok(ThreadingFlag::MicroBatch(spec));
    }
    let Some(settings) = rest.strip_prefix(':') else {
        return Err(format!("'{s}': write micro-batch[:interval=100ms][:group=per-batch|auto|G][:executors=E]"));
    };
    for setting in settings.split(':') {
        let (key, value) = setting
            .split_once('=')
            .ok_or_else(|| format!("'{s}': setting '{setting}' needs a value, e.g. group=10"))?;
        match key {
            "interval" => {
                spec.interval =
                    Some(humantime::parse_duration(value).map_err(|e| format!("'{s}': interval '{value}': {e}"))?)
            }
            "group" => spec.group = Some(parse_group(value).map_err(|e| format!("'{s}': {e}"))?),
            "executors" => {
                spec.executors =
                    Some(value.parse().map_err(|_| format!("'{s}': executors '{value}' is not a whole number"))?)
            }
            other => return Err(format!("'{s}': unknown setting '{other}'; use interval=, group= or executors=")),
        }
    }
    Ok(ThreadingFlag::MicroBatch(spec))
}

impl std::fmt::Display for ThreadingFlag {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            ThreadingFlag::Engine(t) => write!(f, "{t}"),
            ThreadingFlag::MicroBatch(_) => write!(f, "micro-batch"),
        }
    }
}

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
    workload: Workload,
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
        .and_then(|c| match c.workload {
            Workload::WordCount(a) => {
                let config = crate::run::wordcount_config(&a)?;
                job(config, &a.engine).map(|j| Box::new(j) as Box<dyn Job>).map_err(|e| e.to_string())
            }
            Workload::Ysb(a) => {
                let config = crate::run::ysb_config(&a);
                ysb_job(config, &a.engine).map(|(j, _)| Box::new(j) as Box<dyn Job>).map_err(|e| e.to_string())
            }
            _ => Err("micro-batch executors run wordcount and ysb".to_string()),
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
    match moirai_microbatch::executor::run(args.driver, args.id, job, secrets) {
        Ok(()) => 0,
        Err(e) => {
            eprintln!("moirai micro-batch-executor {}: {e}", args.id);
            1
        }
    }
}

fn spec(args: &EngineArgs) -> MicroBatchSpec {
    match &args.threading {
        ThreadingFlag::MicroBatch(s) => s.clone(),
        ThreadingFlag::Engine(_) => MicroBatchSpec::default(),
    }
}

/// The interval: `--batch-interval`, else the flag's `interval=`, else 100 ms.
fn interval(args: &EngineArgs) -> Duration {
    args.batch_interval.or(spec(args).interval).unwrap_or(Duration::from_millis(100))
}

fn duration(args: &EngineArgs) -> Duration {
    args.duration.unwrap_or(Duration::from_secs(5))
}

fn job(config: WordCountConfig, args: &EngineArgs) -> Result<WordCountJob, moirai_microbatch::Error> {
    let endless = if config.sentences > 0 { None } else { Some(duration(args)) };
    let ramp = args.ramp_to.map(|to| (to, duration(args)));
    let job = WordCountJob::with_ramp(config, interval(args), endless, ramp)?;
    Ok(if args.single_stage { job.single_stage() } else { job })
}

/// YSB's query as a micro-batch job, and the handle to its output. Its events are scheduled from
/// time 0 so that every process regenerates the same ones.
fn ysb_job(mut config: YsbConfig, args: &EngineArgs) -> Result<(QueryJob, YsbHandle), moirai_microbatch::Error> {
    use moirai_microbatch::Error;
    if args.single_stage {
        return Err(Error::Config("--single-stage is WordCount's; YSB's stages are its query's".into()));
    }
    if args.ramp_to.is_some() {
        return Err(Error::Config(
            "--ramp-to: YSB's events carry event times drawn at the constant --rate, so micro-batch mode runs it at \
             a constant rate; drop --ramp-to (WordCount ramps in micro-batch mode)"
                .into(),
        ));
    }
    config.origin_ns = Some(0);
    let (mut queries, handle) = ysb::queries(&config).map_err(|e| Error::Config(e.to_string()))?;
    let query = queries.pop().ok_or_else(|| Error::Config("YSB built no query".into()))?;
    let tuples = (config.events > 0).then_some(config.events);
    Ok((QueryJob::new(query, interval(args), tuples, duration(args))?, handle))
}

fn exit_code(result: Result<(), moirai_microbatch::Error>) -> i32 {
    match result {
        Ok(()) => 0,
        Err(e) => {
            eprintln!("moirai: {e}");
            e.exit_code()
        }
    }
}

/// Runs WordCount in micro-batch mode; its exit code.
pub fn run_wordcount(config: WordCountConfig, args: &EngineArgs) -> i32 {
    exit_code(job(config, args).and_then(|job| {
        let config = driver_config(args)?;
        let report = moirai_microbatch::driver::run(&config, &job)?;
        let check = match job.check(&report.counts()) {
            Ok(()) => "counts equal a naive count".to_string(),
            Err(e) => e,
        };
        let extra = serde_json::json!({ "distinct_words": report.counts().len(), "check": check });
        let commit = sorted(report.commit_ms.clone());
        print("wordcount", &report, &job, job.rate(), job.sentences_total(), &commit, &config, args.json, extra);
        Ok(())
    }))
}

/// Runs YSB in micro-batch mode; its exit code. The query's sink runs in this (the driver's)
/// process, fed the committed window results in micro-batch order.
pub fn run_ysb(config: YsbConfig, args: &EngineArgs) -> i32 {
    exit_code(ysb_job(config.clone(), args).and_then(|(job, handle)| {
        use moirai_microbatch::Error;
        let driver = driver_config(args)?;
        let report = moirai_microbatch::driver::run(&driver, &job)?;
        let mut sink = job.sink();
        for (_, output) in report.output_values() {
            let values = output.as_array().cloned().unwrap_or_default();
            sink.push(values).map_err(|e| Error::Protocol(e.to_string()))?;
        }
        sink.finish();
        let (latency, early) = window_latency(&report, job.interval_ms());
        let check = match handle.check() {
            Ok(()) => "window counts equal a naive count".to_string(),
            Err(e) => e.to_string(),
        };
        let events = if config.events > 0 {
            config.events
        } else {
            (config.rate * report.batches as f64 * job.interval_ms() as f64 / 1e3) as u64
        };
        let extra = serde_json::json!({
            "window_latency_ms": latency_summary(&latency),
            "windows_closed_early": early,
            "windows": handle.window_counts().len(),
            "check": check,
        });
        print("ysb", &report, &job, job.rate(), events, &latency, &driver, args.json, extra);
        Ok(())
    }))
}

/// Per window result: its commit time − its last event time (the window's end), ms, sorted; and
/// the results committed before their window's end (closed by the end of a finite input).
fn window_latency(report: &RunReport, interval_ms: u64) -> (Vec<f64>, u64) {
    let (mut latency, mut early) = (Vec::new(), 0);
    for ((batch, _), output) in report.output_values() {
        let Some(commit) = report.commit_ms.get(batch as usize) else { continue };
        let batch_end_ms = ((batch + 1) * interval_ms) as f64;
        for t in output.as_array().into_iter().flatten() {
            let end_ms = t[1]["end_ns"].as_u64().unwrap_or(0) as f64 / 1e6;
            if end_ms > batch_end_ms {
                early += 1;
            } else {
                latency.push(commit + batch_end_ms - end_ms);
            }
        }
    }
    (sorted(latency), early)
}

fn sorted(mut v: Vec<f64>) -> Vec<f64> {
    v.sort_by(f64::total_cmp);
    v
}

fn driver_config(args: &EngineArgs) -> Result<DriverConfig, moirai_microbatch::Error> {
    use moirai_microbatch::Error;
    let spec = spec(args);
    let group = args.group.or(spec.group).unwrap_or(GroupFlag::Auto);
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
        executors: args.executors.or(spec.executors).unwrap_or(2),
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

/// The commit latencies (sorted) as the lab's latency summary: one value per micro-batch, the time
/// from the end of its interval (when its last record was due) to its commit.
fn latency_summary(sorted: &[f64]) -> serde_json::Value {
    serde_json::json!({
        "count": sorted.len(),
        "mean": sorted.iter().sum::<f64>() / sorted.len().max(1) as f64,
        "p10": percentile(sorted, 0.1),
        "p50": percentile(sorted, 0.5),
        "p90": percentile(sorted, 0.9),
        "p99": percentile(sorted, 0.99),
        "p999": percentile(sorted, 0.999),
        "max": percentile(sorted, 1.0),
    })
}

/// Prints the run's summary; `e2e` is the sorted end-to-end latency the lab reads (WordCount:
/// per micro-batch, its commit latency; YSB: per window, its window latency).
#[allow(clippy::too_many_arguments)]
fn print(
    workload: &str,
    report: &RunReport,
    job: &dyn Job,
    rate: f64,
    tuples_in: u64,
    e2e: &[f64],
    config: &DriverConfig,
    json: bool,
    extra: serde_json::Value,
) {
    let commit = sorted(report.commit_ms.clone());
    let latency = latency_summary(e2e);
    let wall_s = report.wall_ms / 1e3;
    let results: usize = report.output_values().map(|(_, v)| v.as_array().map_or(0, Vec::len)).sum();
    let mut summary = serde_json::json!({
        "workload": workload,
        "threading": "micro-batch",
        "offered_rate": rate,
        "duration_s": report.batches as f64 * job.interval_ms() as f64 / 1e3,
        "measured_s": wall_s,
        "tuples_in": tuples_in,
        "tuples_out": results,
        "ingress_tps": tuples_in as f64 / wall_s.max(1e-9),
        "egress_tps": results as f64 / wall_s.max(1e-9),
        "latency_ms": latency,
        "e2e_latency_ms": latency,
        "threads": config.executors,
        "cpu_cores": report.cpu_cores(),
        "executors": config.executors,
        "scheduling": config.scheduling,
        "paced": config.paced,
        "batch_interval_ms": job.interval_ms(),
        "batches": report.batches,
        "decisions": report.decisions,
        "groups": report.groups,
        "wall_ms": report.wall_ms,
        "ms_per_batch": report.ms_per_batch(),
        "coordination_ms_per_batch": report.coordination_ms_per_batch(),
        "compute_ms_per_batch": report.compute_ms_per_batch(),
        "decision_ms_per_batch": report.decision_ms / report.batches.max(1) as f64,
        "stages": if job.reduce_partitions() == 0 { 1 } else { 2 },
        "commit_latency_ms": { "p50": percentile(&commit, 0.5), "p99": percentile(&commit, 0.99), "max": percentile(&commit, 1.0) },
        "mean_overhead": report.overheads.iter().sum::<f64>() / report.overheads.len().max(1) as f64,
        "group_changes": report.group_changes,
        "recoveries": report.recoveries,
        "group_sizes": report.group_sizes,
        "overheads": report.overheads,
        "commit_ms": report.commit_ms,
    });
    if let (Some(s), serde_json::Value::Object(extra)) = (summary.as_object_mut(), extra) {
        s.extend(extra);
    }
    let check = summary["check"].as_str().unwrap_or("").to_string();
    if json {
        println!("{summary}");
        return;
    }
    println!("workload          {workload} (micro-batch, {} executors, {:?})", config.executors, config.scheduling);
    println!(
        "micro-batches     {} of {} ms, {} groups, {} scheduling decisions",
        report.batches,
        job.interval_ms(),
        report.groups,
        report.decisions
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
    println!("coordination      mean overhead {:.3}", summary["mean_overhead"].as_f64().unwrap_or(0.0));
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
    println!("check             {check}");
}

//! `moirai sim <workload>`: a sweep in the simulator (`moirai_sim`), configured like `moirai
//! bench` and reported by the lab's own code.
//!
//! Exit codes: 0 the sweep ran; 1 the results could not be written; 2 bad command line, workload
//! arguments or configuration.

use std::path::PathBuf;
use std::time::Duration;

use clap::{Args, Parser};
use moirai_bench::summary::Criteria;
use moirai_bench::{parse_configurations, parse_rates};
use moirai_sim::lab::{self, Sweep};
use moirai_sim::{Model, SimConfig, SimError};

use crate::run::{syn_config, SynArgs};

/// Options of `moirai sim`.
#[derive(Args, Debug)]
#[command(after_help = "Example:\n  moirai sim syn --rates 1k:5k:500 --compare os,qs,qs@policy:2 --cores 2 \
    --duration 20s --out results/sim-syn -- --lachesis\n\n\
    CONFIG is SCHEDULER[@THREADING][#TAG], as for `moirai bench`: os (the CFS model alone, a thread per \
    operator), qs/hr/fcfs/random (the middleware's policy setting nice values every --policy-period), \
    os@dynamic:N (a pool of N workers), qs@policy:N (the policy at the user level); without N, one worker \
    per simulated core. --nodes N simulates a cluster of N such machines, each with its own middleware, \
    queries placed round-robin. The run is deterministic: the same arguments and --seed give the same files.")]
pub struct SimArgs {
    /// Workload: syn (with the flags of `moirai run syn` after `--`), linear-road (`-- --shape
    /// lachesis`, with measured costs), or hone (Hone's slotted simulation of LBF against round
    /// robin, its Fig. 6a and 6b, printed as tables).
    workload: String,
    /// Offered rates in tuples/s: FROM:TO:STEP (e.g. 1k:5k:500) or a list (e.g. 1000,2000).
    #[arg(long)]
    rates: Option<String>,
    /// Simulated time of every point, warm-up included (e.g. 10s).
    #[arg(long, default_value = "10s", value_parser = humantime::parse_duration)]
    duration: Duration,
    /// Share of each run discarded as warm-up.
    #[arg(long, default_value_t = 0.2)]
    warmup: f64,
    /// Repetitions of every (configuration, rate), each with the next seed.
    #[arg(long, default_value_t = 1)]
    reps: u32,
    /// Configurations compared, comma-separated; the first is the baseline of ratios.
    #[arg(long, default_value = "os", value_name = "CONFIG,...")]
    compare: String,
    /// Cores of the simulated machine (of each node with --nodes).
    #[arg(long, default_value_t = 2)]
    cores: usize,
    /// Nodes of a simulated cluster, each with --cores cores and its own middleware; whole
    /// queries are placed round-robin (query q on node q mod N).
    #[arg(long, default_value_t = 1)]
    nodes: usize,
    /// How the middleware's schedule reaches the kernel: nice (per thread), cgroup (a cpu cgroup
    /// per operator or group, cgroup v2 cpu.weight) or cgroup-v1 (cpu.shares), as `moirai
    /// schedule --translator`; a configuration may set its own with /translator=cgroup.
    #[arg(long, default_value = "nice")]
    translator: String,
    /// Seed of the run's draws (selectivity, blocking); the workload's own --seed picks its queries.
    #[arg(long, default_value_t = 0)]
    seed: u64,
    /// Directory for results.csv, results.json and report.html (created if missing).
    #[arg(long)]
    out: Option<PathBuf>,
    /// Largest median end-to-end p99 of a sustainable rate (e.g. 1s, 200ms).
    #[arg(long, default_value = "1s", value_parser = humantime::parse_duration)]
    p99_bound: Duration,
    /// How often the middleware's policy runs, for configurations with a policy.
    #[arg(long, default_value = "1s", value_parser = humantime::parse_duration)]
    policy_period: Duration,
    /// CPU time a core loses per context switch, ns [default: 2600, measured here; see
    /// docs/sim.md to calibrate].
    #[arg(long)]
    context_switch_ns: Option<u64>,
    /// Time from a wake-up to the thread being runnable, ns [default: 7500].
    #[arg(long)]
    wakeup_ns: Option<u64>,
    /// CPU time a woken thread spends per wake-up besides the context switch, ns [default: 1900].
    #[arg(long)]
    wakeup_cpu_ns: Option<u64>,
    /// CPU time a thread spends per sleeping thread it wakes, ns [default: 5400].
    #[arg(long)]
    notify_ns: Option<u64>,
    /// CPU time every tuple costs besides its operator's own, ns [default: 12].
    #[arg(long)]
    tuple_overhead_ns: Option<u64>,
    /// How a tuple's cost is drawn around its operator's mean: const, exp or lognormal:CV.
    #[arg(long, default_value = "const")]
    cost_dist: String,
    /// Linux's fair scheduler to model: cfs (before 6.6) or eevdf (6.6 and later).
    #[arg(long, default_value = "cfs")]
    scheduler: String,
    /// The workload's arguments, as `moirai run <WORKLOAD>` takes them (e.g. -- --lachesis).
    #[arg(last = true, value_name = "RUN ARGS")]
    extra: Vec<String>,
}

/// The workload's flags, parsed as `moirai run syn` parses them.
#[derive(Parser)]
#[command(name = "moirai sim syn --")]
struct SynRun {
    #[command(flatten)]
    syn: SynArgs,
}

/// Linear Road's flags that the simulator takes: the shape (only `lachesis` is modelled) and the
/// engine's.
#[derive(Parser)]
#[command(name = "moirai sim linear-road --")]
struct LinearRoadRun {
    /// The query's shape: lachesis (the Lachesis evaluation's nine operators).
    #[arg(long, default_value = "faithful")]
    shape: String,
    #[command(flatten)]
    engine: crate::run::EngineArgs,
}

/// Runs `moirai sim`; returns the exit code.
pub fn run(args: SimArgs) -> i32 {
    match execute(args) {
        Ok(()) => 0,
        Err(e @ SimError::Output(moirai_bench::BenchError::Write { .. } | moirai_bench::BenchError::OutDir { .. })) => {
            eprintln!("moirai sim: {e}");
            1
        }
        Err(e) => {
            eprintln!("moirai sim: {e}");
            2
        }
    }
}

fn execute(args: SimArgs) -> Result<(), SimError> {
    if args.workload == "hone" {
        use moirai_sim::hone;
        println!("Hone §4.4, Fig. 6a: 10 queues, 10 000 slots of 100 µs, seed {}", args.seed);
        println!("{}", hone::table(&hone::figure_6a(args.seed)));
        println!("Hone §4.4, Fig. 6b: 2000 tuples/s in all, seed {}", args.seed);
        println!("{}", hone::table(&hone::figure_6b(2000.0, args.seed)));
        return Ok(());
    }
    let (Some(rates), Some(out)) = (&args.rates, &args.out) else {
        return Err(SimError::Config(format!(
            "moirai sim {} needs --rates (e.g. --rates 1k:5k:1k) and --out (a directory for the results)",
            args.workload
        )));
    };
    let (syn, engine) = match args.workload.as_str() {
        "syn" => {
            let words = std::iter::once("syn".to_string()).chain(args.extra.iter().cloned());
            let run = SynRun::try_parse_from(words).map_err(|e| SimError::Config(format!("after --: {e}")))?;
            (Some(syn_config(&run.syn).map_err(SimError::Config)?), run.syn.engine)
        }
        "linear-road" => {
            let words = std::iter::once("linear-road".to_string()).chain(args.extra.iter().cloned());
            let run = LinearRoadRun::try_parse_from(words).map_err(|e| SimError::Config(format!("after --: {e}")))?;
            if run.shape != "lachesis" {
                return Err(SimError::Config(format!(
                    "linear-road --shape {} is not simulated; use -- --shape lachesis (the Lachesis evaluation's shape)",
                    run.shape
                )));
            }
            (None, run.engine)
        }
        other => {
            return Err(SimError::Config(format!(
                "workload '{other}' is not simulated yet; use syn (with its flags after --, e.g. -- --lachesis) \
                 or linear-road -- --shape lachesis"
            )))
        }
    };
    let mut base = SimConfig::new(args.cores, args.duration);
    base.warmup = args.warmup;
    base.seed = args.seed;
    base.policy_period_ns = args.policy_period.as_nanos() as u64;
    base.channel_capacity = engine.channel_capacity;
    base.batch_size = engine.batch_size;
    base.cfs.context_switch_ns = args.context_switch_ns.unwrap_or(base.cfs.context_switch_ns);
    base.cfs.wakeup_ns = args.wakeup_ns.unwrap_or(base.cfs.wakeup_ns);
    base.tuple_overhead_ns = args.tuple_overhead_ns.unwrap_or(base.tuple_overhead_ns);
    base.wakeup_cpu_ns = args.wakeup_cpu_ns.unwrap_or(base.wakeup_cpu_ns);
    base.notify_ns = args.notify_ns.unwrap_or(base.notify_ns);
    base.cost_dist = args.cost_dist.parse().map_err(|e| SimError::Config(format!("--cost-dist: {e}")))?;
    base.cfs.scheduler = args.scheduler.parse().map_err(|e| SimError::Config(format!("--scheduler: {e}")))?;
    base.translator = args.translator.parse().map_err(|e| SimError::Config(format!("--translator: {e}")))?;
    base.validate()?;
    let queries = syn.as_ref().map_or(1, |s| s.queries);
    let placement = moirai_sim::cluster::placement(queries, args.nodes)?;
    let sweep = Sweep {
        workload: args.workload.clone(),
        rates: parse_rates(rates)?,
        configurations: parse_configurations(&args.compare)?,
        reps: args.reps,
        base,
        nodes: args.nodes,
        criteria: Criteria { p99_bound_ms: args.p99_bound.as_secs_f64() * 1e3, ..Criteria::default() },
        out_dir: out.clone(),
        command_line: std::env::args().collect(),
        extra_args: args.extra,
    };
    let model_at = |rate: f64| match &syn {
        Some(syn) => {
            let config = moirai_workloads::syn::SynConfig { rate: rate / syn.queries.max(1) as f64, ..syn.clone() };
            let params = serde_json::to_value(&config).unwrap_or_default();
            let models = placement.iter().map(|part| Model::syn_part(&config, 0, part)).collect::<Result<_, _>>()?;
            Ok((models, params))
        }
        None => Ok((vec![Model::linear_road_lachesis(rate)?], serde_json::json!({ "shape": "lachesis" }))),
    };
    let total = sweep.rates.len() * sweep.reps as usize * sweep.configurations.len();
    let machine = match args.nodes {
        1 => format!("{} cores", sweep.base.cores),
        n => format!("{n} nodes of {} cores", sweep.base.cores),
    };
    eprintln!("moirai sim: {total} points of {:?} simulated each on {machine}", args.duration);
    let machine = lab::simulated_machine(
        sweep.base.cores * sweep.nodes,
        moirai_bench::output::utc_iso8601(std::time::SystemTime::now()),
    );
    let mut done = 0;
    let finished = lab::run(&sweep, &model_at, &machine, |p| {
        done += 1;
        eprintln!("  [{done}/{total}] {} at {} tuples/s", p.configuration, moirai_bench::spec::fmt_rate(p.rate));
    })?;
    println!("{}", finished.summary.render_table());
    for f in &finished.files {
        println!("wrote {}", f.display());
    }
    Ok(())
}

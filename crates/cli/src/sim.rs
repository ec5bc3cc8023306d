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
use moirai_sim::from_engine::{self, EngineSample, HopCosts};
use moirai_sim::lab::{self, Sweep};
use moirai_sim::{Model, SimConfig, SimError};

use crate::workload::{syn_config, SynArgs};

/// Options of `moirai sim`.
#[derive(Args, Debug)]
#[command(after_help = "Example:\n  moirai sim syn --rates 1k:5k:500 --compare os,qs,qs@policy:2 --cores 2 \
    --duration 20s --out results/sim-syn -- --lachesis\n  \
    moirai sim wordcount --rates 100k:300k:40k --out results/sim-wc -- --grouping pkg\n  \
    moirai sim --from-engine http://127.0.0.1:9464 --sample-for 10s --compare os,qs --out results/sim-live\n\n\
    CONFIG is SCHEDULER[@THREADING][#TAG], as for `moirai bench`: os (the CFS model alone, a thread per \
    operator), qs/hr/fcfs/random (the middleware's policy setting nice values every --policy-period), \
    os@dynamic:N (a pool of N workers), qs@policy:N (the policy at the user level); without N, one worker \
    per simulated core. --nodes N simulates a cluster of N such machines, each with its own middleware, \
    queries placed round-robin. The run is deterministic: the same arguments and --seed give the same files.")]
pub struct SimArgs {
    /// Workload: syn (with the flags of `moirai run syn` after `--`), wordcount (with `moirai run
    /// wordcount`'s flags, measured costs), linear-road (`-- --shape lachesis`, with measured
    /// costs), or hone (Hone's slotted simulation of LBF against round robin, its Fig. 6a and 6b,
    /// printed as tables). None with --from-engine.
    #[arg(required_unless_present = "from_engine")]
    workload: Option<String>,
    /// Simulate the queries of the moirai engine whose metrics endpoint is at this URL (e.g.
    /// http://127.0.0.1:9464): its /topology, with each operator's cost and selectivity sampled
    /// from its /metrics over --sample-for.
    #[arg(long, value_name = "URL", conflicts_with = "workload")]
    from_engine: Option<String>,
    /// With --from-engine: how long to sample the engine's counters.
    #[arg(long, default_value = "5s", value_parser = humantime::parse_duration)]
    sample_for: Duration,
    /// Offered rates in tuples/s: FROM:TO:STEP (e.g. 1k:5k:500) or a list (e.g. 1000,2000). With
    /// --from-engine, by default the rate its sources were measured at.
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

/// The engine's settings at their defaults (for --from-engine).
#[derive(Parser)]
struct EngineDefaults {
    #[command(flatten)]
    engine: crate::workload::EngineArgs,
}

/// WordCount's flags, parsed as `moirai run wordcount` parses them.
#[derive(Parser)]
#[command(name = "moirai sim wordcount --")]
struct WordCountRun {
    #[command(flatten)]
    wordcount: crate::workload::WordCountArgs,
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
    engine: crate::workload::EngineArgs,
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

/// What a sweep simulates.
enum Workload {
    /// SYN as `moirai run syn` runs it.
    Syn(moirai_workloads::syn::SynConfig),
    /// Linear Road's Lachesis shape.
    LinearRoad,
    /// WordCount as `moirai run wordcount` runs it.
    WordCount(moirai_workloads::wordcount::WordCountConfig),
    /// A running engine, as sampled.
    Engine(Box<EngineSample>),
}

fn execute(args: SimArgs) -> Result<(), SimError> {
    let name = args.workload.clone().unwrap_or_else(|| "from-engine".into());
    if name == "hone" {
        use moirai_sim::hone;
        println!("Hone §4.4, Fig. 6a: 10 queues, 10 000 slots of 100 µs, seed {}", args.seed);
        println!("{}", hone::table(&hone::figure_6a(args.seed)));
        println!("Hone §4.4, Fig. 6b: 2000 tuples/s in all, seed {}", args.seed);
        println!("{}", hone::table(&hone::figure_6b(2000.0, args.seed)));
        return Ok(());
    }
    let Some(out) = &args.out else {
        return Err(SimError::Config(format!(
            "moirai sim {name} needs --rates (e.g. --rates 1k:5k:1k) and --out (a directory for the results)"
        )));
    };
    if args.rates.is_none() && args.from_engine.is_none() {
        return Err(SimError::Config(format!(
            "moirai sim {name} needs --rates (e.g. --rates 1k:5k:1k) and --out (a directory for the results)"
        )));
    }
    let after = |e: clap::Error| SimError::Config(format!("after --: {e}"));
    let words = |w: &str| std::iter::once(w.to_string()).chain(args.extra.iter().cloned()).collect::<Vec<_>>();
    let (mut workload, engine) = match (name.as_str(), &args.from_engine) {
        (_, Some(_)) => {
            if !args.extra.is_empty() {
                return Err(SimError::Config(
                    "--from-engine takes no workload arguments after --: the engine's /topology describes the queries"
                        .into(),
                ));
            }
            // The engine's channel capacity and batch size are not in /topology: the defaults.
            (None, EngineDefaults::try_parse_from(["from-engine"]).map_err(after)?.engine)
        }
        ("syn", None) => {
            let run = SynRun::try_parse_from(words("syn")).map_err(after)?;
            let config = syn_config(&run.syn).map_err(SimError::Config)?;
            if config.parallelism != 1 {
                return Err(SimError::Config(
                    "moirai sim does not model SYN's --parallelism yet; run it with moirai run or moirai bench".into(),
                ));
            }
            (Some(Workload::Syn(config)), run.syn.engine)
        }
        ("wordcount" | "wc", None) => {
            let run = WordCountRun::try_parse_from(words("wordcount")).map_err(after)?;
            let config = crate::workload::wordcount_config(&run.wordcount).map_err(SimError::Config)?;
            (Some(Workload::WordCount(config)), run.wordcount.engine)
        }
        ("linear-road", None) => {
            let run = LinearRoadRun::try_parse_from(words("linear-road")).map_err(after)?;
            if run.shape != "lachesis" {
                return Err(SimError::Config(format!(
                    "linear-road --shape {} is not simulated; use -- --shape lachesis (the Lachesis evaluation's shape)",
                    run.shape
                )));
            }
            (Some(Workload::LinearRoad), run.engine)
        }
        (other, None) => {
            return Err(SimError::Config(format!(
                "workload '{other}' is not simulated yet; use syn (with its flags after --, e.g. -- --lachesis), \
                 wordcount, linear-road -- --shape lachesis, or --from-engine URL for a running engine"
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
    if let Some(url) = &args.from_engine {
        eprintln!("moirai sim: sampling {url} for {:?}", args.sample_for);
        let sample = from_engine::sample(url, args.sample_for, HopCosts::of(&base))?;
        println!("{}", sample.table());
        // The model is checked against the engine's physical operators before anything runs.
        sample.model(None)?;
        workload = Some(Workload::Engine(Box::new(sample)));
    }
    let Some(workload) = workload else {
        return Err(SimError::Config("nothing to simulate: name a workload or --from-engine URL".into()));
    };
    let rates = match (&args.rates, &workload) {
        (Some(r), _) => parse_rates(r)?,
        (None, Workload::Engine(sample)) => vec![(sample.rate().round()).max(1.0)],
        (None, _) => unreachable!("checked above"),
    };
    // Whole queries go round-robin to the nodes; only SYN has several independent queries.
    let queries = match &workload {
        Workload::Syn(s) => s.queries,
        _ => 1,
    };
    let placement = moirai_sim::cluster::placement(queries, args.nodes)?;
    let sweep = Sweep {
        workload: name.clone(),
        rates,
        configurations: parse_configurations(&args.compare)?,
        reps: args.reps,
        base,
        nodes: args.nodes,
        criteria: Criteria { p99_bound_ms: args.p99_bound.as_secs_f64() * 1e3, ..Criteria::default() },
        out_dir: out.clone(),
        command_line: std::env::args().collect(),
        extra_args: args.extra,
    };
    let model_at = |rate: f64| match &workload {
        Workload::Syn(syn) => {
            let config = moirai_workloads::syn::SynConfig { rate: rate / syn.queries.max(1) as f64, ..syn.clone() };
            let params = serde_json::to_value(&config).unwrap_or_default();
            let models = placement.iter().map(|part| Model::syn_part(&config, 0, part)).collect::<Result<_, _>>()?;
            Ok((models, params))
        }
        Workload::LinearRoad => {
            Ok((vec![Model::linear_road_lachesis(rate)?], serde_json::json!({ "shape": "lachesis" })))
        }
        Workload::WordCount(config) => {
            let config = moirai_workloads::wordcount::WordCountConfig { rate, ..config.clone() };
            let params = serde_json::to_value(&config).unwrap_or_default();
            Ok((vec![Model::wordcount(&config)?], params))
        }
        Workload::Engine(sample) => {
            let params = serde_json::json!({ "from_engine": sample.url, "sampled_s": sample.window_s });
            Ok((vec![sample.model(Some(rate))?], params))
        }
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

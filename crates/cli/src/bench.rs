//! `moirai bench <workload>`: sweep offered rates, compare configurations side by side, report.
//!
//! The command line is turned into a [`moirai_bench::SweepSpec`] here; everything else (start-up
//! checks, the points as child processes, files, the table) is `moirai_bench`'s.
//!
//! Exit codes: 0 the sweep ran (failed points are recorded, not fatal); 1 it was aborted (the
//! engine rejected its arguments), the Flink jobs could not be built, or results could not be
//! written; 2 bad command line; 130 stopped by Ctrl-C (results of what was measured are written).

use std::path::PathBuf;
use std::time::Duration;

use clap::Args;
use moirai_bench::speed::Probing;
use moirai_bench::{parse_configurations, parse_rates, vary, BenchError, Criteria, SweepEnd, SweepSpec};

/// Options of `moirai bench`.
#[derive(Args, Debug)]
#[command(after_help = "Example:\n  moirai bench syn --rates 1M:9M:2M --duration 4s --reps 2 --compare os,qs \
    --out results/syn -- --ops 5\n\n\
    CONFIG is [SYSTEM:]SCHEDULER[@THREADING][/NAME=VALUE...][#TAG]: os (Linux alone), qs/hr/fcfs/random (the \
    middleware `moirai schedule --policy NAME`), script:EXPR (`moirai schedule --script EXPR`), os@dynamic (an engine threading model), qs@policy:2 (the policy at the \
    user level: the engine's policy executor with 2 workers, no middleware; also rr/qbs/rb@policy), flink:os / flink:qs (the \
    workload's Apache Flink job of integrations/flink, alone or steered by the middleware; syn, and linear-road \
    with -- --shape lachesis), flink:qs/cluster=standalone:2 (the same job on a standalone Flink cluster of 2     TaskManagers in network namespaces, one middleware per TaskManager; needs root), os/exchange=lbf (a workload argument of this configuration only, \
    --exchange lbf; --vary exchange=fifo,rr,lbf writes them for every configuration), os#b (a tag; repeats get \
    #2, #3 automatically, so `--compare os,os` is an A/A run).\n\n\
    A rate is sustainable when every repetition ran, median ingress >= 98 % of offered, and median \
    end-to-end p99 <= --p99-bound.")]
pub struct BenchArgs {
    /// Workload, as `moirai run <WORKLOAD>` names it (syn, ...).
    workload: String,
    /// Offered rates in tuples/s: FROM:TO:STEP (e.g. 1M:9M:2M) or a list (e.g. 1000,2000,5000).
    #[arg(long)]
    rates: String,
    /// How long each point runs, warm-up included (e.g. 10s).
    #[arg(long, default_value = "10s", value_parser = humantime::parse_duration)]
    duration: Duration,
    /// Share of each run discarded as warm-up.
    #[arg(long, default_value_t = 0.2)]
    warmup: f64,
    /// Repetitions of every (configuration, rate); figures are medians over them.
    #[arg(long, default_value_t = 3)]
    reps: u32,
    /// Configurations compared, comma-separated; the first is the baseline of ratios.
    #[arg(long, default_value = "os", value_name = "CONFIG,...")]
    compare: String,
    /// A workload parameter swept across configurations: NAME=V1,V2,... runs every configuration
    /// once per value with `--NAME V` (e.g. --vary exchange=fifo,rr,lbf); repeatable.
    #[arg(long, value_name = "NAME=VALUE,...")]
    vary: Vec<String>,
    /// Directory for results.csv, results.json and report.html (created if missing).
    #[arg(long)]
    out: PathBuf,
    /// Largest median end-to-end p99 of a sustainable rate (e.g. 1s, 200ms).
    #[arg(long, default_value = "1s", value_parser = humantime::parse_duration)]
    p99_bound: Duration,
    /// How often the middleware's policy runs, for configurations with a policy (e.g. 1s, 250ms)
    /// [default: the middleware's for the SPE's kind: 200ms on moirai's engine, 1s on Flink and
    /// Storm].
    #[arg(long, value_parser = humantime::parse_duration)]
    policy_period: Option<Duration>,
    /// When to probe the machine's speed (about half a second a probe): every-point (at the
    /// sweep's start and end and before each point), ends (start and end only), or off.
    #[arg(long, default_value = "every-point", value_name = "WHEN")]
    speed_probes: Probing,
    /// Arguments after `--` are passed to `moirai run <WORKLOAD>` and to the Flink job (e.g. -- --ops 3
    /// --cost-ns 500).
    #[arg(last = true, value_name = "RUN ARGS")]
    extra: Vec<String>,
}

/// Runs `moirai bench`; returns the exit code.
pub fn run(args: BenchArgs) -> i32 {
    let spec = match spec(args) {
        Ok(s) => s,
        Err(e) => {
            eprintln!("moirai bench: {e}");
            return 2;
        }
    };
    execute(&spec)
}

/// Runs a sweep, prints the table and the files written; returns the exit code.
pub fn execute(spec: &SweepSpec) -> i32 {
    let stop = match moirai_bench::stop_on_signals() {
        Ok(s) => s,
        Err(e) => {
            eprintln!("moirai bench: {e}");
            return 1;
        }
    };
    // A Flink or Storm point also starts and stops a JVM with a local cluster: about 10 s more.
    let flink_points =
        spec.rates.len() * spec.reps as usize * spec.configurations.iter().filter(|c| c.system.is_jvm()).count();
    eprintln!(
        "moirai bench: {} points ({} rates x {} reps x {} configurations) of {:?} each, about {} in all",
        spec.total_points(),
        spec.rates.len(),
        spec.reps,
        spec.configurations.len(),
        spec.duration,
        moirai_bench::progress::clock(
            spec.duration.mul_f64(spec.total_points() as f64 * 1.05) + Duration::from_secs(10) * flink_points as u32
        ),
    );
    let done = match moirai_bench::run(spec, &stop) {
        Ok(d) => d,
        Err(
            e @ (BenchError::Write { .. } | BenchError::Spawn { .. } | BenchError::Signals(_) | BenchError::Flink(_)),
        ) => {
            eprintln!("moirai bench: {e}");
            return 1;
        }
        Err(e) => {
            eprintln!("moirai bench: {e}");
            return 2;
        }
    };
    println!("{}", done.summary.render_table());
    let cores = std::thread::available_parallelism().map_or(1, |n| n.get()) as f64;
    for l in done.summary.cpu_bound_lines(cores) {
        println!("{l}");
    }
    let speeds: Vec<_> = done.points.iter().filter_map(|p| p.speed).collect();
    for l in done.speed.iter().flat_map(|s| s.lines(&speeds)) {
        println!("{l}");
    }
    let (window_start, window_end) = spec.measured_window();
    for l in moirai_bench::mw_state::late_start_lines(&done.points, window_start, window_end) {
        println!("{l}");
    }
    let failed = done.points.iter().filter(|p| p.failure.is_some()).count();
    if failed > 0 {
        println!("{failed} of {} points failed; see report.html or results.csv for why", done.points.len());
    }
    for f in &done.files {
        println!("wrote {}", f.display());
    }
    match done.end {
        SweepEnd::Completed => 0,
        SweepEnd::Interrupted => {
            eprintln!("moirai bench: interrupted; the results above cover the points measured before Ctrl-C");
            130
        }
        SweepEnd::Aborted(why) => {
            eprintln!("moirai bench: sweep aborted: {why}");
            1
        }
    }
}

fn spec(args: BenchArgs) -> Result<SweepSpec, BenchError> {
    let exe = std::env::current_exe()
        .map_err(|e| BenchError::Spec(format!("cannot find the moirai binary itself (current_exe): {e}")))?;
    let spec = SweepSpec {
        policy_period: args.policy_period,
        exe,
        rates: parse_rates(&args.rates)?,
        configurations: vary(parse_configurations(&args.compare)?, &args.vary)?,
        grace: SweepSpec::default_grace(args.duration),
        duration: args.duration,
        warmup: args.warmup,
        reps: args.reps,
        extra_args: args.extra,
        criteria: Criteria { p99_bound_ms: args.p99_bound.as_secs_f64() * 1e3, ..Criteria::default() },
        speed_probes: args.speed_probes,
        out_dir: args.out,
        workload: args.workload,
        command_line: std::env::args().collect(),
    };
    spec.validate()?;
    Ok(spec)
}

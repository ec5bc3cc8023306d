//! `moirai run <workload>`: one workload, one rate, one report.

use std::net::SocketAddr;
use std::time::{Duration, Instant};

use clap::{Args, Subcommand};
use moirai_engine::metrics::LatencySummary;
use moirai_engine::{BuildError, BuiltQuery, Engine, EngineConfig, EngineError, Threading};
use moirai_workloads::syn::{self, SynConfig};
use serde::Serialize;

#[derive(Subcommand)]
pub enum Workload {
    /// Synthetic pipelines: source → N operators (CPU cost, selectivity) → sink.
    Syn(SynArgs),
}

/// Options every workload shares: how the engine runs and for how long.
#[derive(Args, Clone, Debug)]
pub struct EngineArgs {
    /// Offered rate per query in tuples/s (0 = as fast as possible).
    #[arg(long, default_value_t = 0.0)]
    rate: f64,
    /// How long the sources produce (e.g. 5s, 1m).
    #[arg(long, default_value = "5s", value_parser = humantime::parse_duration)]
    duration: Duration,
    /// Share of the run discarded as warm-up before throughput and latency are measured.
    #[arg(long, default_value_t = 0.2)]
    warmup: f64,
    /// Threading model of the engine.
    #[arg(long, default_value = "dedicated")]
    threading: Threading,
    /// Fuse forward-connected operators onto one thread. Off by default here, so that every
    /// operator has its own thread, as the papers (and Flink with chaining off) run SYN.
    #[arg(long, default_value_t = false)]
    chaining: bool,
    /// Capacity of each channel, in tuples.
    #[arg(long, default_value_t = EngineConfig::default().channel_capacity)]
    channel_capacity: usize,
    /// Tuples per channel batch.
    #[arg(long, default_value_t = EngineConfig::default().batch_size)]
    batch_size: usize,
    /// Serve /metrics and /topology on this address while running (e.g. 127.0.0.1:9464).
    #[arg(long)]
    metrics_addr: Option<SocketAddr>,
    /// Print the summary as one JSON object on the last line.
    #[arg(long)]
    json: bool,
}

#[derive(Args, Clone, Debug)]
pub struct SynArgs {
    /// Independent queries.
    #[arg(long, default_value_t = 1)]
    queries: usize,
    /// Operators between source and sink, per query.
    #[arg(long, default_value_t = 5)]
    ops: usize,
    /// CPU time per tuple and operator, in ns (a calibrated busy loop).
    #[arg(long, default_value_t = 0)]
    cost_ns: u64,
    /// Output tuples per input tuple of each operator.
    #[arg(long, default_value_t = 1.0)]
    selectivity: f64,
    /// Seed of the selectivity draws.
    #[arg(long, default_value_t = 0)]
    seed: u64,
    #[command(flatten)]
    engine: EngineArgs,
}

/// Distribution of sampled queue lengths (tuples), over all operators and samples.
#[derive(Serialize, Default)]
struct QueueStats {
    samples: u64,
    mean: f64,
    p50: u64,
    p90: u64,
    p99: u64,
    max: u64,
    /// Mean queue length per physical operator, by physical name.
    per_operator: std::collections::BTreeMap<String, f64>,
}

/// The report of one run.
#[derive(Serialize)]
struct Report {
    workload: &'static str,
    threading: Threading,
    chaining: bool,
    offered_rate: f64,
    duration_s: f64,
    measured_s: f64,
    ingress_tps: f64,
    egress_tps: f64,
    tuples_in: u64,
    tuples_out: u64,
    latency_ms: LatencySummary,
    e2e_latency_ms: LatencySummary,
    threads: usize,
    cpu_ns_per_tuple: f64,
    /// CPU time of the whole engine process during the measured window, in cores (1.0 = one
    /// core busy all the time).
    cpu_cores: f64,
    /// Queue lengths of all operators, sampled every 100 ms during the measured window.
    queue_len: QueueStats,
    rss_start_bytes: u64,
    /// RSS when the warm-up ended: compare with `rss_end_bytes` to see memory stay flat.
    rss_warm_bytes: u64,
    rss_end_bytes: u64,
    #[serde(flatten)]
    params: serde_json::Value,
}

pub fn run(workload: Workload) -> i32 {
    match workload {
        Workload::Syn(args) => {
            let config = SynConfig {
                queries: args.queries,
                ops: args.ops,
                cost_ns: args.cost_ns,
                selectivity: args.selectivity,
                rate: args.engine.rate,
                seed: args.seed,
                ..SynConfig::default()
            };
            let params = serde_json::to_value(&config).unwrap_or_default();
            execute("syn", &args.engine, syn::queries(&config), params)
        }
    }
}

fn check(args: &EngineArgs) -> Result<(), String> {
    if !(args.rate.is_finite() && args.rate >= 0.0) {
        return Err(format!("--rate {} must be a number >= 0 (0 = as fast as possible)", args.rate));
    }
    if args.duration.is_zero() {
        return Err("--duration must be positive, e.g. 5s".into());
    }
    if !(0.0..0.9).contains(&args.warmup) {
        return Err(format!("--warmup {} must be a share of the run in [0, 0.9)", args.warmup));
    }
    Ok(())
}

fn execute(
    name: &'static str,
    args: &EngineArgs,
    queries: Result<Vec<BuiltQuery>, BuildError>,
    params: serde_json::Value,
) -> i32 {
    if let Err(e) = check(args) {
        eprintln!("moirai: {e}");
        return 2;
    }
    let queries = match queries {
        Ok(q) => q,
        Err(e) => {
            eprintln!("moirai: {e}");
            return 2;
        }
    };
    let config = EngineConfig {
        threading: args.threading,
        chaining: args.chaining,
        channel_capacity: args.channel_capacity,
        batch_size: args.batch_size,
        metrics_addr: args.metrics_addr,
    };
    let pid = std::process::id();
    let rss_start = moirai_os::proc::process_rss_bytes(pid).unwrap_or(0);
    let engine = match Engine::start(config, queries) {
        Ok(e) => e,
        Err(e @ EngineError::Build(_)) => {
            eprintln!("moirai: {e}");
            return 2;
        }
        Err(e) => {
            eprintln!("moirai: {e}");
            return 1;
        }
    };
    if let Some(addr) = engine.metrics_addr() {
        eprintln!("moirai: serving http://{addr}/metrics and http://{addr}/topology");
    }
    let threads = engine.topology().physical.len();
    let start = Instant::now();
    let warmup = args.duration.mul_f64(args.warmup);
    // Sleep in short steps so that an operator failure ends the run early.
    let sleep_until = |until: Duration| {
        while start.elapsed() < until && !engine.is_finished() {
            std::thread::sleep(Duration::from_millis(10).min(until.saturating_sub(start.elapsed())));
        }
    };
    sleep_until(warmup);
    let before = engine.summary();
    engine.reset_latency();
    let cpu_before = moirai_os::proc::process_cpu_ns(pid).unwrap_or(0);
    let rss_warm = moirai_os::proc::process_rss_bytes(pid).unwrap_or(0);
    let measure_start = Instant::now();
    let mut queues = QueueSampler::default();
    let mut next_sample = warmup;
    while start.elapsed() < args.duration && !engine.is_finished() {
        next_sample += Duration::from_millis(100);
        sleep_until(next_sample.min(args.duration));
        queues.sample(&engine.snapshot());
    }
    let after = engine.summary();
    let measured = measure_start.elapsed().as_secs_f64();
    let cpu_after = moirai_os::proc::process_cpu_ns(pid).unwrap_or(0);
    let rss_end = moirai_os::proc::process_rss_bytes(pid).unwrap_or(0);
    engine.stop();
    let end = match engine.wait() {
        Ok(s) => s,
        Err(e) => {
            eprintln!("moirai: {e}");
            return 1;
        }
    };
    let cpu: u64 = end.operators.iter().map(|o| o.cpu_ns).sum();
    let report = Report {
        workload: name,
        threading: args.threading,
        chaining: args.chaining,
        offered_rate: args.rate,
        duration_s: args.duration.as_secs_f64(),
        measured_s: measured,
        ingress_tps: (after.tuples_in - before.tuples_in) as f64 / measured,
        egress_tps: (after.tuples_out - before.tuples_out) as f64 / measured,
        tuples_in: end.tuples_in,
        tuples_out: end.tuples_out,
        latency_ms: end.latency_ms,
        e2e_latency_ms: end.e2e_latency_ms,
        threads,
        cpu_ns_per_tuple: if end.tuples_in > 0 { cpu as f64 / end.tuples_in as f64 } else { 0.0 },
        cpu_cores: cpu_after.saturating_sub(cpu_before) as f64 / 1e9 / measured,
        queue_len: queues.stats(),
        rss_start_bytes: rss_start,
        rss_warm_bytes: rss_warm,
        rss_end_bytes: rss_end,
        params,
    };
    print_report(&report, args.json);
    0
}

/// Collects queue-length samples.
#[derive(Default)]
struct QueueSampler {
    all: Vec<u64>,
    per_operator: std::collections::BTreeMap<String, (u64, u64)>,
}

impl QueueSampler {
    fn sample(&mut self, operators: &[moirai_engine::metrics::OperatorSnapshot]) {
        for o in operators {
            self.all.push(o.queue_len);
            let e = self.per_operator.entry(format!("{}/{}", o.query, o.name)).or_default();
            e.0 += o.queue_len;
            e.1 += 1;
        }
    }

    fn stats(mut self) -> QueueStats {
        if self.all.is_empty() {
            return QueueStats::default();
        }
        self.all.sort_unstable();
        let n = self.all.len();
        let q = |p: f64| self.all[((n - 1) as f64 * p).round() as usize];
        QueueStats {
            samples: n as u64,
            mean: self.all.iter().sum::<u64>() as f64 / n as f64,
            p50: q(0.5),
            p90: q(0.9),
            p99: q(0.99),
            max: self.all[n - 1],
            per_operator: self.per_operator.into_iter().map(|(k, (sum, count))| (k, sum as f64 / count as f64)).collect(),
        }
    }
}

fn print_report(r: &Report, json: bool) {
    let l = |s: &LatencySummary| {
        format!("mean {:.3}  p50 {:.3}  p99 {:.3}  p99.9 {:.3}  max {:.3}", s.mean, s.p50, s.p99, s.p999, s.max)
    };
    println!(
        "workload          {} ({} threads, threading {:?}, chaining {})",
        r.workload, r.threads, r.threading, r.chaining
    );
    let offered = if r.offered_rate == 0.0 {
        "as fast as possible".to_string()
    } else {
        format!("{:.0} tuples/s", r.offered_rate)
    };
    println!("offered rate      {offered}");
    println!("ingress           {:.0} tuples/s over {:.2} s after warm-up", r.ingress_tps, r.measured_s);
    println!("egress            {:.0} tuples/s", r.egress_tps);
    println!("tuples            {} in, {} out", r.tuples_in, r.tuples_out);
    println!("latency (ms)      {}", l(&r.latency_ms));
    println!("end-to-end (ms)   {}", l(&r.e2e_latency_ms));
    println!("CPU per tuple     {:.1} ns (all operator threads)", r.cpu_ns_per_tuple);
    println!("CPU use           {:.2} cores (engine process, measured window)", r.cpu_cores);
    println!("queue lengths     mean {:.1}  p50 {}  p99 {}  max {} (tuples, {} samples)", r.queue_len.mean, r.queue_len.p50, r.queue_len.p99, r.queue_len.max, r.queue_len.samples);
    println!(
        "RSS               {} KiB before start, {} KiB after warm-up, {} KiB at end",
        r.rss_start_bytes / 1024,
        r.rss_warm_bytes / 1024,
        r.rss_end_bytes / 1024
    );
    if json {
        println!("{}", serde_json::to_string(r).unwrap_or_default());
    }
}

//! `moirai run <workload>`: one workload, one rate, one report.

use std::net::SocketAddr;
use std::time::{Duration, Instant};

use clap::{Args, Subcommand};
use moirai_engine::metrics::LatencySummary;
use std::path::PathBuf;

use moirai_engine::{BuiltQuery, Engine, EngineConfig, EngineError, Threading};

use crate::micro_batch::{GroupFlag, ThreadingFlag};
use moirai_workloads::linear_road::{self, LinearRoadConfig};
use moirai_workloads::syn::{self, SynConfig};
use moirai_workloads::wordcount::{self, WordCountConfig};
use moirai_workloads::ysb::{self, YsbConfig};
use serde::Serialize;

#[derive(Subcommand)]
pub enum Workload {
    /// Synthetic pipelines: source → N operators (CPU cost, selectivity) → sink.
    Syn(SynArgs),
    /// Linear Road: the faithful benchmark query, or the 9-operator shape of the Lachesis
    /// evaluation (--shape lachesis).
    #[command(name = "linear-road", alias = "lr")]
    LinearRoad(LinearRoadArgs),
    /// WordCount (Hone): sentences split into words, counted per word, with shuffle, key or
    /// partial key grouping.
    #[command(name = "wordcount", alias = "wc")]
    WordCount(WordCountArgs),
    /// Yahoo Streaming Benchmark: JSON ad events, filter, join ad → campaign, 10 s windows.
    Ysb(YsbArgs),
}

/// Options every workload shares: how the engine runs and for how long.
#[derive(Args, Clone, Debug)]
pub struct EngineArgs {
    /// Offered rate in tuples/s, in total over all queries and source instances (0 = as fast as
    /// possible; at most 1e9, one tuple per ns).
    #[arg(long, default_value_t = 0.0)]
    rate: f64,
    /// Ramp the offered rate linearly from --rate to this many tuples/s over the whole
    /// --duration (the papers' increasing-rate runs).
    #[arg(long)]
    pub(crate) ramp_to: Option<f64>,
    /// With --ramp-to: reach it after this long (e.g. 10s) and hold it for the rest of the run,
    /// instead of ramping over the whole --duration.
    #[arg(long, value_parser = humantime::parse_duration, requires = "ramp_to")]
    ramp_over: Option<Duration>,
    /// How long the sources produce (e.g. 5s, 1m; at most 30days) [default: 5s; a Linear Road
    /// --input runs to its end unless given].
    #[arg(long, value_parser = humantime::parse_duration)]
    pub(crate) duration: Option<Duration>,
    /// Run until the queries' input ends instead of for a duration (set by the workload).
    #[arg(skip)]
    until_input_ends: bool,
    /// Share of the run discarded as warm-up before throughput and latency are measured.
    #[arg(long, default_value_t = 0.2)]
    warmup: f64,
    /// Threading model of the engine: dedicated (a thread per operator), dynamic[:N] (N worker
    /// threads, any runs any operator), elastic[:MIN-MAX][,start=N][,period=1s] (a pool sized at
    /// run time), fused[:NAME,...] (all operators on one thread, or on named threads).
    /// micro-batch[:interval=D][:group=G][:executors=E] runs the workload as Drizzle's
    /// micro-batches on executor processes (wordcount, ysb; see docs/micro-batch.md).
    #[arg(long, default_value = "dedicated", value_parser = crate::micro_batch::parse_threading)]
    pub(crate) threading: ThreadingFlag,
    /// Micro-batch: the batch interval (e.g. 100ms) [default: 100ms].
    #[arg(long, value_parser = humantime::parse_duration)]
    pub(crate) batch_interval: Option<Duration>,
    /// Micro-batch: per-batch (a scheduling round trip per stage and micro-batch), auto (group
    /// size tuned by AIMD) or G (micro-batches per scheduling decision) [default: auto].
    #[arg(long, value_parser = crate::micro_batch::parse_group)]
    pub(crate) group: Option<GroupFlag>,
    /// Micro-batch: executor processes [default: 2].
    #[arg(long)]
    pub(crate) executors: Option<usize>,
    /// Micro-batch: AIMD's bounds of the coordination overhead, LOWER..UPPER.
    #[arg(long, default_value = "0.05..0.1", value_parser = parse_bounds)]
    pub(crate) overhead_bounds: (f64, f64),
    /// Micro-batch: run each micro-batch as soon as it is scheduled instead of when its interval
    /// has passed (measures time per micro-batch).
    #[arg(long)]
    pub(crate) unpaced: bool,
    /// Micro-batch: kill -9 executor ID once micro-batch B is committed (ID@B), to see recovery.
    #[arg(long)]
    pub(crate) kill_executor: Option<String>,
    /// Micro-batch, wordcount: one stage — map tasks send their window counts straight to the
    /// sink, without a shuffle or reduce tasks (Drizzle's single-stage job).
    #[arg(long)]
    pub(crate) single_stage: bool,
    /// Print the threading model's decisions (the elastic thread level) on stderr.
    #[arg(short, long)]
    pub(crate) verbose: bool,
    /// Fuse forward-connected operators onto one thread. Off by default here, so that every
    /// operator has its own thread, as the papers run their workloads on Storm (and Flink with
    /// chaining off), and as the middleware schedules them.
    #[arg(long, default_value_t = false)]
    chaining: bool,
    /// Capacity of each channel, in tuples (at most 16777216).
    #[arg(long, default_value_t = EngineConfig::default().channel_capacity)]
    pub(crate) channel_capacity: usize,
    /// Tuples per channel batch (at most the channel capacity and 65536).
    #[arg(long, default_value_t = EngineConfig::default().batch_size)]
    pub(crate) batch_size: usize,
    /// Serve /metrics and /topology on this address while running (e.g. 127.0.0.1:9464).
    #[arg(long)]
    metrics_addr: Option<SocketAddr>,
    /// Print the summary as one JSON object on the last line.
    #[arg(long)]
    pub(crate) json: bool,
}

/// `--overhead-bounds LOWER..UPPER`.
fn parse_bounds(s: &str) -> Result<(f64, f64), String> {
    s.split_once("..")
        .and_then(|(l, u)| Some((l.trim().parse().ok()?, u.trim().parse().ok()?)))
        .ok_or_else(|| format!("'{s}' must be LOWER..UPPER shares of time, e.g. 0.05..0.1"))
}

#[derive(Args, Clone, Debug)]
pub struct SynArgs {
    /// Start from the Lachesis evaluation's SYN (20 queries x 3 operators, per-query cost
    /// c*2^U{0..5} with +-10 % per operator, drawn selectivities, sinks with cost); the flags
    /// below override it.
    #[arg(long)]
    lachesis: bool,
    /// Independent queries [default: 1; 20 with --lachesis].
    #[arg(long)]
    queries: Option<usize>,
    /// Operators between source and sink, per query [default: 5; 3 with --lachesis].
    #[arg(long)]
    ops: Option<usize>,
    /// CPU time per tuple and operator, in ns, a calibrated busy loop, at most 1 s [default: 0;
    /// 1000 with --lachesis].
    #[arg(long)]
    cost_ns: Option<u64>,
    /// Output tuples per input tuple of each operator [default: 1].
    #[arg(long)]
    selectivity: Option<f64>,
    /// Make 10 % of the operators block (sleep up to 200 ms with probability 0.001 per tuple).
    #[arg(long)]
    blocking: bool,
    /// Operator K (from 1) of every query costs --heavy-factor times as much: one bottleneck.
    #[arg(long, value_name = "K")]
    heavy_op: Option<usize>,
    /// How much heavier the --heavy-op operator is [default: 4].
    #[arg(long, value_name = "F", requires = "heavy_op")]
    heavy_factor: Option<u64>,
    /// Seed of the parameter and selectivity draws.
    #[arg(long, default_value_t = 0)]
    seed: u64,
    #[command(flatten)]
    pub(crate) engine: EngineArgs,
}

/// The SYN configuration the flags ask for (the rate from `--rate`, in total over the queries).
pub(crate) fn syn_config(a: &SynArgs) -> Result<SynConfig, String> {
    let mut config = if a.lachesis { SynConfig::lachesis() } else { SynConfig::default() };
    config.queries = a.queries.unwrap_or(config.queries);
    config.ops = a.ops.unwrap_or(config.ops);
    a.cost_ns.map_or(Ok(()), |c| moirai_workloads::check::cost_ns("--cost-ns", c))?;
    config.cost_ns = a.cost_ns.unwrap_or(config.cost_ns);
    config.selectivity = a.selectivity.unwrap_or(config.selectivity);
    config.blocking = a.blocking;
    config.heavy = a.heavy_op.map(|k| (k, a.heavy_factor.unwrap_or(4)));
    // SynConfig's rate is per query; the command line's, like every workload's, in total.
    config.rate = a.engine.rate / config.queries.max(1) as f64;
    config.seed = a.seed;
    Ok(config)
}

#[derive(Args, Clone, Debug)]
pub struct LinearRoadArgs {
    /// faithful (the benchmark's query) or lachesis (the Lachesis evaluation's 9-operator shape).
    #[arg(long, default_value = "faithful")]
    shape: linear_road::Shape,
    /// Expressways to generate.
    #[arg(long, default_value_t = 1)]
    xways: u16,
    /// Simulated traffic to generate (the benchmark runs 3 hours).
    #[arg(long, default_value = "3h", value_parser = humantime::parse_duration)]
    traffic: Duration,
    /// Cars entering each expressway per second.
    #[arg(long, default_value_t = LinearRoadConfig::default().traffic.cars_per_second)]
    cars_per_second: f64,
    /// Replay this file (type,time,carid,speed,xway,lane,dir,seg,pos,qid,sinit,send,dow,tod,day)
    /// instead of generating. It is replayed to its end unless --duration is given.
    #[arg(long)]
    input: Option<PathBuf>,
    /// Replay at the records' own clock (their time column), this many times faster than real
    /// time: 1.0 = real time, as the benchmark runs, 10.0 = ten times faster. Excludes --rate.
    #[arg(long)]
    replay_speed: Option<f64>,
    /// Write the answers here (faithful shape), in the validator's format (or moirai's, with
    /// --rules moirai).
    #[arg(long)]
    output: Option<PathBuf>,
    /// The historical tolls that daily expenditures (type 3) are answered from: the tolls file
    /// the benchmark's generator wrote with --input (carid,day,xway,tolls), or `seeded` (a table
    /// made from --seed).
    #[arg(long, value_name = "FILE|seeded")]
    historical_tolls: Option<PathBuf>,
    /// validator (the benchmark validator's answers) or moirai (moirai's earlier reading of the
    /// specification); see docs/linear-road.md.
    #[arg(long, default_value = "validator")]
    rules: linear_road::Rules,
    /// Instances of each keyed stage.
    #[arg(long, default_value_t = 1)]
    parallelism: usize,
    /// Seed of the generator.
    #[arg(long, default_value_t = 0)]
    seed: u64,
    #[command(flatten)]
    engine: EngineArgs,
}

#[derive(Args, Clone, Debug)]
pub struct WordCountArgs {
    /// shuffle, key or pkg (partial key grouping).
    #[arg(long, default_value = "pkg")]
    grouping: wordcount::Grouping,
    /// Instances of split and count.
    #[arg(long, default_value_t = WordCountConfig::default().parallelism)]
    parallelism: usize,
    /// Sentences to generate (0 = endless).
    #[arg(long, default_value_t = 0)]
    sentences: u64,
    /// Vocabulary size of the Zipf generator.
    #[arg(long, default_value_t = WordCountConfig::default().vocabulary)]
    vocabulary: usize,
    /// Zipf exponent.
    #[arg(long, default_value_t = WordCountConfig::default().zipf_exponent)]
    zipf: f64,
    /// Read sentences (lines) from this file instead.
    #[arg(long)]
    text: Option<PathBuf>,
    /// Seed of the generator.
    #[arg(long, default_value_t = 0)]
    seed: u64,
    /// Length of the tumbling counting windows, ms.
    #[arg(long, default_value_t = WordCountConfig::default().window_ms)]
    window_ms: u64,
    /// Hone's tuple scheduler between split and count: lbf (largest backlog first), rr (round
    /// robin), fifo (arrival order, Storm's default) over a shared link, or none (ordinary
    /// channels).
    #[arg(long, default_value = "none", value_parser = parse_exchange)]
    exchange: ExchangeFlag,
    /// Capacity of the exchange's link, tuples/s (needed with --exchange).
    #[arg(long)]
    link_capacity: Option<u64>,
    /// The exchange's scheduling interval τ (Hone used 10-130 ms).
    #[arg(long, default_value = "10ms", value_parser = humantime::parse_duration)]
    tau: Duration,
    /// Sentence lengths with high variance (90 % of 1-2 words, 10 % of 32), so that the split
    /// instances emit unequal numbers of words.
    #[arg(long)]
    sentence_variance: bool,
    /// Slow split instance 0 down by this factor (e.g. 4).
    #[arg(long)]
    straggler: Option<f64>,
    #[command(flatten)]
    pub(crate) engine: EngineArgs,
}

/// `--exchange`: a policy, or none.
#[derive(Clone, Copy, Debug)]
pub struct ExchangeFlag(Option<moirai_engine::exchange::Discipline>);

fn parse_exchange(s: &str) -> Result<ExchangeFlag, String> {
    match s {
        "none" => Ok(ExchangeFlag(None)),
        other => other.parse().map(|p| ExchangeFlag(Some(p))).map_err(|e| format!("{e} or none")),
    }
}

impl WordCountArgs {
    /// The Hone exchange the flags ask for; errors name the flag to fix.
    fn hone(&self) -> Result<Option<moirai_engine::Hone>, String> {
        match (self.exchange.0, self.link_capacity) {
            (None, None) => Ok(None),
            (None, Some(_)) => Err("--link-capacity needs --exchange lbf, rr or fifo".into()),
            (Some(p), None) => Err(format!("--exchange {p} needs --link-capacity <tuples/s>, e.g. 20000")),
            (Some(p), Some(c)) => {
                let hone = moirai_engine::Hone::new(p, self.tau).capacity(c);
                hone.validate().map_err(|e| format!("--exchange {p}: {e}"))?;
                Ok(Some(hone))
            }
        }
    }
}

#[derive(Args, Clone, Debug)]
pub struct YsbArgs {
    /// Instances of each operator.
    #[arg(long, default_value_t = YsbConfig::default().parallelism)]
    parallelism: usize,
    /// Campaigns (10 ads each).
    #[arg(long, default_value_t = YsbConfig::default().campaigns)]
    campaigns: usize,
    /// Events to generate (0 = endless).
    #[arg(long, default_value_t = 0)]
    events: u64,
    /// Window length in ms.
    #[arg(long, default_value_t = YsbConfig::default().window_ms)]
    window_ms: u64,
    /// Seed of the generator.
    #[arg(long, default_value_t = 0)]
    seed: u64,
    #[command(flatten)]
    pub(crate) engine: EngineArgs,
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
    /// Tuples out per second from the end of the warm-up until the last tuple came out: the
    /// measured window plus the drain after the run's end.
    egress_tps: f64,
    /// The time `egress_tps` is over, in seconds: `measured_s` + `drained_s`.
    egress_s: f64,
    /// How long the run drained after its end (the sources stopped, the tuples still queued came
    /// out), in seconds: a few ms when the engine keeps up, long when it is far behind.
    drained_s: f64,
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
    /// The rate the run ramped to (from `offered_rate`), if it ramped.
    #[serde(skip_serializing_if = "Option::is_none")]
    ramp_to: Option<f64>,
    /// Per second: throughput, the sources' backlog, the engine's queued tuples.
    timeline: Vec<TimelinePoint>,
    /// Every change of the elastic thread level.
    level_changes: Vec<moirai_engine::executor::LevelChange>,
    /// The Hone exchange's backlogs over the whole run (the first exchange, if the query has one).
    #[serde(skip_serializing_if = "Option::is_none")]
    exchange: Option<moirai_engine::exchange::ExchangeSnapshot>,
    #[serde(flatten)]
    params: serde_json::Value,
    /// What the workload itself measured or checked (Linear Road's deadline misses, YSB's window
    /// latency, WordCount's check).
    #[serde(skip_serializing_if = "serde_json::Value::is_null")]
    workload_stats: serde_json::Value,
}

/// Workload-specific results, read after the run.
type After = Box<dyn FnOnce() -> serde_json::Value>;

pub fn run(workload: Workload) -> i32 {
    match workload {
        Workload::Syn(a) => {
            let config = match syn_config(&a) {
                Ok(c) => c,
                Err(e) => {
                    eprintln!("moirai: {e}");
                    return 2;
                }
            };
            let params = serde_json::to_value(&config).unwrap_or_default();
            let after: After = Box::new(|| serde_json::Value::Null);
            execute("syn", &a.engine, syn::queries(&config).map(|q| (q, after)).map_err(|e| e.to_string()), params)
        }
        Workload::LinearRoad(a) => {
            if let Err(e) = check_linear_road(&a) {
                eprintln!("moirai: {e}");
                return 2;
            }
            // A file runs to its end unless --duration is given: the run ends when the source
            // does, and is measured whole (there is no warm-up to cut).
            let until_end = a.input.is_some() && a.engine.duration.is_none();
            let mut engine = a.engine.clone();
            engine.until_input_ends = until_end;
            let config = LinearRoadConfig {
                traffic: linear_road::generator::GeneratorConfig {
                    xways: a.xways,
                    duration_s: a.traffic.as_secs().min(u32::MAX as u64) as u32,
                    seed: a.seed,
                    cars_per_second: a.cars_per_second,
                    ..Default::default()
                },
                rate: a.engine.rate,
                replay_speed: a.replay_speed,
                parallelism: a.parallelism,
                input: a.input.clone(),
                output: a.output.clone(),
                shape: a.shape,
                rules: a.rules,
                history: match &a.historical_tolls {
                    Some(p) if p.as_os_str() == "seeded" => linear_road::HistorySource::Seeded,
                    Some(p) => linear_road::HistorySource::File(p.clone()),
                    None => linear_road::HistorySource::Default,
                },
                ..LinearRoadConfig::default()
            };
            let params = serde_json::json!({
                "shape": a.shape.to_string(), "xways": a.xways, "traffic_s": config.traffic.duration_s,
                "cars_per_second": a.cars_per_second, "parallelism": a.parallelism, "seed": a.seed,
                "input": a.input, "output": a.output, "replay_speed": a.replay_speed, "rules": a.rules,
                "historical_tolls": a.historical_tolls,
                "run_until": if until_end { "the input ends" } else { "--duration" },
            });
            let built = linear_road::queries(&config).map_err(|e| e.to_string()).map(|(q, stats)| {
                let input = a.input.clone();
                if let (Some(path), Some(0)) = (&input, stats.report().records_total) {
                    eprintln!(
                        "moirai: warning: {} holds no Linear Road records (only blank lines or a header): \
                         nothing to replay",
                        path.display()
                    );
                }
                let duration = engine.duration();
                let after: After = Box::new(move || match stats.finish() {
                    Ok(report) => {
                        let records = records_note(&report, input.as_deref(), duration);
                        if let Some(note) = records.strip_prefix("stopped") {
                            eprintln!("moirai: linear-road: stopped{note}");
                        }
                        let mut v = serde_json::to_value(report).unwrap_or_default();
                        v["records"] = records.into();
                        v
                    }
                    Err(e) => serde_json::json!({ "error": e.to_string() }),
                });
                (q, after)
            });
            execute("linear-road", &engine, built, params)
        }
        Workload::WordCount(a) => {
            let config = match wordcount_config(&a) {
                Ok(c) => c,
                Err(e) => {
                    eprintln!("moirai: {e}");
                    return 2;
                }
            };
            if let ThreadingFlag::MicroBatch(_) = a.engine.threading {
                return crate::micro_batch::run_wordcount(config, &a.engine);
            }
            let hone = config.exchange.clone();
            let params = serde_json::json!({
                "grouping": format!("{:?}", a.grouping), "parallelism": a.parallelism, "sentences": a.sentences,
                "vocabulary": a.vocabulary, "zipf": a.zipf, "seed": a.seed, "text": a.text, "window_ms": a.window_ms,
                "hone": hone, "sentence_variance": a.sentence_variance, "straggler": a.straggler,
            });
            let built = wordcount::queries(&config).map_err(|e| e.to_string()).map(|(q, handle)| {
                let after: After = Box::new(move || {
                    let loads = handle.instance_loads();
                    let check = match handle.check() {
                        Ok(()) => "counts equal a naive count".to_string(),
                        Err(e) => e.to_string(),
                    };
                    serde_json::json!({ "distinct_words": handle.counts().len(), "count_instance_loads": loads, "check": check })
                });
                (q, after)
            });
            execute("wordcount", &a.engine, built, params)
        }
        Workload::Ysb(a) => {
            let config = ysb_config(&a);
            if let ThreadingFlag::MicroBatch(_) = a.engine.threading {
                return crate::micro_batch::run_ysb(config, &a.engine);
            }
            let params = serde_json::json!({
                "parallelism": a.parallelism, "campaigns": a.campaigns, "events": a.events,
                "window_ms": a.window_ms, "seed": a.seed,
            });
            let built = ysb::queries(&config).map_err(|e| e.to_string()).map(|(q, handle)| {
                let after: After = Box::new(move || {
                    let check = match handle.check() {
                        Ok(()) => "window counts equal a naive count".to_string(),
                        Err(e) => e.to_string(),
                    };
                    serde_json::json!({
                        "window_latency_ms": handle.window_latency_ms(),
                        "windows_closed_early": handle.early_windows(),
                        "malformed_events": handle.malformed(),
                        "check": check,
                    })
                });
                (q, after)
            });
            execute("ysb", &a.engine, built, params)
        }
    }
}

/// The YSB configuration the flags ask for.
pub(crate) fn ysb_config(a: &YsbArgs) -> YsbConfig {
    YsbConfig {
        rate: a.engine.rate,
        seed: a.seed,
        parallelism: a.parallelism,
        events: a.events,
        campaigns: a.campaigns,
        window_ms: a.window_ms,
        ..YsbConfig::default()
    }
}

/// The WordCount configuration the flags ask for.
pub(crate) fn wordcount_config(a: &WordCountArgs) -> Result<WordCountConfig, String> {
    Ok(WordCountConfig {
        exchange: a.hone()?,
        sentence_variance: a.sentence_variance,
        straggler: a.straggler,
        rate: a.engine.rate,
        seed: a.seed,
        parallelism: a.parallelism,
        sentences: a.sentences,
        vocabulary: a.vocabulary,
        zipf_exponent: a.zipf,
        text: a.text.clone(),
        grouping: a.grouping,
        window_ms: a.window_ms,
        ..WordCountConfig::default()
    })
}

/// The Linear Road flags that only make sense together (or apart).
fn check_linear_road(a: &LinearRoadArgs) -> Result<(), String> {
    if let Some(speed) = a.replay_speed {
        if !(speed.is_finite() && speed > 0.0) {
            return Err(format!(
                "--replay-speed {speed} must be a positive, finite factor (1.0 = the records' clock in real time)"
            ));
        }
        if a.engine.rate > 0.0 {
            return Err(format!(
                "--replay-speed {speed} and --rate {} exclude each other: replay at the records' own clock, or at \
                 a fixed rate",
                a.engine.rate
            ));
        }
    }
    if a.input.is_some() && a.engine.ramp_to.is_some() && a.engine.duration.is_none() {
        return Err("--ramp-to with --input needs --duration (the length of the ramp)".into());
    }
    Ok(())
}

/// How much of the input a Linear Road run read, in words.
fn records_note(
    report: &linear_road::LinearRoadReport,
    input: Option<&std::path::Path>,
    duration: Option<Duration>,
) -> String {
    let read = report.records_read;
    match (report.records_total, input) {
        (Some(0), Some(path)) => format!("none: {} holds no records", path.display()),
        (Some(total), Some(path)) if read < total && duration.is_some() => format!(
            "stopped after {read} of {total} records of {} (--duration {}); drop --duration to replay it to its end",
            path.display(),
            humantime::format_duration(duration.unwrap_or_default())
        ),
        (Some(total), Some(path)) if read < total => {
            format!("stopped after {read} of {total} records of {} (the run failed)", path.display())
        }
        (Some(total), _) => format!("all {total} records read"),
        (None, _) => format!("{read} records generated"),
    }
}

/// By default, the sources produce this long.
const DEFAULT_DURATION: Duration = Duration::from_secs(5);

impl EngineArgs {
    /// How long the sources produce; `None` when the run goes on until the input ends.
    fn duration(&self) -> Option<Duration> {
        (!self.until_input_ends).then(|| self.duration.unwrap_or(DEFAULT_DURATION))
    }
}

/// The engine flags every workload shares; the bounds are moirai_workloads::check's.
fn check(args: &EngineArgs) -> Result<(), String> {
    use moirai_workloads::check;
    check::rate("--rate", args.rate)?;
    if let Some(to) = args.ramp_to {
        check::ramp_to("--ramp-to", to, args.rate)?;
    }
    if let Some(d) = args.duration() {
        check::duration("--duration", d)?;
    }
    if let Some(over) = args.ramp_over {
        if over.is_zero() || args.duration().is_some_and(|d| over > d) {
            return Err(format!(
                "--ramp-over {} must be positive and at most the run's --duration",
                humantime::format_duration(over)
            ));
        }
    }
    if !(0.0..0.9).contains(&args.warmup) {
        return Err(format!("--warmup {} must be a share of the run in [0, 0.9)", args.warmup));
    }
    check::channel("--channel-capacity", args.channel_capacity, "--batch-size", args.batch_size)
}

fn execute(
    name: &'static str,
    args: &EngineArgs,
    queries: Result<(Vec<BuiltQuery>, After), String>,
    params: serde_json::Value,
) -> i32 {
    if let Err(e) = check(args) {
        eprintln!("moirai: {e}");
        return 2;
    }
    let threading = match &args.threading {
        ThreadingFlag::Engine(t) => t.clone(),
        ThreadingFlag::MicroBatch(_) => {
            // Say which operator stands in the way, if one does.
            let why = match queries {
                Ok((queries, _)) => queries
                    .into_iter()
                    .find_map(|q| q.stages().err())
                    .map_or("its runner is not wired to micro-batch mode".to_string(), |e| e.to_string()),
                Err(e) => e,
            };
            eprintln!(
                "moirai: {name} cannot run in micro-batch mode (wordcount and ysb can): {why}; run it on the \
                 continuous engine (--threading dedicated, dynamic, elastic, fused or policy)"
            );
            return 2;
        }
    };
    let duration = args.duration();
    let (queries, workload_after) = match queries {
        Ok(q) => q,
        Err(e) => {
            eprintln!("moirai: {e}");
            return 2;
        }
    };
    let config = EngineConfig {
        threading: threading.clone(),
        chaining: args.chaining,
        channel_capacity: args.channel_capacity,
        batch_size: args.batch_size,
        metrics_addr: args.metrics_addr,
        ramp: args.ramp_to.zip(args.ramp_over.or(duration)).map(|(to, over)| (to / args.rate, over)),
        verbose: args.verbose,
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
    let topology = engine.topology();
    // Operator threads: one per physical operator, or the pool's workers.
    let threads = if topology.threads.is_empty() { topology.physical.len() } else { topology.threads.len() };
    let start = Instant::now();
    // If the queries end during the warm-up (a finite input), the whole run is measured.
    let from_start = (engine.summary(), moirai_os::proc::process_cpu_ns(pid).unwrap_or(0), rss_start, start);
    // Until the input ends, the whole run is measured: there is no length to take a share of.
    let warmup = duration.map(|d| d.mul_f64(args.warmup));
    // Sleep in short steps so that an operator failure ends the run early.
    let sleep_until = |until: Duration| {
        while start.elapsed() < until && !engine.is_finished() {
            std::thread::sleep(Duration::from_millis(10).min(until.saturating_sub(start.elapsed())));
        }
    };
    // Sample every 100 ms: queue lengths after the warm-up, and a per-second timeline of the
    // whole run (throughput and the sources' backlog as the offered rate holds or ramps).
    let mut queues = QueueSampler::default();
    let mut timeline: Vec<TimelinePoint> = Vec::new();
    let mut last_point = (0.0, 0u64, 0u64);
    let mut measured_from: Option<(moirai_engine::RunSummary, u64, u64, Instant)> = None;
    let mut next_sample = Duration::ZERO;
    let mut samples = 0u64;
    loop {
        if measured_from.is_none() && warmup.is_some_and(|w| start.elapsed() >= w) {
            let before = engine.summary();
            engine.reset_latency();
            let cpu = moirai_os::proc::process_cpu_ns(pid).unwrap_or(0);
            let rss = moirai_os::proc::process_rss_bytes(pid).unwrap_or(0);
            measured_from = Some((before, cpu, rss, Instant::now()));
        }
        if duration.is_some_and(|d| start.elapsed() >= d) || engine.is_finished() {
            break;
        }
        next_sample += Duration::from_millis(100);
        sleep_until(duration.map_or(next_sample, |d| next_sample.min(d)));
        let ops = engine.snapshot();
        if measured_from.is_some() {
            queues.sample(&ops);
        }
        samples += 1;
        if samples % 10 == 0 {
            let s = engine.summary();
            let t = start.elapsed().as_secs_f64();
            let dt = (t - last_point.0).max(1e-9);
            timeline.push(TimelinePoint {
                t_s: t,
                ingress_tps: (s.tuples_in - last_point.1) as f64 / dt,
                egress_tps: (s.tuples_out - last_point.2) as f64 / dt,
                backlog: ops.iter().map(|o| o.backlog).sum(),
                queued: ops.iter().map(|o| o.queue_len).sum(),
                thread_level: engine.thread_level(),
                exchange_max_backlog: engine.exchange_window_max().first().copied(),
            });
            last_point = (t, s.tuples_in, s.tuples_out);
        }
    }
    let (before, cpu_before, rss_warm, measure_start) = measured_from.unwrap_or(from_start);
    let after = engine.summary();
    let measured = measure_start.elapsed().as_secs_f64().max(1e-9);
    let cpu_after = moirai_os::proc::process_cpu_ns(pid).unwrap_or(0);
    let rss_end = moirai_os::proc::process_rss_bytes(pid).unwrap_or(0);
    let run_end = Instant::now();
    engine.stop();
    let end = match engine.wait() {
        Ok(s) => s,
        Err(e) => {
            eprintln!("moirai: {e}");
            return 1;
        }
    };
    // The tuples still queued at the end come out while the engine drains: egress counts them
    // over the time they took, not over the measured window alone (which may have seen none).
    let drained = run_end.elapsed().as_secs_f64();
    let egress_s = measured + drained;
    let cpu: u64 = end.operators.iter().map(|o| o.cpu_ns).sum();
    let workload_stats = workload_after();
    let report = Report {
        workload: name,
        threading,
        chaining: args.chaining,
        offered_rate: args.rate,
        duration_s: duration.unwrap_or(run_end - start).as_secs_f64(),
        measured_s: measured,
        ingress_tps: (after.tuples_in - before.tuples_in) as f64 / measured,
        egress_tps: end.tuples_out.saturating_sub(before.tuples_out) as f64 / egress_s,
        egress_s,
        drained_s: drained,
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
        ramp_to: args.ramp_to,
        timeline,
        level_changes: end.level_changes.clone(),
        exchange: end.exchanges.first().cloned(),
        params,
        workload_stats,
    };
    print_report(&report, args.json);
    0
}

/// One second of a run.
#[derive(Serialize)]
struct TimelinePoint {
    /// Seconds since the start.
    t_s: f64,
    /// Tuples in per second over the last second.
    ingress_tps: f64,
    /// Tuples out per second over the last second.
    egress_tps: f64,
    /// Tuples the sources are behind their schedule (the external queue).
    backlog: u64,
    /// Tuples queued in the engine's channels.
    queued: u64,
    /// Worker threads running operators (pool models; 0 under dedicated).
    thread_level: usize,
    /// The largest backlog of an outgoing queue of the Hone exchange during the last second.
    #[serde(skip_serializing_if = "Option::is_none")]
    exchange_max_backlog: Option<u64>,
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
            per_operator: self
                .per_operator
                .into_iter()
                .map(|(k, (sum, count))| (k, sum as f64 / count as f64))
                .collect(),
        }
    }
}

fn print_report(r: &Report, json: bool) {
    let l = |s: &LatencySummary| {
        format!("mean {:.3}  p50 {:.3}  p99 {:.3}  p99.9 {:.3}  max {:.3}", s.mean, s.p50, s.p99, s.p999, s.max)
    };
    println!(
        "workload          {} ({} threads, threading {}, chaining {})",
        r.workload, r.threads, r.threading, r.chaining
    );
    let offered = if r.offered_rate == 0.0 {
        "as fast as possible".to_string()
    } else {
        format!("{:.0} tuples/s", r.offered_rate)
    };
    println!("offered rate      {offered}");
    println!("ingress           {:.0} tuples/s over {:.2} s after warm-up", r.ingress_tps, r.measured_s);
    println!("egress            {:.0} tuples/s over {:.2} s, until the last tuple came out", r.egress_tps, r.egress_s);
    if r.drained_s >= 0.1 {
        println!(
            "drained           {:.2} s after the end of the run: tuples still queued came out then (egress counts them)",
            r.drained_s
        );
    }
    println!("tuples            {} in, {} out", r.tuples_in, r.tuples_out);
    println!("latency (ms)      {}", l(&r.latency_ms));
    println!("end-to-end (ms)   {}", l(&r.e2e_latency_ms));
    println!("CPU per tuple     {:.1} ns (all operator threads)", r.cpu_ns_per_tuple);
    println!("CPU use           {:.2} cores (engine process, measured window)", r.cpu_cores);
    println!(
        "queue lengths     mean {:.1}  p50 {}  p99 {}  max {} (tuples, {} samples)",
        r.queue_len.mean, r.queue_len.p50, r.queue_len.p99, r.queue_len.max, r.queue_len.samples
    );
    println!(
        "RSS               {} KiB before start, {} KiB after warm-up, {} KiB at end",
        r.rss_start_bytes / 1024,
        r.rss_warm_bytes / 1024,
        r.rss_end_bytes / 1024
    );
    if let Some(x) = &r.exchange {
        println!(
            "exchange          {} {} every {:.1} ms over {} tuples/s, {} queues: max backlog {}, mean {:.1}, mean of the largest {:.1} (tuples, {} ticks, {} sent)",
            x.name, x.policy, x.tau_ms, x.capacity, x.queues, x.max_backlog, x.mean_backlog, x.mean_max_backlog, x.ticks, x.sent
        );
    }
    if !r.workload_stats.is_null() {
        println!("{:<18}{}", r.workload, r.workload_stats);
    }
    if json {
        println!("{}", serde_json::to_string(r).unwrap_or_default());
    }
}

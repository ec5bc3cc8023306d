//! The flags every workload of `moirai run` shares: how the engine runs (its threading model, or
//! micro-batches), at what rate and for how long.

use std::net::SocketAddr;
use std::time::Duration;

use clap::Args;
use moirai_engine::{EngineConfig, Threading};

/// Options every workload shares: how the engine runs and for how long.
#[derive(Args, Clone, Debug)]
pub struct EngineArgs {
    /// Offered rate in tuples/s, in total over all queries and source instances (0 = as fast as
    /// possible; at most 1e9, one tuple per ns); k, M and G multiply (250k, 1.5M).
    #[arg(long, default_value_t = 0.0, value_parser = parse_offered_rate)]
    pub(crate) rate: f64,
    /// Ramp the offered rate linearly from --rate to this many tuples/s over the whole
    /// --duration (the papers' increasing-rate runs).
    #[arg(long, value_parser = moirai_bench::parse_rate)]
    pub(crate) ramp_to: Option<f64>,
    /// With --ramp-to: reach it after this long (e.g. 10s) and hold it for the rest of the run,
    /// instead of ramping over the whole --duration.
    #[arg(long, value_parser = humantime::parse_duration, requires = "ramp_to")]
    pub(crate) ramp_over: Option<Duration>,
    /// How long the sources produce (e.g. 5s, 1m; at most 30days) [default: 5s; a Linear Road
    /// --input runs to its end unless given].
    #[arg(long, value_parser = humantime::parse_duration)]
    pub(crate) duration: Option<Duration>,
    /// Share of the run discarded as warm-up before throughput and latency are measured.
    #[arg(long, default_value_t = 0.2, value_parser = parse_share)]
    pub(crate) warmup: f64,
    /// Threading model of the engine: dedicated (a thread per operator), dynamic[:N] (N worker
    /// threads, any runs any operator), elastic[:MIN-MAX][,start=N][,period=1s] (a pool sized at
    /// run time), fused[:NAME,...] (all operators on one thread, or on named threads).
    /// micro-batch[:interval=D][:group=G][:executors=E] runs the workload as Drizzle's
    /// micro-batches on executor processes (wordcount, ysb; see docs/micro-batch.md).
    #[arg(long, default_value = "dedicated", value_parser = parse_threading)]
    pub(crate) threading: ThreadingFlag,
    /// Micro-batch: the batch interval (e.g. 100ms) [default: 100ms].
    #[arg(long, value_parser = humantime::parse_duration)]
    pub(crate) batch_interval: Option<Duration>,
    /// Micro-batch: per-batch (a scheduling round trip per stage and micro-batch), auto (group
    /// size tuned by AIMD) or G (micro-batches per scheduling decision) [default: auto].
    #[arg(long, value_parser = parse_group)]
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
    pub(crate) chaining: bool,
    /// Capacity of each channel, in tuples (at most 16777216).
    #[arg(long, default_value_t = EngineConfig::default().channel_capacity)]
    pub(crate) channel_capacity: usize,
    /// Tuples per channel batch (at most the channel capacity and 65536).
    #[arg(long, default_value_t = EngineConfig::default().batch_size)]
    pub(crate) batch_size: usize,
    /// A rate-limited source may wake up to this much after a tuple is due (never before), so that
    /// one wake-up carries the tuples due meanwhile (at most 8): fewer wake-ups at low rates, at
    /// most this much more latency (e.g. 1ms; 0, the default, wakes for each tuple; at most 1s).
    #[arg(long, default_value = "0s", value_parser = humantime::parse_duration)]
    pub(crate) source_slack: Duration,
    /// Serve /metrics and /topology on this address while running (e.g. 127.0.0.1:9464).
    #[arg(long)]
    pub(crate) metrics_addr: Option<SocketAddr>,
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

/// `--warmup`: a number (its range is checked with the rest of the settings); a duration given
/// instead is named as such.
/// An offered rate: tuples/s with an optional k/M/G suffix, as `moirai bench --rates` reads them,
/// or 0.
fn parse_offered_rate(s: &str) -> Result<f64, String> {
    if s.trim().parse::<f64>() == Ok(0.0) {
        return Ok(0.0);
    }
    moirai_bench::parse_rate(s).map_err(|e| format!("{e}, or 0 for as fast as the sources can"))
}

fn parse_share(s: &str) -> Result<f64, String> {
    s.trim().parse().map_err(|_| {
        format!("'{s}' is not a share of the run: give a number in [0, 0.9), e.g. 0.2 to discard the first 20 % of --duration")
    })
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

/// By default, the sources produce this long.
pub(crate) const DEFAULT_DURATION: Duration = Duration::from_secs(5);

impl EngineArgs {
    /// How long the sources produce; `None` when the run goes on until the input ends
    /// (`until_input_ends`, the workload's [`Workload::until_input_ends`](super::Workload::until_input_ends)).
    pub(crate) fn duration(&self, until_input_ends: bool) -> Option<Duration> {
        (!until_input_ends).then(|| self.duration.unwrap_or(DEFAULT_DURATION))
    }

    /// Micro-batch: the flag's settings (`micro-batch:group=10`), empty on the continuous engine.
    fn micro_batch_spec(&self) -> MicroBatchSpec {
        match &self.threading {
            ThreadingFlag::MicroBatch(s) => s.clone(),
            ThreadingFlag::Engine(_) => MicroBatchSpec::default(),
        }
    }

    /// Micro-batch: the interval — `--batch-interval`, else the flag's `interval=`, else 100 ms.
    pub(crate) fn batch_interval(&self) -> Duration {
        self.batch_interval.or(self.micro_batch_spec().interval).unwrap_or(Duration::from_millis(100))
    }

    /// Micro-batch: the group size — `--group`, else the flag's `group=`, else AIMD-tuned.
    pub(crate) fn group(&self) -> GroupFlag {
        self.group.or(self.micro_batch_spec().group).unwrap_or(GroupFlag::Auto)
    }

    /// Micro-batch: executor processes — `--executors`, else the flag's `executors=`, else 2.
    pub(crate) fn executors(&self) -> usize {
        self.executors.or(self.micro_batch_spec().executors).unwrap_or(2)
    }

    /// The engine flags every workload shares; the bounds are moirai_workloads::check's.
    pub(crate) fn check(&self, until_input_ends: bool) -> Result<(), String> {
        check_engine_args(self, self.duration(until_input_ends))
    }
}

fn check_engine_args(args: &EngineArgs, duration: Option<Duration>) -> Result<(), String> {
    use moirai_workloads::check;
    check::rate("--rate", args.rate)?;
    if let Some(to) = args.ramp_to {
        check::ramp_to("--ramp-to", to, args.rate)?;
    }
    if let Some(d) = duration {
        check::duration("--duration", d)?;
    }
    if let Some(over) = args.ramp_over {
        if over.is_zero() || duration.is_some_and(|d| over > d) {
            return Err(format!(
                "--ramp-over {} must be positive and at most the run's --duration",
                humantime::format_duration(over)
            ));
        }
    }
    if args.source_slack > moirai_engine::slack::MAX_SOURCE_SLACK {
        return Err(format!(
            "--source-slack {} must be at most 1s (e.g. 1ms, 500us, or 0 to wake for each tuple)",
            humantime::format_duration(args.source_slack)
        ));
    }
    if !(0.0..0.9).contains(&args.warmup) {
        return Err(format!("--warmup {} must be a share of the run in [0, 0.9)", args.warmup));
    }
    check::channel("--channel-capacity", args.channel_capacity, "--batch-size", args.batch_size)
}

#[cfg(test)]
mod tests {
    use super::parse_offered_rate;

    #[test]
    fn an_offered_rate_takes_the_suffixes_the_lab_takes_or_zero() {
        assert_eq!(parse_offered_rate("1.5M"), Ok(1.5e6));
        assert_eq!(parse_offered_rate("250k"), Ok(250e3));
        assert_eq!(parse_offered_rate("42000"), Ok(42e3));
        assert_eq!(parse_offered_rate("0"), Ok(0.0));
        let e = parse_offered_rate("-3").unwrap_err();
        assert!(e.contains("positive") && e.contains("or 0"), "{e}");
        let e = parse_offered_rate("fast").unwrap_err();
        assert!(e.contains("'fast' is not a number of tuples/s"), "{e}");
    }
}

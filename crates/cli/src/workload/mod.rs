//! The workloads of `moirai run`: each is one type implementing [`Workload`] — its name, its
//! flags, its parameters as the summary records them, its queries and what it checks after the
//! run, and its micro-batch job if it has one — listed once in [`Workloads`].
//!
//! To add a workload: a file here with its flags (a clap `Args` struct with `engine: EngineArgs`
//! flattened in) and `impl Workload`, and one variant in [`Workloads`]. `moirai run` executes it
//! on the continuous engine (`crate::run`) or as micro-batches (`crate::micro_batch`) without a
//! change there.

mod engine_args;
mod linear_road;
mod syn;
mod wordcount;
mod ysb;

use clap::Subcommand;
use moirai_engine::BuiltQuery;
use moirai_microbatch::{Job, RunReport};

pub(crate) use engine_args::DEFAULT_DURATION;
pub use engine_args::{EngineArgs, GroupFlag, ThreadingFlag};
pub(crate) use syn::syn_config;
pub use syn::SynArgs;
pub(crate) use wordcount::wordcount_config;
pub use wordcount::WordCountArgs;

/// What a workload measured or checked itself, read after the run (the summary's
/// `workload_stats`; its verdict under `check`).
pub type After = Box<dyn FnOnce() -> serde_json::Value>;

/// One workload of `moirai run`.
pub trait Workload {
    /// Its name on the command line and in the summary.
    fn name(&self) -> &'static str;

    /// The flags every workload shares.
    fn engine_args(&self) -> &EngineArgs;

    /// Whether the run lasts until the queries' input ends rather than for `--duration` (a file
    /// replayed to its end).
    fn until_input_ends(&self) -> bool {
        false
    }

    /// Checks the workload's own flags that only make sense together; the error names them.
    fn check(&self) -> Result<(), String> {
        Ok(())
    }

    /// The run's parameters, recorded at the top level of the summary.
    fn params(&self) -> serde_json::Value;

    /// Its queries on the continuous engine, and what to read from them after the run.
    fn queries(&self) -> Result<(Vec<BuiltQuery>, After), String>;

    /// The workload as Drizzle's micro-batches (`--threading micro-batch`); `None` if it does
    /// not run as them.
    fn micro_batch(&self) -> Option<Result<Box<dyn MicroBatch>, moirai_microbatch::Error>> {
        None
    }
}

/// A workload's micro-batch job: built alike by the driver and by every executor from the run's
/// own arguments, and judged by the driver when the run is over.
pub trait MicroBatch {
    /// The job the driver schedules.
    fn job(&self) -> &dyn Job;

    /// The job, for an executor to run.
    fn into_job(self: Box<Self>) -> Box<dyn Job>;

    /// The offered rate, tuples/s (0 for a finite input as fast as it goes).
    fn rate(&self) -> f64;

    /// After the run: the tuples that entered, the end-to-end latencies and the workload's own
    /// statistics with its check.
    fn finish(&self, report: &RunReport) -> Result<MicroBatchOutcome, moirai_microbatch::Error>;
}

/// What a micro-batch run gives its summary beyond the driver's report.
pub struct MicroBatchOutcome {
    /// Tuples that entered.
    pub tuples_in: u64,
    /// End-to-end latencies, ms, sorted (WordCount: each micro-batch's commit latency; YSB: each
    /// window's latency).
    pub e2e_ms: Vec<f64>,
    /// The summary's `workload_stats`.
    pub workload_stats: serde_json::Value,
}

/// The workloads, as `moirai run`'s subcommands: the one list of them.
#[derive(Subcommand)]
pub enum Workloads {
    /// Synthetic pipelines: source → N operators (CPU cost, selectivity) → sink.
    Syn(SynArgs),
    /// Linear Road: the faithful benchmark query, or the 9-operator shape of the Lachesis
    /// evaluation (--shape lachesis).
    #[command(name = "linear-road", alias = "lr")]
    LinearRoad(linear_road::LinearRoadArgs),
    /// WordCount (Hone): sentences split into words, counted per word, with shuffle, key or
    /// partial key grouping.
    #[command(name = "wordcount", alias = "wc")]
    WordCount(WordCountArgs),
    /// Yahoo Streaming Benchmark: JSON ad events, filter, join ad → campaign, 10 s windows.
    Ysb(ysb::YsbArgs),
}

impl Workloads {
    /// The workload chosen.
    pub fn workload(&self) -> &dyn Workload {
        match self {
            Workloads::Syn(a) => a,
            Workloads::LinearRoad(a) => a,
            Workloads::WordCount(a) => a,
            Workloads::Ysb(a) => a,
        }
    }
}

/// The summary's `extra`: the execution mode's own fields (`mode`, a JSON object), then the
/// workload's [`Workload::params`] where they do not repeat a field of the mode.
pub(crate) fn summary_extra(
    mode: serde_json::Value,
    workload: &dyn Workload,
) -> serde_json::Map<String, serde_json::Value> {
    let mut extra = serde_json::Map::new();
    for fields in [mode, workload.params()] {
        if let serde_json::Value::Object(fields) = fields {
            for (k, v) in fields {
                extra.entry(k).or_insert(v);
            }
        }
    }
    extra
}

/// `v` in ascending order.
pub(crate) fn sorted(mut v: Vec<f64>) -> Vec<f64> {
    v.sort_by(f64::total_cmp);
    v
}

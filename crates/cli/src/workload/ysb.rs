//! The Yahoo Streaming Benchmark: JSON ad events filtered, joined ad → campaign and counted in
//! 10 s windows; on the continuous engine or as Drizzle's micro-batches.

use clap::Args;
use moirai_engine::BuiltQuery;
use moirai_microbatch::{Job, QueryJob, RunReport};
use moirai_workloads::ysb::{self, YsbConfig, YsbHandle};

use moirai_contract::summary::Latency;

use super::{sorted, After, EngineArgs, MicroBatch, MicroBatchOutcome, Workload, DEFAULT_DURATION};

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

impl Workload for YsbArgs {
    fn name(&self) -> &'static str {
        "ysb"
    }

    fn engine_args(&self) -> &EngineArgs {
        &self.engine
    }

    fn params(&self) -> serde_json::Value {
        serde_json::json!({
            "parallelism": self.parallelism, "campaigns": self.campaigns, "events": self.events,
            "window_ms": self.window_ms, "seed": self.seed,
        })
    }

    fn queries(&self) -> Result<(Vec<BuiltQuery>, After), String> {
        let (queries, handle) = ysb::queries(&ysb_config(self)).map_err(|e| e.to_string())?;
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
        Ok((queries, after))
    }

    fn micro_batch(&self) -> Option<Result<Box<dyn MicroBatch>, moirai_microbatch::Error>> {
        Some(self.job().map(|job| Box::new(job) as Box<dyn MicroBatch>))
    }
}

/// YSB's query as a micro-batch job, with the handle to its output.
struct YsbJob {
    job: QueryJob,
    handle: YsbHandle,
    config: YsbConfig,
}

impl YsbArgs {
    /// YSB's query as a micro-batch job. Its events are scheduled from time 0 so that every
    /// process regenerates the same ones.
    fn job(&self) -> Result<YsbJob, moirai_microbatch::Error> {
        use moirai_microbatch::Error;
        if self.engine.single_stage {
            return Err(Error::Config("--single-stage is WordCount's; YSB's stages are its query's".into()));
        }
        if self.engine.ramp_to.is_some() {
            return Err(Error::Config(
                "--ramp-to: YSB's events carry event times drawn at the constant --rate, so micro-batch mode runs \
                 it at a constant rate; drop --ramp-to (WordCount ramps in micro-batch mode)"
                    .into(),
            ));
        }
        let mut config = ysb_config(self);
        config.origin_ns = Some(0);
        let (mut queries, handle) = ysb::queries(&config).map_err(|e| Error::Config(e.to_string()))?;
        let query = queries.pop().ok_or_else(|| Error::Config("YSB built no query".into()))?;
        let tuples = (config.events > 0).then_some(config.events);
        let length = self.engine.duration.unwrap_or(DEFAULT_DURATION);
        let job = QueryJob::new(query, self.engine.batch_interval(), tuples, length)?;
        Ok(YsbJob { job, handle, config })
    }
}

impl MicroBatch for YsbJob {
    fn job(&self) -> &dyn Job {
        &self.job
    }

    fn into_job(self: Box<Self>) -> Box<dyn Job> {
        Box::new(self.job)
    }

    fn rate(&self) -> f64 {
        self.job.rate()
    }

    /// The query's sink runs in the driver's process, fed the committed window results in
    /// micro-batch order; each window's latency.
    fn finish(&self, report: &RunReport) -> Result<MicroBatchOutcome, moirai_microbatch::Error> {
        use moirai_microbatch::Error;
        let mut sink = self.job.sink();
        for (_, output) in report.output_values() {
            let values = output.as_array().cloned().unwrap_or_default();
            sink.push(values).map_err(|e| Error::Protocol(e.to_string()))?;
        }
        sink.finish();
        let (latency, early) = window_latency(report, self.job.interval_ms());
        let check = match self.handle.check() {
            Ok(()) => "window counts equal a naive count".to_string(),
            Err(e) => e.to_string(),
        };
        let tuples_in = if self.config.events > 0 {
            self.config.events
        } else {
            (self.config.rate * report.batches as f64 * self.job.interval_ms() as f64 / 1e3) as u64
        };
        Ok(MicroBatchOutcome {
            tuples_in,
            workload_stats: serde_json::json!({
                "window_latency_ms": Latency::of_sorted(&latency),
                "windows_closed_early": early,
                "windows": self.handle.window_counts().len(),
                "check": check,
            }),
            e2e_ms: latency,
        })
    }
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

//! WordCount (Hone's workload): sentences split into words and counted per word, with shuffle, key
//! or partial key grouping, optionally over Hone's tuple scheduler; on the continuous engine or as
//! Drizzle's micro-batches.

use std::path::PathBuf;
use std::time::Duration;

use clap::Args;
use moirai_engine::BuiltQuery;
use moirai_microbatch::{Job, RunReport, WordCountJob};
use moirai_workloads::wordcount::{self, WordCountConfig};

use super::{sorted, After, EngineArgs, MicroBatch, MicroBatchOutcome, Workload, DEFAULT_DURATION};

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

impl Workload for WordCountArgs {
    fn name(&self) -> &'static str {
        "wordcount"
    }

    fn engine_args(&self) -> &EngineArgs {
        &self.engine
    }

    fn params(&self) -> serde_json::Value {
        serde_json::json!({
            "grouping": format!("{:?}", self.grouping), "parallelism": self.parallelism, "sentences": self.sentences,
            "vocabulary": self.vocabulary, "zipf": self.zipf, "seed": self.seed, "text": self.text,
            "window_ms": self.window_ms, "hone": wordcount_config(self).ok().and_then(|c| c.exchange),
            "sentence_variance": self.sentence_variance, "straggler": self.straggler,
        })
    }

    fn queries(&self) -> Result<(Vec<BuiltQuery>, After), String> {
        let (queries, handle) = wordcount::queries(&wordcount_config(self)?).map_err(|e| e.to_string())?;
        let after: After = Box::new(move || {
            let loads = handle.instance_loads();
            let check = match handle.check() {
                Ok(()) => "counts equal a naive count".to_string(),
                Err(e) => e.to_string(),
            };
            serde_json::json!({ "distinct_words": handle.counts().len(), "count_instance_loads": loads, "check": check })
        });
        Ok((queries, after))
    }

    fn micro_batch(&self) -> Option<Result<Box<dyn MicroBatch>, moirai_microbatch::Error>> {
        Some(self.job().map(|job| Box::new(job) as Box<dyn MicroBatch>))
    }
}

impl WordCountArgs {
    /// WordCount as Drizzle's micro-batch job (map tasks split and count per window, reduce tasks
    /// merge the counts), with the flags' interval, length and ramp.
    fn job(&self) -> Result<WordCountJob, moirai_microbatch::Error> {
        use moirai_microbatch::Error;
        let config = wordcount_config(self).map_err(Error::Config)?;
        let length = self.engine.duration.unwrap_or(DEFAULT_DURATION);
        let endless = if config.sentences > 0 { None } else { Some(length) };
        let ramp = self.engine.ramp_to.map(|to| (to, length));
        let job = WordCountJob::with_ramp(config, self.engine.batch_interval(), endless, ramp)?;
        Ok(if self.engine.single_stage { job.single_stage() } else { job })
    }
}

impl MicroBatch for WordCountJob {
    fn job(&self) -> &dyn Job {
        self
    }

    fn into_job(self: Box<Self>) -> Box<dyn Job> {
        self
    }

    fn rate(&self) -> f64 {
        WordCountJob::rate(self)
    }

    /// The counts checked against a naive count; each micro-batch's commit latency.
    fn finish(&self, report: &RunReport) -> Result<MicroBatchOutcome, moirai_microbatch::Error> {
        let check = match self.check(&report.counts()) {
            Ok(()) => "counts equal a naive count".to_string(),
            Err(e) => e,
        };
        Ok(MicroBatchOutcome {
            tuples_in: self.sentences_total(),
            e2e_ms: sorted(report.commit_ms.clone()),
            workload_stats: serde_json::json!({ "distinct_words": report.counts().len(), "check": check }),
        })
    }
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

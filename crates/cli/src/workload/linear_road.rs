//! Linear Road: the benchmark's faithful query (or the Lachesis evaluation's 9-operator shape),
//! on moirai's generator or the benchmark generator's files.

use std::path::PathBuf;
use std::time::Duration;

use clap::Args;
use moirai_engine::BuiltQuery;
use moirai_workloads::linear_road::{self, LinearRoadConfig};

use super::{After, EngineArgs, Workload};

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

impl LinearRoadArgs {
    /// The query's configuration the flags ask for.
    fn config(&self) -> LinearRoadConfig {
        LinearRoadConfig {
            traffic: linear_road::generator::GeneratorConfig {
                xways: self.xways,
                duration_s: self.traffic.as_secs().min(u32::MAX as u64) as u32,
                seed: self.seed,
                cars_per_second: self.cars_per_second,
                ..Default::default()
            },
            rate: self.engine.rate,
            replay_speed: self.replay_speed,
            parallelism: self.parallelism,
            input: self.input.clone(),
            output: self.output.clone(),
            shape: self.shape,
            rules: self.rules,
            history: match &self.historical_tolls {
                Some(p) if p.as_os_str() == "seeded" => linear_road::HistorySource::Seeded,
                Some(p) => linear_road::HistorySource::File(p.clone()),
                None => linear_road::HistorySource::Default,
            },
            ..LinearRoadConfig::default()
        }
    }
}

impl Workload for LinearRoadArgs {
    fn name(&self) -> &'static str {
        "linear-road"
    }

    fn engine_args(&self) -> &EngineArgs {
        &self.engine
    }

    /// A file runs to its end unless --duration is given: the run ends when the source does, and
    /// is measured whole (there is no warm-up to cut).
    fn until_input_ends(&self) -> bool {
        self.input.is_some() && self.engine.duration.is_none()
    }

    fn check(&self) -> Result<(), String> {
        check_linear_road(self)
    }

    fn params(&self) -> serde_json::Value {
        serde_json::json!({
            "shape": self.shape.to_string(), "xways": self.xways, "traffic_s": self.config().traffic.duration_s,
            "cars_per_second": self.cars_per_second, "parallelism": self.parallelism, "seed": self.seed,
            "input": self.input, "output": self.output, "replay_speed": self.replay_speed, "rules": self.rules,
            "historical_tolls": self.historical_tolls,
            "run_until": if self.until_input_ends() { "the input ends" } else { "--duration" },
        })
    }

    fn queries(&self) -> Result<(Vec<BuiltQuery>, After), String> {
        let (queries, stats) = linear_road::queries(&self.config()).map_err(|e| e.to_string())?;
        let input = self.input.clone();
        if let (Some(path), Some(0)) = (&input, stats.report().records_total) {
            eprintln!(
                "moirai: warning: {} holds no Linear Road records (only blank lines or a header): nothing to replay",
                path.display()
            );
        }
        let duration = self.engine.duration(self.until_input_ends());
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
        Ok((queries, after))
    }
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

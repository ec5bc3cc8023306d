//! `moirai l-rating`: Linear Road's L-rating on this machine — the largest number of expressways
//! whose every answer comes out within the benchmark's limits, replayed at the records' clock.
//!
//! The search and the trial live in `moirai_workloads::linear_road::l_rating`; this file parses
//! the flags, runs each trial as a child process of its own (`moirai l-rating --trial L …`, which
//! prints the trial's report as one JSON line), prints the table and writes the trials to
//! `--out`.

use std::fmt::Write as _;
use std::path::PathBuf;
use std::process::{Command, Stdio};
use std::time::Duration;

use clap::Args;
use moirai_engine::{EngineConfig, Threading};
use moirai_workloads::linear_road::l_rating::{self, RatingConfig, TrialReport, BENCHMARK_PEAK_REPORTS_PER_S};

#[derive(Args, Debug, Clone)]
pub struct LRatingArgs {
    /// Threading model of the engine: dedicated, dynamic[:N], elastic[:MIN-MAX], fused,
    /// policy:NAME[:N] (see docs/threading.md).
    #[arg(long, default_value = "dedicated")]
    threading: Threading,
    /// Instances of each keyed stage of the query.
    #[arg(long, default_value_t = 1)]
    parallelism: usize,
    /// Fuse forward-connected operators onto one thread.
    #[arg(long)]
    chaining: bool,
    /// Capacity of each channel, tuples.
    #[arg(long, default_value_t = EngineConfig::default().channel_capacity)]
    channel_capacity: usize,
    /// Tuples per channel batch.
    #[arg(long, default_value_t = EngineConfig::default().batch_size)]
    batch_size: usize,
    /// The first L the search tries; it doubles while trials pass, then bisects.
    #[arg(long, default_value_t = 1)]
    from: u16,
    /// The largest L the search tries.
    #[arg(long, default_value_t = 1024)]
    max: u16,
    /// The search stops bisecting when the largest passing L and the smallest failing L are at
    /// most this far apart (1: the failure is at L + 1, the exact rating).
    #[arg(long, default_value_t = 1)]
    resolution: u16,
    /// Run these L only (e.g. 40,41), no search.
    #[arg(long, value_delimiter = ',')]
    at: Vec<u16>,
    /// Cars entering each expressway per second (steadily).
    #[arg(long, default_value_t = RatingConfig::default().cars_per_second)]
    cars_per_second: f64,
    /// Traffic the generator simulates without replaying it: the road fills up (0 to build the
    /// whole day's state by fast-forwarding it).
    #[arg(long, default_value = "75m", value_parser = humantime::parse_duration)]
    skip: Duration,
    /// Traffic after the skipped part replayed as fast as the engine takes it, to build the state.
    #[arg(long, default_value = "5m", value_parser = humantime::parse_duration)]
    fast_forward: Duration,
    /// Traffic at the records' clock after the fast-forward whose answers are not judged.
    #[arg(long, default_value = "1m", value_parser = humantime::parse_duration)]
    lead_in: Duration,
    /// Traffic at the records' clock whose every answer must be within its limit.
    #[arg(long, default_value = "10m", value_parser = humantime::parse_duration)]
    judged: Duration,
    /// Seed of the generator and the historical tolls.
    #[arg(long, default_value_t = 0)]
    seed: u64,
    /// validator (the benchmark validator's answers) or moirai.
    #[arg(long, default_value = "validator")]
    rules: moirai_workloads::linear_road::Rules,
    /// Write trials.json and trials.csv here.
    #[arg(long)]
    out: Option<PathBuf>,
    /// Run each trial's process under this command (e.g. a lock that gives the machine to one
    /// benchmark at a time, or `taskset -c 0,1`): the trial runs as `WRAP… moirai l-rating
    /// --trial L …`. Split at spaces.
    #[arg(long, value_name = "COMMAND")]
    wrap: Option<String>,
    /// Run one trial of L expressways in this process and print its report as JSON.
    #[arg(long, hide = true)]
    trial: Option<u16>,
}

impl LRatingArgs {
    fn rating(&self) -> Result<RatingConfig, String> {
        let secs = |d: Duration, flag: &str| -> Result<u32, String> {
            u32::try_from(d.as_secs()).ok().filter(|&s| s < 30 * 86_400).ok_or(format!("{flag} is too long"))
        };
        let c = RatingConfig {
            cars_per_second: self.cars_per_second,
            skip_s: secs(self.skip, "--skip")?,
            fast_forward_s: secs(self.fast_forward, "--fast-forward")?,
            lead_in_s: secs(self.lead_in, "--lead-in")?,
            judged_s: secs(self.judged, "--judged")?,
            seed: self.seed,
            parallelism: self.parallelism,
            rules: self.rules,
        };
        c.validate()?;
        moirai_workloads::check::channel("--channel-capacity", self.channel_capacity, "--batch-size", self.batch_size)?;
        if self.at.contains(&0) || self.from == 0 || self.max == 0 || self.resolution == 0 {
            return Err("L counts expressways: --from, --max, --resolution and --at must be at least 1".into());
        }
        Ok(c)
    }

    fn engine(&self) -> EngineConfig {
        EngineConfig {
            threading: self.threading.clone(),
            chaining: self.chaining,
            channel_capacity: self.channel_capacity,
            batch_size: self.batch_size,
            ..EngineConfig::default()
        }
    }

    /// The arguments of a child process running the trial of `xways`.
    fn trial_args(&self, xways: u16) -> Vec<String> {
        let mut args = vec![
            "l-rating".to_string(),
            "--trial".into(),
            xways.to_string(),
            "--threading".into(),
            self.threading.to_string(),
            "--parallelism".into(),
            self.parallelism.to_string(),
            "--channel-capacity".into(),
            self.channel_capacity.to_string(),
            "--batch-size".into(),
            self.batch_size.to_string(),
            "--cars-per-second".into(),
            self.cars_per_second.to_string(),
            "--skip".into(),
            format!("{}s", self.skip.as_secs()),
            "--fast-forward".into(),
            format!("{}s", self.fast_forward.as_secs()),
            "--lead-in".into(),
            format!("{}s", self.lead_in.as_secs()),
            "--judged".into(),
            format!("{}s", self.judged.as_secs()),
            "--seed".into(),
            self.seed.to_string(),
            "--rules".into(),
            self.rules.to_string(),
        ];
        if self.chaining {
            args.push("--chaining".into());
        }
        args
    }
}

pub fn run(a: LRatingArgs) -> i32 {
    let config = match a.rating() {
        Ok(c) => c,
        Err(e) => {
            eprintln!("moirai l-rating: {e}");
            return 2;
        }
    };
    if let Some(xways) = a.trial {
        return match l_rating::run_trial(&config, xways, a.engine()) {
            Ok(report) => {
                println!("{}", serde_json::to_string(&report).unwrap_or_default());
                0
            }
            Err(e) => {
                eprintln!("moirai l-rating: trial of {xways} expressways: {e}");
                1
            }
        };
    }
    let exe = match std::env::current_exe() {
        Ok(e) => e,
        Err(e) => {
            eprintln!("moirai l-rating: cannot find the moirai binary itself: {e}");
            return 1;
        }
    };
    println!(
        "moirai l-rating: {} cars/s per expressway entering steadily; {} s of traffic skipped, {} s fast-forwarded, \
         then at the records' clock {} s of lead-in and {} s judged; threading {}, parallelism {}, chaining {}, {} \
         rules",
        config.cars_per_second,
        config.skip_s,
        config.fast_forward_s,
        config.lead_in_s,
        config.judged_s,
        a.threading,
        a.parallelism,
        a.chaining,
        config.rules
    );
    println!("{}", header());
    let mut trials: Vec<TrialReport> = Vec::new();
    let mut run_one = |xways: u16| -> Result<bool, String> {
        let report = trial(&exe, &a, xways)?;
        println!("{}", row(&report));
        let passed = report.passed;
        trials.push(report);
        Ok(passed)
    };
    let rating = if a.at.is_empty() {
        match l_rating::search(a.from, a.max, a.resolution, &mut run_one) {
            Ok(r) => Some(r),
            Err(e) => {
                eprintln!("moirai l-rating: {e}");
                return 1;
            }
        }
    } else {
        for &xways in &a.at {
            if let Err(e) = run_one(xways) {
                eprintln!("moirai l-rating: {e}");
                return 1;
            }
        }
        None
    };
    if let Some(r) = &rating {
        let above = match r.failed_at {
            Some(f) => format!("; at L = {f}: {}", failure(&trials, f)),
            None => format!(" (the search's maximum, --max {}: the rating may be higher)", a.max),
        };
        println!("L-rating {}: every answer within its limit at L = {}{above}", r.rating, r.rating);
        for l in [Some(r.rating), r.failed_at].into_iter().flatten().filter(|&l| l > 0) {
            if let Some(t) = trials.iter().rev().find(|t| t.xways == l) {
                println!("{}", distribution(t));
            }
        }
    }
    if let Some(out) = &a.out {
        if let Err(e) = write_out(out, &a, &config, &trials, rating.as_ref()) {
            eprintln!("moirai l-rating: cannot write to {}: {e}", out.display());
            return 1;
        }
    }
    0
}

/// Runs the trial of `xways` in a child process and reads its report.
fn trial(exe: &std::path::Path, a: &LRatingArgs, xways: u16) -> Result<TrialReport, String> {
    let wrap: Vec<&str> = a.wrap.as_deref().map_or(Vec::new(), |w| w.split_whitespace().collect());
    let mut command = match wrap.split_first() {
        Some((first, rest)) => {
            let mut c = Command::new(first);
            c.args(rest).arg(exe);
            c
        }
        None => Command::new(exe),
    };
    let out = command
        .args(a.trial_args(xways))
        .stdin(Stdio::null())
        .stderr(Stdio::inherit())
        .output()
        .map_err(|e| format!("cannot start the trial of {xways} expressways: {e}"))?;
    let text = String::from_utf8_lossy(&out.stdout);
    let last = text.lines().last().unwrap_or("");
    match serde_json::from_str::<TrialReport>(last) {
        Ok(report) if out.status.success() => Ok(report),
        // A trial that dies (killed for memory, say) failed at this L.
        _ => Ok(TrialReport {
            xways,
            passed: false,
            failure: Some(format!("the trial's process failed ({}): {}", out.status, last.trim())),
            responses: Default::default(),
            records: 0,
            judged_reports_per_s_per_xway: 0.0,
            skip_s: 0.0,
            fast_forward_s: 0.0,
            fast_forward_records_per_s: 0.0,
            wall_s: 0.0,
            rss_start_bytes: 0,
            rss_after_fast_forward_bytes: 0,
            rss_peak_bytes: 0,
            cars: 0,
            cpu_cores_judged: 0.0,
            timeline: Vec::new(),
        }),
    }
}

fn header() -> String {
    format!(
        "{:>5}  {:<7} {:>11} {:>10} {:>10} {:>10} {:>10} {:>12} {:>9} {:>9} {:>7}",
        "L",
        "verdict",
        "reports/s/L",
        "toll worst",
        "alert",
        "balance",
        "expend.",
        "ff records/s",
        "RSS ff",
        "RSS peak",
        "CPU"
    )
}

fn row(t: &TrialReport) -> String {
    let worst = |i: usize| t.responses.kinds.get(i).map_or("-".to_string(), |k| format!("{:.2} s", k.worst_ms / 1e3));
    let gib = |b: u64| format!("{:.2} GiB", b as f64 / (1u64 << 30) as f64);
    let mut s = format!(
        "{:>5}  {:<7} {:>11.0} {:>10} {:>10} {:>10} {:>10} {:>12.0} {:>9} {:>9} {:>7.2}",
        t.xways,
        if t.passed { "in time" } else { "late" },
        t.judged_reports_per_s_per_xway,
        worst(0),
        worst(1),
        worst(2),
        worst(3),
        t.fast_forward_records_per_s,
        gib(t.rss_after_fast_forward_bytes),
        gib(t.rss_peak_bytes),
        t.cpu_cores_judged
    );
    if let Some(f) = &t.failure {
        let _ = write!(s, "  {f}");
    }
    if t.passed && t.judged_reports_per_s_per_xway < BENCHMARK_PEAK_REPORTS_PER_S {
        let _ = write!(
            s,
            "  (lighter than the benchmark generator's heaviest minute, {BENCHMARK_PEAK_REPORTS_PER_S} reports/s)"
        );
    }
    s
}

fn failure(trials: &[TrialReport], xways: u16) -> String {
    trials.iter().rev().find(|t| t.xways == xways).and_then(|t| t.failure.clone()).unwrap_or_default()
}

/// The response-time distribution of a trial, per output type.
fn distribution(t: &TrialReport) -> String {
    let mut s = format!("  L = {} ({}):", t.xways, if t.passed { "in time" } else { "late" });
    for k in &t.responses.kinds {
        let _ = write!(
            s,
            "\n    {:<20} {:>9} answers, {:>6.2} % within {} s; p50 {:.1} ms, p99 {:.1} ms, p99.9 {:.1} ms, worst {:.1} ms",
            k.output,
            k.answers,
            k.share_within * 100.0,
            k.limit_s,
            k.p50_ms,
            k.p99_ms,
            k.p999_ms,
            k.worst_ms
        );
    }
    s
}

fn write_out(
    out: &std::path::Path,
    a: &LRatingArgs,
    config: &RatingConfig,
    trials: &[TrialReport],
    rating: Option<&l_rating::Rating>,
) -> std::io::Result<()> {
    std::fs::create_dir_all(out)?;
    let json = serde_json::json!({
        "threading": a.threading.to_string(), "parallelism": a.parallelism, "chaining": a.chaining,
        "config": config, "rating": rating, "trials": trials,
    });
    std::fs::write(out.join("trials.json"), serde_json::to_string_pretty(&json).unwrap_or_default())?;
    let mut csv = String::from(
        "xways,passed,output,answers,within_limit,share_within,p50_ms,p99_ms,p999_ms,worst_ms,\
         judged_reports_per_s_per_xway,fast_forward_records_per_s,rss_after_fast_forward_bytes,rss_peak_bytes,cars,\
         cpu_cores_judged\n",
    );
    for t in trials {
        for k in &t.responses.kinds {
            let _ = writeln!(
                csv,
                "{},{},{},{},{},{},{},{},{},{},{},{},{},{},{},{}",
                t.xways,
                t.passed,
                k.output,
                k.answers,
                k.within_limit,
                k.share_within,
                k.p50_ms,
                k.p99_ms,
                k.p999_ms,
                k.worst_ms,
                t.judged_reports_per_s_per_xway,
                t.fast_forward_records_per_s,
                t.rss_after_fast_forward_bytes,
                t.rss_peak_bytes,
                t.cars,
                t.cpu_cores_judged
            );
        }
    }
    std::fs::write(out.join("trials.csv"), csv)
}

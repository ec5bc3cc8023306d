//! The L-rating: the largest number of expressways L for which every answer of every type comes
//! out within the benchmark's limit while the input is replayed at its own clock.
//!
//! A trial runs L expressways of moirai's generator with the benchmark's records (position
//! reports, account-balance and daily-expenditure queries after 1 % of them, 10 % of the cars
//! coming back; historical tolls from the seeded table), produced as fast as the engine takes
//! them. The benchmark's three hours are shortened, and the trial says so in its report: cars
//! enter at a steady rate; the generator simulates the first `skip_s` seconds of traffic without
//! emitting them (the road fills up); the next `fast_forward_s` seconds are replayed as fast as
//! the engine takes them (they build the state the judged stretch runs on: every car on the road
//! reports in them, the segments' last five minutes, the accidents in progress); then the
//! records are replayed at their own clock (`--replay-speed 1.0`): `lead_in_s` seconds whose
//! answers are not judged (the engine catches up with the fast-forward), then `judged_s` seconds
//! whose every answer must meet its limit. With `skip_s` 0 the fast-forward builds the whole
//! state of the day so far, the accounts of the cars that left included (slower, and what the
//! memory figures are measured with). The default traffic carries, in the judged stretch, at
//! least the benchmark generator's heaviest minute per expressway (2 867 position reports per
//! second in a 3-hour file of Walmart's LinearGenerator), and each trial reports what its judged
//! stretch carried.
//!
//! The search ([`search`]) doubles L from `from` while trials pass, then bisects between the
//! last pass and the first failure: it ends with a passing L and a failing L + 1, both run. Each
//! trial is a separate process in the CLI (`moirai l-rating`), so that one trial's memory does not
//! carry into the next; [`run_trial`] is one trial in this process.

use std::time::{Duration, Instant};

use moirai_engine::{Engine, EngineConfig};
use serde::{Deserialize, Serialize};

use super::generator::GeneratorConfig;
use super::response::{ResponseReport, SecondWorst};
use super::rules::Rules;
use super::{queries, HistorySource, LinearRoadConfig, LinearRoadError};

/// The benchmark generator's heaviest minute, position reports per second and expressway (a
/// 3-hour, 1-expressway file of Walmart's LinearGenerator, minute 117).
pub const BENCHMARK_PEAK_REPORTS_PER_S: f64 = 2867.0;

/// A trial stops early once an answer is this late: it has failed, and its backlog would take as
/// long again to drain.
const ABORT_LATENCY_NS: u64 = 60_000_000_000;

/// How the L-rating's traffic is made and replayed.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct RatingConfig {
    /// Cars entering each expressway per second (steadily).
    pub cars_per_second: f64,
    /// Seconds of traffic simulated by the generator but not replayed.
    pub skip_s: u32,
    /// Seconds of traffic (after the skipped ones) replayed as fast as the engine takes them.
    pub fast_forward_s: u32,
    /// Seconds at the records' clock whose answers are not judged.
    pub lead_in_s: u32,
    /// Seconds at the records' clock whose every answer must be in time.
    pub judged_s: u32,
    /// Seed of the generator and the historical tolls.
    pub seed: u64,
    /// Instances of each keyed stage.
    pub parallelism: usize,
    /// The rules the query follows.
    pub rules: Rules,
}

impl Default for RatingConfig {
    /// 23 cars per second and expressway; 75 minutes skipped, 5 fast-forwarded, one minute of
    /// lead-in, ten judged minutes: the judged stretch carries about 2 900 reports per second and
    /// expressway.
    fn default() -> Self {
        RatingConfig {
            cars_per_second: 23.0,
            skip_s: 75 * 60,
            fast_forward_s: 5 * 60,
            lead_in_s: 60,
            judged_s: 600,
            seed: 0,
            parallelism: 1,
            rules: Rules::Validator,
        }
    }
}

impl RatingConfig {
    /// The time from which answers are judged.
    pub fn judge_from_s(&self) -> u32 {
        self.skip_s + self.fast_forward_s + self.lead_in_s
    }

    /// The Linear Road run of a trial with `xways` expressways.
    pub fn linear_road(&self, xways: u16) -> LinearRoadConfig {
        LinearRoadConfig {
            traffic: GeneratorConfig {
                xways,
                duration_s: self.judge_from_s() + self.judged_s,
                seed: self.seed,
                cars_per_second: self.cars_per_second,
                queries: true,
                reentry: true,
                steady: true,
                start_s: self.skip_s,
                ..GeneratorConfig::default()
            },
            replay_speed: Some(1.0),
            fast_forward_s: Some(self.skip_s + self.fast_forward_s),
            judge_from_s: self.judge_from_s(),
            parallelism: self.parallelism,
            rules: self.rules,
            history: HistorySource::Seeded,
            ..LinearRoadConfig::default()
        }
    }

    /// Checks the parameters; the message names what to change.
    pub fn validate(&self) -> Result<(), String> {
        if self.judged_s == 0 {
            return Err("the judged stretch must last at least 1 s".into());
        }
        self.linear_road(1).validate().map_err(|e| e.to_string())
    }
}

/// What one trial measured.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct TrialReport {
    /// Expressways.
    pub xways: u16,
    /// Every judged answer in time (and the run complete).
    pub passed: bool,
    /// Why it failed, if it did.
    pub failure: Option<String>,
    /// Response times of the judged answers, per output type.
    pub responses: ResponseReport,
    /// Records that entered the query.
    pub records: u64,
    /// Position reports at or after the judged stretch's start, per second and expressway.
    pub judged_reports_per_s_per_xway: f64,
    /// Wall time the generator took to simulate the skipped traffic, s.
    pub skip_s: f64,
    /// Wall time of the fast-forward, s.
    pub fast_forward_s: f64,
    /// Records per second while fast-forwarding.
    pub fast_forward_records_per_s: f64,
    /// Wall time of the whole trial, s.
    pub wall_s: f64,
    /// Resident memory before the engine started, after the fast-forward, and at its peak, bytes.
    pub rss_start_bytes: u64,
    /// After the fast-forward (the state built).
    pub rss_after_fast_forward_bytes: u64,
    /// The largest sampled.
    pub rss_peak_bytes: u64,
    /// Distinct cars seen.
    pub cars: u64,
    /// CPU of the whole process over the judged stretch, in cores.
    pub cpu_cores_judged: f64,
    /// Per judged second of the records' clock: the worst response time of each output type
    /// and the longest a record waited at the source (where in the traffic answers were late).
    #[serde(default)]
    pub timeline: Vec<SecondWorst>,
}

/// Runs one trial of `xways` expressways in this process on an engine configured by `engine`.
pub fn run_trial(config: &RatingConfig, xways: u16, engine: EngineConfig) -> Result<TrialReport, LinearRoadError> {
    let lr = config.linear_road(xways);
    let (queries, stats) = queries(&lr)?;
    let pid = std::process::id();
    let rss = || moirai_os::proc::process_rss_bytes(pid).unwrap_or(0);
    let cpu = || moirai_os::proc::process_cpu_ns(pid).unwrap_or(0);
    let rss_start = rss();
    let started = Instant::now();
    let engine = Engine::start(engine, queries).map_err(|e| LinearRoadError::Run(e.to_string()))?;
    let (mut rss_peak, mut rss_ff, mut cpu_judged_from) = (rss_start, None, None);
    let mut aborted = false;
    while !engine.is_finished() {
        std::thread::sleep(Duration::from_millis(250));
        let now = rss();
        rss_peak = rss_peak.max(now);
        if let Some(ff_end) = stats.fast_forward_ended() {
            rss_ff.get_or_insert(now);
            if cpu_judged_from.is_none() && ff_end.elapsed() >= Duration::from_secs(config.lead_in_s as u64) {
                cpu_judged_from = Some((cpu(), Instant::now()));
            }
        }
        if stats.worst_response_ns() > ABORT_LATENCY_NS {
            aborted = true;
            engine.stop();
            break;
        }
    }
    let cpu_judged = cpu_judged_from
        .map_or(0.0, |(c, at)| cpu().saturating_sub(c) as f64 / 1e9 / at.elapsed().as_secs_f64().max(1e-9));
    engine.wait().map_err(|e| LinearRoadError::Run(e.to_string()))?;
    let wall_s = started.elapsed().as_secs_f64();
    let report = stats.finish()?;
    let responses: ResponseReport = report.response_times.clone();
    let first = stats.first_record().unwrap_or(started);
    let ff_wall = stats.fast_forward_ended().map_or(0.0, |at| at.saturating_duration_since(first).as_secs_f64());
    let mut failure = None;
    if aborted {
        failure = Some(format!("stopped: an answer was more than {} s late", ABORT_LATENCY_NS / 1_000_000_000));
    } else if !responses.all_in_time {
        let late: Vec<String> = responses
            .kinds
            .iter()
            .filter(|k| k.within_limit < k.answers)
            .map(|k| {
                format!(
                    "{} of {} {} late (worst {:.2} s)",
                    k.answers - k.within_limit,
                    k.answers,
                    k.output,
                    k.worst_ms / 1e3
                )
            })
            .collect();
        failure = Some(late.join(", "));
    } else if responses.answers == 0 {
        failure = Some("no answer was judged".into());
    }
    Ok(TrialReport {
        xways,
        passed: failure.is_none(),
        failure,
        responses,
        records: report.records_read,
        judged_reports_per_s_per_xway: stats.judged_reports() as f64 / config.judged_s as f64 / xways as f64,
        skip_s: first.saturating_duration_since(started).as_secs_f64(),
        fast_forward_s: ff_wall,
        fast_forward_records_per_s: if ff_wall > 0.0 { stats.fast_forward_records() as f64 / ff_wall } else { 0.0 },
        wall_s,
        rss_start_bytes: rss_start,
        rss_after_fast_forward_bytes: rss_ff.unwrap_or(0),
        rss_peak_bytes: rss_peak,
        cars: stats.cars(),
        cpu_cores_judged: cpu_judged,
        timeline: stats.response_timeline(),
    })
}

/// The trials a search ran and what it found.
#[derive(Clone, Debug, Default, PartialEq, Serialize)]
pub struct Rating {
    /// The largest L that passed (0 if none did).
    pub rating: u16,
    /// The smallest L above it that failed (`None` if the search reached its maximum passing).
    pub failed_at: Option<u16>,
    /// Every trial, in the order run: (L, passed).
    pub trials: Vec<(u16, bool)>,
}

/// Finds the largest passing L in `1..=max`: doubles from `from` while `trial(L)` passes, then
/// bisects between the last pass and the first failure until they are at most `resolution` apart
/// (1: the failure is at L + 1). `trial` returns whether L passed.
pub fn search<E>(
    from: u16,
    max: u16,
    resolution: u16,
    mut trial: impl FnMut(u16) -> Result<bool, E>,
) -> Result<Rating, E> {
    let mut rating = Rating::default();
    let max = max.max(1);
    let resolution = resolution.max(1);
    let (mut pass, mut fail) = (0u16, None::<u16>);
    let mut l = from.clamp(1, max);
    loop {
        let passed = trial(l)?;
        rating.trials.push((l, passed));
        if passed {
            pass = l;
        } else {
            fail = Some(l);
        }
        l = match fail {
            None if pass >= max => break,
            None => pass.saturating_mul(2).min(max),
            Some(f) if f - pass <= resolution => break,
            Some(f) => pass + (f - pass) / 2,
        };
    }
    rating.rating = pass;
    rating.failed_at = fail;
    Ok(rating)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn searched(capacity: u16, from: u16, max: u16) -> Rating {
        search::<()>(from, max, 1, |l| Ok(l <= capacity)).unwrap()
    }

    #[test]
    fn the_search_ends_with_a_pass_and_the_failure_one_above() {
        let r = searched(150, 1, 1000);
        assert_eq!((r.rating, r.failed_at), (150, Some(151)));
        let ls: Vec<u16> = r.trials.iter().map(|t| t.0).collect();
        assert_eq!(&ls[..9], &[1, 2, 4, 8, 16, 32, 64, 128, 256]);
        assert!(r.trials.contains(&(150, true)) && r.trials.contains(&(151, false)));
        assert!(r.trials.len() <= 9 + 8, "{:?}", r.trials);
        // Starting above the capacity bisects downwards.
        let r = searched(5, 64, 1000);
        assert_eq!((r.rating, r.failed_at), (5, Some(6)));
        // Nothing passes; everything passes.
        assert_eq!(searched(0, 8, 100).rating, 0);
        assert_eq!(searched(0, 8, 100).failed_at, Some(1));
        let r = searched(500, 1, 100);
        assert_eq!((r.rating, r.failed_at), (100, None));
        assert_eq!(r.trials.last(), Some(&(100, true)));
    }

    #[test]
    fn a_coarser_resolution_stops_the_bisection_early() {
        // 150 passes, 300 fails; bisecting to within 40: 225 fails, 187 passes, and 225 − 187 ≤ 40.
        let r = search::<()>(150, 300, 40, |l| Ok(l <= 200)).unwrap();
        assert_eq!(r.trials, vec![(150, true), (300, false), (225, false), (187, true)]);
        assert_eq!((r.rating, r.failed_at), (187, Some(225)));
        // A resolution of 0 is taken as 1.
        assert_eq!(search::<()>(1, 20, 0, |l| Ok(l <= 9)).unwrap().failed_at, Some(10));
    }

    #[test]
    fn an_error_ends_the_search() {
        let mut n = 0;
        let r = search(1, 100, 1, |_| {
            n += 1;
            if n == 3 {
                Err("trial failed to run")
            } else {
                Ok(true)
            }
        });
        assert_eq!(r, Err("trial failed to run"));
    }

    #[test]
    fn the_trials_traffic_is_the_benchmarks() {
        let c = RatingConfig::default();
        let lr = c.linear_road(3);
        assert!(lr.traffic.queries && lr.traffic.reentry && lr.traffic.steady);
        assert_eq!((lr.traffic.xways, lr.traffic.duration_s, lr.traffic.start_s), (3, 80 * 60 + 60 + 600, 4500));
        assert_eq!((lr.replay_speed, lr.fast_forward_s, lr.judge_from_s), (Some(1.0), Some(4800), 4860));
        assert!(c.validate().is_ok());
        assert!(RatingConfig { judged_s: 0, ..c.clone() }.validate().unwrap_err().contains("judged"));
        assert!(RatingConfig { cars_per_second: 0.0, ..c }.validate().unwrap_err().contains("cars per second"));
    }
}

//! Response times against the benchmark's limits, per output type.
//!
//! An answer's response time is the time it left the engine minus the time the record that
//! triggered it was due: the intended send time of that position report or query, so that a
//! record waiting at the source (the engine behind the input) counts. Replayed at the file's
//! clock (`--replay-speed 1.0`), a record at time *t* is due *t* seconds after the start, which
//! makes the limits the benchmark's: 5 s for toll notifications, accident alerts and account
//! balances, 10 s for daily expenditures (toll assessments have none). For each type the report
//! gives how many answers there were, how many were in time, the worst, and the distribution.
//!
//! A run may judge only the answers to records from some time on (`judge_from_s`): the L-rating
//! replays the early part of its traffic as fast as it can, and those answers are early or late
//! on no clock of the benchmark's.
//!
//! Each sink instance records into a [`ResponseTimes`] of its own and merges it into the shared
//! one every few thousand answers and when it is dropped, so that sinks do not contend for a lock
//! per answer.

use std::collections::BTreeMap;
use std::sync::{Arc, Mutex};

use hdrhistogram::Histogram;
use serde::{Deserialize, Serialize};

use super::model::{LrOutput, DEADLINE_S, EXPENDITURE_DEADLINE_S};

/// The output types with a limit, in report order.
pub const KINDS: [&str; 4] = ["toll_notifications", "accident_alerts", "account_balances", "daily_expenditures"];

/// The limit of each of [`KINDS`], seconds.
pub const LIMITS_S: [u64; 4] = [DEADLINE_S, DEADLINE_S, DEADLINE_S, EXPENDITURE_DEADLINE_S];

/// Which of [`KINDS`] an output is, if it has a limit.
pub fn kind(output: &LrOutput) -> Option<usize> {
    match output {
        LrOutput::Toll(_) => Some(0),
        LrOutput::Alert(_) => Some(1),
        LrOutput::Balance(_) => Some(2),
        LrOutput::Expenditure(_) => Some(3),
        LrOutput::Assessment(_) => None,
    }
}

/// The response times of one output type.
#[derive(Clone, Debug)]
struct KindTimes {
    /// Microseconds.
    histogram: Histogram<u64>,
    within: u64,
    worst_ns: u64,
}

impl Default for KindTimes {
    fn default() -> Self {
        KindTimes {
            // 1 µs .. 1 day, 3 significant figures; larger values are clamped (the worst keeps them).
            histogram: Histogram::new_with_bounds(1, 86_400_000_000, 3).expect("valid histogram bounds"),
            within: 0,
            worst_ns: 0,
        }
    }
}

/// The worst of the judged answers to the records of one second.
#[derive(Clone, Copy, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct SecondWorst {
    /// The records' second (their time column).
    pub time: u32,
    /// The worst response time per output type ([`KINDS`]), ms (0 with no answer).
    pub worst_ms: [f64; 4],
    /// The longest a record answered here waited at the source before it entered the engine
    /// (entered minus due), ms: the share of the response time the engine did not see.
    pub source_wait_ms: f64,
}

/// Response times of every output type with a limit.
#[derive(Clone, Debug, Default)]
pub struct ResponseTimes {
    kinds: [KindTimes; 4],
    /// Answers to records before the judged stretch.
    unjudged: u64,
    /// Per second of the records' clock: the worst response time per type and the longest
    /// source wait, ns.
    by_second: BTreeMap<u32, ([u64; 4], u64)>,
}

impl ResponseTimes {
    /// Records one answer of kind `kind` ([`KINDS`]) that took `ns`.
    pub fn record(&mut self, kind: usize, ns: u64) {
        let k = &mut self.kinds[kind];
        k.histogram.saturating_record((ns / 1000).max(1));
        if ns <= LIMITS_S[kind] * 1_000_000_000 {
            k.within += 1;
        }
        k.worst_ns = k.worst_ns.max(ns);
    }

    /// Records one answer of kind `kind` to a record of second `time` that took `ns`, of which
    /// the record waited `source_wait_ns` at the source.
    pub fn record_at(&mut self, kind: usize, time: u32, ns: u64, source_wait_ns: u64) {
        self.record(kind, ns);
        let (worst, wait) = self.by_second.entry(time).or_default();
        worst[kind] = worst[kind].max(ns);
        *wait = (*wait).max(source_wait_ns);
    }

    /// Per second of the records' clock, in time order: the worst response time of each type
    /// and the longest source wait.
    pub fn timeline(&self) -> Vec<SecondWorst> {
        let ms = |ns: u64| ns as f64 / 1e6;
        self.by_second
            .iter()
            .map(|(&time, (worst, wait))| SecondWorst { time, worst_ms: worst.map(ms), source_wait_ms: ms(*wait) })
            .collect()
    }

    /// Counts an answer that is not judged.
    pub fn skip(&mut self) {
        self.unjudged += 1;
    }

    /// Adds `other`'s answers to these.
    pub fn merge(&mut self, other: &ResponseTimes) {
        for (k, o) in self.kinds.iter_mut().zip(&other.kinds) {
            // Same bounds on both sides: adding cannot fail.
            let _ = k.histogram.add(&o.histogram);
            k.within += o.within;
            k.worst_ns = k.worst_ns.max(o.worst_ns);
        }
        self.unjudged += other.unjudged;
        for (&time, (worst, wait)) in &other.by_second {
            let (w, q) = self.by_second.entry(time).or_default();
            for (w, o) in w.iter_mut().zip(worst) {
                *w = (*w).max(*o);
            }
            *q = (*q).max(*wait);
        }
    }

    /// Answers recorded (judged ones).
    pub fn len(&self) -> u64 {
        self.kinds.iter().map(|k| k.histogram.len()).sum()
    }

    /// True if no answer was judged.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// The worst response time of any type, ns.
    pub fn worst_ns(&self) -> u64 {
        self.kinds.iter().map(|k| k.worst_ns).max().unwrap_or(0)
    }

    /// The report: per type, and whether every judged answer was in time.
    pub fn report(&self) -> ResponseReport {
        let kinds: Vec<KindReport> = self
            .kinds
            .iter()
            .enumerate()
            .map(|(i, k)| {
                let n = k.histogram.len();
                let ms = |q: f64| if n == 0 { 0.0 } else { k.histogram.value_at_quantile(q) as f64 / 1000.0 };
                KindReport {
                    output: KINDS[i].to_string(),
                    limit_s: LIMITS_S[i],
                    answers: n,
                    within_limit: k.within,
                    share_within: if n == 0 { 1.0 } else { k.within as f64 / n as f64 },
                    p50_ms: ms(0.5),
                    p99_ms: ms(0.99),
                    p999_ms: ms(0.999),
                    worst_ms: k.worst_ns as f64 / 1e6,
                }
            })
            .collect();
        let all_in_time = kinds.iter().all(|k| k.within_limit == k.answers);
        let answers = kinds.iter().map(|k| k.answers).sum();
        ResponseReport { all_in_time, answers, unjudged: self.unjudged, kinds }
    }
}

/// The response times of one output type, as reported.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct KindReport {
    /// The output type.
    pub output: String,
    /// Its limit, seconds.
    pub limit_s: u64,
    /// Answers judged.
    pub answers: u64,
    /// Of those, within the limit.
    pub within_limit: u64,
    /// `within_limit / answers` (1 with none).
    pub share_within: f64,
    /// Median, ms.
    pub p50_ms: f64,
    /// 99th percentile, ms.
    pub p99_ms: f64,
    /// 99.9th percentile, ms.
    pub p999_ms: f64,
    /// The worst, ms.
    pub worst_ms: f64,
}

/// Response times of a run, as reported.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct ResponseReport {
    /// Every judged answer of every type within its limit.
    pub all_in_time: bool,
    /// Answers judged.
    pub answers: u64,
    /// Answers to records before the judged stretch (not judged).
    pub unjudged: u64,
    /// Per output type, in the order of [`KINDS`].
    pub kinds: Vec<KindReport>,
}

/// Records answers of one sink instance, merged into the shared times every few thousand answers
/// and when dropped.
pub(crate) struct Recorder {
    shared: Arc<Mutex<ResponseTimes>>,
    local: ResponseTimes,
    pending: u32,
    /// Answers to records before this time (seconds) are not judged.
    judge_from_s: u32,
}

impl Recorder {
    pub(crate) fn new(shared: Arc<Mutex<ResponseTimes>>, judge_from_s: u32) -> Self {
        Recorder { shared, local: ResponseTimes::default(), pending: 0, judge_from_s }
    }

    pub(crate) fn record(&mut self, output: &LrOutput, latency_ns: u64, source_wait_ns: u64) {
        let Some(kind) = kind(output) else { return };
        if output.time() < self.judge_from_s {
            self.local.skip();
        } else {
            self.local.record_at(kind, output.time(), latency_ns, source_wait_ns);
        }
        self.pending += 1;
        if self.pending >= 4096 {
            self.flush();
        }
    }

    pub(crate) fn flush(&mut self) {
        let mut shared = self.shared.lock().unwrap_or_else(|e| e.into_inner());
        shared.merge(&self.local);
        self.local = ResponseTimes::default();
        self.pending = 0;
    }
}

impl Drop for Recorder {
    fn drop(&mut self) {
        if self.pending > 0 {
            self.flush();
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::linear_road::model::{DailyExpenditure, TollNotification};

    #[test]
    fn limits_per_type_and_the_judged_stretch() {
        let shared = Arc::new(Mutex::new(ResponseTimes::default()));
        let toll = |time| LrOutput::Toll(TollNotification { car: 1, time, lav: 0, toll: 0 });
        let spent = LrOutput::Expenditure(DailyExpenditure { car: 1, time: 100, qid: 1, bal: 3 });
        {
            let mut r = Recorder::new(shared.clone(), 60);
            r.record(&toll(10), 9_000_000_000, 0); // before the judged stretch
            r.record(&toll(60), 4_000_000_000, 1_000_000);
            r.record(&toll(61), 5_000_000_001, 3_000_000_000); // late by a nanosecond
            r.record(&spent, 9_000_000_000, 0); // a type-3 answer has 10 s
        }
        let times = shared.lock().unwrap();
        let timeline = times.timeline();
        assert_eq!(timeline.iter().map(|s| s.time).collect::<Vec<_>>(), [60, 61, 100], "judged seconds only");
        assert_eq!((timeline[0].worst_ms, timeline[0].source_wait_ms), ([4000.0, 0.0, 0.0, 0.0], 1.0));
        assert_eq!(timeline[1].source_wait_ms, 3000.0);
        assert_eq!(timeline[2].worst_ms[3], 9000.0);
        let report = times.report();
        assert!(!report.all_in_time);
        assert_eq!((report.answers, report.unjudged), (3, 1));
        let tolls = &report.kinds[0];
        assert_eq!((tolls.answers, tolls.within_limit, tolls.share_within), (2, 1, 0.5));
        assert!((tolls.worst_ms - 5000.000001).abs() < 1e-6, "{}", tolls.worst_ms);
        assert_eq!((report.kinds[3].answers, report.kinds[3].within_limit), (1, 1));
        assert_eq!(report.kinds[1].share_within, 1.0, "no alerts: none late");
    }
}

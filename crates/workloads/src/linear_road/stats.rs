//! What a Linear Road run produced: outputs by kind, deadline misses, response times per output
//! type ([`super::response`]), the records the rules skip, the output file, and the errors the
//! engine's threads could not return.
//!
//! The sinks record every output here as it leaves the engine. An output misses its deadline when
//! its end-to-end latency — egress minus the intended send time of the record that triggered it,
//! so the wait in the source's queue counts — exceeds the benchmark's deadline: 5 s for toll
//! notifications, accident alerts and account balances, 10 s for daily expenditures. Toll
//! assessments have none (they are internal accounting in the benchmark) and are counted apart.

use std::fs::File;
use std::io::{BufWriter, Write};
use std::path::PathBuf;
use std::sync::atomic::{AtomicU32, AtomicU64, Ordering};
use std::sync::{Arc, Mutex, MutexGuard, OnceLock};
use std::time::Instant;

use moirai_engine::{now_ns, Tuple};
use serde::Serialize;

use super::csv::format_output;
use super::model::{LrOutput, DEADLINE_S};
use super::response::{Recorder, ResponseReport, ResponseTimes};
use super::rules::Rules;
use super::{LinearRoadError, Shape};

/// The end-to-end latency above which an output misses the deadline, ns.
pub const DEADLINE_NS: u64 = DEADLINE_S * 1_000_000_000;

/// The counts of a run, as [`LinearRoadStats::report`] gives them.
#[derive(Clone, Debug, Default, PartialEq, Serialize)]
pub struct LinearRoadReport {
    /// Records that entered the query (read from the input file, or generated): position reports,
    /// queries passed on and records dropped.
    pub records_read: u64,
    /// Records in the input file (checked before the run); `None` when generating.
    pub records_total: Option<u64>,
    /// Position reports the dispatcher passed on.
    pub position_reports: u64,
    /// Type-2/3 queries the dispatcher passed on (faithful shape).
    pub query_records: u64,
    /// Records the dispatcher dropped: type-4 queries (all queries in the Lachesis shape).
    pub other_records: u64,
    /// Toll notifications out (faithful shape).
    pub toll_notifications: u64,
    /// Accident alerts out (faithful shape).
    pub accident_alerts: u64,
    /// Toll assessments out (faithful shape).
    pub toll_assessments: u64,
    /// Account balances out: type-2 queries answered (faithful shape).
    pub account_balances: u64,
    /// Daily expenditures out: type-3 queries answered (faithful shape).
    pub daily_expenditures: u64,
    /// Notifications out of each toll operator of the Lachesis shape: `[pos, cv, las]`.
    pub lachesis_notifications: [u64; 3],
    /// Outputs that have a deadline.
    pub deadline_outputs: u64,
    /// Of those, the ones whose end-to-end latency exceeded their deadline.
    pub deadline_misses: u64,
    /// `deadline_misses / deadline_outputs` (0 with no outputs).
    pub deadline_miss_share: f64,
    /// The largest end-to-end latency of an output with a deadline, ms.
    pub max_latency_ms: f64,
    /// The rules the faithful query followed.
    pub rules: Rules,
    /// Where daily expenditures came from.
    pub historical_tolls: String,
    /// Response times per output type against the benchmark's limits (faithful shape).
    pub response_times: ResponseReport,
    /// Position reports the rules ignore (validator: a car's reports after its exit until it
    /// enters again).
    pub ignored_reports: u64,
    /// Daily-expenditure queries left unanswered because the history has no toll for the car,
    /// day and expressway (validator rules).
    pub expenditures_without_toll: u64,
    /// Daily-expenditure queries for day 0 (today), which the benchmark answers with type 2 and
    /// the validator leaves unanswered (validator rules).
    pub expenditures_for_today: u64,
}

/// The output file and the first error writing it.
struct OutputFile {
    path: PathBuf,
    out: BufWriter<File>,
    line: String,
    error: Option<std::io::Error>,
}

#[derive(Default)]
struct Counters {
    position_reports: AtomicU64,
    query_records: AtomicU64,
    other_records: AtomicU64,
    tolls: AtomicU64,
    alerts: AtomicU64,
    assessments: AtomicU64,
    balances: AtomicU64,
    expenditures: AtomicU64,
    lachesis: [AtomicU64; 3],
    ignored_reports: AtomicU64,
    /// Position reports at or after the judged stretch's start.
    judged_reports: AtomicU64,
    /// One more than the largest car id seen.
    cars: AtomicU64,
    /// Records read when the fast-forward ended.
    fast_forward_records: AtomicU64,
    expenditures_without_toll: AtomicU64,
    expenditures_for_today: AtomicU64,
    deadline_outputs: AtomicU64,
    deadline_misses: AtomicU64,
    max_latency_ns: AtomicU64,
}

struct Inner {
    shape: Shape,
    rules: Rules,
    /// Answers to records before this time (s) are not judged.
    judge_from_s: AtomicU32,
    responses: Arc<Mutex<ResponseTimes>>,
    /// When the first record was drawn, and when the fast-forward ended (the first record at the
    /// records' clock was drawn).
    first_record: OnceLock<Instant>,
    fast_forward_end: OnceLock<Instant>,
    /// Records in the input file, if known.
    records_total: Mutex<Option<u64>>,
    /// Where daily expenditures come from, in words.
    history: Mutex<String>,
    /// Seconds of the input's clock per second of latency (the replay speed; 1 otherwise): for
    /// the output file's `emit` column.
    clock_speed: f64,
    counters: Counters,
    collected: Option<Mutex<Vec<LrOutput>>>,
    output: Option<Mutex<OutputFile>>,
    /// The first error met inside the engine (an input file that changed since it was checked).
    error: Mutex<Option<LinearRoadError>>,
}

/// A handle on the counts and outputs of a run; clones share them.
#[derive(Clone)]
pub struct LinearRoadStats(Arc<Inner>);

fn lock<T>(m: &Mutex<T>) -> MutexGuard<'_, T> {
    // A panic in a sink thread is reported by the engine; the data here stays usable.
    m.lock().unwrap_or_else(|e| e.into_inner())
}

impl LinearRoadStats {
    /// Stats for a run of `shape` under `rules`, keeping outputs in memory if `collect`,
    /// writing them to `output` if given (the file is created now, so a bad path fails before
    /// the run); `clock_speed` is how much faster than real time the input's clock runs (the
    /// replay speed).
    pub(crate) fn new(
        shape: Shape,
        rules: Rules,
        collect: bool,
        output: Option<PathBuf>,
        clock_speed: f64,
    ) -> Result<Self, LinearRoadError> {
        let output = match output {
            Some(path) => {
                let file =
                    File::create(&path).map_err(|source| LinearRoadError::Write { path: path.clone(), source })?;
                Some(Mutex::new(OutputFile { path, out: BufWriter::new(file), line: String::new(), error: None }))
            }
            None => None,
        };
        Ok(LinearRoadStats(Arc::new(Inner {
            shape,
            rules,
            judge_from_s: AtomicU32::new(0),
            responses: Arc::default(),
            first_record: OnceLock::new(),
            fast_forward_end: OnceLock::new(),
            records_total: Mutex::new(None),
            history: Mutex::new(String::new()),
            clock_speed,
            counters: Counters::default(),
            collected: collect.then(|| Mutex::new(Vec::new())),
            output,
            error: Mutex::new(None),
        })))
    }

    /// The shape of the query these stats belong to.
    pub fn shape(&self) -> Shape {
        self.0.shape
    }

    pub(crate) fn set_records_total(&self, total: Option<u64>) {
        *lock(&self.0.records_total) = total;
    }

    pub(crate) fn set_history(&self, history: String) {
        *lock(&self.0.history) = history;
    }

    pub(crate) fn query_record(&self) {
        self.0.counters.query_records.fetch_add(1, Ordering::Relaxed);
    }

    pub(crate) fn position_report(&self) {
        self.0.counters.position_reports.fetch_add(1, Ordering::Relaxed);
    }

    /// Counts a report of `car` at `time` for the L-rating's figures.
    pub(crate) fn report_of(&self, car: u32, time: u32) {
        let c = &self.0.counters;
        c.cars.fetch_max(car as u64 + 1, Ordering::Relaxed);
        if time >= self.0.judge_from_s.load(Ordering::Relaxed) {
            c.judged_reports.fetch_add(1, Ordering::Relaxed);
        }
    }

    /// Notes that the fast-forward ended now.
    pub(crate) fn fast_forwarded(&self) {
        if self.0.fast_forward_end.set(Instant::now()).is_ok() {
            let read = self.report().records_read;
            self.0.counters.fast_forward_records.store(read, Ordering::Relaxed);
        }
    }

    /// Notes that the source drew its first record now (if it had not).
    pub(crate) fn record_drawn(&self) {
        let _ = self.0.first_record.set(Instant::now());
    }

    /// When the source drew its first record, if it has (noted when fast-forwarding).
    pub fn first_record(&self) -> Option<Instant> {
        self.0.first_record.get().copied()
    }

    /// When the fast-forward ended, if it has.
    pub fn fast_forward_ended(&self) -> Option<Instant> {
        self.0.fast_forward_end.get().copied()
    }

    /// Records read during the fast-forward.
    pub fn fast_forward_records(&self) -> u64 {
        self.0.counters.fast_forward_records.load(Ordering::Relaxed)
    }

    /// Position reports at or after the judged stretch's start, so far.
    pub fn judged_reports(&self) -> u64 {
        self.0.counters.judged_reports.load(Ordering::Relaxed)
    }

    /// Distinct cars seen so far (car ids are numbered from 0).
    pub fn cars(&self) -> u64 {
        self.0.counters.cars.load(Ordering::Relaxed)
    }

    /// Per second of the records' clock, the worst judged response time of each output type
    /// and the longest source wait (see [`ResponseTimes::timeline`]).
    pub fn response_timeline(&self) -> Vec<super::response::SecondWorst> {
        lock(&self.0.responses).timeline()
    }

    /// The worst response time of a judged answer so far (merged from the sinks every few
    /// thousand answers), ns.
    pub fn worst_response_ns(&self) -> u64 {
        lock(&self.0.responses).worst_ns()
    }

    pub(crate) fn other_record(&self) {
        self.0.counters.other_records.fetch_add(1, Ordering::Relaxed);
    }

    pub(crate) fn ignored_report(&self) {
        self.0.counters.ignored_reports.fetch_add(1, Ordering::Relaxed);
    }

    pub(crate) fn expenditure_without_toll(&self) {
        self.0.counters.expenditures_without_toll.fetch_add(1, Ordering::Relaxed);
    }

    pub(crate) fn expenditure_for_today(&self) {
        self.0.counters.expenditures_for_today.fetch_add(1, Ordering::Relaxed);
    }

    /// Judges only the answers to records at or after `time` (seconds of the input's clock).
    pub(crate) fn judge_from(&self, time: u32) {
        self.0.judge_from_s.store(time, Ordering::Relaxed);
    }

    /// The recorder of one sink instance: it records every output that reaches it.
    pub(crate) fn sink(&self) -> SinkRecorder {
        let judge_from = self.0.judge_from_s.load(Ordering::Relaxed);
        SinkRecorder { stats: self.clone(), responses: Recorder::new(self.0.responses.clone(), judge_from) }
    }

    /// Records the first error met inside the engine.
    pub(crate) fn fail(&self, error: LinearRoadError) {
        lock(&self.0.error).get_or_insert(error);
    }

    fn latency(&self, now_ns: u64, intended_ns: u64, deadline_s: Option<u64>) -> u64 {
        let c = &self.0.counters;
        let latency = now_ns.saturating_sub(intended_ns);
        if let Some(deadline_s) = deadline_s {
            c.deadline_outputs.fetch_add(1, Ordering::Relaxed);
            if latency > deadline_s * 1_000_000_000 {
                c.deadline_misses.fetch_add(1, Ordering::Relaxed);
            }
            c.max_latency_ns.fetch_max(latency, Ordering::Relaxed);
        }
        latency
    }

    /// Records one output that leaves the engine at `now_ns`; returns its latency.
    fn output_at(&self, t: &Tuple<LrOutput>, now_ns: u64) -> u64 {
        let c = &self.0.counters;
        let counter = match t.data {
            LrOutput::Toll(_) => &c.tolls,
            LrOutput::Alert(_) => &c.alerts,
            LrOutput::Assessment(_) => &c.assessments,
            LrOutput::Balance(_) => &c.balances,
            LrOutput::Expenditure(_) => &c.expenditures,
        };
        counter.fetch_add(1, Ordering::Relaxed);
        let latency = self.latency(now_ns, t.intended_ns, t.data.deadline_s());
        if let Some(collected) = &self.0.collected {
            lock(collected).push(t.data);
        }
        if let Some(output) = &self.0.output {
            let mut file = lock(output);
            let file = &mut *file;
            if file.error.is_none() {
                file.line.clear();
                format_output(self.0.rules, &t.data, latency, self.0.clock_speed, &mut file.line);
                if let Err(e) = file.out.write_all(file.line.as_bytes()) {
                    file.error = Some(e);
                }
            }
        }
        latency
    }

    /// Records one (dummy) notification of the Lachesis shape's toll operator `branch`
    /// (0 = pos, 1 = cv, 2 = las); every one has the deadline.
    pub(crate) fn lachesis_output(&self, branch: usize, intended_ns: u64) {
        self.0.counters.lachesis[branch].fetch_add(1, Ordering::Relaxed);
        self.latency(now_ns(), intended_ns, Some(DEADLINE_S));
    }

    /// The counts so far.
    pub fn report(&self) -> LinearRoadReport {
        let c = &self.0.counters;
        let get = |a: &AtomicU64| a.load(Ordering::Relaxed);
        let (outputs, misses) = (get(&c.deadline_outputs), get(&c.deadline_misses));
        LinearRoadReport {
            records_read: get(&c.position_reports) + get(&c.query_records) + get(&c.other_records),
            records_total: *lock(&self.0.records_total),
            position_reports: get(&c.position_reports),
            query_records: get(&c.query_records),
            other_records: get(&c.other_records),
            toll_notifications: get(&c.tolls),
            accident_alerts: get(&c.alerts),
            toll_assessments: get(&c.assessments),
            account_balances: get(&c.balances),
            daily_expenditures: get(&c.expenditures),
            lachesis_notifications: [get(&c.lachesis[0]), get(&c.lachesis[1]), get(&c.lachesis[2])],
            deadline_outputs: outputs,
            deadline_misses: misses,
            deadline_miss_share: if outputs == 0 { 0.0 } else { misses as f64 / outputs as f64 },
            max_latency_ms: get(&c.max_latency_ns) as f64 / 1e6,
            rules: self.0.rules,
            historical_tolls: lock(&self.0.history).clone(),
            response_times: lock(&self.0.responses).report(),
            ignored_reports: get(&c.ignored_reports),
            expenditures_without_toll: get(&c.expenditures_without_toll),
            expenditures_for_today: get(&c.expenditures_for_today),
        }
    }

    /// Takes the outputs collected so far (empty unless the run was configured to collect).
    pub fn take_outputs(&self) -> Vec<LrOutput> {
        self.0.collected.as_ref().map(|c| std::mem::take(&mut *lock(c))).unwrap_or_default()
    }

    /// Call after the run: flushes the output file and reports the counts, or the first error
    /// the run met (an input file that changed under it, a full disk).
    pub fn finish(&self) -> Result<LinearRoadReport, LinearRoadError> {
        if let Some(error) = lock(&self.0.error).take() {
            return Err(error);
        }
        if let Some(output) = &self.0.output {
            let mut file = lock(output);
            let file = &mut *file;
            let result = match file.error.take() {
                Some(e) => Err(e),
                None => file.out.flush(),
            };
            result.map_err(|source| LinearRoadError::Write { path: file.path.clone(), source })?;
        }
        Ok(self.report())
    }
}

/// Records the outputs reaching one sink instance: counts, the output file, and response times
/// (merged into the run's when it is dropped).
pub(crate) struct SinkRecorder {
    stats: LinearRoadStats,
    responses: Recorder,
}

impl SinkRecorder {
    /// Records one output of the faithful query as it leaves the engine.
    pub(crate) fn output(&mut self, t: &Tuple<LrOutput>) {
        let latency = self.stats.output_at(t, now_ns());
        self.responses.record(&t.data, latency, t.ingress_ns.saturating_sub(t.intended_ns));
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::linear_road::model::{TollAssessment, TollNotification};

    fn at(intended_ns: u64, data: LrOutput) -> Tuple<LrOutput> {
        Tuple { event_ns: 0, intended_ns, ingress_ns: intended_ns, data }
    }

    #[test]
    fn outputs_later_than_five_seconds_miss_the_deadline() {
        let stats = LinearRoadStats::new(Shape::Faithful, Rules::Validator, true, None, 1.0).unwrap();
        let toll = LrOutput::Toll(TollNotification { car: 1, time: 0, lav: 0, toll: 0 });
        let start = 1_000_000;
        stats.output_at(&at(start, toll), start + 4_999_000_000);
        stats.output_at(&at(start, toll), start + 5_001_000_000);
        // Assessments have no deadline: neither counted as outputs with one nor as misses.
        let charged = LrOutput::Assessment(TollAssessment { car: 1, time: 30, toll: 2 });
        stats.output_at(&at(start, charged), start + 60_000_000_000);
        let r = stats.finish().unwrap();
        assert_eq!((r.toll_notifications, r.toll_assessments), (2, 1));
        assert_eq!((r.deadline_outputs, r.deadline_misses, r.deadline_miss_share), (2, 1, 0.5));
        assert_eq!(r.max_latency_ms, 5001.0);
        assert_eq!(stats.take_outputs(), vec![toll, toll, charged]);
    }
}

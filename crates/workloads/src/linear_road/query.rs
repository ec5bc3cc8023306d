//! The faithful Linear Road query on moirai's engine.
//!
//! ```text
//! source → dispatcher → vehicles → segments → tolls → accounts → outputs
//!          (parse)      by car      by segment  by segment  by car
//! ```
//!
//! - **dispatcher** parses each CSV line and keeps position reports and account-balance and
//!   daily-expenditure queries (type 2 and 3); it drops travel-time queries (type 4).
//! - **vehicles** (keyed by car) sees each car's reports in order: counts identical consecutive
//!   reports (a car is stopped at the 4th, until it reports another place), and flags the first
//!   report in a new segment (a toll notification is due) and the first on the exit ramp.
//! - **segments** (keyed by expressway, direction, segment) gathers each minute's reports into
//!   the number of cars (NOV) and the average of the cars' average speeds, and detects accidents
//!   from the stopped cars: an accident is a place where two or more cars are stopped, from the
//!   second in which that became so until the second it stopped being so. Each accident's start
//!   and end go to the five segments it concerns (its own and four upstream).
//! - **tolls** (keyed by segment) answers each car entering the segment with the statistics of
//!   the previous minute: LAV over the last five minutes, NOV, and the nearest accident in effect
//!   during the previous minute up to four segments downstream; it emits the toll notification
//!   and, if there is such an accident, the accident alert.
//! - **accounts** (keyed by car) passes notifications and alerts on and assesses each car's
//!   previous toll when it gets its next notification or reaches the exit ramp. It keeps each
//!   car's account (the tolls charged, per expressway today) and answers its historical queries:
//!   the balance (type 2), and the expenditure on an expressway on a day (type 3: day 0 from
//!   today's charges, days 1–69 from the historical tolls table).
//!
//! Queries travel with their car's key through vehicles, and pass segments and tolls unchanged
//! (keyed by a stand-in segment), so the topology is the same with or without them. A query is
//! answered once the watermark has passed its second: it sees every toll charged up to and
//! including that second, as the reference does.//!
//! Order across instances is restored by event time (the report's time): a stage that merges
//! streams from several instances acts on a minute, a second or a car's next event only when the
//! watermark says everything before it has arrived. Results are therefore the same at any
//! parallelism and any speed, and equal to [`super::reference`](mod@super::reference)'s. What waits on watermarks:
//! segment statistics (until the minute is over), accident spans (until their second is over),
//! toll requests (until the previous minute's statistics are in: right away in practice, the
//! watermark crosses the minute with the request's own report), and assessments (until the
//! watermark reaches the charging report's second).
//!
//! A tuple emitted when a watermark `w` arrives carries an event time at or after the previous
//! watermark, so it is never late downstream: the engine forwards `w` after what the operator
//! emitted for it.

use std::collections::BTreeMap;
use std::hash::Hash;

use moirai_engine::{now_ns, BuildError, BuiltQuery, Data, Operator, Output, Query, Source, Stream, Tuple};
use rustc_hash::FxHashMap;

use super::model::{
    downstream_distance, historical_toll, minute_start, toll, upstream_of, AccidentAlert, AccountBalance,
    DailyExpenditure, LrOutput, PositionReport, QueryKind, QueryRecord, SegmentId, TollAssessment, TollNotification,
    EXIT_LANE, LAV_MINUTES, SEGMENTS, STOPPED_REPORTS,
};
use super::stats::LinearRoadStats;

const NS: u64 = 1_000_000_000;
const MINUTE_NS: u64 = 60 * NS;

/// Seconds of LR time as event-time nanoseconds.
pub fn event_ns(time: u32) -> u64 {
    time as u64 * NS
}

/// Minutes complete at watermark `w`: minute `k` is complete once `w` reaches its end, `60k` s.
fn complete_minutes(w: u64) -> u32 {
    (w / MINUTE_NS).min(u32::MAX as u64 - 1) as u32
}

/// What the dispatcher passes on: a position report or a historical query.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Input {
    /// Type 0.
    Report(PositionReport),
    /// Type 2 or 3.
    Query(QueryRecord),
}

impl Input {
    pub(crate) fn car(&self) -> u32 {
        match self {
            Input::Report(p) => p.car,
            Input::Query(q) => q.car,
        }
    }
}

/// The segment a query is keyed by in the stages it only passes: any will do, this spreads them.
fn query_segment(q: &QueryRecord) -> SegmentId {
    SegmentId { xway: 0, dir: 0, seg: (q.car % SEGMENTS as u32) as u8 }
}

/// What a position report asks of the stages after vehicles.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Request {
    /// Nothing: the report only feeds statistics.
    None,
    /// The car's first report in this segment, not on the exit ramp: a toll notification is due.
    Notify,
    /// The car's first report on the exit ramp: its last toll is due.
    Exit,
}

/// From vehicles to segments, keyed by segment.
#[derive(Clone, Debug)]
pub(crate) enum SegmentEvent {
    /// A position report.
    Report { report: PositionReport, request: Request },
    /// A car became stopped at `pos` of `segment` (`stopped`), or moved away from there.
    Stop { segment: SegmentId, pos: u32, car: u32, time: u32, stopped: bool },
    /// A historical query, passed on.
    Query(QueryRecord),
}

impl SegmentEvent {
    pub(crate) fn segment(&self) -> SegmentId {
        match self {
            SegmentEvent::Report { report, .. } => report.segment(),
            SegmentEvent::Stop { segment, .. } => *segment,
            SegmentEvent::Query(q) => query_segment(q),
        }
    }
}

/// From segments to tolls, keyed by the segment it concerns.
#[derive(Clone, Debug)]
pub(crate) enum TollEvent {
    /// A segment's statistics of a complete minute.
    Stats { segment: SegmentId, minute: u32, cars: u32, average: u32 },
    /// An accident at `pos` in `accident_seg` started (or ended) at `time`; sent to every segment
    /// `target` whose cars it concerns.
    Accident { target: SegmentId, accident_seg: u8, pos: u32, time: u32, start: bool },
    /// A car entered the segment and needs a toll notification.
    Notify(PositionReport),
    /// A car reached the exit ramp in `segment`.
    Exit { segment: SegmentId, car: u32, time: u32 },
    /// A historical query, passed on.
    Query(QueryRecord),
}

impl TollEvent {
    pub(crate) fn segment(&self) -> SegmentId {
        match self {
            TollEvent::Stats { segment, .. } | TollEvent::Exit { segment, .. } => *segment,
            TollEvent::Accident { target, .. } => *target,
            TollEvent::Notify(report) => report.segment(),
            TollEvent::Query(q) => query_segment(q),
        }
    }
}

/// From tolls to accounts, keyed by car.
#[derive(Clone, Debug)]
pub(crate) enum Charge {
    /// An accident alert.
    Alert(AccidentAlert),
    /// A toll notification for a segment of expressway `xway`.
    Toll { notification: TollNotification, xway: u16 },
    /// The car reached the exit ramp at `time`.
    Exit { car: u32, time: u32 },
    /// A historical query of the car.
    Query(QueryRecord),
}

impl Charge {
    pub(crate) fn car(&self) -> u32 {
        match self {
            Charge::Alert(a) => a.car,
            Charge::Toll { notification, .. } => notification.car,
            Charge::Exit { car, .. } => *car,
            Charge::Query(q) => q.car,
        }
    }

    fn time(&self) -> u32 {
        match self {
            Charge::Alert(a) => a.time,
            Charge::Toll { notification, .. } => notification.time,
            Charge::Exit { time, .. } => *time,
            Charge::Query(q) => q.time,
        }
    }
}

/// What vehicles remembers about a car.
#[derive(Clone, Debug, Default)]
pub(crate) struct Vehicle {
    last: Option<PositionReport>,
    /// Identical consecutive reports up to the last one.
    run: u32,
    /// Where the car is stopped.
    stopped_at: Option<(SegmentId, u32)>,
}

/// The vehicles stage, per car (a keyed process: it needs no watermark, a car's reports arrive
/// in order from the single dispatcher).
#[allow(clippy::needless_pass_by_value)] // the engine's keyed-process signature takes the tuple
pub(crate) fn vehicle(_car: &u32, v: &mut Vehicle, t: Tuple<Input>, out: &mut Output<'_, SegmentEvent>) {
    let p = match t.data {
        Input::Report(p) => p,
        Input::Query(q) => return out.emit(t.with(SegmentEvent::Query(q))),
    };
    let same_place = v.last.is_some_and(|q| q.place() == p.place());
    v.run = if same_place { v.run.saturating_add(1) } else { 1 };
    if !same_place {
        if let Some((segment, pos)) = v.stopped_at.take() {
            out.emit(t.with(SegmentEvent::Stop { segment, pos, car: p.car, time: p.time, stopped: false }));
        }
    }
    if v.run == STOPPED_REPORTS {
        v.stopped_at = Some((p.segment(), p.pos));
        out.emit(t.with(SegmentEvent::Stop {
            segment: p.segment(),
            pos: p.pos,
            car: p.car,
            time: p.time,
            stopped: true,
        }));
    }
    let entered = v.last.is_none_or(|q| q.segment() != p.segment());
    let request = if p.lane == EXIT_LANE {
        if v.last.is_none_or(|q| q.lane != EXIT_LANE) {
            Request::Exit
        } else {
            Request::None
        }
    } else if entered {
        Request::Notify
    } else {
        Request::None
    };
    v.last = Some(p);
    out.emit(t.with(SegmentEvent::Report { report: p, request }));
}

/// A car stopping or moving away, waiting for its second to be complete.
#[derive(Clone, Copy, Debug)]
struct StopEvent {
    segment: SegmentId,
    pos: u32,
    car: u32,
    stopped: bool,
}

/// The segments stage: per-minute statistics and accident detection for the segments of one
/// instance.
#[derive(Default)]
pub(crate) struct Segments {
    /// Minutes up to this one have been closed.
    closed: u32,
    /// Per segment, per open minute, per car: (sum of speeds, reports).
    speeds: FxHashMap<SegmentId, BTreeMap<u32, FxHashMap<u32, (u32, u32)>>>,
    /// Stop events by second, applied when the second is complete.
    stops: BTreeMap<u32, Vec<Tuple<StopEvent>>>,
    /// Stopped cars per place.
    stopped: FxHashMap<(SegmentId, u32), Vec<u32>>,
}

impl Segments {
    fn accident(&self, place: &(SegmentId, u32)) -> bool {
        self.stopped.get(place).is_some_and(|cars| cars.len() >= 2)
    }

    /// Applies the stop events of complete seconds (all if `watermark` is `None`), one second at
    /// a time, and emits where an accident started or ended.
    fn apply_stops(&mut self, watermark: Option<u64>, out: &mut Output<'_, TollEvent>) {
        while let Some(entry) = self.stops.first_entry() {
            if watermark.is_some_and(|w| event_ns(*entry.key()) >= w) {
                break;
            }
            let (time, events) = entry.remove_entry();
            let mut touched: Vec<((SegmentId, u32), bool)> = Vec::new();
            for e in &events {
                let place = (e.data.segment, e.data.pos);
                if !touched.iter().any(|(p, _)| *p == place) {
                    touched.push((place, self.accident(&place)));
                }
            }
            for e in &events {
                let cars = self.stopped.entry((e.data.segment, e.data.pos)).or_default();
                let at = cars.iter().position(|&c| c == e.data.car);
                match (e.data.stopped, at) {
                    (true, None) => cars.push(e.data.car),
                    (false, Some(i)) => {
                        cars.swap_remove(i);
                    }
                    _ => {}
                }
            }
            let last = events.last().expect("a second with stop events has one");
            for ((segment, pos), before) in touched {
                let after = self.accident(&(segment, pos));
                if self.stopped.get(&(segment, pos)).is_some_and(|cars| cars.is_empty()) {
                    self.stopped.remove(&(segment, pos));
                }
                if before == after {
                    continue;
                }
                for seg in upstream_of(segment.dir, segment.seg) {
                    let target = SegmentId { seg, ..segment };
                    let data = TollEvent::Accident { target, accident_seg: segment.seg, pos, time, start: after };
                    out.emit(Tuple {
                        event_ns: event_ns(time),
                        intended_ns: last.intended_ns,
                        ingress_ns: last.ingress_ns,
                        data,
                    });
                }
            }
        }
    }

    /// Emits the statistics of every open minute up to `complete`.
    fn close_minutes(&mut self, complete: u32, out: &mut Output<'_, TollEvent>) {
        let now = now_ns();
        self.speeds.retain(|&segment, minutes| {
            while let Some(entry) = minutes.first_entry() {
                if *entry.key() > complete {
                    break;
                }
                let (minute, cars) = entry.remove_entry();
                let sum: u64 = cars.values().map(|&(speed, reports)| (speed / reports) as u64).sum();
                let average = (sum / cars.len() as u64) as u32;
                let data = TollEvent::Stats { segment, minute, cars: cars.len() as u32, average };
                // The last instant of the minute: before any watermark that closes it downstream.
                out.emit(Tuple { event_ns: minute as u64 * MINUTE_NS - 1, intended_ns: now, ingress_ns: now, data });
            }
            !minutes.is_empty()
        });
        self.closed = complete;
    }
}

impl Operator<SegmentEvent, TollEvent> for Segments {
    fn process(&mut self, t: Tuple<SegmentEvent>, out: &mut Output<'_, TollEvent>) {
        match t.data {
            SegmentEvent::Report { report: p, request } => {
                let cars = self.speeds.entry(p.segment()).or_default().entry(p.minute()).or_default();
                let speeds = cars.entry(p.car).or_default();
                speeds.0 = speeds.0.saturating_add(p.speed as u32);
                speeds.1 = speeds.1.saturating_add(1);
                match request {
                    Request::Notify => out.emit(t.with(TollEvent::Notify(p))),
                    Request::Exit => {
                        out.emit(t.with(TollEvent::Exit { segment: p.segment(), car: p.car, time: p.time }))
                    }
                    Request::None => {}
                }
            }
            SegmentEvent::Stop { segment, pos, car, time, stopped } => {
                let event = t.with(StopEvent { segment, pos, car, stopped });
                self.stops.entry(time).or_default().push(event);
            }
            SegmentEvent::Query(q) => out.emit(t.with(TollEvent::Query(q))),
        }
    }

    fn on_watermark(&mut self, watermark: u64, out: &mut Output<'_, TollEvent>) {
        self.apply_stops(Some(watermark), out);
        let complete = complete_minutes(watermark);
        if complete > self.closed {
            self.close_minutes(complete, out);
        }
    }

    fn on_end(&mut self, out: &mut Output<'_, TollEvent>) {
        self.apply_stops(None, out);
        self.close_minutes(u32::MAX - 1, out);
    }
}

/// An accident in effect from `start` until `end` (exclusive; open while unknown).
#[derive(Clone, Copy, Debug)]
struct Span {
    accident_seg: u8,
    pos: u32,
    start: u32,
    end: Option<u32>,
}

/// What tolls keeps per segment.
#[derive(Default)]
struct TollSegment {
    /// Per minute: (cars, average speed).
    stats: BTreeMap<u32, (u32, u32)>,
    /// Accidents that concern this segment.
    spans: Vec<Span>,
}

/// The tolls stage: toll notifications and accident alerts for the segments of one instance.
#[derive(Default)]
pub(crate) struct Tolls {
    watermark: u64,
    segments: FxHashMap<SegmentId, TollSegment>,
    /// Requests by minute, waiting for the previous minute to be complete.
    pending: BTreeMap<u32, Vec<Tuple<PositionReport>>>,
    trimmed: u32,
}

impl Tolls {
    /// Answers a car that entered a segment at `t`.
    fn answer(&self, t: &Tuple<PositionReport>, out: &mut Output<'_, Charge>) {
        let p = t.data;
        let previous = p.minute() - 1;
        let (mut cars, mut lav, mut accident) = (0, 0, None);
        if let (Some(s), true) = (self.segments.get(&p.segment()), previous >= 1) {
            cars = s.stats.get(&previous).map_or(0, |&(cars, _)| cars);
            let first = previous.saturating_sub(LAV_MINUTES - 1).max(1);
            let averages: Vec<u32> = s.stats.range(first..=previous).map(|(_, &(_, average))| average).collect();
            if !averages.is_empty() {
                lav = averages.iter().sum::<u32>() / averages.len() as u32;
            }
            // In effect during the previous minute: started before its end, ended after its start.
            let (from, to) = (minute_start(previous), minute_start(p.minute()));
            accident = s
                .spans
                .iter()
                .filter(|a| a.start < to && a.end.is_none_or(|end| end > from))
                .filter_map(|a| downstream_distance(p.dir, p.seg, a.accident_seg).map(|d| (d, a.accident_seg)))
                .min();
        }
        if let Some((_, seg)) = accident {
            out.emit(t.with(Charge::Alert(AccidentAlert { car: p.car, time: p.time, seg })));
        }
        let toll = toll(lav, cars, accident.is_some());
        let notification = TollNotification { car: p.car, time: p.time, lav, toll };
        out.emit(t.with(Charge::Toll { notification, xway: p.xway }));
    }

    /// Drops statistics and accidents no request can need any more: every request still to come
    /// is in minute `complete + 1` or later.
    fn trim(&mut self, complete: u32) {
        let keep_from = complete.saturating_sub(LAV_MINUTES - 1);
        let ended_before = minute_start(complete.max(1));
        self.segments.retain(|_, s| {
            s.stats = s.stats.split_off(&keep_from);
            s.spans.retain(|a| a.end.is_none_or(|end| end > ended_before));
            !(s.stats.is_empty() && s.spans.is_empty())
        });
        self.trimmed = complete;
    }
}

impl Operator<TollEvent, Charge> for Tolls {
    fn process(&mut self, t: Tuple<TollEvent>, out: &mut Output<'_, Charge>) {
        match t.data {
            TollEvent::Stats { segment, minute, cars, average } => {
                self.segments.entry(segment).or_default().stats.insert(minute, (cars, average));
            }
            TollEvent::Accident { target, accident_seg, pos, time, start } => {
                let spans = &mut self.segments.entry(target).or_default().spans;
                if start {
                    spans.push(Span { accident_seg, pos, start: time, end: None });
                } else if let Some(span) =
                    spans.iter_mut().find(|a| a.accident_seg == accident_seg && a.pos == pos && a.end.is_none())
                {
                    span.end = Some(time);
                }
            }
            TollEvent::Notify(p) => {
                let request = t.with(p);
                if p.minute() <= complete_minutes(self.watermark) + 1 {
                    self.answer(&request, out);
                } else {
                    self.pending.entry(p.minute()).or_default().push(request);
                }
            }
            TollEvent::Exit { car, time, .. } => out.emit(t.with(Charge::Exit { car, time })),
            TollEvent::Query(q) => out.emit(t.with(Charge::Query(q))),
        }
    }

    fn on_watermark(&mut self, watermark: u64, out: &mut Output<'_, Charge>) {
        self.watermark = watermark;
        let complete = complete_minutes(watermark);
        while let Some(entry) = self.pending.first_entry() {
            if *entry.key() > complete + 1 {
                break;
            }
            for request in entry.remove() {
                self.answer(&request, out);
            }
        }
        if complete > self.trimmed {
            self.trim(complete);
        }
    }

    fn on_end(&mut self, out: &mut Output<'_, Charge>) {
        for (_, requests) in std::mem::take(&mut self.pending) {
            for request in requests {
                self.answer(&request, out);
            }
        }
    }
}

/// A car's account: the tolls charged to it.
#[derive(Default)]
struct Account {
    /// Sum of the tolls charged.
    balance: u64,
    /// Time of the last charge.
    last_charge: Option<u32>,
    /// Tolls charged today, per expressway.
    today: Vec<(u16, u64)>,
}

/// The accounts stage: passes outputs on, assesses tolls and answers historical queries, per car
/// in time order.
#[derive(Default)]
pub(crate) struct Accounts {
    /// Seed of the historical tolls table.
    history_seed: u64,
    watermark: u64,
    /// Each car's last notified toll, if not 0, and its expressway.
    pending: FxHashMap<u32, (u32, u16)>,
    accounts: FxHashMap<u32, Account>,
    /// Notifications, exits (phase 0) and queries (phase 1) waiting for the watermark, by (time,
    /// phase, car): a query comes after the charges of its second.
    buffered: BTreeMap<(u32, u8, u32), Vec<Tuple<Charge>>>,
}

impl Accounts {
    pub(crate) fn new(history_seed: u64) -> Self {
        Accounts { history_seed, ..Accounts::default() }
    }

    fn charge(&mut self, t: &Tuple<Charge>, out: &mut Output<'_, LrOutput>) {
        let (car, time) = (t.data.car(), t.data.time());
        let previous = match t.data {
            Charge::Toll { notification, xway } if notification.toll > 0 => {
                self.pending.insert(car, (notification.toll, xway))
            }
            Charge::Query(q) => return self.answer(t, &q, out),
            _ => self.pending.remove(&car),
        };
        if let Some((toll, xway)) = previous {
            let account = self.accounts.entry(car).or_default();
            account.balance += toll as u64;
            account.last_charge = Some(time);
            match account.today.iter_mut().find(|(x, _)| *x == xway) {
                Some((_, sum)) => *sum += toll as u64,
                None => account.today.push((xway, toll as u64)),
            }
            out.emit(t.with(LrOutput::Assessment(TollAssessment { car, time, toll })));
        }
    }

    fn answer(&self, t: &Tuple<Charge>, q: &QueryRecord, out: &mut Output<'_, LrOutput>) {
        let account = self.accounts.get(&q.car);
        let output = match q.kind {
            QueryKind::AccountBalance => LrOutput::Balance(AccountBalance {
                car: q.car,
                time: q.time,
                result_time: account.and_then(|a| a.last_charge).unwrap_or(q.time),
                qid: q.qid,
                bal: account.map_or(0, |a| a.balance),
            }),
            QueryKind::DailyExpenditure => {
                let bal = if q.day == 0 {
                    let today = account.map_or(&[][..], |a| &a.today[..]);
                    today.iter().find(|(x, _)| i32::from(*x) == q.xway).map_or(0, |&(_, sum)| sum)
                } else {
                    historical_toll(self.history_seed, q.car, q.xway, q.day)
                };
                LrOutput::Expenditure(DailyExpenditure { car: q.car, time: q.time, qid: q.qid, bal })
            }
            QueryKind::TravelTime => return,
        };
        out.emit(t.with(output));
    }

    fn release(&mut self, watermark: Option<u64>, out: &mut Output<'_, LrOutput>) {
        while let Some(entry) = self.buffered.first_entry() {
            let &(time, phase, _) = entry.key();
            // Charges once the watermark reaches their second, queries once it has passed it.
            if watermark.is_some_and(|w| if phase == 0 { event_ns(time) > w } else { event_ns(time) >= w }) {
                break;
            }
            for t in entry.remove() {
                self.charge(&t, out);
            }
        }
    }
}

impl Operator<Charge, LrOutput> for Accounts {
    fn process(&mut self, t: Tuple<Charge>, out: &mut Output<'_, LrOutput>) {
        let phase = match t.data {
            Charge::Alert(alert) => return out.emit(t.with(LrOutput::Alert(alert))),
            Charge::Toll { notification, .. } => {
                out.emit(t.with(LrOutput::Toll(notification)));
                0
            }
            Charge::Exit { .. } => 0,
            Charge::Query(_) => 1,
        };
        // A car's earlier events all have arrived once the watermark reaches this one's time;
        // a query waits until its whole second has.
        let due = if phase == 0 { t.event_ns <= self.watermark } else { t.event_ns < self.watermark };
        if due {
            self.charge(&t, out);
        } else {
            self.buffered.entry((t.data.time(), phase, t.data.car())).or_default().push(t);
        }
    }

    fn on_watermark(&mut self, watermark: u64, out: &mut Output<'_, LrOutput>) {
        self.watermark = watermark;
        self.release(Some(watermark), out);
    }

    fn on_end(&mut self, out: &mut Output<'_, LrOutput>) {
        self.release(None, out);
    }
}

fn pass<K, T>(_key: &K, _state: &mut (), t: Tuple<T>, out: &mut Output<'_, T>) {
    out.emit(t);
}

/// Runs the operator `make(instance)` on `stream` partitioned by `key`, with `parallelism`
/// instances.
///
/// The engine's keyed operators are per-key closures, which see no watermarks; these stages
/// need them. So a pass-through keyed step partitions the stream, and the operator follows it
/// over a forward edge at the same parallelism (fused onto its thread when chaining is on): each
/// instance sees exactly the tuples of its keys, in the order they arrived.
pub(crate) fn keyed<T, K, U, Op>(
    stream: Stream<T>,
    name: &str,
    parallelism: usize,
    key: fn(&T) -> K,
    make: impl Fn(usize) -> Op + Send + 'static,
) -> Stream<U>
where
    T: Data,
    K: Data + Hash + Eq,
    U: Data,
    Op: Operator<T, U>,
{
    stream
        .key_by(key)
        .process(&format!("{name}_by_key"), |_| (), pass)
        .parallelism(parallelism)
        .process(name, make)
        .parallelism(parallelism)
}

/// Builds the query `linear_road` over `lines` (with event time set), with `parallelism`
/// instances of each keyed stage.
pub(crate) fn build(
    lines: Source<String>,
    parallelism: usize,
    history_seed: u64,
    stats: &LinearRoadStats,
) -> Result<BuiltQuery, BuildError> {
    let n = parallelism;
    let query = Query::new("linear_road");
    let s = stats.clone();
    let inputs =
        query.source("source", lines).flat_map("dispatcher", move |line: String| super::dispatch_input(&line, &s));
    let events = inputs.key_by(Input::car).process("vehicles", |_| Vehicle::default(), vehicle).parallelism(n);
    let toll_events = keyed(events, "segments", n, SegmentEvent::segment, |_| Segments::default());
    let charges = keyed(toll_events, "tolls", n, TollEvent::segment, |_| Tolls::default());
    let outputs = keyed(charges, "accounts", n, Charge::car, move |_| Accounts::new(history_seed));
    let s = stats.clone();
    outputs.sink_with("outputs", move |_| {
        let s = s.clone();
        move |t: Tuple<LrOutput>| s.output(&t)
    });
    query.build()
}

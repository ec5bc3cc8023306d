//! The faithful Linear Road query on moirai's engine.
//!
//! ```text
//! source → dispatcher → vehicles → segments → tolls → accounts → outputs
//!          (parse)      by car      by segment  by segment  by car
//! ```
//!
//! - **dispatcher** parses each CSV line and keeps position reports and account-balance and
//!   daily-expenditure queries (type 2 and 3); it drops travel-time queries (type 4).
//! - **vehicles** (keyed by car, `vehicles.rs`) sees each car's reports in order: follows its
//!   trips as the rules say, counts identical consecutive reports (a car is stopped at the 4th,
//!   until it reports another place), and flags the first report in a new segment (a toll
//!   notification is due) and the exit-ramp report that charges the last toll.
//! - **segments** (keyed by expressway, direction, segment) gathers each minute's reports into
//!   the minute's statistics (NOV, the speeds' sum and count, the cars' mean speed), and detects
//!   accidents from the stopped cars: an accident is a place where two or more cars are stopped,
//!   from the second in which that became so until the second it stopped being so. Each
//!   accident's start and end go to the five segments it concerns (its own and four upstream).
//! - **tolls** (keyed by segment) answers each car entering the segment with the statistics of
//!   the previous minutes: the LAV, NOV, and the nearest accident up to four segments downstream
//!   whose alert window (the rules') holds the report's minute; it emits the toll notification
//!   and, if there is such an accident, the accident alert.
//! - **accounts** (keyed by car, `accounts.rs`) passes notifications and alerts on and assesses
//!   each car's previous toll when it gets its next notification or reaches the exit ramp. It
//!   keeps each car's account and answers its historical queries: the balance (type 2), and the
//!   expenditure on an expressway on a day (type 3, from the historical tolls).
//!
//! Queries travel with their car's key through vehicles, and pass segments and tolls unchanged
//! (keyed by a stand-in segment), so the topology is the same with or without them. A query is
//! answered once the watermark has passed its second: it sees every toll charged up to and
//! including that second, as the reference does.
//!
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

use super::accounts::Accounts;
use super::events::{
    complete_minutes, event_ns, stamped, Charge, Input, Place, Request, SegmentEvent, TollEvent, MINUTE_NS,
};
use super::model::{
    downstream_distance, minute_start, toll, upstream_of, AccidentAlert, LrOutput, PositionReport, SegmentId,
    TollNotification, LAV_MINUTES,
};
use super::rules::{MinuteStats, Rules};
use super::stats::LinearRoadStats;
use super::tolls::HistoricalTolls;
use super::vehicles::{vehicle, Vehicle};

/// A car stopping or moving away, waiting for its second to be complete.
#[derive(Clone, Copy, Debug)]
struct StopEvent {
    place: Place,
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
    stopped: FxHashMap<Place, Vec<u32>>,
}

impl Segments {
    fn accident(&self, place: &Place) -> bool {
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
            let mut touched: Vec<(Place, bool)> = Vec::new();
            for e in &events {
                if !touched.iter().any(|(p, _)| *p == e.data.place) {
                    touched.push((e.data.place, self.accident(&e.data.place)));
                }
            }
            for e in &events {
                let cars = self.stopped.entry(e.data.place).or_default();
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
            for (place, before) in touched {
                let after = self.accident(&place);
                if self.stopped.get(&place).is_some_and(|cars| cars.is_empty()) {
                    self.stopped.remove(&place);
                }
                if before == after {
                    continue;
                }
                let segment = place.0;
                for seg in upstream_of(segment.dir, segment.seg) {
                    let target = SegmentId { seg, ..segment };
                    out.emit(stamped(last, event_ns(time), TollEvent::Accident { target, place, time, start: after }));
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
                let data = TollEvent::Stats { segment, minute, stats: MinuteStats::from_cars(cars.values()) };
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
            SegmentEvent::Report { report: p, request, fresh } => {
                let cars = self.speeds.entry(p.segment()).or_default().entry(p.minute()).or_default();
                let speeds = cars.entry(p.car).or_default();
                speeds.0 = speeds.0.saturating_add(p.speed as u32);
                speeds.1 = speeds.1.saturating_add(1);
                match request {
                    Request::Notify => out.emit(t.with(TollEvent::Notify { report: p, fresh })),
                    Request::Exit => {
                        out.emit(t.with(TollEvent::Exit { segment: p.segment(), car: p.car, time: p.time, fresh }))
                    }
                    Request::None => {}
                }
            }
            SegmentEvent::Stop { place, car, time, stopped } => {
                let event = t.with(StopEvent { place, car, stopped });
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

/// An accident at `place` in effect from `start` until `end` (exclusive; open while unknown).
#[derive(Clone, Copy, Debug)]
struct Span {
    place: Place,
    start: u32,
    end: Option<u32>,
}

/// What tolls keeps per segment.
#[derive(Default)]
struct TollSegment {
    /// Per minute: what the segment saw.
    stats: BTreeMap<u32, MinuteStats>,
    /// Accidents that concern this segment.
    spans: Vec<Span>,
}

/// The tolls stage: toll notifications and accident alerts for the segments of one instance.
#[derive(Default)]
pub(crate) struct Tolls {
    rules: Rules,
    watermark: u64,
    segments: FxHashMap<SegmentId, TollSegment>,
    /// Requests by minute, waiting for the previous minute to be complete.
    pending: BTreeMap<u32, Vec<Tuple<(PositionReport, bool)>>>,
    trimmed: u32,
}

impl Tolls {
    fn new(rules: Rules) -> Self {
        Tolls { rules, ..Tolls::default() }
    }

    /// Answers a car that entered a segment at `t` (`fresh`: the first report of its trip).
    fn answer(&self, t: &Tuple<(PositionReport, bool)>, out: &mut Output<'_, Charge>) {
        let (p, fresh) = t.data;
        let m = p.minute();
        let (mut cars, mut lav, mut accident) = (0, 0, None);
        if let Some(s) = self.segments.get(&p.segment()) {
            cars = s.stats.get(&(m - 1)).map_or(0, |k| k.cars);
            lav = self.rules.lav(m, |k| s.stats.get(&k).copied());
            accident = s
                .spans
                .iter()
                .filter(|a| self.rules.alerts(a.start, a.end, m))
                .filter_map(|a| downstream_distance(p.dir, p.seg, a.place.0.seg).map(|d| (d, a.place.0.seg)))
                .min();
        }
        if let Some((_, seg)) = accident {
            let alert = AccidentAlert { car: p.car, time: p.time, xway: p.xway, seg, dir: p.dir };
            out.emit(t.with(Charge::Alert(alert)));
        }
        let toll = toll(lav, cars, accident.is_some());
        let notification = TollNotification { car: p.car, time: p.time, lav, toll };
        out.emit(t.with(Charge::Toll { notification, xway: p.xway, fresh }));
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
            TollEvent::Stats { segment, minute, stats } => {
                self.segments.entry(segment).or_default().stats.insert(minute, stats);
            }
            TollEvent::Accident { target, place, time, start } => {
                let spans = &mut self.segments.entry(target).or_default().spans;
                if start {
                    spans.push(Span { place, start: time, end: None });
                } else if let Some(span) = spans.iter_mut().find(|a| a.place == place && a.end.is_none()) {
                    span.end = Some(time);
                }
            }
            TollEvent::Notify { report, fresh } => {
                let request = t.with((report, fresh));
                if report.minute() <= complete_minutes(self.watermark) + 1 {
                    self.answer(&request, out);
                } else {
                    self.pending.entry(report.minute()).or_default().push(request);
                }
            }
            TollEvent::Exit { car, time, fresh, .. } => out.emit(t.with(Charge::Exit { car, time, fresh })),
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

/// What the faithful query needs besides its input.
#[derive(Clone)]
pub(crate) struct QueryOptions {
    /// Instances of each keyed stage.
    pub(crate) parallelism: usize,
    /// The rules to follow.
    pub(crate) rules: Rules,
    /// Where daily expenditures come from.
    pub(crate) history: HistoricalTolls,
}

/// Builds the query `linear_road` over `lines` (with event time set).
pub(crate) fn build(
    lines: Source<String>,
    options: &QueryOptions,
    stats: &LinearRoadStats,
) -> Result<BuiltQuery, BuildError> {
    let (n, rules) = (options.parallelism, options.rules);
    let query = Query::new("linear_road");
    let s = stats.clone();
    let inputs =
        query.source("source", lines).flat_map("dispatcher", move |line: String| super::dispatch_input(&line, &s));
    let s = stats.clone();
    let events = inputs
        .key_by(Input::car)
        .process("vehicles", |_| Vehicle::default(), move |_, v, t, out| vehicle(rules, &s, v, t, out))
        .parallelism(n);
    let toll_events = keyed(events, "segments", n, SegmentEvent::segment, |_| Segments::default());
    let charges = keyed(toll_events, "tolls", n, TollEvent::segment, move |_| Tolls::new(rules));
    let (history, s) = (options.history.clone(), stats.clone());
    let outputs = keyed(charges, "accounts", n, Charge::car, move |_| Accounts::new(rules, history.clone(), s.clone()));
    let s = stats.clone();
    outputs.sink_with("outputs", move |_| {
        let mut recorder = s.sink();
        move |t: Tuple<LrOutput>| recorder.output(&t)
    });
    query.build()
}

//! The Linear Road query as the Lachesis evaluation ran it (its Storm and Flink jobs, taken from
//! the StreamBenchmarks / BriskStream code): a *load shape* with nine operators and selectivity
//! about 1 everywhere, not a correct Linear Road.
//!
//! ```text
//! source → dispatcher → average_speed → last_average_speed → toll_notification_las ─┐
//!                     → count_vehicles → toll_notification_cv ──────────────────────┼→ sink
//!                     → toll_notification_pos ──────────────────────────────────────┘
//! ```
//!
//! Every edge is round-robin (Storm's shuffle grouping), so no operator is fused with the next;
//! the sink's three inputs are merged by a union fused onto the sink's thread (with chaining on,
//! that makes the nine threads the paper scheduled).
//!
//! The operators do what the originals do, quirks included, because the quirks set the load:
//! `average_speed` and `count_vehicles` clear their maps on *every* tuple (so `count_vehicles`
//! only ever emits a progress tuple, and `average_speed` emits the previous tuple's vehicle), the
//! three toll operators share no state (so `toll_notification_pos` never sees a LAV or a count and
//! every toll it computes is 0), its LAV threshold is 50 mph, and each toll operator emits one
//! dummy notification per input. One change: `average_speed` emits its last held vehicle at the
//! end of the stream, so that every operator has selectivity exactly 1 and the sink receives
//! exactly three tuples per position report.

use std::collections::{HashSet, VecDeque};

use moirai_engine::{BuildError, BuiltQuery, Operator, Output, Query, Source, Tuple};
use rustc_hash::FxHashMap;

use super::model::{PositionReport, SegmentId, EXIT_LANE};
use super::stats::LinearRoadStats;

/// A vehicle's average speed in one segment and minute.
#[derive(Clone, Copy, Debug)]
pub(crate) struct AvgVehicleSpeed {
    minute: u32,
    segment: SegmentId,
    speed: u32,
}

/// A segment's latest average velocity, for the minute after `minute - 1`.
#[derive(Clone, Copy, Debug)]
pub(crate) struct Lav {
    minute: u32,
    segment: SegmentId,
    lav: u32,
}

/// What count_vehicles emits: a segment with more than 50 cars, or a progress tuple.
#[derive(Clone, Copy, Debug)]
pub(crate) enum CountTuple {
    Count { minute: u32, segment: SegmentId, count: u32 },
    Progress { minute: u32 },
}

/// The dummy toll notification each toll operator emits per input, tagged with the operator
/// (0 = pos, 1 = cv, 2 = las) so the sink can count per branch.
#[derive(Clone, Copy, Debug)]
pub(crate) struct Notification {
    pub(crate) branch: u8,
}

/// average_speed: per vehicle, the average speed of its reports in one segment and minute.
#[derive(Default)]
pub(crate) struct AverageSpeed {
    /// Vehicle → (sum of speeds, reports, segment).
    speeds: FxHashMap<u32, (u32, u32, SegmentId)>,
    minute: u32,
    /// The last input, whose timestamps the vehicle still held at the end leaves with.
    last: Option<Tuple<PositionReport>>,
}

impl AverageSpeed {
    fn emit_all(&mut self, t: &Tuple<PositionReport>, out: &mut Output<'_, AvgVehicleSpeed>) {
        for &(sum, reports, segment) in self.speeds.values() {
            out.emit(t.with(AvgVehicleSpeed { minute: self.minute, segment, speed: sum / reports }));
        }
        self.speeds.clear();
    }
}

impl Operator<PositionReport, AvgVehicleSpeed> for AverageSpeed {
    fn process(&mut self, t: Tuple<PositionReport>, out: &mut Output<'_, AvgVehicleSpeed>) {
        let p = t.data;
        // As in the original: the map is emitted and cleared on every tuple, not per minute.
        self.emit_all(&t, out);
        self.minute = p.minute();
        self.speeds.insert(p.car, (p.speed as u32, 1, p.segment()));
        self.last = Some(t);
    }

    fn on_end(&mut self, out: &mut Output<'_, AvgVehicleSpeed>) {
        if let Some(t) = self.last.take() {
            self.emit_all(&t, out);
        }
    }
}

/// last_average_speed: per segment, the mean of the (at most five minutes old) vehicle averages.
#[derive(Default)]
pub(crate) struct LastAverageSpeed {
    /// Per segment: (average speed, minute), oldest first.
    latest: FxHashMap<SegmentId, VecDeque<(u32, u32)>>,
}

impl Operator<AvgVehicleSpeed, Lav> for LastAverageSpeed {
    fn process(&mut self, t: Tuple<AvgVehicleSpeed>, out: &mut Output<'_, Lav>) {
        let a = t.data;
        let latest = self.latest.entry(a.segment).or_default();
        latest.push_back((a.speed, a.minute));
        while latest.len() > 1 && latest.front().is_some_and(|&(_, m)| m + 4 < a.minute) {
            latest.pop_front();
        }
        // The original caps the sum at 11 values "to ensure constant workload".
        let values: Vec<u32> = latest.iter().take(11).map(|&(speed, _)| speed).collect();
        let lav = values.iter().sum::<u32>() / values.len() as u32;
        out.emit(t.with(Lav { minute: a.minute + 1, segment: a.segment, lav }));
    }
}

/// count_vehicles: per segment, reports in the current minute (cleared on every tuple).
#[derive(Default)]
pub(crate) struct CountVehicles {
    counts: FxHashMap<SegmentId, u32>,
    minute: u32,
}

impl Operator<PositionReport, CountTuple> for CountVehicles {
    fn process(&mut self, t: Tuple<PositionReport>, out: &mut Output<'_, CountTuple>) {
        let p = t.data;
        let mut emitted = false;
        for (&segment, &count) in &self.counts {
            if count > 50 {
                emitted = true;
                out.emit(t.with(CountTuple::Count { minute: self.minute, segment, count }));
            }
        }
        if !emitted {
            out.emit(t.with(CountTuple::Progress { minute: self.minute }));
        }
        self.counts.clear();
        self.minute = p.minute();
        *self.counts.entry(p.segment()).or_insert(0) += 1;
    }
}

/// The per-minute buffers every toll operator of the original keeps (and mostly never fills).
#[derive(Default)]
struct MinuteBuffers {
    minute: Option<u32>,
    accidents: [HashSet<SegmentId>; 2],
    counts: [FxHashMap<SegmentId, u32>; 2],
    lavs: [FxHashMap<SegmentId, u32>; 2],
}

impl MinuteBuffers {
    /// Rotates current into previous when the minute advances (and restarts if it goes back, as
    /// when the original's input file loops).
    fn check_minute(&mut self, minute: u32) {
        match self.minute {
            Some(m) if minute < m => self.minute = Some(minute),
            Some(m) if minute == m => {}
            _ => {
                self.minute = Some(minute);
                self.accidents.swap(0, 1);
                self.accidents[0].clear();
                self.counts.swap(0, 1);
                self.counts[0].clear();
                self.lavs.swap(0, 1);
                self.lavs[0].clear();
            }
        }
    }
}

/// toll_notification_las: records LAVs; one dummy notification per input.
#[derive(Default)]
pub(crate) struct TollNotificationLas {
    buffers: MinuteBuffers,
}

impl Operator<Lav, Notification> for TollNotificationLas {
    fn process(&mut self, t: Tuple<Lav>, out: &mut Output<'_, Notification>) {
        out.emit(t.with(Notification { branch: 2 }));
        self.buffers.check_minute(t.data.minute);
        self.buffers.lavs[0].insert(t.data.segment, t.data.lav);
    }
}

/// toll_notification_cv: records counts; one dummy notification per input.
#[derive(Default)]
pub(crate) struct TollNotificationCv {
    buffers: MinuteBuffers,
}

impl Operator<CountTuple, Notification> for TollNotificationCv {
    fn process(&mut self, t: Tuple<CountTuple>, out: &mut Output<'_, Notification>) {
        out.emit(t.with(Notification { branch: 1 }));
        match t.data {
            CountTuple::Progress { minute } => self.buffers.check_minute(minute),
            CountTuple::Count { minute, segment, count } => {
                self.buffers.check_minute(minute);
                self.buffers.counts[0].insert(segment, count);
            }
        }
    }
}

/// toll_notification_pos: the toll formula, on buffers nothing fills; one dummy notification per
/// input.
#[derive(Default)]
pub(crate) struct TollNotificationPos {
    buffers: MinuteBuffers,
    /// Each car's last segment.
    segments: FxHashMap<u32, u8>,
    /// Each car's last non-zero toll: (toll, LAV).
    last_toll: FxHashMap<u32, (u32, u32)>,
}

impl Operator<PositionReport, Notification> for TollNotificationPos {
    fn process(&mut self, t: Tuple<PositionReport>, out: &mut Output<'_, Notification>) {
        out.emit(t.with(Notification { branch: 0 }));
        let p = t.data;
        self.buffers.check_minute(p.minute());
        if p.lane == EXIT_LANE {
            self.last_toll.remove(&p.car);
            return;
        }
        if self.segments.insert(p.car, p.seg) == Some(p.seg) {
            return;
        }
        let segment = p.segment();
        let lav = self.buffers.lavs[1].get(&segment).copied().unwrap_or(0);
        let mut toll = 0;
        if lav < 50 {
            let cars = self.buffers.counts[1].get(&segment).copied().unwrap_or(0);
            if cars > 50 {
                let downstream = |i: u8| if p.dir == 0 { p.seg.checked_add(i) } else { p.seg.checked_sub(i) };
                let accident = (0..=4)
                    .filter_map(downstream)
                    .any(|seg| self.buffers.accidents[1].contains(&SegmentId { seg, ..segment }));
                if !accident {
                    let excess = (cars - 50) as u128;
                    toll = (2 * excess * excess).min(u32::MAX as u128) as u32;
                }
            }
        }
        if toll != 0 {
            self.last_toll.insert(p.car, (toll, lav));
        } else {
            self.last_toll.remove(&p.car);
        }
    }
}

/// Builds the query `linear_road_lachesis` over `lines`, with `parallelism` instances of every
/// operator between source and sink.
pub(crate) fn build(
    lines: Source<String>,
    parallelism: usize,
    stats: &LinearRoadStats,
) -> Result<BuiltQuery, BuildError> {
    let n = parallelism;
    let query = Query::new("linear_road_lachesis");
    let s = stats.clone();
    // The original dispatcher splits the line and parses the fields of type-0 records only.
    let reports = query
        .source("source", lines)
        .rebalance()
        .flat_map("dispatcher", move |line: String| super::dispatch(&line, &s))
        .parallelism(n);
    let las = reports
        .clone()
        .rebalance()
        .process("average_speed", |_| AverageSpeed::default())
        .parallelism(n)
        .rebalance()
        .process("last_average_speed", |_| LastAverageSpeed::default())
        .parallelism(n)
        .rebalance()
        .process("toll_notification_las", |_| TollNotificationLas::default())
        .parallelism(n);
    let cv = reports
        .clone()
        .rebalance()
        .process("count_vehicles", |_| CountVehicles::default())
        .parallelism(n)
        .rebalance()
        .process("toll_notification_cv", |_| TollNotificationCv::default())
        .parallelism(n);
    let pos = reports.rebalance().process("toll_notification_pos", |_| TollNotificationPos::default()).parallelism(n);
    let s = stats.clone();
    pos.rebalance().union("sink_merge", vec![cv.rebalance(), las.rebalance()]).sink_with("sink", move |_| {
        let s = s.clone();
        move |t: Tuple<Notification>| s.lachesis_output(t.data.branch as usize, t.intended_ns)
    });
    query.build()
}

//! What the stages of the faithful query ([`super::query`]) send each other, and the event-time
//! helpers they share.

use moirai_engine::Tuple;

use super::model::{AccidentAlert, PositionReport, QueryRecord, SegmentId, TollNotification, SEGMENTS};
use super::rules::MinuteStats;

const NS: u64 = 1_000_000_000;
/// A minute of event time, ns.
pub(crate) const MINUTE_NS: u64 = 60 * NS;

/// Seconds of LR time as event-time nanoseconds.
pub fn event_ns(time: u32) -> u64 {
    time as u64 * NS
}

/// Minutes complete at watermark `w`: minute `k` is complete once `w` reaches its end, `60k` s.
pub(crate) fn complete_minutes(w: u64) -> u32 {
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
    /// The car reached the exit ramp: its last toll is due.
    Exit,
}

/// A place where cars stop: a segment, a lane (0 for all lanes, as the rules say) and a position.
pub(crate) type Place = (SegmentId, u8, u32);

/// From vehicles to segments, keyed by segment.
#[derive(Clone, Debug)]
pub(crate) enum SegmentEvent {
    /// A position report; `fresh` when it starts the car's trip (its unpaid toll is dropped).
    Report { report: PositionReport, request: Request, fresh: bool },
    /// A car became stopped at `place` (`stopped`), or moved away from there.
    Stop { place: Place, car: u32, time: u32, stopped: bool },
    /// A historical query, passed on.
    Query(QueryRecord),
}

impl SegmentEvent {
    pub(crate) fn segment(&self) -> SegmentId {
        match self {
            SegmentEvent::Report { report, .. } => report.segment(),
            SegmentEvent::Stop { place, .. } => place.0,
            SegmentEvent::Query(q) => query_segment(q),
        }
    }
}

/// From segments to tolls, keyed by the segment it concerns.
#[derive(Clone, Debug)]
pub(crate) enum TollEvent {
    /// A segment's statistics of a complete minute.
    Stats { segment: SegmentId, minute: u32, stats: MinuteStats },
    /// An accident at `place` started (or ended) at `time`; sent to every segment `target` whose
    /// cars it concerns.
    Accident { target: SegmentId, place: Place, time: u32, start: bool },
    /// A car entered the segment and needs a toll notification.
    Notify { report: PositionReport, fresh: bool },
    /// A car reached the exit ramp in `segment`.
    Exit { segment: SegmentId, car: u32, time: u32, fresh: bool },
    /// A historical query, passed on.
    Query(QueryRecord),
}

impl TollEvent {
    pub(crate) fn segment(&self) -> SegmentId {
        match self {
            TollEvent::Stats { segment, .. } | TollEvent::Exit { segment, .. } => *segment,
            TollEvent::Accident { target, .. } => *target,
            TollEvent::Notify { report, .. } => report.segment(),
            TollEvent::Query(q) => query_segment(q),
        }
    }
}

/// From tolls to accounts, keyed by car.
#[derive(Clone, Debug)]
pub(crate) enum Charge {
    /// An accident alert.
    Alert(AccidentAlert),
    /// A toll notification for a segment of expressway `xway`; `fresh` when it starts a trip.
    Toll { notification: TollNotification, xway: u16, fresh: bool },
    /// The car reached the exit ramp at `time`.
    Exit { car: u32, time: u32, fresh: bool },
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

    pub(crate) fn time(&self) -> u32 {
        match self {
            Charge::Alert(a) => a.time,
            Charge::Toll { notification, .. } => notification.time,
            Charge::Exit { time, .. } => *time,
            Charge::Query(q) => q.time,
        }
    }
}

/// A tuple made by an operator on its own behalf (not from one input tuple), at event time
/// `event_ns`, stamped like `like` (its intended and ingress times).
pub(crate) fn stamped<T, U>(like: &Tuple<U>, event_ns: u64, data: T) -> Tuple<T> {
    Tuple { event_ns, intended_ns: like.intended_ns, ingress_ns: like.ingress_ns, data }
}

//! The Linear Road world and its records: constants of the benchmark, input records (position
//! reports and historical queries), outputs, and the few formulas every implementation shares
//! (minute numbers, the toll formula, which segments lie downstream).
//!
//! Constants follow Arasu et al. (VLDB 2004) as quoted by the aeolus LRB code: 100 segments of
//! one mile per expressway, lanes 0 (entrance ramp) to 4 (exit ramp), a position report every
//! 30 s, a car stopped after 4 identical reports, tolls when LAV < 40 mph and more than 50 cars.

use serde::Serialize;

/// Segments per expressway and direction.
pub const SEGMENTS: u8 = 100;
/// Length of a segment, in feet (one mile).
pub const SEGMENT_FT: u32 = 5280;
/// The largest position on an expressway, in feet.
pub const MAX_POS: u32 = SEGMENTS as u32 * SEGMENT_FT - 1;
/// The entrance ramp.
pub const ENTRY_LANE: u8 = 0;
/// The exit ramp.
pub const EXIT_LANE: u8 = 4;
/// The largest speed a report may carry, mph.
pub const MAX_SPEED: u8 = 100;
/// Every car on the road reports its position this often, seconds.
pub const REPORT_INTERVAL_S: u32 = 30;
/// Identical consecutive reports after which a car counts as stopped.
pub const STOPPED_REPORTS: u32 = 4;
/// Minutes averaged into the latest average velocity (LAV).
pub const LAV_MINUTES: u32 = 5;
/// An accident this many segments downstream (or in the car's own segment) matters to a car.
pub const ACCIDENT_LOOKAHEAD: u8 = 4;
/// Tolls are charged only when the LAV is below this, mph.
pub const TOLL_LAV_MPH: u32 = 40;
/// Tolls are charged only when more cars than this were in the segment in the previous minute.
pub const TOLL_MIN_CARS: u32 = 50;
/// Toll notifications, accident alerts and account balances must leave within this many seconds
/// of their trigger.
pub const DEADLINE_S: u64 = 5;
/// Daily expenditures must leave within this many seconds of their query.
pub const EXPENDITURE_DEADLINE_S: u64 = 10;
/// Days of toll history a daily-expenditure query may ask about (1 = yesterday).
pub const HISTORY_DAYS: i32 = 69;

/// A type-0 input record: where a car is, sent every 30 s while it is on the road.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize)]
pub struct PositionReport {
    /// Seconds since the start of the simulation.
    pub time: u32,
    /// The car (VID).
    pub car: u32,
    /// Speed, mph (0..=100).
    pub speed: u8,
    /// Expressway, from 0.
    pub xway: u16,
    /// 0 = entrance ramp, 1..=3 = travel lanes, 4 = exit ramp.
    pub lane: u8,
    /// 0 = eastbound (positions grow), 1 = westbound.
    pub dir: u8,
    /// Segment, `pos / 5280`.
    pub seg: u8,
    /// Position on the expressway, feet from its western end.
    pub pos: u32,
}

impl PositionReport {
    /// The minute this report belongs to.
    pub fn minute(&self) -> u32 {
        minute(self.time)
    }

    /// The segment this report is in: `(xway, dir, seg)`.
    pub fn segment(&self) -> SegmentId {
        SegmentId { xway: self.xway, dir: self.dir, seg: self.seg }
    }

    /// Where the car is, as far as "stopped" is concerned: the same lane and position.
    pub fn place(&self) -> Place {
        Place { xway: self.xway, dir: self.dir, lane: self.lane, pos: self.pos }
    }
}

/// One direction of one segment of one expressway: the key of segment statistics and tolls.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize)]
pub struct SegmentId {
    /// Expressway.
    pub xway: u16,
    /// Direction.
    pub dir: u8,
    /// Segment.
    pub seg: u8,
}

/// A car's exact place: consecutive reports at the same place mean the car does not move.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct Place {
    /// Expressway.
    pub xway: u16,
    /// Direction.
    pub dir: u8,
    /// Lane.
    pub lane: u8,
    /// Position, feet.
    pub pos: u32,
}

/// The kinds of historical query a record may carry besides position reports.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize)]
pub enum QueryKind {
    /// Type 2: a car asks for its account balance.
    AccountBalance,
    /// Type 3: a car asks what it spent on one expressway on one day.
    DailyExpenditure,
    /// Type 4: a car asks for a travel-time estimate (never implemented by any LR system).
    TravelTime,
}

impl QueryKind {
    /// The record type in the CSV format.
    pub fn code(self) -> u8 {
        match self {
            QueryKind::AccountBalance => 2,
            QueryKind::DailyExpenditure => 3,
            QueryKind::TravelTime => 4,
        }
    }
}

/// A type-2, -3 or -4 record. The faithful query answers types 2 and 3; type 4 is read and dropped.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize)]
pub struct QueryRecord {
    /// Which query.
    pub kind: QueryKind,
    /// Seconds since the start of the simulation.
    pub time: u32,
    /// The asking car.
    pub car: u32,
    /// Expressway (types 3 and 4), else -1.
    pub xway: i32,
    /// Query id.
    pub qid: i32,
    /// Start segment (type 4), else -1.
    pub sinit: i32,
    /// End segment (type 4), else -1.
    pub send: i32,
    /// Day of week (type 4), else -1.
    pub dow: i32,
    /// Minute of day (type 4), else -1.
    pub tod: i32,
    /// Day (type 3): 1 = yesterday … 69; 0 = today (moirai's extension), else -1.
    pub day: i32,
}

/// One input record.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize)]
pub enum Record {
    /// Type 0.
    Position(PositionReport),
    /// Types 2, 3, 4.
    Query(QueryRecord),
}

impl Record {
    /// Seconds since the start of the simulation.
    pub fn time(&self) -> u32 {
        match self {
            Record::Position(p) => p.time,
            Record::Query(q) => q.time,
        }
    }
}

/// Output type 0: the toll a car will be charged for the segment it just entered.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize)]
pub struct TollNotification {
    /// The car.
    pub car: u32,
    /// Time of the position report that triggered it.
    pub time: u32,
    /// Latest average velocity of the segment, mph (0 if the segment had no traffic).
    pub lav: u32,
    /// The toll (0 when none applies).
    pub toll: u32,
}

/// Output type 1: an accident lies in the car's segment or up to 4 segments downstream.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize)]
pub struct AccidentAlert {
    /// The car.
    pub car: u32,
    /// Time of the position report that triggered it.
    pub time: u32,
    /// The car's (and the accident's) expressway.
    pub xway: u16,
    /// The segment of the (nearest) accident.
    pub seg: u8,
    /// The car's (and the accident's) direction.
    pub dir: u8,
}

/// A toll charged: the last notified toll, assessed when the car enters its next segment or
/// reaches the exit ramp.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize)]
pub struct TollAssessment {
    /// The car.
    pub car: u32,
    /// Time of the position report at which it was charged.
    pub time: u32,
    /// The amount (never 0: nothing is assessed for a zero toll).
    pub toll: u32,
}

/// Output type 2: the answer to an account-balance query.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize)]
pub struct AccountBalance {
    /// The asking car (not in the output line; the QID identifies the query).
    pub car: u32,
    /// Time of the query.
    pub time: u32,
    /// Time of the last toll charged to the car (the query's time if none was).
    pub result_time: u32,
    /// Query id.
    pub qid: i32,
    /// Sum of the tolls charged to the car so far.
    pub bal: u64,
}

/// Output type 3: the answer to a daily-expenditure query.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize)]
pub struct DailyExpenditure {
    /// The asking car (not in the output line).
    pub car: u32,
    /// Time of the query.
    pub time: u32,
    /// Query id.
    pub qid: i32,
    /// The car's tolls on the asked expressway on the asked day.
    pub bal: u64,
}

/// What a Linear Road query outputs.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize)]
pub enum LrOutput {
    /// Type 0.
    Toll(TollNotification),
    /// Type 1.
    Alert(AccidentAlert),
    /// Toll assessment (internal accounting in the benchmark; reported here to be checked).
    Assessment(TollAssessment),
    /// Type 2.
    Balance(AccountBalance),
    /// Type 3.
    Expenditure(DailyExpenditure),
}

impl LrOutput {
    /// True for the outputs the benchmark puts a deadline on: all but toll assessments.
    pub fn has_deadline(&self) -> bool {
        self.deadline_s().is_some()
    }

    /// The benchmark's deadline of this output, seconds: 5 s for toll notifications, accident
    /// alerts and account balances, 10 s for daily expenditures, none for toll assessments.
    pub fn deadline_s(&self) -> Option<u64> {
        match self {
            LrOutput::Assessment(_) => None,
            LrOutput::Expenditure(_) => Some(EXPENDITURE_DEADLINE_S),
            _ => Some(DEADLINE_S),
        }
    }

    /// Time of the report that triggered it.
    pub fn time(&self) -> u32 {
        match self {
            LrOutput::Toll(n) => n.time,
            LrOutput::Alert(a) => a.time,
            LrOutput::Assessment(a) => a.time,
            LrOutput::Balance(b) => b.time,
            LrOutput::Expenditure(e) => e.time,
        }
    }
}

/// The toll a car paid on an expressway on a past day (`day` 1 = yesterday …
/// [`HISTORY_DAYS`]): the historical tolls table the benchmark's data generator supplies, made
/// here deterministically from `seed` — a toll in 0..=99, as the benchmark's generator draws them.
/// 0 for other days.
pub fn historical_toll(seed: u64, car: u32, xway: i32, day: i32) -> u64 {
    if !(1..=HISTORY_DAYS).contains(&day) {
        return 0;
    }
    // SplitMix64 over the key.
    let mut z =
        seed ^ ((car as u64) << 32 | (xway as u32 as u64) << 8 | day as u64).wrapping_mul(0x9E37_79B9_7F4A_7C15);
    z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
    z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
    (z ^ (z >> 31)) % 100
}

/// Minute number of a time: `floor(t / 60) + 1`, as in the benchmark.
pub fn minute(time: u32) -> u32 {
    time / 60 + 1
}

/// The first second of minute `m`.
pub fn minute_start(m: u32) -> u32 {
    (m - 1) * 60
}

/// The toll for a segment: `2 · (NOV − 50)²` when LAV < 40 mph, NOV > 50 and no accident is
/// near, else 0.
pub fn toll(lav: u32, nov: u32, accident_near: bool) -> u32 {
    if lav < TOLL_LAV_MPH && nov > TOLL_MIN_CARS && !accident_near {
        let excess = (nov - TOLL_MIN_CARS) as u128;
        (2 * excess * excess).min(u32::MAX as u128) as u32
    } else {
        0
    }
}

/// How many segments `accident_seg` lies downstream of `seg` in direction `dir`, if it lies in
/// `seg` itself or at most [`ACCIDENT_LOOKAHEAD`] segments downstream (eastbound: higher
/// segments; westbound: lower).
pub fn downstream_distance(dir: u8, seg: u8, accident_seg: u8) -> Option<u8> {
    let distance = if dir == 0 { accident_seg.checked_sub(seg) } else { seg.checked_sub(accident_seg) };
    distance.filter(|&d| d <= ACCIDENT_LOOKAHEAD)
}

/// The segments whose cars an accident in `accident_seg` concerns: itself and the
/// [`ACCIDENT_LOOKAHEAD`] segments upstream of it.
pub fn upstream_of(dir: u8, accident_seg: u8) -> impl Iterator<Item = u8> {
    (0..=ACCIDENT_LOOKAHEAD).filter_map(move |d| {
        let seg = if dir == 0 { accident_seg.checked_sub(d) } else { accident_seg.checked_add(d) };
        seg.filter(|&s| s < SEGMENTS)
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn minutes_start_at_one() {
        assert_eq!(minute(0), 1);
        assert_eq!(minute(59), 1);
        assert_eq!(minute(60), 2);
        assert_eq!(minute_start(2), 60);
    }

    #[test]
    fn toll_formula_and_its_conditions() {
        assert_eq!(toll(39, 51, false), 2);
        assert_eq!(toll(10, 60, false), 200);
        assert_eq!(toll(40, 60, false), 0, "LAV must be below 40");
        assert_eq!(toll(10, 50, false), 0, "more than 50 cars are needed");
        assert_eq!(toll(10, 60, true), 0, "no toll near an accident");
        assert_eq!(toll(10, u32::MAX, false), u32::MAX, "saturates rather than overflows");
    }

    #[test]
    fn downstream_depends_on_direction() {
        assert_eq!(downstream_distance(0, 10, 14), Some(4));
        assert_eq!(downstream_distance(0, 10, 15), None);
        assert_eq!(downstream_distance(0, 10, 9), None);
        assert_eq!(downstream_distance(1, 10, 6), Some(4));
        assert_eq!(downstream_distance(1, 10, 11), None);
        assert_eq!(upstream_of(0, 2).collect::<Vec<_>>(), vec![2, 1, 0]);
        assert_eq!(upstream_of(1, 97).collect::<Vec<_>>(), vec![97, 98, 99]);
        // Every segment an accident concerns sees it downstream, and no other does.
        for dir in 0..2 {
            for acc in 0..SEGMENTS {
                let concerned: Vec<u8> = upstream_of(dir, acc).collect();
                for seg in 0..SEGMENTS {
                    assert_eq!(concerned.contains(&seg), downstream_distance(dir, seg, acc).is_some());
                }
            }
        }
    }
}

//! The reference implementation: Linear Road's semantics as a plain, single-threaded loop over the
//! input, second by second, with no engine, no watermarks and no partitioning.
//!
//! It is written the naive way on purpose, so that it is easy to check by reading against the
//! semantics in [`super`], and so that the engine query (which reaches the same answers through
//! keyed state, event time and watermarks) can be checked against it. Where the query keeps
//! accident *spans* and checks their overlap with a minute, this loop marks every minute in which
//! an accident was in effect, including the minutes it was carried over into.

use std::collections::{BTreeSet, HashMap, HashSet};

use super::model::{
    downstream_distance, minute, minute_start, toll, AccidentAlert, LrOutput, PositionReport, Record, SegmentId,
    TollAssessment, TollNotification, EXIT_LANE, LAV_MINUTES, STOPPED_REPORTS,
};

/// What the reference remembers about a car.
#[derive(Default)]
struct Car {
    last: Option<PositionReport>,
    /// Identical consecutive reports up to the last one.
    run: u32,
    /// Where the car is stopped: `(xway, dir, seg, pos)`.
    stopped_at: Option<(u16, u8, u8, u32)>,
    /// The last notified toll, not yet assessed.
    pending_toll: u32,
}

/// The reference's state between seconds.
#[derive(Default)]
struct Reference {
    cars: HashMap<u32, Car>,
    /// Per segment and minute: per car, (sum of speeds, reports).
    speeds: HashMap<(SegmentId, u32), HashMap<u32, (u32, u32)>>,
    /// Stopped cars per `(xway, dir, seg, pos)`.
    stopped: HashMap<(u16, u8, u8, u32), BTreeSet<u32>>,
    /// `(segment of the accident, minute)` for every minute an accident was in effect.
    accidents: HashSet<(SegmentId, u32)>,
    /// The minute of the last second processed (0 before the first).
    minute: u32,
    out: Vec<LrOutput>,
}

/// Runs Linear Road over `records` (in time order) and returns every output, in the order the
/// loop produced them.
pub fn run(records: impl IntoIterator<Item = Record>) -> Vec<LrOutput> {
    let mut reference = Reference::default();
    let mut second: Vec<PositionReport> = Vec::new();
    for record in records {
        let Record::Position(p) = record else { continue };
        if second.first().is_some_and(|first| first.time != p.time) {
            reference.second(&second);
            second.clear();
        }
        second.push(p);
    }
    if !second.is_empty() {
        reference.second(&second);
    }
    reference.out
}

impl Reference {
    /// Processes all reports of one second.
    fn second(&mut self, reports: &[PositionReport]) {
        let t = reports[0].time;
        let m = minute(t);
        // Accidents in effect since the last processed second stay in effect over the gap
        // (whole minutes in between, and the start of this minute before this second).
        if m > self.minute {
            for k in self.minute + 1..m {
                self.mark_accidents(k);
            }
            if t > minute_start(m) {
                self.mark_accidents(m);
            }
            self.minute = m;
            // Only the last five minutes' statistics and the last minute's accidents are read.
            let oldest = m.saturating_sub(LAV_MINUTES + 1);
            self.speeds.retain(|&(_, k), _| k >= oldest);
            self.accidents.retain(|&(_, k)| k + 1 >= m);
        }
        let mut entries = Vec::new();
        let mut exits = Vec::new();
        for &p in reports {
            let car = self.cars.entry(p.car).or_default();
            let prev = car.last;
            let same_place = prev.is_some_and(|q| q.place() == p.place());
            car.run = if same_place { car.run.saturating_add(1) } else { 1 };
            if !same_place {
                if let Some(at) = car.stopped_at.take() {
                    let cars = self.stopped.get_mut(&at).expect("a stopped car is in the stopped map");
                    cars.remove(&p.car);
                    if cars.is_empty() {
                        self.stopped.remove(&at);
                    }
                }
            }
            if car.run == STOPPED_REPORTS {
                let at = (p.xway, p.dir, p.seg, p.pos);
                car.stopped_at = Some(at);
                self.stopped.entry(at).or_default().insert(p.car);
            }
            let speeds = self.speeds.entry((p.segment(), m)).or_default().entry(p.car).or_default();
            speeds.0 = speeds.0.saturating_add(p.speed as u32);
            speeds.1 = speeds.1.saturating_add(1);
            let entered = prev.is_none_or(|q| q.segment() != p.segment());
            if entered && p.lane != EXIT_LANE {
                entries.push(p);
            }
            if p.lane == EXIT_LANE && prev.is_none_or(|q| q.lane != EXIT_LANE) {
                exits.push(p);
            }
            car.last = Some(p);
        }
        self.mark_accidents(m);
        for p in entries {
            self.notify(&p, m);
        }
        for p in exits {
            let car = self.cars.get_mut(&p.car).expect("a car that reported is known");
            let pending = std::mem::take(&mut car.pending_toll);
            if pending > 0 {
                self.out.push(LrOutput::Assessment(TollAssessment { car: p.car, time: p.time, toll: pending }));
            }
        }
    }

    /// Marks minute `k` for every position where two or more cars are stopped now.
    fn mark_accidents(&mut self, k: u32) {
        for (&(xway, dir, seg, _pos), cars) in &self.stopped {
            if cars.len() >= 2 {
                self.accidents.insert((SegmentId { xway, dir, seg }, k));
            }
        }
    }

    /// Average speed of a segment in minute `k`: the mean of its cars' mean speeds (integer
    /// means, as LR implementations compute them); `None` if no car reported there.
    fn average_speed(&self, segment: SegmentId, k: u32) -> Option<u32> {
        let cars = self.speeds.get(&(segment, k))?;
        let sum: u64 = cars.values().map(|&(speed, reports)| (speed / reports) as u64).sum();
        Some((sum / cars.len() as u64) as u32)
    }

    /// The toll notification (and maybe accident alert, and assessment of the previous toll) for
    /// a car that entered a segment at `p`, in minute `m`.
    fn notify(&mut self, p: &PositionReport, m: u32) {
        let segment = p.segment();
        let previous = m - 1;
        let nov = self.speeds.get(&(segment, previous)).map_or(0, |cars| cars.len() as u32);
        let minutes: Vec<u32> = (previous.saturating_sub(LAV_MINUTES - 1).max(1)..=previous)
            .filter_map(|k| self.average_speed(segment, k))
            .collect();
        let lav = if minutes.is_empty() { 0 } else { minutes.iter().sum::<u32>() / minutes.len() as u32 };
        let accident = (0..super::model::SEGMENTS)
            .filter(|&a| self.accidents.contains(&(SegmentId { seg: a, ..segment }, previous)))
            .filter_map(|a| downstream_distance(p.dir, p.seg, a).map(|d| (d, a)))
            .min();
        if let Some((_, seg)) = accident {
            self.out.push(LrOutput::Alert(AccidentAlert { car: p.car, time: p.time, seg }));
        }
        let toll = toll(lav, nov, accident.is_some());
        self.out.push(LrOutput::Toll(TollNotification { car: p.car, time: p.time, lav, toll }));
        let car = self.cars.get_mut(&p.car).expect("a car that reported is known");
        let pending = std::mem::replace(&mut car.pending_toll, toll);
        if pending > 0 {
            self.out.push(LrOutput::Assessment(TollAssessment { car: p.car, time: p.time, toll: pending }));
        }
    }
}

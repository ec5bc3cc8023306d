//! The reference implementation: Linear Road's semantics as a plain, single-threaded loop over the
//! input, second by second, with no engine, no watermarks and no partitioning.
//!
//! It is written the naive way on purpose, so that it is easy to check by reading against the
//! semantics in [`super`], and so that the engine query (which reaches the same answers through
//! keyed state, event time and watermarks) can be checked against it. Where the query keeps
//! accident *spans* and checks their overlap with a minute, this loop marks every minute in which
//! an accident was in effect, including the minutes it was carried over into.
//!
//! Historical queries are answered after all reports of their second: an account balance
//! (type 2) or a daily expenditure for today (type 3, day 0) counts every toll charged up to and
//! including that second.

use std::collections::{BTreeSet, HashMap, HashSet};

use super::model::{
    downstream_distance, historical_toll, minute, minute_start, toll, AccidentAlert, AccountBalance, DailyExpenditure,
    LrOutput, PositionReport, QueryKind, QueryRecord, Record, SegmentId, TollAssessment, TollNotification, EXIT_LANE,
    LAV_MINUTES, STOPPED_REPORTS,
};

/// What the reference remembers about a car.
#[derive(Default)]
struct Car {
    last: Option<PositionReport>,
    /// Identical consecutive reports up to the last one.
    run: u32,
    /// Where the car is stopped: `(xway, dir, seg, pos)`.
    stopped_at: Option<(u16, u8, u8, u32)>,
    /// The last notified toll, not yet assessed, and the expressway it is for.
    pending_toll: u32,
    pending_xway: u16,
    /// Sum of the tolls charged so far, and the time of the last charge.
    balance: u64,
    last_charge: Option<u32>,
    /// Tolls charged today, per expressway.
    today: HashMap<u16, u64>,
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
    /// Seed of the historical tolls table.
    history_seed: u64,
    out: Vec<LrOutput>,
}

/// Runs Linear Road over `records` (in time order) and returns every output, in the order the
/// loop produced them; historical tolls come from seed 0.
pub fn run(records: impl IntoIterator<Item = Record>) -> Vec<LrOutput> {
    run_with_history(records, 0)
}

/// [`run`], with the historical tolls table of `history_seed`
/// ([`super::model::historical_toll`]).
pub fn run_with_history(records: impl IntoIterator<Item = Record>, history_seed: u64) -> Vec<LrOutput> {
    let mut reference = Reference { history_seed, ..Reference::default() };
    let mut second: Vec<PositionReport> = Vec::new();
    let mut queries: Vec<QueryRecord> = Vec::new();
    let mut time = None;
    for record in records {
        if time.is_some_and(|t| t != record.time()) {
            reference.second(&second);
            reference.answer(&queries);
            second.clear();
            queries.clear();
        }
        time = Some(record.time());
        match record {
            Record::Position(p) => second.push(p),
            Record::Query(q) => queries.push(q),
        }
    }
    reference.second(&second);
    reference.answer(&queries);
    reference.out
}

impl Reference {
    /// Answers the account-balance and daily-expenditure queries of one second (after its
    /// reports); travel-time queries are not answered.
    fn answer(&mut self, queries: &[QueryRecord]) {
        for q in queries {
            let car = self.cars.get(&q.car);
            match q.kind {
                QueryKind::AccountBalance => self.out.push(LrOutput::Balance(AccountBalance {
                    car: q.car,
                    time: q.time,
                    result_time: car.and_then(|c| c.last_charge).unwrap_or(q.time),
                    qid: q.qid,
                    bal: car.map_or(0, |c| c.balance),
                })),
                QueryKind::DailyExpenditure => {
                    let bal = if q.day == 0 {
                        let xway = u16::try_from(q.xway).ok();
                        car.zip(xway).and_then(|(c, x)| c.today.get(&x).copied()).unwrap_or(0)
                    } else {
                        historical_toll(self.history_seed, q.car, q.xway, q.day)
                    };
                    self.out.push(LrOutput::Expenditure(DailyExpenditure { car: q.car, time: q.time, qid: q.qid, bal }))
                }
                QueryKind::TravelTime => {}
            }
        }
    }

    /// Charges the car of `p` its pending toll, if any.
    fn charge(&mut self, p: &PositionReport) {
        let car = self.cars.get_mut(&p.car).expect("a car that reported is known");
        let pending = std::mem::take(&mut car.pending_toll);
        if pending > 0 {
            car.balance += pending as u64;
            car.last_charge = Some(p.time);
            *car.today.entry(car.pending_xway).or_default() += pending as u64;
            self.out.push(LrOutput::Assessment(TollAssessment { car: p.car, time: p.time, toll: pending }));
        }
    }

    /// Processes all reports of one second.
    fn second(&mut self, reports: &[PositionReport]) {
        let Some(first) = reports.first() else { return };
        let t = first.time;
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
            self.charge(&p);
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
        self.charge(p);
        let car = self.cars.get_mut(&p.car).expect("a car that reported is known");
        car.pending_toll = toll;
        car.pending_xway = p.xway;
    }
}

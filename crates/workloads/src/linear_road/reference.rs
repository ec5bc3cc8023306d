//! The reference implementation: Linear Road's semantics as a plain, single-threaded loop over the
//! input, second by second, with no engine, no watermarks and no partitioning.
//!
//! It is written the naive way on purpose, so that it is easy to check by reading against the
//! semantics in [`super`] and the rules in [`super::rules`], and so that the engine query (which
//! reaches the same answers through keyed state, event time and watermarks) can be checked
//! against it. It follows the same rules as the query: the validator's by default
//! ([`run`], [`run_with_history`]), or either with [`run_with`].
//!
//! Historical queries are answered after all reports of their second: an account balance
//! (type 2) or a daily expenditure for today (type 3, day 0, moirai's rules) counts every toll
//! charged up to and including that second.

use std::collections::{BTreeSet, HashMap};

use super::model::{
    downstream_distance, minute, toll, AccidentAlert, AccountBalance, DailyExpenditure, LrOutput, PositionReport,
    QueryKind, QueryRecord, Record, SegmentId, TollAssessment, TollNotification, EXIT_LANE, LAV_MINUTES,
    STOPPED_REPORTS,
};
use super::rules::{MinuteStats, Rules, Trip};
use super::tolls::HistoricalTolls;

/// A place where cars stop: expressway, direction, segment, lane (as the rules count it) and
/// position.
type Place = (u16, u8, u8, u8, u32);

/// What the reference remembers about a car.
#[derive(Default)]
struct Car {
    last: Option<PositionReport>,
    /// Identical consecutive reports up to the last one.
    run: u32,
    /// Where the car is stopped.
    stopped_at: Option<Place>,
    /// The last notified toll, not yet assessed, and the expressway it is for.
    pending_toll: u32,
    pending_xway: u16,
    /// Sum of the tolls charged so far, and the time of the last charge.
    balance: u64,
    last_charge: Option<u32>,
    /// Tolls charged today, per expressway.
    today: HashMap<u16, u64>,
}

/// An accident: where, when it was detected and when it was cleared.
struct Accident {
    place: Place,
    start: u32,
    end: Option<u32>,
}

/// The reference's state between seconds.
struct Reference {
    rules: Rules,
    history: HistoricalTolls,
    cars: HashMap<u32, Car>,
    /// Per segment and minute: per car, (sum of speeds, reports).
    speeds: HashMap<(SegmentId, u32), HashMap<u32, (u32, u32)>>,
    /// Stopped cars per place.
    stopped: HashMap<Place, BTreeSet<u32>>,
    /// Every accident so far.
    accidents: Vec<Accident>,
    out: Vec<LrOutput>,
}

/// Runs Linear Road over `records` (in time order) under the validator's rules and returns every
/// output, in the order the loop produced them; historical tolls come from seed 0.
pub fn run(records: impl IntoIterator<Item = Record>) -> Vec<LrOutput> {
    run_with_history(records, 0)
}

/// [`run`], with the historical tolls table of `history_seed`
/// ([`super::model::historical_toll`]).
pub fn run_with_history(records: impl IntoIterator<Item = Record>, history_seed: u64) -> Vec<LrOutput> {
    run_with(records, Rules::Validator, &HistoricalTolls::Seeded(history_seed))
}

/// Runs Linear Road over `records` (in time order) under `rules`, with the historical tolls
/// `history`.
pub fn run_with(records: impl IntoIterator<Item = Record>, rules: Rules, history: &HistoricalTolls) -> Vec<LrOutput> {
    let mut reference = Reference {
        rules,
        history: history.clone(),
        cars: HashMap::new(),
        speeds: HashMap::new(),
        stopped: HashMap::new(),
        accidents: Vec::new(),
        out: Vec::new(),
    };
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
                    result_time: self.rules.balance_result_time(q.time, car.and_then(|c| c.last_charge)),
                    qid: q.qid,
                    bal: car.map_or(0, |c| c.balance),
                })),
                QueryKind::DailyExpenditure => {
                    let today = || {
                        let xway = u16::try_from(q.xway).ok();
                        car.zip(xway).and_then(|(c, x)| c.today.get(&x).copied()).unwrap_or(0)
                    };
                    let bal = match (self.rules, q.day) {
                        (Rules::Validator, 0) => None,
                        (Rules::Moirai, 0) => Some(today()),
                        (Rules::Validator, day) => self.history.toll(q.car, q.xway, day),
                        (Rules::Moirai, day) => Some(self.history.toll(q.car, q.xway, day).unwrap_or(0)),
                    };
                    if let Some(bal) = bal {
                        self.out.push(LrOutput::Expenditure(DailyExpenditure {
                            car: q.car,
                            time: q.time,
                            qid: q.qid,
                            bal,
                        }))
                    }
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

    /// Whether two or more cars are stopped at `place`.
    fn accident_at(&self, place: &Place) -> bool {
        self.stopped.get(place).is_some_and(|cars| cars.len() >= 2)
    }

    /// Processes all reports of one second.
    fn second(&mut self, reports: &[PositionReport]) {
        let Some(first) = reports.first() else { return };
        let (t, m) = (first.time, minute(first.time));
        // Only the last five minutes' statistics are read.
        self.speeds.retain(|&(_, k), _| k + LAV_MINUTES >= m);
        let mut places: Vec<(Place, bool)> = Vec::new();
        let mut entries = Vec::new();
        let mut exits = Vec::new();
        for &p in reports {
            let car = self.cars.entry(p.car).or_default();
            let fresh = match self.rules.trip(car.last.as_ref(), &p) {
                Trip::Ignored => continue,
                Trip::New => true,
                Trip::Continues => false,
            };
            let prev = if fresh { None } else { car.last };
            if fresh {
                // A new trip: the unpaid toll of the last one is dropped.
                car.pending_toll = 0;
            }
            let same_place = prev.is_some_and(|q| q.place() == p.place());
            car.run = if same_place { car.run.saturating_add(1) } else { 1 };
            let mut moved = Vec::new();
            if !same_place {
                if let Some(at) = car.stopped_at.take() {
                    moved.push((at, false));
                }
            }
            if car.run == STOPPED_REPORTS {
                let at = (p.xway, p.dir, p.seg, self.rules.accident_lane(p.lane), p.pos);
                car.stopped_at = Some(at);
                moved.push((at, true));
            }
            let entered = prev.is_none_or(|q| q.segment() != p.segment());
            let first_exit = prev.is_none_or(|q| q.lane != EXIT_LANE);
            if p.lane != EXIT_LANE && entered {
                entries.push(p);
            }
            if p.lane == EXIT_LANE && self.rules.charges_at_exit(entered, first_exit) {
                exits.push(p);
            }
            car.last = Some(p);
            for (at, stopped) in moved {
                if !places.iter().any(|(q, _)| *q == at) {
                    places.push((at, self.accident_at(&at)));
                }
                let cars = self.stopped.entry(at).or_default();
                if stopped {
                    cars.insert(p.car);
                } else {
                    cars.remove(&p.car);
                }
            }
            let speeds = self.speeds.entry((p.segment(), m)).or_default().entry(p.car).or_default();
            speeds.0 = speeds.0.saturating_add(p.speed as u32);
            speeds.1 = speeds.1.saturating_add(1);
        }
        // Accidents start and end after all reports of the second.
        for (place, before) in places {
            let after = self.accident_at(&place);
            if self.stopped.get(&place).is_some_and(|cars| cars.is_empty()) {
                self.stopped.remove(&place);
            }
            if !before && after {
                self.accidents.push(Accident { place, start: t, end: None });
            } else if before && !after {
                let open = self.accidents.iter_mut().find(|a| a.place == place && a.end.is_none());
                open.expect("an accident in effect is open").end = Some(t);
            }
        }
        for p in entries {
            self.notify(&p, m);
        }
        for p in exits {
            self.charge(&p);
        }
    }

    /// The statistics of a segment in minute `k`; `None` if no car reported there.
    fn minute_stats(&self, segment: SegmentId, k: u32) -> Option<MinuteStats> {
        self.speeds.get(&(segment, k)).map(|cars| MinuteStats::from_cars(cars.values()))
    }

    /// The toll notification (and maybe accident alert, and assessment of the previous toll) for
    /// a car that entered a segment at `p`, in minute `m`.
    fn notify(&mut self, p: &PositionReport, m: u32) {
        let segment = p.segment();
        let nov = self.minute_stats(segment, m - 1).map_or(0, |s| s.cars);
        let lav = self.rules.lav(m, |k| self.minute_stats(segment, k));
        let accident = self
            .accidents
            .iter()
            .filter(|a| (a.place.0, a.place.1) == (p.xway, p.dir))
            .filter(|a| self.rules.alerts(a.start, a.end, m))
            .filter_map(|a| downstream_distance(p.dir, p.seg, a.place.2).map(|d| (d, a.place.2)))
            .min();
        if let Some((_, seg)) = accident {
            self.out.push(LrOutput::Alert(AccidentAlert { car: p.car, time: p.time, xway: p.xway, seg, dir: p.dir }));
        }
        let toll = toll(lav, nov, accident.is_some());
        self.out.push(LrOutput::Toll(TollNotification { car: p.car, time: p.time, lav, toll }));
        self.charge(p);
        let car = self.cars.get_mut(&p.car).expect("a car that reported is known");
        car.pending_toll = toll;
        car.pending_xway = p.xway;
    }
}

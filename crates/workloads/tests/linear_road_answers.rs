//! Linear Road's answers checked against answers computed here, independently of the query and of
//! `reference.rs`: a small generated data set (two expressways, accidents, tolls, re-entering
//! cars, account-balance and daily-expenditure queries) goes through the engine, and every output
//! type is compared with what the code below computes.
//!
//! The code below follows the rules as the benchmark's validator applies them (the default
//! rules, `docs/linear-road.md`), and is organised as the validator is, not as moirai's query or
//! reference: one state per expressway and direction, each record acted on in file order as it
//! comes, the second's queries answered when the next second begins.

use std::collections::{BTreeMap, HashMap};

use moirai_engine::{Engine, EngineConfig};
use moirai_workloads::linear_road::model::{historical_toll, QueryKind};
use moirai_workloads::linear_road::{generator, queries, GeneratorConfig, LinearRoadConfig, LrOutput, Record, Rules};

/// A car as one expressway-direction knows it.
#[derive(Default)]
struct Car {
    last_time: i64,
    last_lane: i64,
    last_seg: i64,
    last_pos: i64,
    /// Reports in a row at the same lane and position.
    times_here: u32,
    /// The toll of its last notification, not yet paid.
    unpaid: u64,
}

/// One accident: its place, the cars in it, when it was detected and cleared.
struct Accident {
    lane: i64,
    seg: i64,
    pos: i64,
    cars: Vec<u32>,
    detected: u32,
    cleared: Option<u32>,
}

/// What one expressway and direction keeps.
#[derive(Default)]
struct Road {
    cars: HashMap<u32, Car>,
    /// (segment, minute) → (sum of speeds, reports, cars).
    minutes: HashMap<(i64, u32), (u64, u64, Vec<u32>)>,
    /// (lane, segment, position) → stopped cars.
    stopped: HashMap<(i64, i64, i64), Vec<u32>>,
    accidents: Vec<Accident>,
}

#[derive(Default, Debug, PartialEq)]
struct Answers {
    /// (car, time) → (lav, toll).
    tolls: BTreeMap<(u32, u32), (u32, u32)>,
    /// (car, time) → (xway, segment, direction).
    alerts: BTreeMap<(u32, u32), (u16, u8, u8)>,
    /// qid → (time, result time, balance).
    balances: BTreeMap<i32, (u32, u32, u64)>,
    /// qid → (time, toll).
    expenditures: BTreeMap<i32, (u32, u64)>,
}

struct Expected {
    roads: HashMap<(u16, u8), Road>,
    /// Each car's paid tolls.
    paid: HashMap<u32, u64>,
    /// Where each car last reported, for its queries.
    answers: Answers,
    seed: u64,
}

impl Expected {
    fn report(&mut self, p: &moirai_workloads::linear_road::PositionReport) {
        let road = self.roads.entry((p.xway, p.dir)).or_default();
        let (time, lane, seg, pos) = (p.time, p.lane as i64, p.seg as i64, p.pos as i64);
        let minute = time / 60 + 1;
        let car = road.cars.entry(p.car).or_insert_with(|| Car {
            last_time: -1,
            last_lane: -1,
            last_seg: -1,
            last_pos: -1,
            ..Car::default()
        });
        // Back on the entrance ramp more than a minute later: a new trip.
        if lane == 0 && time as i64 > car.last_time + 60 {
            *car = Car { last_time: -1, last_lane: -1, last_seg: -1, last_pos: -1, ..Car::default() };
        }
        // After the exit and not entering again: ignored.
        if car.last_lane == 4 && lane != 0 {
            return;
        }
        if car.last_pos == pos && car.last_lane == lane {
            car.times_here += 1;
            if car.times_here == 4 {
                let cars = road.stopped.entry((lane, seg, pos)).or_default();
                if !cars.contains(&p.car) {
                    cars.push(p.car);
                }
                let open =
                    road.accidents.iter().any(|a| (a.lane, a.seg, a.pos) == (lane, seg, pos) && a.cleared.is_none());
                if cars.len() >= 2 && !open {
                    let cars = cars.clone();
                    road.accidents.push(Accident { lane, seg, pos, cars, detected: time, cleared: None });
                }
            }
        } else {
            let before = (car.last_lane, car.last_seg, car.last_pos);
            if let Some(cars) = road.stopped.get_mut(&before) {
                cars.retain(|&c| c != p.car);
            }
            for a in road.accidents.iter_mut() {
                if (a.lane, a.seg, a.pos) == before && a.cleared.is_none() && a.cars.contains(&p.car) {
                    a.cleared = Some(time);
                }
            }
            car.times_here = 1;
            if seg != car.last_seg {
                let mut toll = 0;
                if lane != 4 {
                    let cars = road.minutes.get(&(seg, minute - 1)).map_or(0, |m| m.2.len() as u64);
                    let (mut sum, mut n) = (0u64, 0u64);
                    for k in minute.saturating_sub(5)..minute {
                        if let Some(m) = road.minutes.get(&(seg, k)) {
                            sum += m.0;
                            n += m.1;
                        }
                    }
                    let lav = if n == 0 { 0 } else { (sum as f64 / n as f64 + 0.5).floor() as u64 };
                    if cars > 50 && lav < 40 {
                        toll = 2 * (cars - 50) * (cars - 50);
                    }
                    // The nearest accident in this segment or the 4 downstream, from the minute
                    // after it was detected up to the minute it was cleared in.
                    let near = (0..5).find_map(|d| {
                        let s = if p.dir == 0 { seg + d } else { seg - d };
                        road.accidents
                            .iter()
                            .any(|a| {
                                a.seg == s
                                    && minute > a.detected / 60 + 1
                                    && a.cleared.is_none_or(|c| minute <= c / 60 + 1)
                            })
                            .then_some(s)
                    });
                    if let Some(s) = near {
                        toll = 0;
                        self.answers.alerts.insert((p.car, time), (p.xway, s as u8, p.dir));
                    }
                    self.answers.tolls.insert((p.car, time), (lav as u32, toll as u32));
                }
                if car.unpaid > 0 {
                    *self.paid.entry(p.car).or_default() += car.unpaid;
                }
                car.unpaid = toll;
            }
        }
        car.last_time = time as i64;
        car.last_lane = lane;
        car.last_seg = seg;
        car.last_pos = pos;
        let m = road.minutes.entry((seg, minute)).or_default();
        m.0 += p.speed as u64;
        m.1 += 1;
        if !m.2.contains(&p.car) {
            m.2.push(p.car);
        }
    }

    fn query(&mut self, q: &moirai_workloads::linear_road::model::QueryRecord) {
        match q.kind {
            QueryKind::AccountBalance => {
                let bal = self.paid.get(&q.car).copied().unwrap_or(0);
                self.answers.balances.insert(q.qid, (q.time, q.time, bal));
            }
            QueryKind::DailyExpenditure => {
                let toll = historical_toll(self.seed, q.car, q.xway, q.day);
                self.answers.expenditures.insert(q.qid, (q.time, toll));
            }
            QueryKind::TravelTime => {}
        }
    }
}

fn expected(records: &[Record], seed: u64) -> Answers {
    let mut e = Expected { roads: HashMap::new(), paid: HashMap::new(), answers: Answers::default(), seed };
    let mut waiting = Vec::new();
    let mut second = None;
    for r in records {
        if second != Some(r.time()) {
            for q in waiting.drain(..) {
                e.query(&q);
            }
            second = Some(r.time());
        }
        match r {
            Record::Position(p) => e.report(p),
            Record::Query(q) => waiting.push(*q),
        }
    }
    for q in waiting.drain(..) {
        e.query(&q);
    }
    e.answers
}

fn answers(outputs: &[LrOutput]) -> Answers {
    let mut a = Answers::default();
    for o in outputs {
        match *o {
            LrOutput::Toll(n) => assert!(a.tolls.insert((n.car, n.time), (n.lav, n.toll)).is_none(), "{n:?} twice"),
            LrOutput::Alert(x) => assert!(a.alerts.insert((x.car, x.time), (x.xway, x.seg, x.dir)).is_none()),
            LrOutput::Balance(b) => assert!(a.balances.insert(b.qid, (b.time, b.result_time, b.bal)).is_none()),
            LrOutput::Expenditure(x) => assert!(a.expenditures.insert(x.qid, (x.time, x.bal)).is_none()),
            LrOutput::Assessment(_) => {}
        }
    }
    a
}

#[test]
fn every_output_type_equals_answers_computed_independently() {
    let traffic = GeneratorConfig {
        xways: 2,
        duration_s: 2400,
        seed: 5,
        cars_per_second: 6.0,
        accident_interval_s: 200,
        accident_min_s: 240,
        accident_max_s: 420,
        queries: true,
        reentry: true,
        ..GeneratorConfig::default()
    };
    let records = generator::generate(&traffic).unwrap();
    let want = expected(&records, traffic.seed);
    // The data set exercises every rule.
    let reentered = {
        let mut firsts: HashMap<u32, u32> = HashMap::new();
        records
            .iter()
            .filter_map(|r| if let Record::Position(p) = r { Some(p) } else { None })
            .filter(|p| p.lane == 0)
            .filter(|p| firsts.insert(p.car, p.time).is_some_and(|t| p.time > t + 60))
            .count()
    };
    assert!(reentered > 20, "{reentered} re-entries");
    assert!(want.tolls.values().filter(|t| t.1 > 0).count() > 100, "tolls are charged");
    assert!(want.alerts.len() > 20, "{} alerts", want.alerts.len());
    assert!(want.balances.values().filter(|b| b.2 > 0).count() > 20, "balances are paid");
    assert!(want.expenditures.len() > 20);

    let config = LinearRoadConfig { traffic, parallelism: 2, collect_outputs: true, ..LinearRoadConfig::default() };
    assert_eq!(config.rules, Rules::Validator, "the default rules are the validator's");
    let (built, stats) = queries(&config).unwrap();
    Engine::start(EngineConfig::default(), built).unwrap().wait().unwrap();
    let report = stats.finish().unwrap();
    let got = answers(&stats.take_outputs());
    let checks = [
        ("toll notifications", first_difference(&got.tolls, &want.tolls)),
        ("accident alerts", first_difference(&got.alerts, &want.alerts)),
        ("account balances", first_difference(&got.balances, &want.balances)),
        ("daily expenditures", first_difference(&got.expenditures, &want.expenditures)),
    ];
    for (name, difference) in checks {
        assert!(difference.is_none(), "{name} differ from the independent answers: {}", difference.unwrap_or_default());
    }
    assert_eq!(report.toll_notifications as usize, want.tolls.len());
    assert_eq!(report.ignored_reports, 0, "the generator's cars never report after their exit");
}

fn first_difference<K: Ord + std::fmt::Debug, V: PartialEq + std::fmt::Debug>(
    got: &BTreeMap<K, V>,
    want: &BTreeMap<K, V>,
) -> Option<String> {
    if got == want {
        return None;
    }
    let missing = want.iter().find(|(k, v)| got.get(k) != Some(v));
    let extra = got.iter().find(|(k, _)| !want.contains_key(k));
    Some(format!(
        "{} answers, {} expected; first expected one not matched: {:?} (got {:?}); first unexpected: {:?}",
        got.len(),
        want.len(),
        missing,
        missing.and_then(|(k, _)| got.get(k)),
        extra
    ))
}

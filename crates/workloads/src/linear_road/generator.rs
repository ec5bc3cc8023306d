//! A seeded Linear Road traffic generator: the same seed gives the same records.
//!
//! It follows the model of the generators the benchmark's users ran (MITSIM in the paper, the
//! Walmart LinearGen the Lachesis evaluation used), simplified to what the queries observe:
//!
//! - Cars enter each expressway at a rate that ramps from 0.5× to 1.5× the configured mean over
//!   the run (the load of LR grows over its three hours). Each car picks a direction, an entry
//!   segment and an exit segment at least two segments downstream.
//! - A car reports its position when it enters (on the entrance ramp, lane 0) and every 30 s after;
//!   it travels in a lane 1–3 and leaves with one report on the exit ramp (lane 4) in its exit
//!   segment.
//! - Speed follows the density of the car's segment (the Greenshields model: free-flow speed
//!   falling linearly with occupancy, plus noise), so busy segments slow down: that is what makes
//!   tolls (LAV < 40 mph with more than 50 cars) appear. A few *bottleneck* segments per
//!   expressway and direction have a third of the usual capacity, where queues form first.
//! - Accidents: about every `accident_interval_s` per expressway a car in a travel lane stops
//!   where it is, and the next car of the same expressway and direction to reach that spot stops
//!   at the same lane and position. Both stay for 10–20 minutes (configurable) and report speed 0
//!   at the same place, which is ≥ 4 identical reports: an accident. Then both drive on.
//!
//! Two parts of the benchmark generator's records are opt-in, so that the default traffic stays
//! the one the Lachesis shape and its Flink and Storm jobs replay: historical queries
//! (`queries`: after 1 % of the reports, as the benchmark's generator does, half of them an
//! account balance and a tenth a daily expenditure about a day 1–69 on the car's expressway; the
//! rest would be travel-time queries, which it does not make either) and re-entering cars
//! (`reentry`: 10 % of the cars that leave come back 1000–2000 s later with the same id, on a
//! new route of a random expressway). Daily expenditures are answered from the seeded
//! historical tolls ([`super::model::historical_toll`]).
//!
//! At the default 20 cars per second this makes about 20 M reports per expressway in three
//! hours, ramping from about 500 to 5000 per second: the volume of the benchmark's data
//! (20–25 M tuples per expressway). Each report is O(1) work (a timing wheel of 30 one-second
//! buckets holds the cars due): about 30 M reports per second on one core.

use std::collections::BTreeMap;

use super::model::{
    PositionReport, QueryKind, QueryRecord, Record, ENTRY_LANE, EXIT_LANE, HISTORY_DAYS, REPORT_INTERVAL_S, SEGMENTS,
    SEGMENT_FT,
};

/// Parameters of the generated traffic.
#[derive(Clone, Debug, PartialEq, serde::Serialize)]
pub struct GeneratorConfig {
    /// Expressways (L).
    pub xways: u16,
    /// Simulated seconds; reports carry times `0..duration_s`.
    pub duration_s: u32,
    /// Seed: the same seed gives the same records.
    pub seed: u64,
    /// Cars entering each expressway per second, on average over the run.
    pub cars_per_second: f64,
    /// Mean time between accidents on one expressway, seconds; 0 = no accidents.
    pub accident_interval_s: u32,
    /// Shortest time the cars of an accident stay stopped, seconds.
    pub accident_min_s: u32,
    /// Longest time the cars of an accident stay stopped, seconds.
    pub accident_max_s: u32,
    /// Make the benchmark generator's historical queries (types 2 and 3) among the reports.
    pub queries: bool,
    /// Let 10 % of the cars that leave come back later, as the benchmark's generator does.
    pub reentry: bool,
    /// Cars enter at a steady `cars_per_second` instead of ramping from half of it to one and a
    /// half times it over the run: the road fills within a trip's time and then carries the
    /// same load (the L-rating's traffic).
    pub steady: bool,
    /// Simulate the traffic before this second without emitting its records: the run starts
    /// with the road as it is then (the L-rating skips the early part of its traffic so).
    pub start_s: u32,
}

impl Default for GeneratorConfig {
    /// One expressway for the benchmark's three hours at its volume, accidents about every 20
    /// minutes.
    fn default() -> Self {
        GeneratorConfig {
            xways: 1,
            duration_s: 10_800,
            seed: 0,
            cars_per_second: 20.0,
            accident_interval_s: 1200,
            accident_min_s: 600,
            accident_max_s: 1200,
            queries: false,
            reentry: false,
            steady: false,
            start_s: 0,
        }
    }
}

impl GeneratorConfig {
    /// Checks the parameters; the message says what to change.
    pub fn validate(&self) -> Result<(), String> {
        if self.xways == 0 {
            return Err("xways must be at least 1".into());
        }
        if !(self.cars_per_second.is_finite() && self.cars_per_second > 0.0 && self.cars_per_second <= 10_000.0) {
            return Err(format!("cars per second must be in (0, 10000], not {}", self.cars_per_second));
        }
        // At most 1.5 (ramp) × 1.5 (noise) times the mean rate enter in any second.
        let cars = self.cars_per_second * 2.25 * self.duration_s as f64 * self.xways as f64;
        if cars >= u32::MAX as f64 {
            return Err(format!(
                "this would make about {cars:.0} cars, more than 32-bit car ids allow; shorten the run"
            ));
        }
        if self.start_s >= self.duration_s {
            return Err(format!(
                "the traffic would start at {} s but lasts only {} s; start it earlier",
                self.start_s, self.duration_s
            ));
        }
        if self.accident_min_s > self.accident_max_s {
            return Err(format!(
                "the shortest accident ({} s) is longer than the longest ({} s)",
                self.accident_min_s, self.accident_max_s
            ));
        }
        if self.accident_interval_s > 0 && self.accident_min_s < 4 * REPORT_INTERVAL_S {
            return Err(format!(
                "accidents must last at least {} s (4 reports 30 s apart) to be detected, not {} s",
                4 * REPORT_INTERVAL_S,
                self.accident_min_s
            ));
        }
        Ok(())
    }
}

/// Free-flow speed, mph (the benchmark's speed limit).
const FREE_SPEED: f64 = 70.0;
/// Slowest a moving car goes, mph: it always moves, so only accident cars report one place twice.
const MIN_SPEED: i32 = 10;
/// Fastest a car goes, mph.
const TOP_SPEED: i32 = 80;
/// Speed on the entrance ramp, mph.
const RAMP_SPEED: u8 = 10;
/// Cars in one direction of a segment at which traffic stands still (three lanes).
const JAM_CARS: f64 = 120.0;
/// Bottleneck segments per expressway and direction.
const BOTTLENECKS: usize = 3;
/// Feet a car moves in one report interval per mph: 5280 ft / 3600 s × 30 s.
const FT_PER_MPH: u32 = 44;
/// Share of the reports a historical query follows (the benchmark generator's).
const QUERY_SHARE: f64 = 0.01;
/// Share of the cars leaving that come back.
const REENTRY_SHARE: f64 = 0.1;

#[derive(Clone, Debug)]
struct Car {
    id: u32,
    xway: u16,
    dir: u8,
    lane: u8,
    pos: u32,
    speed: u8,
    exit_seg: u8,
    /// Stopped by an accident until this time.
    frozen_until: Option<u32>,
    /// False until its first report.
    on_road: bool,
}

impl Car {
    fn seg(&self) -> u8 {
        (self.pos / SEGMENT_FT) as u8
    }
}

/// The first car of an accident, waiting for a second one to reach its spot.
#[derive(Clone, Copy, Debug)]
struct Waiting {
    xway: u16,
    dir: u8,
    lane: u8,
    pos: u32,
    until: u32,
}

/// The generator: an iterator over position reports in time order.
pub struct Generator {
    config: GeneratorConfig,
    rng: fastrand::Rng,
    /// The next second to simulate.
    time: u32,
    cars: Vec<Option<Car>>,
    free: Vec<usize>,
    /// `wheel[t % 30]`: the cars that report at second `t`.
    wheel: Vec<Vec<usize>>,
    next_id: u32,
    /// Cars per expressway, direction and segment at their last report.
    occupancy: Vec<[[u32; SEGMENTS as usize]; 2]>,
    /// Cars at which a segment stands still, per expressway, direction and segment.
    jam: Vec<[[f64; SEGMENTS as usize]; 2]>,
    /// Carry of fractional cars to insert, per expressway.
    arrivals: Vec<f64>,
    next_accident: Vec<u32>,
    waiting: Vec<Waiting>,
    /// Cars coming back: their ids, by the second they enter again.
    reentries: BTreeMap<u32, Vec<u32>>,
    next_qid: i32,
    out: Vec<Record>,
    next_out: usize,
}

impl Generator {
    /// A generator for `config`. The traffic before `config.start_s` is simulated here, not
    /// when the first record is drawn: a source replaying the records at their clock starts
    /// that clock when it is created and first steps, so a skip simulated on the first draw
    /// (tens of seconds at L = 100) would make the first records already that late.
    pub fn new(config: GeneratorConfig) -> Result<Self, String> {
        let mut generator = Self::at_zero(config)?;
        while generator.time < generator.config.start_s {
            generator.second(generator.time);
            generator.time += 1;
            generator.out.clear();
        }
        Ok(generator)
    }

    /// The next second the generator simulates (`start_s` right after [`Generator::new`]).
    pub fn next_second(&self) -> u32 {
        self.time
    }

    fn at_zero(config: GeneratorConfig) -> Result<Self, String> {
        config.validate()?;
        let mut rng = fastrand::Rng::with_seed(config.seed);
        let xways = config.xways as usize;
        let mut jam = vec![[[JAM_CARS; SEGMENTS as usize]; 2]; xways];
        for directions in &mut jam {
            for segments in directions.iter_mut() {
                for _ in 0..BOTTLENECKS {
                    segments[rng.usize(..SEGMENTS as usize)] = JAM_CARS / 3.0;
                }
            }
        }
        let next_accident = (0..xways)
            .map(|_| if config.accident_interval_s == 0 { u32::MAX } else { first_accident(&mut rng, &config) })
            .collect();
        Ok(Generator {
            rng,
            time: 0,
            cars: Vec::new(),
            free: Vec::new(),
            wheel: vec![Vec::new(); REPORT_INTERVAL_S as usize],
            next_id: 0,
            occupancy: vec![[[0; SEGMENTS as usize]; 2]; xways],
            jam,
            arrivals: vec![0.0; xways],
            next_accident,
            waiting: Vec::new(),
            reentries: BTreeMap::new(),
            next_qid: 0,
            out: Vec::new(),
            next_out: 0,
            config,
        })
    }

    /// Cars entering expressway `xway` in second `t`: the mean rate times the ramp, with the
    /// fraction carried over so that the count over the run matches the rate.
    fn arrivals(&mut self, xway: usize, t: u32) -> usize {
        let ramp = if self.config.steady { 1.0 } else { 0.5 + t as f64 / self.config.duration_s.max(1) as f64 };
        let due = self.arrivals[xway] + self.config.cars_per_second * ramp * (0.5 + self.rng.f64());
        let n = due.floor();
        self.arrivals[xway] = due - n;
        n as usize
    }

    /// A new car with a new id on expressway `xway`.
    fn new_car(&mut self, xway: u16) -> usize {
        let id = self.next_id;
        self.next_id += 1;
        self.enter(xway, id)
    }

    /// Car `id` enters expressway `xway` on a random route.
    fn enter(&mut self, xway: u16, id: u32) -> usize {
        let dir = self.rng.u8(0..2);
        let (entry, exit_seg) = if dir == 0 {
            let entry = self.rng.u8(0..SEGMENTS - 2);
            (entry, self.rng.u8(entry + 2..SEGMENTS))
        } else {
            let entry = self.rng.u8(2..SEGMENTS);
            (entry, self.rng.u8(0..entry - 1))
        };
        let pos = entry as u32 * SEGMENT_FT + if dir == 0 { 0 } else { SEGMENT_FT - 1 };
        let car = Car {
            id,
            xway,
            dir,
            lane: ENTRY_LANE,
            pos,
            speed: RAMP_SPEED,
            exit_seg,
            frozen_until: None,
            on_road: false,
        };
        match self.free.pop() {
            Some(i) => {
                self.cars[i] = Some(car);
                i
            }
            None => {
                self.cars.push(Some(car));
                self.cars.len() - 1
            }
        }
    }

    /// The speed a car drives at in a segment with `cars` cars.
    fn speed(&mut self, cars: u32, jam: f64) -> u8 {
        let free_flow = FREE_SPEED * (1.0 - cars as f64 / jam);
        (free_flow.round() as i32 + self.rng.i32(-5..=5)).clamp(MIN_SPEED, TOP_SPEED) as u8
    }

    /// Simulates second `t`: new cars enter, every car due reports.
    fn second(&mut self, t: u32) {
        let slot = (t % REPORT_INTERVAL_S) as usize;
        let mut due = std::mem::take(&mut self.wheel[slot]);
        for xway in 0..self.config.xways {
            for _ in 0..self.arrivals(xway as usize, t) {
                due.push(self.new_car(xway));
            }
        }
        if let Some(ids) = self.reentries.remove(&t) {
            for id in ids {
                let xway = self.rng.u16(0..self.config.xways);
                due.push(self.enter(xway, id));
            }
        }
        self.waiting.retain(|w| w.until > t);
        let mut stays = Vec::with_capacity(due.len());
        for i in due {
            if self.step(i, t) {
                stays.push(i);
            } else {
                self.cars[i] = None;
                self.free.push(i);
            }
        }
        self.wheel[slot] = stays;
    }

    /// Moves car `i` to where it is at `t` and emits its report; false if it left the road.
    fn step(&mut self, i: usize, t: u32) -> bool {
        let mut car = self.cars[i].take().expect("a car in the wheel exists");
        let (x, d) = (car.xway as usize, car.dir as usize);
        let mut leaves = false;
        if !car.on_road {
            car.on_road = true;
            self.occupancy[x][d][car.seg() as usize] += 1;
        } else if car.frozen_until.is_some_and(|until| t < until) {
            car.speed = 0;
        } else {
            if car.frozen_until.take().is_some() {
                let seg = car.seg() as usize;
                car.speed = self.speed(self.occupancy[x][d][seg], self.jam[x][d][seg]);
            }
            let old_seg = car.seg() as usize;
            let moved = car.speed as u32 * FT_PER_MPH;
            let exit_start = car.exit_seg as u32 * SEGMENT_FT;
            let exit_end = exit_start + SEGMENT_FT - 1;
            let (unclamped, exiting) = if car.dir == 0 {
                let p = car.pos + moved;
                (p, p >= exit_start)
            } else {
                let p = car.pos.saturating_sub(moved);
                (p, p <= exit_end)
            };
            // A car reaching the spot where an accident's first car stands becomes its second.
            let crash = self.waiting.iter().position(|w| {
                let (reaches, before_exit) = if car.dir == 0 {
                    (car.pos < w.pos && w.pos <= unclamped, w.pos < exit_start)
                } else {
                    (unclamped <= w.pos && w.pos < car.pos, w.pos > exit_end)
                };
                w.xway == car.xway && w.dir == car.dir && reaches && before_exit
            });
            if let Some(w) = crash {
                let w = self.waiting.remove(w);
                car.pos = w.pos;
                car.lane = w.lane;
                car.speed = 0;
                car.frozen_until = Some(w.until);
            } else if exiting {
                car.pos = unclamped.clamp(exit_start, exit_end);
                car.lane = EXIT_LANE;
                leaves = true;
            } else {
                car.pos = unclamped;
                if car.lane == ENTRY_LANE {
                    car.lane = 1 + self.rng.u8(0..3);
                }
            }
            let seg = car.seg() as usize;
            self.occupancy[x][d][old_seg] -= 1;
            self.occupancy[x][d][seg] += 1;
            if car.frozen_until.is_none() {
                car.speed = self.speed(self.occupancy[x][d][seg], self.jam[x][d][seg]);
                self.maybe_crash(&mut car, t);
            }
        }
        self.out.push(Record::Position(PositionReport {
            time: t,
            car: car.id,
            speed: car.speed,
            xway: car.xway,
            lane: car.lane,
            dir: car.dir,
            seg: car.seg(),
            pos: car.pos,
        }));
        if self.config.queries {
            self.maybe_query(&car, t);
        }
        if leaves {
            self.occupancy[x][d][car.seg() as usize] -= 1;
            if self.config.reentry && self.rng.f64() < REENTRY_SHARE {
                let back = t + 1000 + self.rng.u32(0..1000);
                if back < self.config.duration_s {
                    self.reentries.entry(back).or_default().push(car.id);
                }
            }
        } else {
            self.cars[i] = Some(car);
        }
        !leaves
    }

    /// After a report of `car`: a historical query with the benchmark generator's odds.
    fn maybe_query(&mut self, car: &Car, t: u32) {
        if self.rng.f64() >= QUERY_SHARE {
            return;
        }
        let kind = self.rng.f64();
        let (kind, xway, day) = if kind < 0.5 {
            (QueryKind::AccountBalance, -1, -1)
        } else if kind < 0.6 {
            (QueryKind::DailyExpenditure, car.xway as i32, self.rng.i32(1..=HISTORY_DAYS))
        } else {
            return;
        };
        let qid = self.next_qid;
        self.next_qid = self.next_qid.wrapping_add(1).max(0);
        let q = QueryRecord { kind, time: t, car: car.id, xway, qid, sinit: -1, send: -1, dow: -1, tod: -1, day };
        self.out.push(Record::Query(q));
    }

    /// Stops `car` as the first car of an accident if one is due on its expressway and it is in
    /// a travel lane well before its exit.
    fn maybe_crash(&mut self, car: &mut Car, t: u32) {
        let x = car.xway as usize;
        let far_from_exit = car.seg().abs_diff(car.exit_seg) >= 3;
        if t < self.next_accident[x] || car.lane == ENTRY_LANE || car.lane == EXIT_LANE || !far_from_exit {
            return;
        }
        let c = &self.config;
        let until = t + c.accident_min_s + self.rng.u32(0..=c.accident_max_s - c.accident_min_s);
        car.speed = 0;
        car.frozen_until = Some(until);
        self.waiting.push(Waiting { xway: car.xway, dir: car.dir, lane: car.lane, pos: car.pos, until });
        self.next_accident[x] = t + next_accident_gap(&mut self.rng, c);
    }
}

fn first_accident(rng: &mut fastrand::Rng, config: &GeneratorConfig) -> u32 {
    // The first accident comes after the road has filled a little.
    4 * REPORT_INTERVAL_S + next_accident_gap(rng, config) / 2
}

fn next_accident_gap(rng: &mut fastrand::Rng, config: &GeneratorConfig) -> u32 {
    (config.accident_interval_s as f64 * (0.5 + rng.f64())) as u32
}

impl Iterator for Generator {
    type Item = Record;

    fn next(&mut self) -> Option<Record> {
        while self.next_out == self.out.len() {
            if self.time >= self.config.duration_s {
                return None;
            }
            self.out.clear();
            self.next_out = 0;
            let t = self.time;
            self.second(t);
            self.time += 1;
        }
        self.next_out += 1;
        Some(self.out[self.next_out - 1])
    }
}

/// All records of `config`, in time order (convenient for tests and small runs).
pub fn generate(config: &GeneratorConfig) -> Result<Vec<Record>, String> {
    Ok(Generator::new(config.clone())?.collect())
}

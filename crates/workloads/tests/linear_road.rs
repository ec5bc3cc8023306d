//! Linear Road: generator, file format, the engine query against the reference, hand-made
//! scenarios with known answers, and the Lachesis load shape.

use std::path::PathBuf;

use moirai_engine::plan::PhysicalPlan;
use moirai_engine::{Engine, EngineConfig};
use moirai_workloads::linear_road::model::{
    historical_toll, AccountBalance, DailyExpenditure, PositionReport, QueryKind, QueryRecord, EXIT_LANE,
};
use moirai_workloads::linear_road::{
    check_input, csv, generator, queries, read_input, reference, write_input, AccidentAlert, GeneratorConfig,
    HistoricalTolls, HistorySource, LinearRoadConfig, LinearRoadError, LinearRoadReport, LrOutput, Record, Rules,
    Shape, TollAssessment, TollNotification,
};

/// A file in the temp directory, removed when dropped (also when the test fails).
struct TempFile(PathBuf);

impl TempFile {
    fn new(name: &str) -> Self {
        TempFile(std::env::temp_dir().join(format!("moirai-lr-{}-{name}", std::process::id())))
    }

    fn with(name: &str, text: &str) -> Self {
        let f = TempFile::new(name);
        std::fs::write(&f.0, text).unwrap();
        f
    }
}

impl Drop for TempFile {
    fn drop(&mut self) {
        let _ = std::fs::remove_file(&self.0);
    }
}

fn traffic(seed: u64, cars_per_second: f64, duration_s: u32) -> GeneratorConfig {
    GeneratorConfig {
        seed,
        cars_per_second,
        duration_s,
        accident_interval_s: 150,
        accident_min_s: 240,
        accident_max_s: 420,
        ..GeneratorConfig::default()
    }
}

fn config(g: &GeneratorConfig, parallelism: usize) -> LinearRoadConfig {
    LinearRoadConfig { traffic: g.clone(), parallelism, collect_outputs: true, ..LinearRoadConfig::default() }
}

/// Runs `config` on the engine; returns the sorted outputs and the report.
fn run(config: &LinearRoadConfig) -> (Vec<LrOutput>, LinearRoadReport) {
    let (queries, stats) = queries(config).unwrap();
    Engine::start(EngineConfig::default(), queries).unwrap().wait().unwrap();
    let report = stats.finish().unwrap();
    let mut outputs = stats.take_outputs();
    outputs.sort();
    (outputs, report)
}

fn sorted(mut outputs: Vec<LrOutput>) -> Vec<LrOutput> {
    outputs.sort();
    outputs
}

fn positions(records: &[Record]) -> Vec<PositionReport> {
    records.iter().filter_map(|r| if let Record::Position(p) = r { Some(*p) } else { None }).collect()
}

#[test]
fn generator_is_deterministic_and_follows_the_rules_of_the_road() {
    let a = generator::generate(&traffic(7, 3.0, 600)).unwrap();
    assert_eq!(a, generator::generate(&traffic(7, 3.0, 600)).unwrap(), "same seed, same records");
    assert_ne!(a, generator::generate(&traffic(8, 3.0, 600)).unwrap(), "another seed, other records");
    let reports = positions(&a);
    assert!(reports.len() > 5000, "{} reports", reports.len());
    assert!(reports.windows(2).all(|w| w[0].time <= w[1].time), "in time order");
    assert!(reports.iter().all(|p| p.time < 600));
    let mut by_car: std::collections::BTreeMap<u32, Vec<PositionReport>> = Default::default();
    for p in &reports {
        // Every record is valid in the file format.
        assert_eq!(csv::parse_record(&csv::record_line(&Record::Position(*p))), Ok(Record::Position(*p)));
        by_car.entry(p.car).or_default().push(*p);
    }
    let mut exited = 0;
    for trip in by_car.values() {
        assert_eq!(trip[0].lane, 0, "a car enters on the ramp: {trip:?}");
        assert!(trip.windows(2).all(|w| w[1].time == w[0].time + 30), "a report every 30 s: {trip:?}");
        assert!(trip.iter().all(|p| p.xway == trip[0].xway && p.dir == trip[0].dir));
        if let Some(exit) = trip.iter().position(|p| p.lane == EXIT_LANE) {
            assert_eq!(exit, trip.len() - 1, "the exit report is the last: {trip:?}");
            exited += 1;
        }
    }
    assert!(exited > 100, "{exited} cars left the road");
}

#[test]
fn a_later_start_simulates_the_early_traffic_without_emitting_it() {
    let whole = generator::generate(&traffic(5, 3.0, 600)).unwrap();
    let late = generator::generate(&GeneratorConfig { start_s: 400, ..traffic(5, 3.0, 600) }).unwrap();
    let tail: Vec<Record> = whole.iter().filter(|r| r.time() >= 400).copied().collect();
    assert!(tail.len() > 1000, "{} records after 400 s", tail.len());
    assert_eq!(late, tail, "the same road from 400 s on, nothing before");
    // The early traffic is simulated when the generator is made, not on the first draw: a
    // source replaying at the records' clock starts its clock before it draws (the L-rating's
    // first real-time records were otherwise as late as the skip took to simulate).
    let g = generator::Generator::new(GeneratorConfig { start_s: 400, ..traffic(5, 3.0, 600) }).unwrap();
    assert_eq!(g.next_second(), 400);
    let e = generator::generate(&GeneratorConfig { start_s: 600, ..traffic(5, 3.0, 600) }).unwrap_err();
    assert!(e.contains("start it earlier"), "{e}");
}

#[test]
fn records_survive_a_round_trip_through_the_file_format() {
    let mut records = generator::generate(&traffic(3, 2.0, 300)).unwrap();
    let query = |kind, time| {
        Record::Query(QueryRecord { kind, time, car: 5, xway: 0, qid: 9, sinit: 3, send: 7, dow: 2, tod: 600, day: 12 })
    };
    records.insert(0, query(QueryKind::AccountBalance, 0));
    records.push(query(QueryKind::DailyExpenditure, 299));
    records.push(query(QueryKind::TravelTime, 299));
    let file = TempFile::new("roundtrip.csv");
    let mut out = Vec::new();
    csv::write_records(&mut out, &records).unwrap();
    std::fs::write(&file.0, out).unwrap();
    assert_eq!(read_input(&file.0).unwrap(), records);
    assert_eq!(check_input(&file.0).unwrap(), records.len() as u64);

    let generated = TempFile::new("generated.csv");
    let n = write_input(&traffic(3, 2.0, 300), &generated.0).unwrap();
    assert_eq!(read_input(&generated.0).unwrap(), generator::generate(&traffic(3, 2.0, 300)).unwrap());
    assert_eq!(n as usize, records.len() - 3);
}

/// The error `queries` gives for a file with `text`.
fn input_error(text: &str) -> String {
    let file = TempFile::with("bad.csv", text);
    let cfg = LinearRoadConfig { input: Some(file.0.clone()), ..LinearRoadConfig::default() };
    match queries(&cfg) {
        Err(e @ LinearRoadError::Input { .. }) => e.to_string(),
        Err(e) => panic!("expected an input error, got {e}"),
        Ok(_) => panic!("accepted a malformed file: {text}"),
    }
}

#[test]
fn malformed_rows_are_reported_with_line_and_column() {
    let good = "0,0,1,30,0,0,0,0,100,-1,-1,-1,-1,-1,-1\n";
    let e = input_error(&format!("{good}0,1,2,fast,0,0,0,0,100,-1,-1,-1,-1,-1,-1\n"));
    assert!(e.contains("line 2, column 4 (speed): 'fast' is not an integer"), "{e}");
    let e = input_error(&format!("{good}{good}0,2,2,30,0,0,0,0,100\n"));
    assert!(e.contains("line 3: expected 15 columns"), "{e}");
    assert!(e.contains("found 9"), "{e}");
    let e = input_error(&format!("0,5,1,30,0,0,0,0,100,-1,-1,-1,-1,-1,-1\n{good}"));
    assert!(e.contains("line 2, column 2 (time): time 0 is before time 5 on line 1"), "{e}");
    let e = input_error("0,0,1,30,0,0,2,0,100,-1,-1,-1,-1,-1,-1\n");
    assert!(e.contains("line 1, column 7 (dir): 2 is out of range 0..=1"), "{e}");
    let e = input_error("0,0,1,30,0,0,0,3,100,-1,-1,-1,-1,-1,-1\n");
    assert!(e.contains("column 8 (seg): segment 3 does not hold position 100"), "{e}");
    let e = input_error("7,0,1,30,0,0,0,0,100,-1,-1,-1,-1,-1,-1\n");
    assert!(e.contains("column 1 (type): 7 is not a Linear Road record type"), "{e}");
    let e = input_error("0,-3,1,30,0,0,0,0,100,-1,-1,-1,-1,-1,-1\n");
    assert!(e.contains("column 2 (time): -3 is out of range"), "{e}");

    let missing = LinearRoadConfig { input: Some("/nonexistent/lr.csv".into()), ..LinearRoadConfig::default() };
    let e = queries(&missing).err().expect("a missing file is an error").to_string();
    assert!(e.starts_with("cannot read /nonexistent/lr.csv"), "{e}");
}

#[test]
fn bad_configurations_are_refused_with_a_reason() {
    let refused = |cfg: LinearRoadConfig| queries(&cfg).err().expect("refused").to_string();
    assert!(refused(LinearRoadConfig { parallelism: 0, ..Default::default() }).contains("parallelism"));
    assert!(refused(LinearRoadConfig { rate: f64::NAN, ..Default::default() }).contains("rate"));
    assert!(refused(LinearRoadConfig {
        traffic: GeneratorConfig { xways: 0, ..GeneratorConfig::default() },
        ..Default::default()
    })
    .contains("xways"));
    assert!(refused(LinearRoadConfig {
        traffic: GeneratorConfig { accident_min_s: 60, ..GeneratorConfig::default() },
        ..Default::default()
    })
    .contains("at least 120 s"));
    let e = refused(LinearRoadConfig { shape: Shape::Lachesis, output: Some("x.csv".into()), ..Default::default() });
    assert!(e.contains("faithful"), "{e}");
    let e = refused(LinearRoadConfig { output: Some("/nonexistent/out.csv".into()), ..Default::default() });
    assert!(e.starts_with("cannot write /nonexistent/out.csv"), "{e}");
    assert_eq!("lachesis".parse::<Shape>(), Ok(Shape::Lachesis));
    assert!("fast".parse::<Shape>().unwrap_err().contains("'faithful' or 'lachesis'"));
}

/// The central check: on generated traffic the engine query gives exactly the reference's
/// outputs, at parallelism 1 and above, with the generator in the source and with a file.
#[test]
fn engine_query_equals_the_reference() {
    // One run long and busy enough for queues, tolls and assessments; shorter ones on more seeds.
    let cases = [(traffic(11, 6.0, 1200), 3), (traffic(1, 3.0, 600), 1), (traffic(2, 3.0, 600), 2)];
    for (g, parallelism) in cases {
        let want = sorted(reference::run(generator::generate(&g).unwrap()));
        let (got, report) = run(&config(&g, parallelism));
        assert_eq!(got.len(), want.len(), "seed {} at parallelism {parallelism}", g.seed);
        assert!(got == want, "seed {} at parallelism {parallelism}: outputs differ", g.seed);
        assert_eq!(report.toll_notifications as usize, got.iter().filter(|o| matches!(o, LrOutput::Toll(_))).count());
        assert_eq!(report.deadline_outputs, report.toll_notifications + report.accident_alerts);
        assert!(report.deadline_misses <= report.deadline_outputs);
        assert!(report.accident_alerts > 0, "seed {}: the traffic has accidents", g.seed);
    }
    // The busy run exercises every rule: non-zero tolls and their assessment.
    let busy = sorted(reference::run(generator::generate(&traffic(11, 6.0, 1200)).unwrap()));
    assert!(busy.iter().filter(|o| matches!(o, LrOutput::Toll(n) if n.toll > 0)).count() > 100);
    assert!(busy.iter().filter(|o| matches!(o, LrOutput::Assessment(_))).count() > 10);
}

#[test]
fn replayed_file_at_a_rate_gives_the_reference_outputs_and_an_output_file() {
    let g = traffic(5, 3.0, 480);
    let input = TempFile::new("replay.csv");
    let n = write_input(&g, &input.0).unwrap();
    let output = TempFile::new("replay-out.csv");
    let cfg = LinearRoadConfig {
        input: Some(input.0.clone()),
        output: Some(output.0.clone()),
        rate: 100_000.0,
        parallelism: 2,
        collect_outputs: true,
        ..LinearRoadConfig::default()
    };
    let (got, report) = run(&cfg);
    assert_eq!(report.position_reports, n);
    assert_eq!(got, sorted(reference::run(read_input(&input.0).unwrap())));
    let written = std::fs::read_to_string(&output.0).unwrap();
    // The validator's lines: no toll assessments; `emit` is the response time in ms.
    let assessments = got.iter().filter(|o| matches!(o, LrOutput::Assessment(_))).count();
    assert_eq!(written.lines().count(), got.len() - assessments);
    for line in written.lines() {
        let fields: Vec<&str> = line.split(',').collect();
        let emit_column = if fields[0] == "0" { 3 } else { 2 };
        let ms: u64 = fields[emit_column].parse().unwrap_or_else(|_| panic!("emit in whole ms: {line}"));
        assert!(ms < 60_000, "{line}");
        assert!(matches!((fields[0], fields.len()), ("0", 6) | ("1", 7)), "{line}");
    }
}

fn report(time: u32, car: u32, speed: u8, lane: u8, dir: u8, pos: u32) -> PositionReport {
    PositionReport { time, car, speed, xway: 0, lane, dir, seg: (pos / 5280) as u8, pos }
}

/// Runs hand-made reports through the reference and the engine (parallelism 1 and 3) under
/// `rules`; all must give `want`.
fn check_scenario(mut reports: Vec<PositionReport>, want: &[LrOutput], name: &str, rules: Rules) {
    reports.sort_by_key(|p| (p.time, p.car));
    let records: Vec<Record> = reports.into_iter().map(Record::Position).collect();
    let want = sorted(want.to_vec());
    let got = sorted(reference::run_with(records.clone(), rules, &HistoricalTolls::Seeded(0)));
    assert_eq!(got, want, "reference, {name}, {rules} rules");
    let file = TempFile::new(name);
    let mut text = Vec::new();
    csv::write_records(&mut text, &records).unwrap();
    std::fs::write(&file.0, text).unwrap();
    for parallelism in [1, 3] {
        let cfg = LinearRoadConfig {
            input: Some(file.0.clone()),
            parallelism,
            collect_outputs: true,
            rules,
            ..Default::default()
        };
        assert_eq!(run(&cfg).0, want, "engine at parallelism {parallelism}, {name}, {rules} rules");
    }
}

fn toll(car: u32, time: u32, lav: u32, toll: u32) -> LrOutput {
    LrOutput::Toll(TollNotification { car, time, lav, toll })
}

#[test]
fn a_congested_segment_charges_the_toll_formula_and_assesses_it_on_the_next_segment() {
    for rules in [Rules::Validator, Rules::Moirai] {
        // The LAV of one minute of 60 reports at 15..=24 mph: Σ 1170 / 60 = 19.5, which the
        // validator rounds (20) and moirai floors (19).
        let lav = if rules == Rules::Validator { 20 } else { 19 };
        let mut reports = Vec::new();
        let mut want = Vec::new();
        // Minute 1: 60 cars crawl through segment 10 (one report each, speeds 15..=24).
        for car in 0..60 {
            reports.push(report(car, car, 15 + (car % 10) as u8, 1, 0, 10 * 5280 + car * 10));
            want.push(toll(car, car, 0, 0));
        }
        // Minute 2: car 100 enters segment 10: NOV 60, LAV below 40 → toll 2·(60−50)² = 200.
        reports.push(report(65, 100, 20, 1, 0, 10 * 5280 + 2000));
        want.push(toll(100, 65, lav, 200));
        // It moves on to segment 11: a new notification (no traffic there, toll 0), and the 200
        // is charged.
        reports.push(report(95, 100, 60, 1, 0, 11 * 5280 + 100));
        want.push(toll(100, 95, 0, 0));
        want.push(LrOutput::Assessment(TollAssessment { car: 100, time: 95, toll: 200 }));
        // Car 103 also pays 200 for segment 10, and leaves by its exit ramp there, in the same
        // segment: moirai charges it on the exit, the validator only when the exit report is the
        // car's first in a segment.
        reports.push(report(66, 103, 20, 2, 0, 10 * 5280 + 2100));
        want.push(toll(103, 66, lav, 200));
        reports.push(report(96, 103, 20, EXIT_LANE, 0, 10 * 5280 + 3000));
        if rules == Rules::Moirai {
            want.push(LrOutput::Assessment(TollAssessment { car: 103, time: 96, toll: 200 }));
        }
        // Car 104 pays 200 too and leaves from the next segment: charged on exit by both.
        reports.push(report(67, 104, 20, 2, 0, 10 * 5280 + 2200));
        want.push(toll(104, 67, lav, 200));
        reports.push(report(97, 104, 10, EXIT_LANE, 0, 11 * 5280 + 10));
        want.push(LrOutput::Assessment(TollAssessment { car: 104, time: 97, toll: 200 }));
        // Car 101 enters segment 10 westbound: statistics are per direction, no toll.
        reports.push(report(70, 101, 20, 1, 1, 10 * 5280 + 3000));
        want.push(toll(101, 70, 0, 0));
        // Car 102 enters segment 10 in minute 3: minute 2 had 3 cars (100, 103 and 104 at 20
        // mph), no toll; the LAV over minutes 1-2: validator (1170 + 60) / 63 = 19.5 → 20,
        // moirai (19 + 20) / 2 = 19.
        reports.push(report(125, 102, 20, 1, 0, 10 * 5280 + 4000));
        want.push(toll(102, 125, lav, 0));
        // Car 102 exits in the same segment: nothing charged (its toll was 0).
        reports.push(report(155, 102, 10, EXIT_LANE, 0, 10 * 5280 + 4500));
        check_scenario(reports, &want, "toll.csv", rules);
    }
}

/// The validator's reading of accidents: stopped cars in the same lane only, alerts from the
/// minute after detection up to the minute of clearing; moirai's: any lane, and the minutes after
/// those in which the accident was in effect.
#[test]
fn the_rules_place_an_accident_and_its_alerts_differently() {
    let alert = |car, time, seg| LrOutput::Alert(AccidentAlert { car, time, xway: 0, seg, dir: 0 });
    for rules in [Rules::Validator, Rules::Moirai] {
        let v = rules == Rules::Validator;
        let p = 20 * 5280 + 700;
        let mut reports = Vec::new();
        let mut want = Vec::new();
        // Cars 1 and 2 stop at the same place of lane 1: the accident is detected at 91 (minute
        // 2), when car 2 sends its 4th report there, and cleared at 150 (minute 3), when car 1
        // drives off.
        for t in [0, 30, 60, 90, 120] {
            reports.push(report(t, 1, 0, 1, 0, p));
            reports.push(report(t + 1, 2, 0, 1, 0, p));
        }
        reports.push(report(150, 1, 30, 1, 0, p + 1320));
        reports.push(report(151, 2, 0, 1, 0, p));
        want.push(toll(1, 0, 0, 0));
        want.push(toll(2, 1, 0, 0));
        // Minute 2: detected in this minute, no alert yet.
        reports.push(report(100, 3, 50, 1, 0, 17 * 5280));
        want.push(toll(3, 100, 0, 0));
        // Minute 3: both alert.
        reports.push(report(130, 4, 50, 1, 0, 18 * 5280));
        want.push(alert(4, 130, 20));
        want.push(toll(4, 130, 0, 0));
        // Minute 4: cleared in minute 3; it was in effect during minute 3, so moirai alerts.
        reports.push(report(185, 5, 50, 1, 0, 19 * 5280));
        if !v {
            want.push(alert(5, 185, 20));
        }
        want.push(toll(5, 185, 0, 0));
        // Cars 7 and 8 stop at one position in different lanes of segment 40 from 300 on.
        for t in [300, 330, 360, 390] {
            reports.push(report(t, 7, 0, 1, 0, 40 * 5280));
            reports.push(report(t, 8, 0, 2, 0, 40 * 5280));
        }
        want.push(toll(7, 300, 0, 0));
        want.push(toll(8, 300, 0, 0));
        // Minute 8: an accident for moirai only.
        reports.push(report(425, 9, 50, 1, 0, 38 * 5280));
        if !v {
            want.push(alert(9, 425, 40));
        }
        want.push(toll(9, 425, 0, 0));
        check_scenario(reports, &want, "rules-accident.csv", rules);
    }
}

/// The validator's trips: a car back on the entrance ramp after more than a minute, or on another
/// road, starts afresh (its unpaid toll is dropped); its reports after the exit are ignored.
#[test]
fn validator_trips_start_afresh_and_reports_after_the_exit_are_ignored() {
    let mut reports = Vec::new();
    let mut want_v = Vec::new();
    let mut want_m = Vec::new();
    let both = |w: &mut Vec<LrOutput>, m: &mut Vec<LrOutput>, o: LrOutput| {
        w.push(o);
        m.push(o);
    };
    // 60 cars in segment 10 in minute 1 make it congested (one report each at 30 mph).
    for car in 0..60 {
        reports.push(report(car, car, 30, 1, 0, 10 * 5280 + car * 10));
        both(&mut want_v, &mut want_m, toll(car, car, 0, 0));
    }
    // Car 100 pays 200 for segment 10 at 65 ...
    reports.push(report(65, 100, 30, 1, 0, 10 * 5280 + 2000));
    both(&mut want_v, &mut want_m, toll(100, 65, 30, 200));
    // ... and shows up on the entrance ramp of segment 30 at 200: a new trip for the validator
    // (its 200 is dropped), the same car going on for moirai (the 200 is charged).
    reports.push(report(200, 100, 10, 0, 0, 30 * 5280));
    both(&mut want_v, &mut want_m, toll(100, 200, 0, 0));
    want_m.push(LrOutput::Assessment(TollAssessment { car: 100, time: 200, toll: 200 }));
    // Car 101 pays 200 and exits in segment 11 at 95 (charged by both) ...
    reports.push(report(66, 101, 30, 1, 0, 10 * 5280 + 2100));
    both(&mut want_v, &mut want_m, toll(101, 66, 30, 200));
    reports.push(report(96, 101, 10, EXIT_LANE, 0, 11 * 5280 + 10));
    both(&mut want_v, &mut want_m, LrOutput::Assessment(TollAssessment { car: 101, time: 96, toll: 200 }));
    // ... then reports from segment 12, lane 2, without entering again: ignored by the
    // validator, a new segment for moirai.
    reports.push(report(126, 101, 40, 2, 0, 12 * 5280 + 10));
    want_m.push(toll(101, 126, 0, 0));
    for (rules, want) in [(Rules::Validator, &want_v), (Rules::Moirai, &want_m)] {
        check_scenario(reports.clone(), want, "trips.csv", rules);
    }
    // The ignored report is counted.
    let mut sorted_reports = reports.clone();
    sorted_reports.sort_by_key(|p| (p.time, p.car));
    let records: Vec<Record> = sorted_reports.into_iter().map(Record::Position).collect();
    let file = write_file("trips-count.csv", &records);
    let cfg = LinearRoadConfig { input: Some(file.0.clone()), collect_outputs: true, ..Default::default() };
    assert_eq!(run(&cfg).1.ignored_reports, 1);
}

#[test]
fn two_cars_stopped_together_are_an_accident_for_four_segments_upstream() {
    let p = 20 * 5280 + 700;
    let alert = |car, time, seg| LrOutput::Alert(AccidentAlert { car, time, xway: 0, seg, dir: 0 });
    let mut reports = Vec::new();
    let mut want = Vec::new();
    // moirai's rules: stopped cars in any lane at one position make an accident.
    // Cars 1 and 2 stand at the same place eastbound in segment 20 from t = 0: both stopped at
    // their 4th report (t = 90), an accident in effect from 90; car 1 drives off at t = 120.
    for t in [0, 30, 60, 90] {
        reports.push(report(t, 1, 0, 1, 0, p));
        reports.push(report(t + 1, 2, 0, 2, 0, p));
    }
    reports.push(report(120, 1, 30, 1, 0, p + 1320));
    reports.push(report(121, 2, 0, 2, 0, p));
    want.push(toll(1, 0, 0, 0));
    want.push(toll(2, 1, 0, 0));
    // Minute 3 (t = 125): the accident was in effect during minute 2 ([90, 120)).
    reports.push(report(125, 3, 50, 1, 0, 17 * 5280)); // 3 segments upstream: alert
    want.push(alert(3, 125, 20));
    want.push(toll(3, 125, 0, 0));
    reports.push(report(126, 4, 50, 1, 0, 15 * 5280)); // 5 upstream: too far
    want.push(toll(4, 126, 0, 0));
    reports.push(report(127, 5, 50, 1, 0, 21 * 5280)); // downstream of it: no
    want.push(toll(5, 127, 0, 0));
    reports.push(report(128, 6, 50, 1, 1, 18 * 5280)); // the other direction: no
    want.push(toll(6, 128, 0, 0));
    reports.push(report(129, 7, 50, 1, 0, 20 * 5280 + 100)); // its own segment: alert
    want.push(alert(7, 129, 20));
    want.push(toll(7, 129, 0, 0));
    // Minute 4: the accident ended at 120, in effect no instant of minute 3: no alert.
    reports.push(report(185, 8, 50, 1, 0, 18 * 5280));
    want.push(toll(8, 185, 0, 0));
    // A car that stands alone at one place for 4 reports is no accident.
    for t in [200, 230, 260, 290] {
        reports.push(report(t, 9, 0, 3, 0, 40 * 5280));
    }
    want.push(toll(9, 200, 0, 0));
    reports.push(report(305, 10, 50, 1, 0, 38 * 5280));
    want.push(toll(10, 305, 0, 0));
    // In one second car 11 becomes stopped where car 12 was stopped and drives off: after that
    // second only one car stands there, so there is no accident (whatever order the two reports
    // are processed in).
    for t in [310, 340, 370, 400] {
        reports.push(report(t, 12, 0, 1, 0, 45 * 5280));
    }
    for t in [340, 370, 400, 430] {
        reports.push(report(t, 11, 0, 2, 0, 45 * 5280));
    }
    reports.push(report(430, 12, 40, 1, 0, 45 * 5280 + 1760));
    want.push(toll(12, 310, 0, 0));
    want.push(toll(11, 340, 0, 0));
    reports.push(report(485, 13, 50, 1, 0, 43 * 5280));
    want.push(toll(13, 485, 0, 0));
    check_scenario(reports, &want, "accident.csv", Rules::Moirai);
}

#[test]
fn lachesis_shape_passes_every_tuple_to_the_sink() {
    for parallelism in [1, 2] {
        let g = traffic(4, 2.0, 300);
        let cfg = LinearRoadConfig { shape: Shape::Lachesis, ..config(&g, parallelism) };
        let (queries, stats) = queries(&cfg).unwrap();
        assert_eq!(queries[0].graph().nodes.len(), 10, "9 operators and the sink's merge");
        // With chaining on, the merge runs on the sink's thread: the paper's nine threads (at
        // parallelism 1; the seven operators between source and sink have `parallelism` each).
        let plan = PhysicalPlan::new(queries[0].graph(), true);
        assert_eq!(plan.operators.len(), 2 + 7 * parallelism);
        Engine::start(EngineConfig::default(), queries).unwrap().wait().unwrap();
        let report = stats.finish().unwrap();
        let n = positions(&generator::generate(&g).unwrap()).len() as u64;
        assert_eq!(report.position_reports, n);
        assert_eq!(report.lachesis_notifications, [n, n, n], "one notification per report on each branch");
        assert_eq!(report.deadline_outputs, 3 * n);
    }
}

/// A historical query record.
fn query(kind: QueryKind, time: u32, car: u32, xway: i32, qid: i32, day: i32) -> Record {
    Record::Query(QueryRecord { kind, time, car, xway, qid, sinit: -1, send: -1, dow: -1, tod: -1, day })
}

/// Generated traffic with historical queries among the reports: some cars ask for their balance
/// or a day's expenditure (today, yesterday, …, on their expressway or another) when they report,
/// and a few ask for travel times (not answered).
fn with_queries(records: Vec<Record>) -> Vec<Record> {
    let mut out = Vec::with_capacity(records.len() * 11 / 10);
    let mut qid = 0;
    for r in records {
        out.push(r);
        let Record::Position(p) = r else { continue };
        qid += 1;
        if p.car % 3 == 0 {
            out.push(query(QueryKind::AccountBalance, p.time, p.car, -1, qid, -1));
        } else if p.car % 7 == 0 {
            let day = (p.time / 30 % 4) as i32; // 0 = today, 1..=3 from the history
            let xway = if p.time % 90 < 60 { p.xway as i32 } else { 1 };
            out.push(query(QueryKind::DailyExpenditure, p.time, p.car, xway, qid, day));
        } else if p.car % 101 == 0 {
            out.push(query(QueryKind::TravelTime, p.time, p.car, 0, qid, -1));
        }
    }
    out
}

fn write_file(name: &str, records: &[Record]) -> TempFile {
    let file = TempFile::new(name);
    let mut text = Vec::new();
    csv::write_records(&mut text, records).unwrap();
    std::fs::write(&file.0, text).unwrap();
    file
}

/// Type-2 and type-3 queries are answered, by the engine as by the reference, at any parallelism
/// and under either rules: balances count every toll charged so far, daily expenditures come from
/// the history (and, under moirai's rules, day 0 from today's tolls).
#[test]
fn historical_queries_are_answered_as_the_reference_answers_them() {
    let g = traffic(11, 6.0, 1200);
    let records = with_queries(generator::generate(&g).unwrap());
    let file = write_file("queries.csv", &records);
    let asked = |kind| records.iter().filter(|r| matches!(r, Record::Query(q) if q.kind == kind)).count();
    let today = records
        .iter()
        .filter(|r| matches!(r, Record::Query(q) if q.kind == QueryKind::DailyExpenditure && q.day == 0))
        .count();
    assert!(today > 10);
    for rules in [Rules::Validator, Rules::Moirai] {
        let want = sorted(reference::run_with(records.clone(), rules, &HistoricalTolls::Seeded(g.seed)));
        let balances: Vec<&AccountBalance> =
            want.iter().filter_map(|o| if let LrOutput::Balance(b) = o { Some(b) } else { None }).collect();
        let expenditures: Vec<&DailyExpenditure> =
            want.iter().filter_map(|o| if let LrOutput::Expenditure(e) = o { Some(e) } else { None }).collect();
        assert_eq!(balances.len(), asked(QueryKind::AccountBalance), "every type-2 query is answered");
        // The validator leaves day 0 (today) unanswered; the seeded table has every other day.
        let answered = asked(QueryKind::DailyExpenditure) - if rules == Rules::Validator { today } else { 0 };
        assert_eq!(expenditures.len(), answered, "{rules}");
        // The traffic charges tolls, so some balances are not zero.
        assert!(balances.iter().filter(|b| b.bal > 0).count() > 10);
        if rules == Rules::Moirai {
            let spent_today = expenditures.iter().filter(|e| e.bal > 0).count();
            assert!(balances.iter().filter(|b| b.bal > 0 && b.result_time < b.time).count() > 10);
            assert!(spent_today > 10);
        } else {
            assert!(balances.iter().all(|b| b.result_time == b.time), "the validator's result time is the query's");
        }
        for parallelism in [1, 3] {
            let cfg = LinearRoadConfig {
                input: Some(file.0.clone()),
                traffic: g.clone(),
                parallelism,
                collect_outputs: true,
                rules,
                history: HistorySource::Seeded,
                ..LinearRoadConfig::default()
            };
            let (got, report) = run(&cfg);
            assert!(got == want, "parallelism {parallelism}, {rules}: outputs differ from the reference");
            assert_eq!(report.account_balances as usize, balances.len());
            assert_eq!(report.daily_expenditures as usize, expenditures.len());
            let skipped = if rules == Rules::Validator { today } else { 0 };
            assert_eq!(report.expenditures_for_today as usize, skipped, "counted, not silently dropped");
            assert_eq!(report.query_records as usize, balances.len() + expenditures.len() + skipped);
            assert_eq!(report.other_records as usize, asked(QueryKind::TravelTime), "type 4 is dropped");
            assert_eq!((report.records_read, report.records_total), (records.len() as u64, Some(records.len() as u64)));
            assert_eq!(
                report.deadline_outputs,
                report.toll_notifications
                    + report.accident_alerts
                    + report.account_balances
                    + report.daily_expenditures
            );
            let judged: u64 = report.response_times.kinds.iter().map(|k| k.answers).sum();
            assert_eq!(judged, report.deadline_outputs, "every answer's response time is recorded");
        }
    }
}

/// Known answers: a balance counts the tolls charged up to and including its second, a daily
/// expenditure the historical table (or, under moirai's rules, today's tolls on one expressway).
#[test]
fn a_balance_and_an_expenditure_have_the_known_answers() {
    let mut records: Vec<Record> = Vec::new();
    // Minute 1: 60 cars crawl through segment 10: car 100 then pays 200 there.
    for car in 0..60 {
        records.push(Record::Position(report(car, car, 15 + (car % 10) as u8, 1, 0, 10 * 5280 + car * 10)));
    }
    records.push(Record::Position(report(65, 100, 20, 1, 0, 10 * 5280 + 2000)));
    records.push(query(QueryKind::AccountBalance, 70, 100, -1, 1, -1)); // notified, not yet charged: 0
    records.push(query(QueryKind::AccountBalance, 94, 100, -1, 2, -1));
    // Charged at 95 when it enters segment 11.
    records.push(query(QueryKind::AccountBalance, 95, 100, -1, 3, -1)); // before its report in the file
    records.push(Record::Position(report(95, 100, 60, 1, 0, 11 * 5280 + 100)));
    records.push(query(QueryKind::AccountBalance, 96, 100, -1, 4, -1));
    records.push(query(QueryKind::DailyExpenditure, 96, 100, 0, 5, 0)); // today on xway 0
    records.push(query(QueryKind::DailyExpenditure, 96, 100, 1, 6, 0)); // today on xway 1
    records.push(query(QueryKind::DailyExpenditure, 96, 100, 0, 7, 3)); // three days ago
    records.push(query(QueryKind::AccountBalance, 97, 555, -1, 9, -1)); // a car never seen
    let seed = 42;
    let balance =
        |time, result_time, qid, bal| LrOutput::Balance(AccountBalance { car: 100, time, result_time, qid, bal });
    let spent = |qid, bal| LrOutput::Expenditure(DailyExpenditure { car: 100, time: 96, qid, bal });
    let history = historical_toll(seed, 100, 0, 3);
    assert!(history < 100);
    assert_ne!(historical_toll(seed, 100, 0, 4), history, "days differ");
    assert_ne!(historical_toll(seed + 1, 100, 0, 3), history, "seeds differ");
    let never_seen = LrOutput::Balance(AccountBalance { car: 555, time: 97, result_time: 97, qid: 9, bal: 0 });
    // moirai: a balance's result time is the last charge's; day 0 is today.
    let moirai = vec![
        balance(70, 70, 1, 0),
        balance(94, 94, 2, 0),
        balance(95, 95, 3, 200),
        balance(96, 95, 4, 200),
        spent(5, 200),
        spent(6, 0),
        spent(7, history),
        never_seen,
    ];
    // The validator: the query's time; day 0 is not answered.
    let validator = vec![
        balance(70, 70, 1, 0),
        balance(94, 94, 2, 0),
        balance(95, 95, 3, 200),
        balance(96, 96, 4, 200),
        spent(7, history),
        never_seen,
    ];
    let answers = |outputs: Vec<LrOutput>| -> Vec<LrOutput> {
        sorted(outputs.into_iter().filter(|o| matches!(o, LrOutput::Balance(_) | LrOutput::Expenditure(_))).collect())
    };
    let file = write_file("answers.csv", &records);
    let output = TempFile::new("answers-out.csv");
    for (rules, want) in [(Rules::Moirai, moirai), (Rules::Validator, validator)] {
        let want = sorted(want);
        let got = answers(reference::run_with(records.clone(), rules, &HistoricalTolls::Seeded(seed)));
        assert_eq!(got, want, "reference, {rules}");
        for parallelism in [1, 2] {
            let cfg = LinearRoadConfig {
                input: Some(file.0.clone()),
                output: Some(output.0.clone()),
                traffic: GeneratorConfig { seed, ..GeneratorConfig::default() },
                parallelism,
                collect_outputs: true,
                rules,
                history: HistorySource::Seeded,
                ..LinearRoadConfig::default()
            };
            assert_eq!(answers(run(&cfg).0), want, "engine at parallelism {parallelism}, {rules}");
        }
        // The output file has the benchmark's columns: 2,Time,Emit,ResultTime,QID,Bal and
        // 3,Time,Emit,QID,Bal.
        let written = std::fs::read_to_string(&output.0).unwrap();
        let line = |prefix: &str, suffix: &str| written.lines().any(|l| l.starts_with(prefix) && l.ends_with(suffix));
        let result_time = if rules == Rules::Validator { 96 } else { 95 };
        assert!(line("2,96,", &format!(",{result_time},4,200")), "{written}");
        assert!(line("3,96,", &format!(",7,{history}")), "{written}");
        assert_eq!(written.lines().any(|l| l.starts_with("5,")), rules == Rules::Moirai, "assessments: moirai's only");
    }
}

/// `replay_speed` sends each record at its own time (divided by the speed): a file spanning 3 s of
/// LR time takes 1.5 s at speed 2, and its outputs are the same as at full speed.
#[test]
fn a_replay_follows_the_records_clock() {
    let mut records: Vec<Record> = Vec::new();
    for (time, car) in [(0, 1), (0, 2), (1, 3), (3, 4)] {
        records.push(Record::Position(report(time, car, 50, 0, 0, 5280 * car)));
    }
    let file = write_file("clock.csv", &records);
    let cfg = LinearRoadConfig {
        input: Some(file.0.clone()),
        replay_speed: Some(2.0),
        collect_outputs: true,
        ..LinearRoadConfig::default()
    };
    let started = std::time::Instant::now();
    let (got, report) = run(&cfg);
    let took = started.elapsed();
    assert!(took.as_millis() >= 1500, "the last record is due 1.5 s in: took {took:?}");
    assert!(took.as_secs() < 20, "{took:?}");
    assert_eq!(got, sorted(reference::run(records.clone())));
    assert_eq!((report.records_read, report.records_total), (4, Some(4)));
    assert_eq!(report.deadline_misses, 0, "paced replay of 4 records meets the deadline");

    let refused = |cfg: LinearRoadConfig| queries(&cfg).err().expect("refused").to_string();
    for bad in [0.0, -1.0, f64::NAN, f64::INFINITY] {
        let e = refused(LinearRoadConfig { replay_speed: Some(bad), ..cfg.clone() });
        assert!(e.contains("replay speed must be a positive, finite factor"), "{bad}: {e}");
    }
    let e = refused(LinearRoadConfig { rate: 1000.0, ..cfg.clone() });
    assert!(e.contains("exclude each other"), "{e}");
}

/// Every answer's response time is recorded under every threading model: the sinks' recorders
/// hand theirs over when the engine is done.
#[test]
fn response_times_count_every_answer_under_each_threading_model() {
    let g = traffic(6, 3.0, 400);
    for threading in ["dedicated", "dynamic:2", "policy:qs:2", "fused"] {
        let (queries, stats) = queries(&config(&g, 2)).unwrap();
        let engine = EngineConfig { threading: threading.parse().unwrap(), ..EngineConfig::default() };
        Engine::start(engine, queries).unwrap().wait().unwrap();
        let report = stats.finish().unwrap();
        assert!(report.deadline_outputs > 1000, "{threading}");
        assert_eq!(report.response_times.answers, report.deadline_outputs, "{threading}");
    }
}

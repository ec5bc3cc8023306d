//! Linear Road (Arasu et al., VLDB 2004): variable tolling on a simulated network of expressways,
//! the benchmark the Lachesis evaluation (and many SPE papers) ran.
//!
//! How it is organised:
//!
//! - [`model`]: constants, records, outputs and the shared formulas (toll, downstream).
//! - [`rules`]: where readings of the benchmark differ — the validator's (the default) or
//!   moirai's earlier one — and the formulas that depend on it (LAV, alert window, trips).
//! - [`generator`]: a seeded traffic generator (same seed, same records), optionally with the
//!   benchmark generator's queries and re-entering cars.
//! - [`csv`]: the public 15-column file format: validating reader, writer, output lines.
//! - [`tolls`]: the historical tolls: the generator's tolls file, or a seeded table.
//! - [`query`]: the faithful query on moirai's engine (its stages in `vehicles`, `query` and
//!   `accounts`, their events in `events`); [`reference`](mod@reference): the same semantics as
//!   a plain single-threaded loop, to check the query against.
//! - [`lachesis`]: the nine-operator load shape the Lachesis evaluation ran.
//! - [`stats`]: outputs, deadline misses and errors of a run; [`response`]: response times per
//!   output type against the benchmark's limits.
//! - [`l_rating`]: the L-rating's trial and search.
//! - This file: the configuration and [`queries`], which the CLI and the lab call.
//!
//! # Semantics
//!
//! Input: position reports `(time, car, speed, xway, lane, dir, seg, pos)` in time order, time in
//! seconds, and queries. Minute `m = time / 60 + 1`. A *segment* is `(xway, dir, seg)`. Where
//! the two readings differ, the rule is [`rules::Rules`]'s (the validator's by default;
//! `docs/linear-road.md` has them side by side).
//!
//! - **Trips.** Under the validator's rules a car's report on the entrance ramp more than 60 s
//!   after its last one, or on another expressway or direction, starts a new trip (its unpaid
//!   toll is dropped), and its reports after the exit ramp are ignored until it enters again.
//! - **Stopped cars.** A car is stopped once it sent 4 consecutive reports at the same place
//!   (xway, dir, lane, pos), from the time of the 4th until the time of its next report
//!   elsewhere.
//! - **Accidents.** An accident is in effect at a place while two or more cars are stopped there
//!   (the same lane and position for the validator; the same position in any lane for moirai),
//!   judged after all reports of each second.
//! - **Segment statistics** of a segment and minute: NOV = the number of distinct cars that
//!   reported there; the sum and the number of their speed readings; the mean of the cars' mean
//!   speeds.
//! - **LAV** for minute `m`, from minutes `m−5 … m−1`: `round(Σ speeds / Σ readings)`
//!   (validator), or the floor of the mean of the per-minute means (moirai).
//! - **Toll notification** (output type 0) for each report that is a car's first in a segment
//!   (of its trip) and not on the exit ramp (lane 4): `toll = 2 · (NOV − 50)²` with NOV of
//!   minute `m−1`, if LAV < 40 mph, NOV > 50 and no accident alerts the car; else 0.
//! - **Accident alert** (output type 1) for the same reports, for the nearest accident in the
//!   car's segment or the 4 segments downstream (higher segments eastbound, lower westbound):
//!   from the minute after its detection to the minute it was cleared in (validator), or in the
//!   minutes after one in which it was in effect (moirai).
//! - **Toll assessment**: a car's last notified toll is charged when it gets its next
//!   notification or reaches the exit ramp (in a new segment, for the validator); zero tolls
//!   are not charged.
//! - **Account balance** (input type 2 `(Time, VID, QID)` → output type 2 `(Time, Emit,
//!   ResultTime, QID, Bal)`): Bal = the sum of the tolls charged to the car up to and including
//!   the query's second; ResultTime = the query's time (validator) or the last charge's (moirai).
//! - **Daily expenditure** (input type 3 `(Time, VID, XWay, QID, Day)` → output type 3 `(Time,
//!   Emit, QID, Bal)`): the car's tolls on that expressway on that day (1 = yesterday … 69), from
//!   the historical tolls ([`tolls`]). The validator's rules leave a query unanswered (counted)
//!   when the history has no toll for it, and for day 0; moirai's answer 0, and day 0 with the
//!   tolls charged today.
//!
//! The limits: toll notifications, accident alerts and account balances must leave within 5 s
//! of the intended send time of the record that triggered them, daily expenditures within 10 s
//! ([`response`]). The intended send time follows `rate` (a schedule of the engine's), or, with
//! `replay_speed`, the records' own clock: at speed 1.0 a record is due `time` seconds after the
//! start, which makes the limits the benchmark's.
//!
//! Left out of the benchmark: type 4 (travel time) was never part of any implementation and is
//! read and dropped. The Lachesis shape drops queries too. The source replays one time-ordered
//! stream, so it runs as one instance whatever the parallelism.

mod accounts;
pub mod csv;
mod events;
pub mod generator;
pub mod l_rating;
pub mod lachesis;
pub mod model;
pub mod query;
pub mod reference;
pub mod response;
pub mod rules;
pub mod stats;
pub mod tolls;
mod vehicles;

use std::fmt;
use std::fs::File;
use std::io::{BufRead, BufReader, BufWriter, Write};
use std::path::{Path, PathBuf};
use std::str::FromStr;
use std::sync::{Arc, OnceLock};
use std::time::Duration;

use moirai_engine::{now_ns, BuildError, BuiltQuery, Source};
use serde::Serialize;

pub use generator::{Generator, GeneratorConfig};
pub use model::{AccidentAlert, LrOutput, PositionReport, Record, TollAssessment, TollNotification};
pub use rules::Rules;
pub use stats::{LinearRoadReport, LinearRoadStats};
pub use tolls::{HistoricalTolls, TollsError};

use self::csv::{line_time_ns, parse_record, record_line, RecordReader, RowError};
use self::events::Input;
use self::tolls::AskedDays;

/// Which query to run.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize)]
#[serde(rename_all = "lowercase")]
pub enum Shape {
    /// The benchmark's semantics: tolls, accidents, assessments ([`query`]).
    #[default]
    Faithful,
    /// The nine-operator, selectivity-1 load shape of the Lachesis evaluation ([`lachesis`]).
    Lachesis,
}

impl fmt::Display for Shape {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            Shape::Faithful => "faithful",
            Shape::Lachesis => "lachesis",
        })
    }
}

impl FromStr for Shape {
    type Err = String;

    fn from_str(s: &str) -> Result<Self, String> {
        match s {
            "faithful" => Ok(Shape::Faithful),
            "lachesis" => Ok(Shape::Lachesis),
            other => Err(format!("unknown Linear Road shape '{other}'; use 'faithful' or 'lachesis'")),
        }
    }
}

/// Why Linear Road could not run.
#[derive(Debug, thiserror::Error)]
pub enum LinearRoadError {
    /// A parameter is out of range.
    #[error("invalid Linear Road configuration: {0}")]
    Config(String),
    /// A row of the input file is malformed.
    #[error("{}: {error}; fix the row, or regenerate the file", path.display())]
    Input {
        /// The file.
        path: PathBuf,
        /// The row, column and problem.
        error: RowError,
    },
    /// The input file cannot be read.
    #[error("cannot read {}: {source}", path.display())]
    Read {
        /// The file.
        path: PathBuf,
        /// Why.
        source: std::io::Error,
    },
    /// The output file cannot be written.
    #[error("cannot write {}: {source}", path.display())]
    Write {
        /// The file.
        path: PathBuf,
        /// Why.
        source: std::io::Error,
    },
    /// Something failed inside the running engine (an input file changed while it ran).
    #[error("Linear Road run failed: {0}")]
    Run(String),
    /// The historical tolls file is malformed or does not belong to the input.
    #[error(transparent)]
    Tolls(#[from] TollsError),
    /// The query could not be built.
    #[error(transparent)]
    Build(#[from] BuildError),
}

/// Parameters of a Linear Road run.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct LinearRoadConfig {
    /// The traffic to generate (ignored when replaying an input file).
    pub traffic: GeneratorConfig,
    /// Offered rate, records per second in total; 0 = as fast as the engine takes them.
    pub rate: f64,
    /// Replay at the records' own clock (their time column) this many times faster than real
    /// time, instead of at `rate` (which must then be 0).
    pub replay_speed: Option<f64>,
    /// Instances of each keyed stage (faithful) or of each operator between source and sink
    /// (Lachesis shape).
    pub parallelism: usize,
    /// Replay this file (the 15-column format) instead of generating.
    pub input: Option<PathBuf>,
    /// Write the outputs here (faithful shape only).
    pub output: Option<PathBuf>,
    /// Which query.
    pub shape: Shape,
    /// Keep every output in memory for [`LinearRoadStats::take_outputs`] (for checking).
    pub collect_outputs: bool,
    /// The rules the faithful query follows.
    pub rules: Rules,
    /// Where daily expenditures (type 3) come from.
    pub history: HistorySource,
    /// With `replay_speed`: replay the records before this time (seconds of the records' clock)
    /// as fast as the engine takes them, and the rest at the replay speed from the moment the
    /// first of them is drawn (the L-rating builds its state this way).
    pub fast_forward_s: Option<u32>,
    /// Judge the response times of the answers to records at or after this time only.
    pub judge_from_s: u32,
}

/// Where a run's historical tolls come from.
#[derive(Clone, Debug, Default, PartialEq, Serialize)]
pub enum HistorySource {
    /// Generated traffic: the seeded table. An input file: under the validator's rules, refused
    /// if the input asks about past days; under moirai's, the seeded table.
    #[default]
    Default,
    /// The table made from the generator's seed ([`model::historical_toll`]).
    Seeded,
    /// The benchmark generator's tolls file (`carid,day,xway,tolls`).
    File(PathBuf),
}

impl Default for LinearRoadConfig {
    /// One expressway for the benchmark's three hours, generated, as fast as possible.
    fn default() -> Self {
        LinearRoadConfig {
            traffic: GeneratorConfig::default(),
            rate: 0.0,
            replay_speed: None,
            parallelism: 1,
            input: None,
            output: None,
            shape: Shape::Faithful,
            collect_outputs: false,
            rules: Rules::default(),
            history: HistorySource::Default,
            fast_forward_s: None,
            judge_from_s: 0,
        }
    }
}

impl LinearRoadConfig {
    /// Checks the parameters (not the input file); the message says what to change.
    pub fn validate(&self) -> Result<(), LinearRoadError> {
        let bad = |m: String| Err(LinearRoadError::Config(m));
        if self.parallelism == 0 || self.parallelism > 256 {
            return bad(format!("parallelism must be in 1..=256, not {}", self.parallelism));
        }
        crate::check::rate("rate", self.rate).map_err(LinearRoadError::Config)?;
        if let Some(speed) = self.replay_speed {
            if !(speed.is_finite() && speed > 0.0) {
                return bad(format!("replay speed must be a positive, finite factor (1.0 = real time), not {speed}"));
            }
            if self.rate > 0.0 {
                return bad(format!(
                    "a replay speed ({speed}) and a rate ({}) exclude each other: replay at the records' clock, \
                     or at a rate",
                    self.rate
                ));
            }
        }
        if self.fast_forward_s.is_some() && self.replay_speed.is_none() {
            return bad("fast-forwarding needs a replay speed for the rest of the records".into());
        }
        if self.shape == Shape::Lachesis && self.output.is_some() {
            return bad(
                "the Lachesis shape emits only dummy notifications; write outputs with the faithful shape".into()
            );
        }
        if self.input.is_none() {
            if self.traffic.duration_s == 0 {
                return bad("duration must be at least 1 s".into());
            }
            self.traffic.validate().map_err(LinearRoadError::Config)?;
        }
        Ok(())
    }
}

/// Builds the Linear Road query for `config`, and the handle that reports its outputs and
/// deadline misses after (or during) the run. An input file is checked row by row first, so a
/// malformed file fails here, with its line and column.
pub fn queries(config: &LinearRoadConfig) -> Result<(Vec<BuiltQuery>, LinearRoadStats), LinearRoadError> {
    config.validate()?;
    let scan = match &config.input {
        Some(path) => Some(scan_input(path)?),
        None => None,
    };
    let history = history(config, scan.as_ref())?;
    let speed = config.replay_speed.unwrap_or(1.0);
    let stats = LinearRoadStats::new(config.shape, config.rules, config.collect_outputs, config.output.clone(), speed)?;
    stats.set_records_total(scan.as_ref().map(|s| s.records));
    stats.set_history(history.describe());
    stats.judge_from(config.judge_from_s);
    let source = match (config.replay_speed, config.fast_forward_s) {
        (Some(speed), Some(until)) => lines(config, &stats).replay(fast_forward_clock(until, speed, &stats), speed),
        (Some(speed), None) => lines(config, &stats).replay(|line: &String| line_time_ns(line), speed),
        (None, _) => lines(config, &stats).rate(config.rate),
    };
    let query = match config.shape {
        Shape::Faithful => {
            // Event time is the report's time; the stream is in time order, so no lateness.
            let source = source.event_time(|line: &String| line_time_ns(line), Duration::ZERO);
            let options = query::QueryOptions { parallelism: config.parallelism, rules: config.rules, history };
            query::build(source, &options, &stats)?
        }
        Shape::Lachesis => lachesis::build(source, config.parallelism, &stats)?,
    };
    Ok((vec![query], stats))
}

/// The historical tolls of a run: the file's rows its queries ask about, or the seeded table.
fn history(config: &LinearRoadConfig, scan: Option<&InputScan>) -> Result<HistoricalTolls, LinearRoadError> {
    let seeded = HistoricalTolls::Seeded(config.traffic.seed);
    match (&config.history, &config.input, scan) {
        (HistorySource::File(tolls), Some(input), Some(scan)) => {
            Ok(HistoricalTolls::File(Arc::new(tolls::read_tolls(tolls, &scan.asked, input)?)))
        }
        (HistorySource::File(tolls), None, _) => Err(LinearRoadError::Config(format!(
            "a historical tolls file ({}) goes with the input file the generator wrote it for; give --input, or \
             drop the tolls file to answer generated traffic from the seeded table",
            tolls.display()
        ))),
        (HistorySource::Default, Some(input), Some(scan))
            if config.rules == Rules::Validator && config.shape == Shape::Faithful && !scan.asked.is_empty() =>
        {
            Err(LinearRoadError::Config(format!(
                "{}: line {}: daily-expenditure queries (type 3) ask about past days, which come from the historical \
                 tolls file the benchmark's generator writes with the input (carid,day,xway,tolls): give it with \
                 --historical-tolls FILE, or answer from a table made from --seed with --historical-tolls seeded",
                input.display(),
                scan.first_history_line
            )))
        }
        _ => Ok(seeded),
    }
}

/// The replay clock of a run that fast-forwards the records before `until` seconds: they are all
/// due at the start; a record at `t ≥ until` is due `(t − until) / speed` after the moment the
/// first of them was drawn, however long the fast-forward took. (The source calls the clock once
/// per record as it draws it, in order, so the first call marks the start and the first record
/// at `until` or later the end of the fast-forward. The source's own replay clock starts when it
/// first steps, so the first record must come at once: the generator simulates skipped traffic
/// when it is made, not on the first draw.)
fn fast_forward_clock(
    until: u32,
    speed: f64,
    stats: &LinearRoadStats,
) -> impl Fn(&String) -> u64 + Send + Sync + 'static {
    let until_ns = until as u64 * 1_000_000_000;
    let (start, end) = (Arc::new(OnceLock::new()), Arc::new(OnceLock::new()));
    let stats = stats.clone();
    move |line: &String| {
        let t = line_time_ns(line);
        let start = *start.get_or_init(|| {
            stats.record_drawn();
            now_ns()
        });
        if t < until_ns {
            return 0;
        }
        let took = *end.get_or_init(|| {
            stats.fast_forwarded();
            now_ns().saturating_sub(start)
        });
        (took as f64 * speed) as u64 + (t - until_ns)
    }
}

/// The source's lines: the input file's, or the generator's records formatted as the file has
/// them (a Kafka consumer hands the engine bytes to parse, and the dispatcher parses them).
fn lines(config: &LinearRoadConfig, stats: &LinearRoadStats) -> Source<String> {
    let stats = stats.clone();
    match config.input.clone() {
        Some(path) => Source::new(move |_, _| -> Box<dyn Iterator<Item = String> + Send> {
            match File::open(&path) {
                Ok(file) => Box::new(RawLines {
                    input: Some(BufReader::new(file)),
                    path: path.clone(),
                    line: 0,
                    stats: stats.clone(),
                }),
                Err(source) => {
                    stats.fail(LinearRoadError::Read { path: path.clone(), source });
                    Box::new(std::iter::empty())
                }
            }
        }),
        None => {
            let generator = config.traffic.clone();
            Source::new(move |_, _| -> Box<dyn Iterator<Item = String> + Send> {
                match Generator::new(generator.clone()) {
                    Ok(g) => Box::new(g.map(|r| record_line(&r))),
                    Err(e) => {
                        stats.fail(LinearRoadError::Config(e));
                        Box::new(std::iter::empty())
                    }
                }
            })
        }
    }
}

/// The record lines of a file, as they are (checked before the run; the dispatcher parses them).
struct RawLines {
    input: Option<BufReader<File>>,
    path: PathBuf,
    line: u64,
    stats: LinearRoadStats,
}

impl Iterator for RawLines {
    type Item = String;

    fn next(&mut self) -> Option<String> {
        let input = self.input.as_mut()?;
        loop {
            let mut line = String::new();
            self.line += 1;
            match input.read_line(&mut line) {
                Ok(0) => {
                    self.input = None;
                    return None;
                }
                Ok(_) => {}
                Err(source) => {
                    self.stats.fail(LinearRoadError::Read { path: self.path.clone(), source });
                    self.input = None;
                    return None;
                }
            }
            let text = line.trim_end_matches(['\n', '\r']);
            if text.trim().is_empty() || (self.line == 1 && text.trim_start().starts_with("type")) {
                continue;
            }
            line.truncate(text.len());
            return Some(line);
        }
    }
}

/// Parses a line for the faithful query's dispatcher: position reports and type-2/3 queries go
/// on, type-4 queries are counted and dropped, a malformed line (the file changed since it was
/// checked) fails the run.
pub(crate) fn dispatch_input(line: &str, stats: &LinearRoadStats) -> Option<Input> {
    match parse_record(line) {
        Ok(Record::Position(p)) => {
            stats.position_report();
            stats.report_of(p.car, p.time);
            Some(Input::Report(p))
        }
        Ok(Record::Query(q)) if q.kind != model::QueryKind::TravelTime => {
            stats.query_record();
            Some(Input::Query(q))
        }
        Ok(Record::Query(_)) => {
            stats.other_record();
            None
        }
        Err(e) => {
            stats.fail(LinearRoadError::Run(format!("dispatcher: {} in '{line}'", e.message)));
            None
        }
    }
}

/// Parses a line for a dispatcher: position reports go on, other records are counted and
/// dropped, a malformed line (the file changed since it was checked) fails the run.
pub(crate) fn dispatch(line: &str, stats: &LinearRoadStats) -> Option<PositionReport> {
    match parse_record(line) {
        Ok(Record::Position(p)) => {
            stats.position_report();
            Some(p)
        }
        Ok(Record::Query(_)) => {
            stats.other_record();
            None
        }
        Err(e) => {
            stats.fail(LinearRoadError::Run(format!("dispatcher: {} in '{line}'", e.message)));
            None
        }
    }
}

/// What a check of an input file found.
#[derive(Clone, Debug, Default)]
pub struct InputScan {
    /// Records in the file.
    pub records: u64,
    /// The car-days its daily-expenditure queries ask about.
    pub asked: AskedDays,
    /// The line of the first query that asks about a past day (0 if none does).
    pub first_history_line: u64,
}

/// Reads and checks a whole input file; returns how many records it holds.
pub fn check_input(path: &Path) -> Result<u64, LinearRoadError> {
    Ok(scan_input(path)?.records)
}

/// Reads and checks a whole input file, noting the days its daily-expenditure queries ask about.
pub fn scan_input(path: &Path) -> Result<InputScan, LinearRoadError> {
    let mut scan = InputScan::default();
    let mut reader = RecordReader::new(open(path)?);
    while let Some(record) = reader.next_line() {
        let (record, _) = record.map_err(|error| LinearRoadError::Input { path: path.to_path_buf(), error })?;
        scan.records += 1;
        if let Record::Query(q) = record {
            if q.kind == model::QueryKind::DailyExpenditure && q.day >= 1 {
                let line = reader.line();
                scan.asked.ask(q.car, q.day, line);
                if scan.first_history_line == 0 {
                    scan.first_history_line = line;
                }
            }
        }
    }
    Ok(scan)
}

/// Reads a whole input file into memory.
pub fn read_input(path: &Path) -> Result<Vec<Record>, LinearRoadError> {
    RecordReader::new(open(path)?)
        .map(|r| r.map_err(|error| LinearRoadError::Input { path: path.to_path_buf(), error }))
        .collect()
}

fn open(path: &Path) -> Result<BufReader<File>, LinearRoadError> {
    File::open(path).map(BufReader::new).map_err(|source| LinearRoadError::Read { path: path.to_path_buf(), source })
}

/// Generates the records of `config` into a file in the 15-column format; returns how many.
pub fn write_input(config: &GeneratorConfig, path: &Path) -> Result<u64, LinearRoadError> {
    let generator = Generator::new(config.clone()).map_err(LinearRoadError::Config)?;
    let write_error = |source| LinearRoadError::Write { path: path.to_path_buf(), source };
    let mut out = BufWriter::new(File::create(path).map_err(write_error)?);
    let mut n = 0;
    for record in generator {
        csv::write_records(&mut out, [&record]).map_err(write_error)?;
        n += 1;
    }
    out.flush().map_err(write_error)?;
    Ok(n)
}

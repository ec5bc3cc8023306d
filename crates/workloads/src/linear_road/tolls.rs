//! The historical tolls that daily-expenditure queries (type 3) are answered from: the benchmark
//! generator's tolls file, or a table made from a seed.
//!
//! The tolls file has one line per car, day and expressway, `carid,day,xway,tolls` (all
//! integers, days 1–69, 1 = yesterday), and the generator writes one for every car and day: 69
//! lines per car, some 25 M per expressway. Like the benchmark's validator (which first cuts the
//! file down to the rows its input's queries match), moirai keeps only the rows whose car and day
//! a type-3 query of the input asks about; every line is still read and checked. A query whose
//! car and day the file does not hold at all means that the file belongs to another input: that
//! is an error before the run, naming the query's line. A query for an expressway the car did not
//! use that day has no toll: the rules say what to answer ([`super::rules`]).
//!
//! Without a file (generated traffic, or `--historical-tolls seeded`), the tolls come from
//! [`historical_toll`], a seeded function of car, expressway and day.

use std::collections::hash_map::Entry;
use std::fmt;
use std::fs::File;
use std::io::{BufRead, BufReader};
use std::path::{Path, PathBuf};
use std::sync::Arc;

use rustc_hash::{FxHashMap, FxHashSet};

use super::model::{historical_toll, HISTORY_DAYS};

/// The columns of a tolls file.
pub const TOLL_COLUMNS: [&str; 4] = ["carid", "day", "xway", "tolls"];

/// Where the historical tolls come from.
#[derive(Clone, Debug)]
pub enum HistoricalTolls {
    /// A table made from this seed ([`historical_toll`]).
    Seeded(u64),
    /// The rows of a tolls file that the input's queries ask about.
    File(Arc<TollTable>),
}

impl HistoricalTolls {
    /// The toll of `car` on expressway `xway` on day `day` (1 = yesterday … 69), if the history
    /// has one; the seeded table has one for every car, expressway and day 1–69.
    pub fn toll(&self, car: u32, xway: i32, day: i32) -> Option<u64> {
        match self {
            HistoricalTolls::Seeded(seed) => {
                (1..=HISTORY_DAYS).contains(&day).then(|| historical_toll(*seed, car, xway, day))
            }
            HistoricalTolls::File(table) => table.toll(car, xway, day),
        }
    }

    /// In words, for the run's summary.
    pub fn describe(&self) -> String {
        match self {
            HistoricalTolls::Seeded(seed) => format!("a table made from seed {seed}"),
            HistoricalTolls::File(t) => {
                format!("{} ({} lines, {} rows kept for the input's queries)", t.path.display(), t.lines, t.rows.len())
            }
        }
    }
}

/// The rows of a tolls file that matter to an input.
#[derive(Debug)]
pub struct TollTable {
    path: PathBuf,
    /// Lines read.
    lines: u64,
    /// `(car, day, xway) → toll`, for the asked cars and days.
    rows: FxHashMap<(u32, u8, u16), u64>,
}

impl TollTable {
    fn toll(&self, car: u32, xway: i32, day: i32) -> Option<u64> {
        let (day, xway) = (u8::try_from(day).ok()?, u16::try_from(xway).ok()?);
        self.rows.get(&(car, day, xway)).copied()
    }

    /// The file it was read from.
    pub fn path(&self) -> &Path {
        &self.path
    }
}

/// What is wrong with a tolls file, and where.
#[derive(Debug, thiserror::Error)]
pub enum TollsError {
    /// The file cannot be read.
    #[error("cannot read the historical tolls file {}: {source}", path.display())]
    Read {
        /// The file.
        path: PathBuf,
        /// Why.
        source: std::io::Error,
    },
    /// A line is malformed.
    #[error("{}: {at}: {message}; the file must have lines carid,day,xway,tolls (integers, days 1-69), as the benchmark's generator writes them", path.display())]
    Row {
        /// The file.
        path: PathBuf,
        /// Line (and column).
        at: Position,
        /// What is wrong.
        message: String,
    },
    /// A type-3 query asks about a car and day the file does not hold.
    #[error(
        "{}: line {line}: the type-3 query asks about car {car} on day {day}, which the historical tolls file {} \
         does not hold (it holds {} lines): the tolls file belongs to another input; pass the tolls file the \
         generator wrote with this input",
        input.display(), tolls.display(), lines
    )]
    Mismatch {
        /// The input file.
        input: PathBuf,
        /// The query's line in it.
        line: u64,
        /// The asking car.
        car: u32,
        /// The asked day.
        day: u8,
        /// The tolls file.
        tolls: PathBuf,
        /// Lines in the tolls file.
        lines: u64,
    },
}

/// A line, and a column of it if one field is at fault.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Position {
    /// Line, from 1.
    pub line: u64,
    /// Column index into [`TOLL_COLUMNS`].
    pub column: Option<usize>,
}

impl fmt::Display for Position {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self.column {
            Some(c) => write!(f, "line {}, column {} ({})", self.line, c + 1, TOLL_COLUMNS[c]),
            None => write!(f, "line {}", self.line),
        }
    }
}

/// The type-3 queries of an input: which car asks about which day, first on which line.
#[derive(Clone, Debug, Default)]
pub struct AskedDays {
    asked: FxHashMap<(u32, u8), u64>,
}

impl AskedDays {
    /// Notes that the query on `line` asks car `car` about `day` (days outside 1–69 are not in
    /// any tolls file and are left to the rules).
    pub fn ask(&mut self, car: u32, day: i32, line: u64) {
        if let Ok(day @ 1..=69) = u8::try_from(day) {
            self.asked.entry((car, day)).or_insert(line);
        }
    }

    /// How many distinct car-days are asked about.
    pub fn len(&self) -> usize {
        self.asked.len()
    }

    /// True if no query asks about a past day.
    pub fn is_empty(&self) -> bool {
        self.asked.is_empty()
    }
}

fn parse(text: &str, column: usize, max: u64, path: &Path, line: u64) -> Result<u64, TollsError> {
    let bad = |message: String| TollsError::Row {
        path: path.to_path_buf(),
        at: Position { line, column: Some(column) },
        message,
    };
    let value: i64 = text.trim().parse().map_err(|_| bad(format!("'{}' is not an integer", text.trim())))?;
    let min = if column == 1 { 1 } else { 0 };
    if value < min || value as u64 > max {
        return Err(bad(format!("{value} is out of range {min}..={max}")));
    }
    Ok(value as u64)
}

/// Reads and checks the tolls file at `path`, keeping the rows of the car-days `asked`; then
/// checks that every asked car-day has a row (`input` names the input file in that error).
pub fn read_tolls(path: &Path, asked: &AskedDays, input: &Path) -> Result<TollTable, TollsError> {
    let read_error = |source| TollsError::Read { path: path.to_path_buf(), source };
    let mut reader = BufReader::new(File::open(path).map_err(read_error)?);
    let mut rows: FxHashMap<(u32, u8, u16), u64> = FxHashMap::default();
    let mut first_line: FxHashMap<(u32, u8, u16), u64> = FxHashMap::default();
    let mut covered: FxHashSet<(u32, u8)> = FxHashSet::default();
    let mut buffer = String::new();
    let mut line = 0u64;
    loop {
        buffer.clear();
        if reader.read_line(&mut buffer).map_err(read_error)? == 0 {
            break;
        }
        line += 1;
        let text = buffer.trim_end_matches(['\n', '\r']);
        if text.trim().is_empty() || (line == 1 && text.trim_start().starts_with("carid")) {
            continue;
        }
        let mut fields = [""; 4];
        let mut n = 0;
        for part in text.split(',') {
            if n < 4 {
                fields[n] = part;
            }
            n += 1;
        }
        if n != 4 {
            return Err(TollsError::Row {
                path: path.to_path_buf(),
                at: Position { line, column: None },
                message: format!("expected 4 columns ({}), found {n}", TOLL_COLUMNS.join(",")),
            });
        }
        let car = parse(fields[0], 0, u32::MAX as u64, path, line)? as u32;
        let day = parse(fields[1], 1, HISTORY_DAYS as u64, path, line)? as u8;
        let xway = parse(fields[2], 2, u16::MAX as u64, path, line)? as u16;
        let toll = parse(fields[3], 3, u32::MAX as u64, path, line)?;
        if !asked.asked.contains_key(&(car, day)) {
            continue;
        }
        covered.insert((car, day));
        match rows.entry((car, day, xway)) {
            Entry::Vacant(e) => {
                e.insert(toll);
                first_line.insert((car, day, xway), line);
            }
            Entry::Occupied(_) => {
                return Err(TollsError::Row {
                    path: path.to_path_buf(),
                    at: Position { line, column: None },
                    message: format!(
                        "car {car}, day {day}, expressway {xway} has a toll on line {} already",
                        first_line[&(car, day, xway)]
                    ),
                })
            }
        }
    }
    // The first missing car-day by input line, so that the error is the same run after run.
    let missing = asked.asked.iter().filter(|(key, _)| !covered.contains(key)).min_by_key(|(_, &line)| line);
    if let Some((&(car, day), &query_line)) = missing {
        return Err(TollsError::Mismatch {
            input: input.to_path_buf(),
            line: query_line,
            car,
            day,
            tolls: path.to_path_buf(),
            lines: line,
        });
    }
    Ok(TollTable { path: path.to_path_buf(), lines: line, rows })
}

#[cfg(test)]
mod tests {
    use super::*;

    struct Temp(PathBuf);

    impl Temp {
        fn with(name: &str, text: &str) -> Self {
            let path = std::env::temp_dir().join(format!("moirai-tolls-{}-{name}", std::process::id()));
            std::fs::write(&path, text).unwrap();
            Temp(path)
        }
    }

    impl Drop for Temp {
        fn drop(&mut self) {
            let _ = std::fs::remove_file(&self.0);
        }
    }

    fn asked(pairs: &[(u32, i32)]) -> AskedDays {
        let mut a = AskedDays::default();
        for (i, &(car, day)) in pairs.iter().enumerate() {
            a.ask(car, day, 10 + i as u64);
        }
        a
    }

    #[test]
    fn keeps_the_asked_rows_and_answers_from_them() {
        let f = Temp::with("ok.dat", "0,1,0,17\n0,2,1,30\n5,1,0,99\n5,2,0,12\n");
        let t = read_tolls(&f.0, &asked(&[(0, 1), (0, 2), (0, 0), (0, 70)]), Path::new("in.dat")).unwrap();
        assert_eq!(t.lines, 4);
        assert_eq!(t.rows.len(), 2, "car 5 is not asked about");
        let h = HistoricalTolls::File(Arc::new(t));
        assert_eq!(h.toll(0, 0, 1), Some(17));
        assert_eq!(h.toll(0, 1, 2), Some(30));
        assert_eq!(h.toll(0, 0, 2), None, "car 0 drove on expressway 1 on day 2");
        assert_eq!(h.toll(0, -1, 2), None);
        assert_eq!(h.toll(5, 0, 1), None, "not kept");
        assert!(h.describe().contains("4 lines, 2 rows kept"), "{}", h.describe());
        let seeded = HistoricalTolls::Seeded(3);
        assert_eq!(seeded.toll(9, 0, 4), Some(historical_toll(3, 9, 0, 4)));
        assert_eq!(seeded.toll(9, 0, 0), None);
    }

    #[test]
    fn a_bad_line_is_reported_with_its_line_and_column() {
        let error = |text: &str| {
            let f = Temp::with("bad.dat", text);
            read_tolls(&f.0, &AskedDays::default(), Path::new("in.dat")).unwrap_err().to_string()
        };
        assert!(error("1,1,0,5\n1,x,0,5\n").contains("line 2, column 2 (day): 'x' is not an integer"));
        assert!(error("1,0,0,5\n").contains("line 1, column 2 (day): 0 is out of range 1..=69"));
        assert!(error("1,70,0,5\n").contains("column 2 (day): 70 is out of range"));
        assert!(error("1,1,0,-5\n").contains("line 1, column 4 (tolls): -5 is out of range"));
        assert!(error("-1,1,0,5\n").contains("column 1 (carid): -1 is out of range"));
        let e = error("1,1,0\n");
        assert!(e.contains("line 1: expected 4 columns (carid,day,xway,tolls), found 3"), "{e}");
        let missing = read_tolls(Path::new("/nonexistent/t.dat"), &AskedDays::default(), Path::new("in.dat"));
        assert!(missing.unwrap_err().to_string().starts_with("cannot read the historical tolls file /nonexistent"));
    }

    #[test]
    fn a_file_of_another_input_or_with_a_row_twice_is_refused() {
        let f = Temp::with("other.dat", "carid,day,xway,tolls\n1,1,0,5\n1,2,0,5\n");
        let e = read_tolls(&f.0, &asked(&[(1, 1), (2, 3)]), Path::new("in.dat")).unwrap_err().to_string();
        assert!(e.starts_with("in.dat: line 11: the type-3 query asks about car 2 on day 3"), "{e}");
        assert!(e.contains("belongs to another input"), "{e}");
        let f = Temp::with("twice.dat", "1,1,0,5\n1,1,0,6\n");
        let e = read_tolls(&f.0, &asked(&[(1, 1)]), Path::new("in.dat")).unwrap_err().to_string();
        assert!(e.contains("line 2: car 1, day 1, expressway 0 has a toll on line 1 already"), "{e}");
    }
}

//! The public Linear Road file format: reading, validating and writing records, and writing
//! outputs.
//!
//! Input files have one record per line in the 15 columns of the Walmart / LinearGen files,
//! `type,time,carid,speed,xway,lane,dir,seg,pos,qid,sinit,send,dow,tod,day`, all integers, -1 for
//! columns a record type does not use, in time order, without a header (a header line starting
//! with `type` is accepted and skipped). The format has no quoting or escaping, so a line is split
//! at commas; each field is checked, and a bad row is reported with its line, column and what is
//! wrong with it.
//!
//! Output files have one line per output, as the benchmark's validator writes and compares them
//! (the default, [`Rules::Validator`]): `0,carid,time,emit,lav,toll` for toll notifications,
//! `1,time,emit,xway,seg,dir,carid` for accident alerts, `2,time,emit,resulttime,qid,bal` for
//! account balances and `3,time,emit,qid,bal` for daily expenditures, where `emit` is the
//! response time in milliseconds (rounded up), the field the validator's comparison checks
//! against 5000. With [`Rules::Moirai`] alerts are `1,carid,time,emit,seg`, toll assessments are
//! written too, as `5,carid,time,emit,toll` (not an output of the benchmark; the type number is
//! moirai's), and `emit` is the time the output left the engine on the input's clock: `time` plus
//! the response time, in seconds with millisecond precision.
//!
//! Query records (types 2–4) must carry a query id ≥ 0; a daily-expenditure query (type 3) an
//! expressway ≥ 0 and a day in 0–69 (1 = yesterday; 0, today, is moirai's extension).

use std::fmt::{self, Write as _};
use std::io::{BufRead, Write};

use super::model::{
    LrOutput, PositionReport, QueryKind, QueryRecord, Record, EXIT_LANE, HISTORY_DAYS, MAX_POS, MAX_SPEED, SEGMENTS,
    SEGMENT_FT,
};
use super::rules::Rules;

/// The columns of an input record, in order.
pub const COLUMNS: [&str; 15] = [
    "type", "time", "carid", "speed", "xway", "lane", "dir", "seg", "pos", "qid", "sinit", "send", "dow", "tod", "day",
];

/// What is wrong with one row, and where.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct RowError {
    /// Line number, from 1.
    pub line: u64,
    /// The column (index into [`COLUMNS`]), if one field is to blame.
    pub column: Option<usize>,
    /// What is wrong.
    pub message: String,
}

impl fmt::Display for RowError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self.column {
            Some(c) => write!(f, "line {}, column {} ({}): {}", self.line, c + 1, COLUMNS[c], self.message),
            None => write!(f, "line {}: {}", self.line, self.message),
        }
    }
}

impl std::error::Error for RowError {}

/// A problem with one field or a whole row, before the line number is known.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct FieldError {
    /// The column (index into [`COLUMNS`]), if one field is to blame.
    pub column: Option<usize>,
    /// What is wrong.
    pub message: String,
}

impl FieldError {
    fn at(self, line: u64) -> RowError {
        RowError { line, column: self.column, message: self.message }
    }
}

fn field(fields: &[&str; 15], column: usize, min: i64, max: i64) -> Result<i64, FieldError> {
    let text = fields[column];
    let value: i64 = text
        .parse()
        .map_err(|_| FieldError { column: Some(column), message: format!("'{text}' is not an integer") })?;
    if value < min || value > max {
        return Err(FieldError { column: Some(column), message: format!("{value} is out of range {min}..={max}") });
    }
    Ok(value)
}

/// Parses one line into a record, checking every field a record of its type uses.
pub fn parse_record(line: &str) -> Result<Record, FieldError> {
    let mut fields = [""; 15];
    let mut n = 0;
    for part in line.split(',') {
        if n < 15 {
            fields[n] = part.trim();
        }
        n += 1;
    }
    if n != 15 {
        return Err(FieldError {
            column: None,
            message: format!("expected 15 columns ({}), found {n}", COLUMNS.join(",")),
        });
    }
    let kind = field(&fields, 0, i64::MIN, i64::MAX)?;
    let time = field(&fields, 1, 0, u32::MAX as i64)? as u32;
    let car = field(&fields, 2, 0, u32::MAX as i64)? as u32;
    match kind {
        0 => {
            let speed = field(&fields, 3, 0, MAX_SPEED as i64).map_err(|mut e| {
                if fields[3].starts_with('-') {
                    // LinearGenerator writes one now and then (a car changing lanes as it leaves
                    // an accident): about 1 in 20 M reports.
                    e.message += " (a negative speed: the benchmark's generator writes one now and then; set it to 0, \
                                   as in awk -F, 'BEGIN{OFS=\",\"} $1==0 && $4<0 {$4=0} {print}', for both moirai and \
                                   the validator)";
                }
                e
            })? as u8;
            let xway = field(&fields, 4, 0, u16::MAX as i64)? as u16;
            let lane = field(&fields, 5, 0, EXIT_LANE as i64)? as u8;
            let dir = field(&fields, 6, 0, 1)? as u8;
            let seg = field(&fields, 7, 0, SEGMENTS as i64 - 1)? as u8;
            let pos = field(&fields, 8, 0, MAX_POS as i64)? as u32;
            if pos / SEGMENT_FT != seg as u32 {
                return Err(FieldError {
                    column: Some(7),
                    message: format!(
                        "segment {seg} does not hold position {pos} (its segment is pos / 5280 = {})",
                        pos / SEGMENT_FT
                    ),
                });
            }
            Ok(Record::Position(PositionReport { time, car, speed, xway, lane, dir, seg, pos }))
        }
        2..=4 => {
            let kind = match kind {
                2 => QueryKind::AccountBalance,
                3 => QueryKind::DailyExpenditure,
                _ => QueryKind::TravelTime,
            };
            let int = |c| field(&fields, c, i32::MIN as i64, i32::MAX as i64).map(|v| v as i32);
            let (xway, day) = if kind == QueryKind::DailyExpenditure {
                (field(&fields, 4, 0, u16::MAX as i64)? as i32, field(&fields, 14, 0, HISTORY_DAYS as i64)? as i32)
            } else {
                (int(4)?, int(14)?)
            };
            Ok(Record::Query(QueryRecord {
                kind,
                time,
                car,
                xway,
                qid: field(&fields, 9, 0, i32::MAX as i64)? as i32,
                sinit: int(10)?,
                send: int(11)?,
                dow: int(12)?,
                tod: int(13)?,
                day,
            }))
        }
        1 => Err(FieldError {
            column: Some(0),
            message: "type 1 is an output (an accident alert), not an input record; inputs have types 0, 2, 3, 4"
                .into(),
        }),
        other => Err(FieldError {
            column: Some(0),
            message: format!("{other} is not a Linear Road record type (0 = position report, 2, 3, 4 = queries)"),
        }),
    }
}

/// The time of a record line, in nanoseconds, without parsing the rest: what the engine's source
/// uses as event time. 0 if the field is not a number (lines are validated before a run).
pub fn line_time_ns(line: &str) -> u64 {
    line.split(',').nth(1).and_then(|t| t.trim().parse::<u64>().ok()).map_or(0, |s| s * 1_000_000_000)
}

/// Appends `record` as one line (with its newline) to `out`.
pub fn format_record(record: &Record, out: &mut String) {
    // Writing to a String cannot fail.
    let _ = match record {
        Record::Position(p) => writeln!(
            out,
            "0,{},{},{},{},{},{},{},{},-1,-1,-1,-1,-1,-1",
            p.time, p.car, p.speed, p.xway, p.lane, p.dir, p.seg, p.pos
        ),
        Record::Query(q) => writeln!(
            out,
            "{},{},{},-1,{},-1,-1,-1,-1,{},{},{},{},{},{}",
            q.kind.code(),
            q.time,
            q.car,
            q.xway,
            q.qid,
            q.sinit,
            q.send,
            q.dow,
            q.tod,
            q.day
        ),
    };
}

/// `record` as one line, without the newline.
pub fn record_line(record: &Record) -> String {
    let mut line = String::with_capacity(48);
    format_record(record, &mut line);
    line.pop();
    line
}

/// Reads records from lines, checking each row and that times never go back. After the first
/// error it yields nothing more.
pub struct RecordReader<R> {
    input: R,
    buffer: String,
    line: u64,
    last_time: Option<(u32, u64)>,
    failed: bool,
}

impl<R: BufRead> RecordReader<R> {
    /// A reader over `input`.
    pub fn new(input: R) -> Self {
        RecordReader { input, buffer: String::new(), line: 0, last_time: None, failed: false }
    }

    /// The line number of the last line read (from 1).
    pub fn line(&self) -> u64 {
        self.line
    }

    /// Reads the next raw line that holds a record (skipping blank lines and a header), checking
    /// it; returns the record and the line as read (without the line break).
    pub fn next_line(&mut self) -> Option<Result<(Record, &str), RowError>> {
        if self.failed {
            return None;
        }
        loop {
            self.buffer.clear();
            self.line += 1;
            match self.input.read_line(&mut self.buffer) {
                Ok(0) => return None,
                Ok(_) => {}
                Err(e) => {
                    self.failed = true;
                    return Some(Err(RowError { line: self.line, column: None, message: format!("cannot read: {e}") }));
                }
            }
            let text = self.buffer.trim_end_matches(['\n', '\r']);
            if text.trim().is_empty() || (self.line == 1 && text.trim_start().starts_with("type")) {
                continue;
            }
            let result = parse_record(text).map_err(|e| e.at(self.line)).and_then(|record| {
                let time = record.time();
                match self.last_time {
                    Some((last, line)) if time < last => Err(RowError {
                        line: self.line,
                        column: Some(1),
                        message: format!(
                            "time {time} is before time {last} on line {line}: records must be in time order"
                        ),
                    }),
                    _ => {
                        self.last_time = Some((time, self.line));
                        Ok(record)
                    }
                }
            });
            self.failed = result.is_err();
            return Some(result.map(|r| (r, self.buffer.trim_end_matches(['\n', '\r']))));
        }
    }
}

impl<R: BufRead> Iterator for RecordReader<R> {
    type Item = Result<Record, RowError>;

    fn next(&mut self) -> Option<Self::Item> {
        self.next_line().map(|r| r.map(|(record, _)| record))
    }
}

/// Writes `records` in the input format.
pub fn write_records<'a>(out: &mut impl Write, records: impl IntoIterator<Item = &'a Record>) -> std::io::Result<()> {
    let mut line = String::with_capacity(64);
    for record in records {
        line.clear();
        format_record(record, &mut line);
        out.write_all(line.as_bytes())?;
    }
    Ok(())
}

/// Appends `output` as one line of the output format of `rules` to `out` (nothing for a toll
/// assessment under [`Rules::Validator`]); `latency_ns` is its response time, and `clock_speed`
/// how many seconds of the input's clock pass per second of it (the replay speed: the
/// [`Rules::Moirai`] `emit` column is on the input's clock).
pub fn format_output(rules: Rules, output: &LrOutput, latency_ns: u64, clock_speed: f64, out: &mut String) {
    if rules == Rules::Validator {
        // The response time in whole milliseconds, rounded up: never below the true one.
        let ms = latency_ns.div_ceil(1_000_000);
        let _ = match output {
            LrOutput::Toll(n) => writeln!(out, "0,{},{},{ms},{},{}", n.car, n.time, n.lav, n.toll),
            LrOutput::Alert(a) => writeln!(out, "1,{},{ms},{},{},{},{}", a.time, a.xway, a.seg, a.dir, a.car),
            LrOutput::Balance(b) => writeln!(out, "2,{},{ms},{},{},{}", b.time, b.result_time, b.qid, b.bal),
            LrOutput::Expenditure(e) => writeln!(out, "3,{},{ms},{},{}", e.time, e.qid, e.bal),
            LrOutput::Assessment(_) => Ok(()),
        };
        return;
    }
    let emit = |time: u32| time as f64 + latency_ns as f64 * clock_speed / 1e9;
    let _ = match output {
        LrOutput::Toll(n) => writeln!(out, "0,{},{},{:.3},{},{}", n.car, n.time, emit(n.time), n.lav, n.toll),
        LrOutput::Alert(a) => writeln!(out, "1,{},{},{:.3},{}", a.car, a.time, emit(a.time), a.seg),
        LrOutput::Assessment(a) => writeln!(out, "5,{},{},{:.3},{}", a.car, a.time, emit(a.time), a.toll),
        LrOutput::Balance(b) => {
            writeln!(out, "2,{},{:.3},{},{},{}", b.time, emit(b.time), b.result_time, b.qid, b.bal)
        }
        LrOutput::Expenditure(e) => writeln!(out, "3,{},{:.3},{},{}", e.time, emit(e.time), e.qid, e.bal),
    };
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parses_a_walmart_position_report() {
        let r = parse_record("0,17,107,32,0,1,0,10,53320,-1,-1,-1,-1,-1,-1").unwrap();
        let want = PositionReport { time: 17, car: 107, speed: 32, xway: 0, lane: 1, dir: 0, seg: 10, pos: 53320 };
        assert_eq!(r, Record::Position(want));
        assert_eq!(record_line(&r), "0,17,107,32,0,1,0,10,53320,-1,-1,-1,-1,-1,-1");
        assert_eq!(line_time_ns("0,17,107,32,0,1,0,10,53320,-1,-1,-1,-1,-1,-1"), 17_000_000_000);
    }

    #[test]
    fn reports_the_column_at_fault() {
        let e = parse_record("0,17,107,132,0,1,0,10,53320,-1,-1,-1,-1,-1,-1").unwrap_err();
        assert_eq!(e.column, Some(3));
        assert!(e.message.contains("132"), "{}", e.message);
        let e = parse_record("0,17,107,32,0,1,0,11,53320,-1,-1,-1,-1,-1,-1").unwrap_err();
        assert_eq!(e.column, Some(7));
        let e = parse_record("0,17,x,32,0,1,0,10,53320,-1,-1,-1,-1,-1,-1").unwrap_err();
        assert_eq!((e.column, e.message.as_str()), (Some(2), "'x' is not an integer"));
        let e = parse_record("0,17,107").unwrap_err();
        assert_eq!(e.column, None);
        assert!(e.message.contains("found 3"), "{}", e.message);
        assert_eq!(parse_record("1,17,107,32,0,1,0,10,53320,-1,-1,-1,-1,-1,-1").unwrap_err().column, Some(0));
    }

    #[test]
    fn outputs_carry_their_emit_time() {
        use crate::linear_road::model::{AccidentAlert, TollAssessment, TollNotification};
        let mut out = String::new();
        let toll = LrOutput::Toll(TollNotification { car: 7, time: 60, lav: 35, toll: 242 });
        let alert = LrOutput::Alert(AccidentAlert { car: 7, time: 60, xway: 2, seg: 12, dir: 1 });
        let charged = LrOutput::Assessment(TollAssessment { car: 7, time: 90, toll: 242 });
        for o in [toll, alert, charged] {
            format_output(Rules::Moirai, &o, 1_700_000, 2.0, &mut out);
        }
        assert_eq!(out, "0,7,60,60.003,35,242\n1,7,60,60.003,12\n5,7,90,90.003,242\n");
        out.clear();
        for o in [toll, alert, charged] {
            format_output(Rules::Validator, &o, 1_700_000, 2.0, &mut out);
        }
        assert_eq!(out, "0,7,60,2,35,242\n1,60,2,2,12,1,7\n", "ms rounded up, the validator's alert, no assessment");
    }

    #[test]
    fn query_records_carry_possible_fields() {
        let e = parse_record("3,5,1,-1,0,-1,-1,-1,-1,7,-1,-1,-1,-1,70").unwrap_err();
        assert_eq!(e.column, Some(14), "{}", e.message);
        let e = parse_record("3,5,1,-1,-1,-1,-1,-1,-1,7,-1,-1,-1,-1,3").unwrap_err();
        assert_eq!(e.column, Some(4), "{}", e.message);
        let e = parse_record("2,5,1,-1,-1,-1,-1,-1,-1,-7,-1,-1,-1,-1,-1").unwrap_err();
        assert_eq!(e.column, Some(9), "{}", e.message);
        // The benchmark generator's queries repeat the car's position fields.
        assert!(parse_record("3,5,1,55,0,2,1,40,212000,7,-1,-1,-1,-1,68").is_ok());
    }

    #[test]
    fn reader_skips_a_header_and_blank_lines_and_checks_time_order() {
        let text = "type,time,carid,speed,xway,lane,dir,seg,pos,qid,sinit,send,dow,tod,day\r\n\
                    0,1,1,10,0,0,0,0,0,-1,-1,-1,-1,-1,-1\r\n\
                    \n\
                    2,2,1,-1,-1,-1,-1,-1,-1,7,-1,-1,-1,-1,-1\n\
                    0,1,2,10,0,0,0,0,0,-1,-1,-1,-1,-1,-1\n";
        let rows: Vec<_> = RecordReader::new(text.as_bytes()).collect();
        assert_eq!(rows.len(), 3);
        assert!(rows[0].is_ok() && rows[1].is_ok());
        let e = rows[2].clone().unwrap_err();
        assert_eq!((e.line, e.column), (5, Some(1)));
        assert!(e.to_string().starts_with("line 5, column 2 (time): time 1 is before time 2 on line 4"), "{e}");
    }
}

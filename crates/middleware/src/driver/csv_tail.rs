//! The last value of a CSV file that a reporter appends to (`t,value` lines: Storm's
//! `CsvStormReporter`), read round after round from a file kept open, in one system call.
//!
//! Seeking to the file's end and reading its last 256 bytes each round took a `lseek` and four
//! `read`s a file (`read_to_string` probes for the end) — with 100 executors some 300 files and
//! 1 400 system calls a round, a quarter of a Storm round's CPU. A [`CsvTail`] keeps the offset
//! just past the last complete line it read and reads on from there with one `pread`: what the
//! reporter appended since (one line a period), or nothing.
//!
//! - Only complete lines count: a line the reporter is still writing is read again, whole, once
//!   its newline is there.
//! - The read starts one byte before the offset, at the newline that ended the last line read.
//!   When that byte is gone (the file was truncated) or is something else (rewritten), the file
//!   is read afresh from its last [`TAIL`] bytes, as the first time.
//! - A file replaced under the same name (rotated) is another file: the caller opens it anew
//!   (the metrics directory's listing does, when the directory changes).

use std::fs::File;
use std::io;
use std::os::unix::fs::FileExt;
use std::path::Path;
use std::time::{Duration, Instant};

/// How much of a file's end the first read (and a read after a truncation) looks at.
pub const TAIL: u64 = 256;
/// The buffer of one read: a round's appended lines, usually one of a few dozen bytes.
const CHUNK: usize = 512;

/// An open CSV file and how far it was read; see the [module docs](self).
#[derive(Debug)]
pub struct CsvTail {
    file: File,
    /// Where the next read goes on from: just past the last complete line read, or (with
    /// `partial`) a point inside a line, to be skipped to the next newline. `None`: not read yet.
    offset: Option<u64>,
    /// Whether the bytes at `offset` start within a line (after a jump to the file's tail).
    partial: bool,
    /// The value of the last complete, non-empty line read (`None` when it did not parse).
    last: Option<f64>,
    /// When a read last found a complete line that had not been read before.
    grew: Option<Instant>,
    /// The times (`t`, whole seconds) of the first and the last line read that had one, and
    /// how many lines with a time were read (since the file was opened or read afresh).
    stamps: Option<(i64, i64, u32)>,
}

impl CsvTail {
    /// The file at `path`, opened without touching its access time.
    pub fn open(path: &Path) -> io::Result<Self> {
        Ok(CsvTail::new(moirai_os::file::open_without_atime(path)?))
    }

    /// An open file, not read yet.
    pub fn new(file: File) -> Self {
        CsvTail { file, offset: None, partial: false, last: None, grew: None, stamps: None }
    }

    /// The value of the file's last complete, non-empty line now (`None` for a header, a value
    /// that is not a finite number, no line yet, or a failed read).
    pub fn value(&mut self) -> Option<f64> {
        match self.read_on() {
            Ok(()) => self.last,
            Err(_) => {
                // Read afresh next time.
                self.offset = None;
                None
            }
        }
    }

    /// When a read last found a line not read before (the first read's lines count): the file
    /// is being written. `None` before any line was read.
    pub fn grew(&self) -> Option<Instant> {
        self.grew
    }

    /// How often the reporter appends a line: the time from the first line read to the last,
    /// over the lines between (`None` before three lines with times were read). The reporter
    /// writes whole seconds, so a single step of a 1 s period can read 0 or 2; over `k` steps
    /// the mean is off by less than `1/k` s.
    pub fn period(&self) -> Option<Duration> {
        let (first, last, lines) = self.stamps?;
        (lines >= 3).then(|| Duration::from_secs_f64((last - first).max(0) as f64 / f64::from(lines - 1)))
    }

    /// Jumps to the file's last [`TAIL`] bytes and forgets the value.
    fn restart(&mut self) -> io::Result<()> {
        let size = self.file.metadata()?.len();
        let at = size.saturating_sub(TAIL);
        self.offset = Some(at);
        self.partial = at > 0;
        self.last = None;
        self.stamps = None;
        Ok(())
    }

    /// Counts the time of a line read (a header has none).
    fn note_stamp(&mut self, stamp: Option<i64>) {
        let Some(t) = stamp else { return };
        self.stamps = Some(match self.stamps {
            None => (t, t, 1),
            Some((first, last, lines)) => (first, last.max(t), lines.saturating_add(1)),
        });
    }

    /// Reads what was appended since the last call.
    fn read_on(&mut self) -> io::Result<()> {
        let mut buf = [0u8; CHUNK];
        let mut restarted = false;
        loop {
            let Some(offset) = self.offset else {
                self.restart()?;
                restarted = true;
                continue;
            };
            // From the newline that ended the last line read, when there is one.
            let check = !self.partial && offset > 0;
            let from = if check { offset - 1 } else { offset };
            let n = self.file.read_at(&mut buf, from)?;
            let mut data = &buf[..n];
            if check {
                if data.first() != Some(&b'\n') {
                    // Truncated (nothing there) or rewritten (something else there): afresh, once.
                    if restarted {
                        return Ok(());
                    }
                    self.restart()?;
                    restarted = true;
                    continue;
                }
                data = &data[1..];
            }
            let Some(end) = data.iter().rposition(|&b| b == b'\n') else {
                if n == buf.len() {
                    // A line longer than the buffer is no reporter's: skipped.
                    self.offset = Some(from + n as u64);
                    self.partial = true;
                    continue;
                }
                return Ok(());
            };
            let mut lines = &data[..end];
            if self.partial {
                // Up to the first newline: the end of a line whose start was not read.
                lines = match lines.iter().position(|&b| b == b'\n') {
                    Some(i) => &lines[i + 1..],
                    None => &[],
                };
            }
            let mut read = false;
            for line in lines.split(|&b| b == b'\n').filter(|l| !l.trim_ascii().is_empty()) {
                self.note_stamp(parse_stamp(line));
                self.last = parse_value(line);
                read = true;
            }
            if read {
                self.grew = Some(Instant::now());
            }
            self.offset = Some(from + (n - data.len()) as u64 + end as u64 + 1);
            self.partial = false;
            if n < buf.len() {
                return Ok(());
            }
        }
    }
}

/// The time of a `t,value` line: its first field, when a whole number (Storm's reporter writes
/// seconds since the epoch).
fn parse_stamp(line: &[u8]) -> Option<i64> {
    let line = std::str::from_utf8(line).ok()?;
    line.split(',').next()?.trim().parse().ok()
}

/// The value of a `t,value` line: its last field, when a finite number.
fn parse_value(line: &[u8]) -> Option<f64> {
    let line = std::str::from_utf8(line).ok()?;
    line.rsplit(',').next()?.trim().parse().ok().filter(|v: &f64| v.is_finite())
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::io::Write;
    use std::path::PathBuf;

    /// A file of its own under the system's temporary directory, removed when dropped.
    struct Scratch(PathBuf);

    impl Scratch {
        fn new(tag: &str) -> Scratch {
            Scratch(std::env::temp_dir().join(format!("moirai-csv-tail-{tag}-{}", std::process::id())))
        }

        fn write(&self, text: &str) {
            std::fs::write(&self.0, text).unwrap();
        }

        fn append(&self, text: &str) {
            std::fs::OpenOptions::new().append(true).open(&self.0).unwrap().write_all(text.as_bytes()).unwrap();
        }
    }

    impl Drop for Scratch {
        fn drop(&mut self) {
            let _ = std::fs::remove_file(&self.0);
        }
    }

    #[test]
    fn appended_lines_are_read_on_from_the_last_one() {
        let f = Scratch::new("append");
        f.write("t,count\n");
        let mut tail = CsvTail::open(&f.0).unwrap();
        assert_eq!(tail.value(), None, "a header only");
        f.append("1795534869,20\n");
        assert_eq!(tail.value(), Some(20.0));
        let grew = tail.grew().expect("a line was read");
        assert_eq!(tail.value(), Some(20.0), "nothing new: the last value stays");
        assert_eq!(tail.grew(), Some(grew), "nothing new: it did not grow");
        f.append("1795534870,40\n1795534871,60\n");
        assert_eq!(tail.value(), Some(60.0), "two lines in one period: the last");
        assert!(tail.grew() > Some(grew), "it grew");
        f.append("1795534872,NaN\n");
        assert_eq!(tail.value(), None, "not a finite number");
        f.append("\n1795534873,0.5\n\n");
        assert_eq!(tail.value(), Some(0.5), "empty lines are passed over");
    }

    #[test]
    fn the_reporters_period_is_the_mean_step_between_the_times_of_its_lines() {
        let f = Scratch::new("period");
        f.write("t,count\n1795534869,20\n");
        let mut tail = CsvTail::open(&f.0).unwrap();
        assert_eq!(tail.value(), Some(20.0));
        f.append("1795534879,40\n");
        assert_eq!(tail.value(), Some(40.0));
        assert_eq!(tail.period(), None, "one step is not enough: a 1 s period can read 2");
        f.append("1795534889,60\n");
        assert_eq!(tail.value(), Some(60.0));
        assert_eq!(tail.period(), Some(Duration::from_secs(10)), "Storm's default period");
        // A period of 1 s whose writes fall near a second's end: steps of 2, 0, 1, 1.
        let g = Scratch::new("period-jitter");
        g.write("t,count\n100,1\n102,2\n");
        let mut tail = CsvTail::open(&g.0).unwrap();
        assert_eq!(tail.value(), Some(2.0));
        g.append("102,3\n103,4\n");
        assert_eq!(tail.value(), Some(4.0), "the first read and the next, as they come");
        assert_eq!(tail.period(), Some(Duration::from_secs(1)));
        g.append("104,5\n");
        tail.value();
        assert_eq!(tail.period(), Some(Duration::from_secs(1)));
    }

    #[test]
    fn a_line_being_written_counts_once_it_is_complete() {
        let f = Scratch::new("partial");
        f.write("t,count\n1795534869,20\n1795534870,4");
        let mut tail = CsvTail::open(&f.0).unwrap();
        assert_eq!(tail.value(), Some(20.0), "not the half-written 4…");
        f.append("00\n");
        assert_eq!(tail.value(), Some(400.0));
    }

    #[test]
    fn a_long_file_is_read_from_its_tail_then_on() {
        let f = Scratch::new("long");
        let mut text = "t,count\n".to_string();
        for i in 0..1000 {
            text.push_str(&format!("{},{}\n", 1795534869 + i, i * 20));
        }
        f.write(&text);
        let mut tail = CsvTail::open(&f.0).unwrap();
        assert_eq!(tail.value(), Some(19980.0));
        // More than a buffer appended at once: read on to the last line.
        let more: String = (1000..1100).map(|i| format!("{},{}\n", 1795534869 + i, i * 20)).collect();
        assert!(more.len() > CHUNK);
        f.append(&more);
        assert_eq!(tail.value(), Some(21980.0));
    }

    #[test]
    fn a_truncated_or_rewritten_file_is_read_afresh() {
        let f = Scratch::new("truncate");
        f.write("t,count\n1795534869,20\n1795534870,40\n");
        let mut tail = CsvTail::open(&f.0).unwrap();
        assert_eq!(tail.value(), Some(40.0));
        // Truncated and started over, shorter than before.
        f.write("t,count\n");
        assert_eq!(tail.value(), None, "truncated to its header");
        f.append("1795534871,7\n");
        assert_eq!(tail.value(), Some(7.0));
        // Rewritten with other lines, longer than before: the byte before the offset is no
        // longer the newline read there.
        f.write("t,count\n1795534880,1\n1795534881,2\n1795534882,3\n");
        assert_eq!(tail.value(), Some(3.0));
        // Emptied.
        f.write("");
        assert_eq!(tail.value(), None);
        f.write("t,v\n1,9\n");
        assert_eq!(tail.value(), Some(9.0));
    }

    #[test]
    fn a_replaced_file_is_another_file() {
        let f = Scratch::new("rotate");
        f.write("t,count\n1,5\n");
        let mut tail = CsvTail::open(&f.0).unwrap();
        assert_eq!(tail.value(), Some(5.0));
        // Rotated: the old file renamed away, a new one created under the name. The open handle
        // stays with the old file (the listing opens the new one).
        let old = f.0.with_extension("old");
        std::fs::rename(&f.0, &old).unwrap();
        f.write("t,count\n2,6\n");
        assert_eq!(tail.value(), Some(5.0));
        assert_eq!(CsvTail::open(&f.0).unwrap().value(), Some(6.0));
        std::fs::remove_file(old).unwrap();
    }

    #[test]
    fn a_line_longer_than_the_buffer_is_passed_over() {
        let f = Scratch::new("longline");
        f.write(&format!("t,v\n1,{}\n2,3\n", "9".repeat(3 * CHUNK)));
        let mut tail = CsvTail::open(&f.0).unwrap();
        assert_eq!(tail.value(), Some(3.0));
        f.append(&format!("3,{}\n", "1".repeat(3 * CHUNK)));
        assert_eq!(tail.value(), Some(3.0), "no value is that long: the line is passed over");
        f.append("4,8\n");
        assert_eq!(tail.value(), Some(8.0));
    }
}

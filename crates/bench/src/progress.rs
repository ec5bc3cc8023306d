//! Progress of a sweep on stderr: one updating line with a bar and the time left when stderr is
//! a terminal, one plain log line per point otherwise (CI logs, files).
//!
//! Hand-rolled rather than `indicatif`: one line and an estimate are all a sweep needs.

use std::collections::BTreeMap;
use std::io::IsTerminal;
use std::time::{Duration, Instant};

use crate::point::Point;
use crate::spec::fmt_rate;

/// Width of the bar, in characters.
const BAR: usize = 24;

/// Progress of a sweep.
pub struct Progress {
    total: usize,
    done: usize,
    started: Instant,
    /// Guess of one point's wall time until one has run: the run plus start-up.
    first_guess: Duration,
    tty: bool,
    current: String,
}

impl Progress {
    /// Progress over `total` points of about `duration` each.
    pub fn new(total: usize, duration: Duration) -> Progress {
        Progress {
            total,
            done: 0,
            started: Instant::now(),
            first_guess: duration + Duration::from_millis(300),
            tty: std::io::stderr().is_terminal(),
            current: String::new(),
        }
    }

    /// Time left, estimated from the mean wall time of the points done so far.
    pub fn eta(&self) -> Duration {
        let left = self.total.saturating_sub(self.done) as u32;
        if self.done == 0 {
            self.first_guess * left
        } else {
            self.started.elapsed() / self.done as u32 * left
        }
    }

    /// A point starts.
    pub fn start(&mut self, label: &str, rate: f64, rep: u32, reps: u32) {
        self.current = format!("{label} @ {} tuples/s rep {rep}/{reps}", fmt_rate(rate));
        if self.tty {
            self.draw();
        }
    }

    /// A point ended.
    pub fn done(&mut self, point: &Point) {
        self.done += 1;
        if self.tty {
            // Failures stay on screen above the bar; measured points only move it.
            if point.failure.is_some() {
                eprint!("\r\x1b[2K");
                eprintln!("moirai bench: {}", describe_point(point));
            }
            self.draw();
        } else {
            eprintln!(
                "moirai bench: [{}/{}] {} (about {} left)",
                self.done,
                self.total,
                describe_point(point),
                clock(self.eta())
            );
        }
    }

    /// The sweep ended: clear the bar.
    pub fn finish(&mut self) {
        if self.tty {
            eprint!("\r\x1b[2K");
        }
    }

    fn draw(&self) {
        let filled = (self.done * BAR).checked_div(self.total).unwrap_or(BAR);
        eprint!(
            "\r\x1b[2K[{}{}] {}/{} points, {} left — {}",
            "#".repeat(filled),
            " ".repeat(BAR - filled),
            self.done,
            self.total,
            clock(self.eta()),
            self.current
        );
    }
}

/// `h:mm:ss` or `m:ss`.
pub fn clock(d: Duration) -> String {
    let s = d.as_secs();
    if s >= 3600 {
        format!("{}:{:02}:{:02}", s / 3600, s / 60 % 60, s % 60)
    } else {
        format!("{}:{:02}", s / 60, s % 60)
    }
}

/// A one-line description of a point, for logs.
pub fn describe_point(p: &Point) -> String {
    let head = format!("{} @ {} tuples/s rep {}", p.configuration, fmt_rate(p.rate), p.rep);
    match (&p.failure, &p.run) {
        (Some(f), _) => format!("{head}: FAILED: {}", f.lines().next().unwrap_or("")),
        (None, Some(r)) => format!(
            "{head}: ingress {:.0}/s, e2e p99 {:.3} ms, engine {:.2} cores{}{}",
            r.ingress_tps,
            r.e2e_latency_ms.p99,
            r.cpu_cores,
            p.middleware_cpu.map(|c| format!(", middleware {:.1} % of a core", c * 100.0)).unwrap_or_default(),
            p.middleware_active_share.map(|s| describe_activity(s, p)).unwrap_or_default()
        ),
        (None, None) => head,
    }
}

/// `, acting 85 % of the window (first at 3.20 s; 2 activations, handed back: no_gain:1)`:
/// whether the middleware acted, how often, and why it stopped.
fn describe_activity(share: f64, p: &Point) -> String {
    let first = p.middleware_first_active_s.map_or("never".into(), |s| format!("first at {s:.2} s"));
    let times = match p.middleware_activations {
        Some(n) if n > 0 => {
            let back = match releases_text(&p.middleware_releases) {
                r if r.is_empty() => String::new(),
                r => format!(", handed back: {r}"),
            };
            format!("; {n} activation{}{back}", if n == 1 { "" } else { "s" })
        }
        _ => String::new(),
    };
    format!(", acting {:.0} % of the window ({first}{times})", share * 100.0)
}

/// `no_gain:1 probing:2`: how many times the middleware turned idle, by reason.
pub fn releases_text(releases: &BTreeMap<String, u64>) -> String {
    releases.iter().map(|(reason, n)| format!("{reason}:{n}")).collect::<Vec<_>>().join(" ")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_point_says_whether_the_middleware_acted() {
        let mut p = crate::summary::tests::point("qs", 1000.0, 1, 999.0, 2.0);
        assert!(!describe_point(&p).contains("acting"));
        p.middleware_cpu = Some(0.012);
        p.middleware_active_share = Some(0.853);
        p.middleware_first_active_s = Some(3.2);
        let line = describe_point(&p);
        assert!(line.ends_with("middleware 1.2 % of a core, acting 85 % of the window (first at 3.20 s)"), "{line}");
        p.middleware_activations = Some(2);
        p.middleware_releases = [("no_gain".to_string(), 1)].into_iter().collect();
        let line = describe_point(&p);
        assert!(line.ends_with("(first at 3.20 s; 2 activations, handed back: no_gain:1)"), "{line}");
        p.middleware_activations = Some(0);
        p.middleware_releases.clear();
        p.middleware_active_share = Some(0.0);
        p.middleware_first_active_s = None;
        assert!(describe_point(&p).ends_with("acting 0 % of the window (never)"));
    }

    #[test]
    fn clocks_read_naturally() {
        assert_eq!(clock(Duration::from_secs(5)), "0:05");
        assert_eq!(clock(Duration::from_secs(125)), "2:05");
        assert_eq!(clock(Duration::from_secs(3725)), "1:02:05");
    }

    #[test]
    fn the_first_estimate_uses_the_run_length() {
        let p = Progress::new(4, Duration::from_secs(10));
        assert_eq!(p.eta(), Duration::from_millis(10_300) * 4);
    }
}

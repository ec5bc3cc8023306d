//! The comparison with Linux while behind (see the [module docs](super), "to compare").

use std::time::Duration;

use super::{Activation, Reason, Transition, COMPARE_AFTER, COMPARE_FALL, PROBE_DOUBLINGS};

impl Activation {
    /// While active and behind, after the verdict: begins a comparison when it is due and the
    /// SPE loses ground scheduled, its backlog grown by at least a `lag` of input over the last
    /// `release` window (one that holds its backlog, or catches up, keeps pace with its input:
    /// it is left to the scheduling), and its intake fell [`COMPARE_FALL`] below what it was
    /// when the scheduling last showed a gain (a gain that holds is not paid for again),
    /// handing the SPE to Linux.
    pub(super) fn compare_if_due(&mut self, now: Duration) -> Option<Transition> {
        if now < self.compare_due {
            return None;
        }
        let window = self.config.release;
        let w = self.window(now, window)?;
        let lag = self.config.lag.as_secs_f64();
        let scheduled = w.rate.filter(|&r| r > 0.0 && w.growth.is_some_and(|g| g >= lag * r))?;
        let worn_off =
            |gained: (f64, Duration)| self.config.rate_below((scheduled, w.span), gained, 1.0 - COMPARE_FALL);
        if !self.gained_at.is_none_or(worn_off) {
            return None;
        }
        let through = w.through.unwrap_or(scheduled);
        self.comparing = Some((scheduled, through));
        self.change(now, false, Reason::Comparing { scheduled: through, linux: None, window })
    }

    /// During a comparison's window under Linux: at its end, schedules the SPE again for the
    /// second window (its verdict taken against Linux's course: its throughput, its backlog at
    /// the end and the pace the backlog grew at) when the SPE was behind under Linux too;
    /// otherwise the comparison ends there, with the usual rule. `scheduled`: the throughput of
    /// the window of acting before.
    pub(super) fn follow_linux(&mut self, now: Duration, scheduled: f64) -> Option<Transition> {
        let window = self.config.release;
        if now < self.since + window {
            return None;
        }
        let keep_up = self.config.keep_up.as_secs_f64();
        match self.window(now, window) {
            Some(w) if w.lag_mean.is_some_and(|m| m >= keep_up) && w.rate.is_some() => {
                self.before = w.pace();
                self.change(now, true, Reason::Comparing { scheduled, linux: w.through, window })
            }
            _ => {
                self.comparing = None;
                self.consider_activation(now)
            }
        }
    }

    /// A comparison the scheduling won, with `intake` over its scheduled window: the next waits
    /// twice as long as the last (up to 2^[`PROBE_DOUBLINGS`] times the first), and for the
    /// intake to fall below this one.
    pub(super) fn compared_with_gain(&mut self, now: Duration, intake: Option<(f64, Duration)>) {
        self.gained_at = intake;
        self.compare_wins = self.compare_wins.saturating_add(1);
        let wait = COMPARE_AFTER << self.compare_wins.min(PROBE_DOUBLINGS);
        self.compare_due = now + self.config.release * wait;
    }
}

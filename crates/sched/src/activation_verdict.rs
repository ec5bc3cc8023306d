//! The no-gain verdict on the first window of acting (see the [module docs](super), "no gain").

use std::time::Duration;

use super::{Activation, Reason, Window, BACKLOG_GAIN, PROBE_DOUBLINGS, THROUGHPUT_GAIN};

impl Activation {
    /// The no-gain verdict on the window `w` that began when it became active:
    /// [`Verdict::NoGain`] (and the hold set) when the SPE's backlog is not [`BACKLOG_GAIN`]
    /// below its extrapolation and its throughput not [`THROUGHPUT_GAIN`] above the one at which
    /// it fell behind; [`Verdict::LoadChanged`] when the intake fell (below [`RATE_MARGIN`](super::RATE_MARGIN) of that rate,
    /// beyond what the counters can tell) while the sources' backlog did not rise by a `lag` of
    /// input above its lowest in the window. Without a backlog at both ends nothing can be told,
    /// and it stays. After a comparison (`compared`: the intake and the throughput over the
    /// window of acting before Linux's), the baseline is Linux's course, and the intake and the
    /// throughput the means of the two windows.
    pub(super) fn no_gain(&mut self, now: Duration, w: &Window, compared: Option<(f64, f64)>) -> Verdict {
        let (Some(at_start), Some(backlog), Some(rate)) = (self.before.backlog, w.backlog, w.rate) else {
            return Verdict::Gain;
        };
        let through = w.through.unwrap_or(rate);
        let (rate, through) = compared.map_or((rate, through), |(r, t)| ((r + rate) / 2.0, (t + through) / 2.0));
        let acted = now.saturating_sub(self.since);
        let expected = at_start + self.before.growth.max(0.0) * acted.as_secs_f64();
        let (rate_before, through_before) = (self.before.rate, self.before.through);
        let drained = backlog <= (1.0 - BACKLOG_GAIN) * expected;
        // The throughput, not the intake: sources favoured by the scheduling may take in more
        // only to fill the operators' queues, which Linux then drains (measured on Storm with
        // Linear Road past saturation: 77.3k tuples/s taken in scheduled against 70.9k under
        // Linux, 74.6k against 75.0k through).
        let moved_more = through_before > 0.0 && through >= (1.0 + THROUGHPUT_GAIN) * through_before;
        if drained || moved_more {
            self.no_gains = 0;
            return Verdict::Gain;
        }
        // Sources that take in less because the scheduling holds them back fall behind by what
        // they do not take in; sources that take in less and stay up to date had less to take
        // (the window that activated the rule held a catch-up, or the input fell): the baseline
        // is another load's, and an input that falls counts as a gain, as everywhere else.
        let fell = self.config.rate_fell((rate, w.span), (rate_before, self.before.rate_span));
        let kept_pace = w.source_rise.is_some_and(|g| g < self.config.lag.as_secs_f64() * rate);
        if fell && kept_pace {
            return Verdict::LoadChanged;
        }
        self.no_gains = self.no_gains.saturating_add(1);
        let hold = self.config.release * (1u32 << self.no_gains.min(PROBE_DOUBLINGS));
        let against_linux = compared.is_some();
        let reason = Reason::NoGain { acted, backlog, expected, through, through_before, against_linux, hold };
        self.held = Some((now + hold, reason.clone()));
        Verdict::NoGain(reason)
    }
}

/// The outcome of the no-gain verdict.
pub(super) enum Verdict {
    /// The scheduling changed the SPE's course, or nothing can be told: it stays.
    Gain,
    /// The load changed under it: no baseline to judge against; it stays.
    LoadChanged,
    /// No gain: hand the SPE back, for the hold in the reason.
    NoGain(Reason),
}

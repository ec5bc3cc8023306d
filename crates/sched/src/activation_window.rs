//! What the rule measures over a window of its samples ([`Window`]).

use std::time::Duration;

use super::{Activation, LoadSample, Pace};

/// Measures of the samples from `from` on (and the one before, as the window's start).
pub(super) struct Window {
    /// Mean CPU busy share of the samples that have one.
    pub(super) busy_mean: Option<f64>,
    /// Whether every sample that has one is at or above the threshold (`None`: none has one).
    pub(super) all_busy: Option<bool>,
    /// Whether every sample that has one is below the losing-ground level minus the hysteresis.
    pub(super) all_room: Option<bool>,
    /// Input rate over the window, tuples/s.
    pub(super) rate: Option<f64>,
    /// Throughput over the window, tuples/s: the input rate less what the operators' queues
    /// (the backlog beyond the sources') grew by, what the SPE took through them; the input rate
    /// where the backlog or the sources' part of it is not reported.
    pub(super) through: Option<f64>,
    /// The time `rate` was measured over (from the opening sample to the last).
    pub(super) span: Duration,
    /// Smallest and largest lag of the window, s, the opening sample's included (`None`: no
    /// backlog): "behind in every round of the window" then needs the SPE behind from the
    /// window's start on, also where the samples are further apart than usual (a caller that
    /// looks less often while the rule is [quiet](Activation::is_quiet)); rounds one period
    /// apart need one round more.
    pub(super) lag: Option<(f64, f64)>,
    /// The mean lag of the samples with a backlog.
    pub(super) lag_mean: Option<f64>,
    /// Backlog at the window's end minus at its start.
    pub(super) growth: Option<f64>,
    /// Backlog at the window's end.
    pub(super) backlog: Option<f64>,
    /// How fast the backlog grew inside the window (from its first sample to its last, so that
    /// a step at its opening does not count), tuples/s.
    pub(super) trend: Option<f64>,
    /// The sources' backlog at the window's end minus its lowest in the window (from the
    /// opening sample on): what they fell behind by since they were last most up to date.
    pub(super) source_rise: Option<f64>,
}

impl Window {
    /// The pace this window shows, as the baseline of the no-gain verdict.
    pub(super) fn pace(&self) -> Pace {
        Pace {
            rate: self.rate.unwrap_or(0.0),
            through: self.through.or(self.rate).unwrap_or(0.0),
            rate_span: self.span,
            backlog: self.backlog,
            growth: self.trend.unwrap_or(0.0),
            in_startup: false,
        }
    }
}

impl Activation {
    /// The window of the last `span`: `None` while the samples do not reach back that far.
    pub(super) fn window(&self, now: Duration, span: Duration) -> Option<Window> {
        let start = now.checked_sub(span)?;
        // The last sample at or before `start` opens the window.
        let first = self.samples.iter().rposition(|s| s.at <= start)?;
        let opening = self.samples[first];
        let inside: Vec<&LoadSample> = self.samples.iter().skip(first + 1).collect();
        let last = **inside.last()?;
        let threshold = self.config.cpu_threshold;
        let busy: Vec<f64> = inside.iter().filter_map(|s| s.cpu_busy).collect();
        let busy_mean = (!busy.is_empty()).then(|| busy.iter().sum::<f64>() / busy.len() as f64);
        let all_busy = (!busy.is_empty()).then(|| busy.iter().all(|&b| b >= threshold));
        let room = self.config.room_level();
        let all_room = (!busy.is_empty()).then(|| busy.iter().all(|&b| b < room));
        let rate = match (opening.ingested, last.ingested) {
            (Some(a), Some(b)) if last.at > opening.at => {
                Some(((b - a) / (last.at - opening.at).as_secs_f64()).max(0.0))
            }
            _ => None,
        };
        // Sources that take in more only to fill the operators' queues do not move the SPE on
        // (measured on Storm past saturation: its bolts' queues held 60 % more while scheduled).
        let queued = |s: &LoadSample| s.backlog.zip(s.source_backlog).map(|(all, sources)| all - sources);
        let through = match (rate, queued(&opening), queued(&last)) {
            (Some(r), Some(a), Some(b)) => Some((r - (b - a) / (last.at - opening.at).as_secs_f64()).max(0.0)),
            (r, ..) => r,
        };
        let lag_of = |s: &LoadSample| {
            s.backlog.map(|b| match rate {
                _ if b <= 0.0 => 0.0,
                Some(r) if r > 0.0 => b / r,
                // Tuples wait and none come in: as far behind as can be.
                _ => f64::INFINITY,
            })
        };
        let lags: Vec<f64> = inside.iter().filter_map(|s| lag_of(s)).collect();
        let lag = (!lags.is_empty()).then(|| {
            let all = lags.iter().copied().chain(lag_of(&opening));
            (all.clone().fold(f64::INFINITY, f64::min), all.fold(0.0, f64::max))
        });
        let growth = match (opening.backlog, last.backlog) {
            (Some(a), Some(b)) => Some(b - a),
            _ => None,
        };
        let first_inside = *inside[0];
        let trend = match (first_inside.backlog, last.backlog) {
            (Some(a), Some(b)) if last.at > first_inside.at => {
                Some((b - a) / (last.at - first_inside.at).as_secs_f64())
            }
            _ => None,
        };
        let lowest_at_sources = self
            .samples
            .iter()
            .skip(first)
            .filter_map(|s| s.source_backlog)
            .fold(None, |m: Option<f64>, b| Some(m.map_or(b, |m| m.min(b))));
        let source_rise = match (lowest_at_sources, last.source_backlog) {
            (Some(low), Some(b)) => Some(b - low),
            _ => None,
        };
        let lag_mean = (!lags.is_empty()).then(|| lags.iter().sum::<f64>() / lags.len() as f64);
        let span = last.at - opening.at;
        Some(Window {
            busy_mean,
            all_busy,
            all_room,
            rate,
            through,
            span,
            lag,
            lag_mean,
            growth,
            backlog: last.backlog,
            trend,
            source_rise,
        })
    }
}

impl Activation {
    /// Whether the rule is **quiet**: idle, not comparing with Linux, and the SPE's last sample
    /// not behind (its backlog below [`lag`](super::ActivationConfig::lag) of input, at the rate of
    /// the last [`confirm`](super::ActivationConfig::confirm) window). Every way in needs the SPE
    /// behind from the start of its window on, so a quiet rule acts no sooner than a `confirm`
    /// window after a round first finds the SPE behind: a caller may take samples less often
    /// while it is quiet (the middleware's quiet period) and reacts later by at most that
    /// interval. Not quiet before the samples span a `confirm` window, nor for an SPE that
    /// reports no backlog (the rule then follows the CPU, which any round may change).
    pub fn is_quiet(&self) -> bool {
        if self.active || self.comparing.is_some() {
            return false;
        }
        let Some(last) = self.samples.back() else { return false };
        let Some(w) = self.window(last.at, self.config.confirm) else { return false };
        match (last.backlog, w.rate) {
            (Some(b), _) if b <= 0.0 => true,
            (Some(b), Some(r)) => r > 0.0 && b / r < self.config.lag.as_secs_f64(),
            _ => false,
        }
    }
}

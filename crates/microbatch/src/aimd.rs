//! Drizzle's group-size tuning (§3.4): keep the *coordination overhead* — the share of a group's
//! wall time not spent running tasks or waiting for input — between a lower and an upper bound.
//! Above the upper bound the group size grows multiplicatively (the overhead must fall fast);
//! below the lower bound it shrinks additively (to win back adaptivity and latency slowly). The
//! overhead is exponentially averaged, so that one slow group does not move the size.
//!
//! The controller is pure: it is fed one measured overhead per group and answers the next size.

/// Settings of the AIMD controller.
#[derive(Clone, Copy, Debug, PartialEq, serde::Serialize)]
pub struct AimdConfig {
    /// Below this averaged overhead the group shrinks (the paper's runs: 0.05).
    pub lower: f64,
    /// Above this averaged overhead the group grows (the paper's runs: 0.10).
    pub upper: f64,
    /// Factor of a multiplicative increase.
    pub increase: f64,
    /// Micro-batches of an additive decrease.
    pub decrease: u64,
    /// Weight of the newest measurement in the average.
    pub alpha: f64,
    /// Group size at the start.
    pub start: u64,
    /// The largest group size.
    pub max: u64,
}

impl Default for AimdConfig {
    fn default() -> Self {
        AimdConfig { lower: 0.05, upper: 0.10, increase: 2.0, decrease: 1, alpha: 0.5, start: 1, max: 1000 }
    }
}

impl AimdConfig {
    /// Checks the settings; the error names the one to fix.
    pub fn validate(&self) -> Result<(), String> {
        if !(0.0 <= self.lower && self.lower < self.upper && self.upper < 1.0) {
            return Err(format!(
                "AIMD bounds {}..{} must satisfy 0 <= lower < upper < 1 (e.g. 0.05..0.1)",
                self.lower, self.upper
            ));
        }
        if !(self.increase > 1.0 && self.increase.is_finite()) {
            return Err(format!("AIMD increase factor {} must be > 1 (e.g. 2)", self.increase));
        }
        if !(self.alpha > 0.0 && self.alpha <= 1.0) {
            return Err(format!("AIMD averaging weight {} must be in (0, 1]", self.alpha));
        }
        if self.decrease == 0 || self.start == 0 || self.start > self.max {
            return Err(format!(
                "AIMD decrease {} must be >= 1 and the start group {} in 1..={}",
                self.decrease, self.start, self.max
            ));
        }
        Ok(())
    }
}

/// A change of group size and why.
#[derive(Clone, Copy, Debug, PartialEq, serde::Serialize)]
pub struct GroupChange {
    /// Size before.
    pub from: u64,
    /// Size after.
    pub to: u64,
    /// The averaged overhead that decided it.
    pub overhead: f64,
}

/// The AIMD group-size controller.
#[derive(Clone, Debug)]
pub struct Aimd {
    config: AimdConfig,
    group: u64,
    average: Option<f64>,
}

impl Aimd {
    /// A controller at `config.start`.
    pub fn new(config: AimdConfig) -> Self {
        Aimd { group: config.start, config, average: None }
    }

    /// The group size to schedule next.
    pub fn group(&self) -> u64 {
        self.group
    }

    /// The averaged overhead so far.
    pub fn average(&self) -> Option<f64> {
        self.average
    }

    /// Feeds the overhead (0..=1) measured over the last group; returns the change it causes.
    pub fn observe(&mut self, overhead: f64) -> Option<GroupChange> {
        let overhead = if overhead.is_finite() { overhead.clamp(0.0, 1.0) } else { 1.0 };
        let a = self.config.alpha;
        let average = self.average.map_or(overhead, |avg| a * overhead + (1.0 - a) * avg);
        self.average = Some(average);
        let from = self.group;
        let to = if average > self.config.upper {
            ((from as f64 * self.config.increase).ceil() as u64).min(self.config.max)
        } else if average < self.config.lower {
            from.saturating_sub(self.config.decrease).max(1)
        } else {
            from
        };
        self.group = to;
        (to != from).then_some(GroupChange { from, to, overhead: average })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn run(config: AimdConfig, trace: &[f64]) -> Vec<u64> {
        let mut aimd = Aimd::new(config);
        trace
            .iter()
            .map(|o| {
                aimd.observe(*o);
                aimd.group()
            })
            .collect()
    }

    #[test]
    fn high_overhead_doubles_the_group_and_low_overhead_shrinks_it_by_one() {
        let sizes = run(AimdConfig::default(), &[0.5, 0.5, 0.5, 0.5, 0.01, 0.01, 0.01]);
        // averages: 0.5, 0.5, 0.5, 0.5, 0.255, 0.1325, 0.071 → up ×2 six times, then stay.
        assert_eq!(sizes, vec![2, 4, 8, 16, 32, 64, 64]);
        let sizes = run(AimdConfig { start: 40, ..AimdConfig::default() }, &[0.0; 5]);
        assert_eq!(sizes, vec![39, 38, 37, 36, 35]);
    }

    #[test]
    fn a_recorded_trace_converges_into_the_bounds() {
        // Overhead of a group of size g when coordination costs c per group and work w per
        // micro-batch: c / (c + g·w). Recorded shape: c = 20 ms, w = 2 ms → within 5–10 % for g in 100..=190.
        let overhead = |g: u64| 20.0 / (20.0 + g as f64 * 2.0);
        let mut aimd = Aimd::new(AimdConfig::default());
        let mut sizes = Vec::new();
        // The average lags, so the doubling overshoots (to 512); the additive decrease then walks
        // down to where the overhead reaches the lower bound (g = 190), one micro-batch per group.
        for _ in 0..800 {
            let g = aimd.group();
            aimd.observe(overhead(g));
            sizes.push(aimd.group());
        }
        assert_eq!(sizes.iter().max(), Some(&512));
        let tail = &sizes[700..];
        assert!(tail.iter().all(|g| (90..=200).contains(g)), "settles where 5% <= overhead <= 10%: {tail:?}");
        assert!(aimd.average().unwrap() < 0.11);
    }

    #[test]
    fn one_spike_is_averaged_away_and_the_max_is_kept() {
        let config = AimdConfig { start: 10, ..AimdConfig::default() };
        // In-bounds overheads with one spike of 0.15: the averages 0.11, 0.09, 0.08 move the
        // group once.
        let sizes = run(config, &[0.07, 0.07, 0.15, 0.07, 0.07]);
        assert_eq!(sizes, vec![10, 10, 20, 20, 20]);
        let sizes = run(AimdConfig { start: 600, ..AimdConfig::default() }, &[0.9, 0.9]);
        assert_eq!(sizes, vec![1000, 1000]);
    }

    #[test]
    fn bad_settings_are_refused() {
        assert!(AimdConfig { lower: 0.2, upper: 0.1, ..AimdConfig::default() }
            .validate()
            .unwrap_err()
            .contains("lower"));
        assert!(AimdConfig { increase: 1.0, ..AimdConfig::default() }.validate().is_err());
        assert!(AimdConfig::default().validate().is_ok());
    }
}

//! The elastic thread level (IBM Streams 4.2, §4.2): a pure decision function over observed
//! throughput, so that it can be tested on recorded traces without timing.
//!
//! The paper keeps a record per thread level (the last throughput seen there and whether it is
//! trusted) and, every period, moves the level by six rules: up while the level below was
//! clearly worse (by more than `SENS` = 5 %) and nothing above is known, up while the level above
//! was clearly better, up from level 1 while nothing above is known; down while the level below
//! is not known or was not clearly worse; else stay. It never raises the level beyond the
//! available cores nor while the system's CPU is busier than 80 %.
//!
//! The paper admits a weakness (its Fig. 10: 130–184 threads, oscillating): on every change of
//! load it forgets everything, and one noisy period is enough to look like a change. Here:
//!
//! - a level's throughput is a moving average (the newest period weighs half), not the last
//!   sample, so one noisy period moves it half as far;
//! - a change of load is only believed when two consecutive periods at the same level deviate
//!   from its record by more than `SENS` in the same direction; a single noisy period changes
//!   nothing but the average, so the history is kept through noise;
//! - a believed change of load keeps the current level's new throughput and, as in the paper,
//!   stops trusting the other levels (their curve may have changed shape: the operators got
//!   costlier, and more threads pay now), so the search explores again from here.

pub use crate::threading::ElasticConfig;

#[derive(Clone, Copy, Debug, Default)]
struct Record {
    trusted: bool,
    /// Moving average of the throughput observed at this level.
    throughput: f64,
    /// Consecutive periods that deviated from `throughput` by more than SENS: +up, −down.
    deviating: i32,
}

/// What [`Elastic::update`] decided.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Decision {
    /// The new level.
    pub level: usize,
    /// The rule that decided, in words.
    pub reason: &'static str,
}

/// The state of the elastic algorithm.
#[derive(Clone, Debug)]
pub struct Elastic {
    config: ElasticConfig,
    /// Indexed by level; index 0 unused.
    records: Vec<Record>,
    level: usize,
}

impl Elastic {
    /// At `config.start`, nothing trusted.
    pub fn new(config: ElasticConfig) -> Elastic {
        let records = vec![Record::default(); config.max + 1];
        Elastic { level: config.start, records, config }
    }

    /// The current level.
    pub fn level(&self) -> usize {
        self.level
    }

    /// Records the throughput observed over the last period at the current level and decides
    /// the next level. `cpu_ok`: the system's CPU is below the bound.
    pub fn update(&mut self, throughput: f64, cpu_ok: bool) -> Decision {
        let sens = self.config.sens();
        let l = self.level;
        let rec = self.records[l];
        if rec.trusted && rec.throughput > 0.0 {
            let ratio = throughput / rec.throughput;
            let dir = if ratio > 1.0 + sens {
                1
            } else if ratio < 1.0 - sens {
                -1
            } else {
                0
            };
            let deviating = if dir != 0 && rec.deviating.signum() == dir { rec.deviating + dir } else { dir };
            if deviating.abs() >= 2 {
                // A change of load, confirmed twice: the rest of the curve is unknown again.
                for r in self.records.iter_mut() {
                    r.trusted = false;
                }
                self.records[l] = Record { trusted: true, throughput, deviating: 0 };
            } else {
                self.records[l] = Record { trusted: true, throughput: (rec.throughput + throughput) / 2.0, deviating };
            }
        } else {
            self.records[l] = Record { trusted: true, throughput, deviating: 0 };
        }
        let here = self.records[l].throughput;
        let (min, max) = (self.config.min, self.config.max);
        let below = (l > min).then(|| self.records[l - 1]).filter(|r| r.trusted);
        let above = (l < max).then(|| self.records[l + 1]).filter(|r| r.trusted);
        let trend_below = below.is_some_and(|b| here > b.throughput * (1.0 + sens));
        let trend_above = above.is_some_and(|a| a.throughput > here * (1.0 + sens));
        let (up, why_up) = if trend_below && above.is_none() {
            (true, "better than the level below, nothing known above")
        } else if trend_above {
            (true, "the level above was better")
        } else if l == min && above.is_none() {
            (true, "at the lowest level, nothing known above")
        } else {
            (false, "")
        };
        let decision = if up && l < max && cpu_ok {
            Decision { level: l + 1, reason: why_up }
        } else if up && l < max {
            Decision { level: l, reason: "would go up, but the system's CPU is busy" }
        } else if l > min && below.is_none() {
            Decision { level: l - 1, reason: "nothing known below" }
        } else if l > min && !trend_below {
            Decision { level: l - 1, reason: "no better than the level below" }
        } else {
            Decision { level: l, reason: "settled: better than below, not worse than above" }
        };
        self.level = decision.level;
        decision
    }
}

/// The system's CPU use between calls, from `/proc/stat`.
pub struct SystemCpu {
    last: Option<(u64, u64)>,
}

impl SystemCpu {
    /// Starts measuring now.
    pub fn new() -> SystemCpu {
        SystemCpu { last: Self::read() }
    }

    /// (busy, total) jiffies over all CPUs.
    fn read() -> Option<(u64, u64)> {
        let stat = std::fs::read_to_string("/proc/stat").ok()?;
        let line = stat.lines().next()?.strip_prefix("cpu ")?;
        let v: Vec<u64> = line.split_whitespace().filter_map(|x| x.parse().ok()).collect();
        let total: u64 = v.iter().take(8).sum();
        let idle = v.get(3)? + v.get(4).copied().unwrap_or(0);
        Some((total - idle, total))
    }

    /// Share of all CPUs busy since the last call (None if /proc/stat cannot be read).
    pub fn busy_share(&mut self) -> Option<f64> {
        let now = Self::read()?;
        let (busy0, total0) = self.last.replace(now)?;
        let total = now.1.saturating_sub(total0);
        (total > 0).then(|| now.0.saturating_sub(busy0) as f64 / total as f64)
    }
}

impl Default for SystemCpu {
    fn default() -> Self {
        SystemCpu::new()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn config(min: usize, max: usize) -> ElasticConfig {
        ElasticConfig { min, max, start: min, ..ElasticConfig::new() }
    }

    /// A deterministic ±`amp` multiplicative noise (a fixed-seed generator).
    fn noise(seed: u64, amp: f64) -> impl FnMut() -> f64 {
        let mut rng = fastrand::Rng::with_seed(seed);
        move || 1.0 + amp * (2.0 * rng.f64() - 1.0)
    }

    /// Runs `periods` updates on a throughput curve; returns the levels visited.
    fn run(
        e: &mut Elastic,
        periods: usize,
        curve: impl Fn(usize) -> f64,
        mut noise: impl FnMut() -> f64,
    ) -> Vec<usize> {
        (0..periods).map(|_| e.update(curve(e.level()) * noise(), true).level).collect()
    }

    /// The IBM pipeline's shape: gains up to a best level, then losses.
    fn peaked(best: usize) -> impl Fn(usize) -> f64 {
        move |l| if l <= best { 100.0 * l as f64 } else { 100.0 * best as f64 - 30.0 * (l - best) as f64 }
    }

    #[test]
    fn finds_the_best_level_and_stays() {
        for best in [1, 2, 3, 6] {
            let mut e = Elastic::new(config(1, 8));
            let levels = run(&mut e, 40, peaked(best), || 1.0);
            let tail = &levels[20..];
            let curve = peaked(best);
            for &l in tail {
                assert!(curve(l) >= 0.9 * curve(best), "best {best}: settled at {l}: {levels:?}");
            }
            let (lo, hi) = (tail.iter().min().unwrap(), tail.iter().max().unwrap());
            assert!(hi - lo <= 1, "best {best}: oscillates {levels:?}");
        }
    }

    #[test]
    fn noise_does_not_make_it_oscillate() {
        // ±4 % noise per period, below SENS; the paper's version forgets its history whenever one
        // period deviates and wanders; this one must settle within one level.
        for seed in 0..20 {
            let mut e = Elastic::new(config(1, 8));
            let levels = run(&mut e, 80, peaked(4), noise(seed, 0.04));
            let tail = &levels[30..];
            let (lo, hi) = (*tail.iter().min().unwrap(), *tail.iter().max().unwrap());
            assert!(hi - lo <= 1 && lo >= 3, "seed {seed}: {levels:?}");
        }
    }

    #[test]
    fn a_flat_curve_settles_low() {
        let mut e = Elastic::new(config(1, 6));
        let levels = run(&mut e, 30, |_| 1000.0, || 1.0);
        assert!(levels[10..].iter().all(|&l| l <= 2), "{levels:?}");
    }

    #[test]
    fn a_change_of_load_is_followed() {
        let mut e = Elastic::new(config(1, 8));
        run(&mut e, 30, peaked(2), || 1.0);
        assert!(e.level() <= 3, "{}", e.level());
        // The operators get costlier: more threads pay now.
        let levels = run(&mut e, 40, |l| 50.0 * peaked(6)(l), || 1.0);
        assert!(levels[25..].iter().all(|&l| (5..=7).contains(&l)), "{levels:?}");
    }

    #[test]
    fn busy_cpu_or_bounds_stop_increases() {
        let mut e = Elastic::new(config(1, 8));
        for _ in 0..10 {
            let d = e.update(100.0 * e.level() as f64, false);
            assert_eq!(d.level, 1, "{d:?}");
        }
        let mut e = Elastic::new(config(2, 3));
        let levels = run(&mut e, 20, |l| 100.0 * l as f64, || 1.0);
        assert!(levels.iter().all(|&l| (2..=3).contains(&l)), "{levels:?}");
        assert_eq!(*levels.last().unwrap(), 3);
    }
}

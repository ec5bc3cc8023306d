//! The rate a source offers over time: constant, a ramp, or as fast as the engine takes tuples.
//! Pure arithmetic of intended send times, shared by the sources, their backlog metric and
//! micro-batch execution.

use std::time::Duration;

use crate::error::InvalidSetting;

/// The highest rate a source offers, tuples/s in total. A source paces its tuples by their
/// intended send times in whole nanoseconds: above one tuple per nanosecond consecutive tuples
/// would share a send time and the schedule could not be kept (nor its backlog measured).
pub const MAX_RATE: f64 = 1e9;

/// The rate a source offers, over time.
#[derive(Clone, Copy, Debug, PartialEq)]
pub enum Offered {
    /// As fast as the engine takes tuples.
    Unlimited,
    /// A constant rate, tuples/s.
    Constant(f64),
    /// A rate rising (or falling) linearly from `from` to `to` tuples/s over `over`, then
    /// staying at `to`: the papers' increasing-rate runs.
    Ramp {
        /// Rate at the start, tuples/s.
        from: f64,
        /// Rate at the end of the ramp and after, tuples/s (> 0).
        to: f64,
        /// Length of the ramp.
        over: Duration,
    },
}

impl Offered {
    /// The same schedule split evenly over `n` instances.
    pub fn split(self, n: usize) -> Offered {
        let n = n.max(1) as f64;
        match self {
            Offered::Unlimited => Offered::Unlimited,
            Offered::Constant(r) => Offered::Constant(r / n),
            Offered::Ramp { from, to, over } => Offered::Ramp { from: from / n, to: to / n, over },
        }
    }

    /// Instance `instance` of `parallelism` of this schedule: its tuples `instance`,
    /// `instance + parallelism`, ... ([`Share`]), so that the instances together offer exactly
    /// this schedule from one start.
    pub fn share(self, instance: usize, parallelism: usize) -> Share {
        let parallelism = parallelism.max(1) as u64;
        Share { offered: self, instance: (instance as u64).min(parallelism - 1), parallelism }
    }

    /// Checks the rates: finite, positive (a ramp may start at 0) and at most [`MAX_RATE`]; the
    /// message says how to fix them.
    pub fn validate(&self) -> Result<(), InvalidSetting> {
        self.check().map_err(|message| InvalidSetting::new("rate", message))
    }

    fn check(&self) -> Result<(), String> {
        let schedulable = |what: &str, r: f64| {
            if r > MAX_RATE {
                Err(format!(
                    "{what} {r} tuples/s is above the {MAX_RATE:.0} tuples/s a source can schedule (it paces \
                     tuples in whole nanoseconds); offer at most {MAX_RATE:.0} tuples/s"
                ))
            } else {
                Ok(())
            }
        };
        match *self {
            Offered::Unlimited => Ok(()),
            Offered::Constant(r) if r.is_finite() && r > 0.0 => schedulable("rate", r),
            Offered::Constant(r) => Err(format!("rate {r} must be a positive number of tuples/s")),
            Offered::Ramp { from, to, over } => {
                if !(from.is_finite() && from >= 0.0 && to.is_finite() && to > 0.0) {
                    Err(format!("ramp {from} -> {to} tuples/s: rates must be finite, from >= 0 and to > 0"))
                } else if over.is_zero() {
                    Err("a ramp needs a positive length".into())
                } else {
                    schedulable("ramp start", from)?;
                    schedulable("ramp target", to)
                }
            }
        }
    }

    /// How many tuples are due `elapsed_ns` after the start: those intended at or before it.
    pub fn due(&self, elapsed_ns: u64) -> u64 {
        let t = elapsed_ns as f64 / 1e9;
        let cumulative = match *self {
            Offered::Unlimited => return u64::MAX,
            Offered::Constant(r) => r * t,
            Offered::Ramp { from, to, over } => {
                let len = over.as_secs_f64();
                if t <= len {
                    from * t + (to - from) * t * t / (2.0 * len)
                } else {
                    (from + to) * len / 2.0 + to * (t - len)
                }
            }
        };
        // Tuple k is intended at the moment the cumulative rate reaches k, so tuple 0 at once.
        // (Saturating: a schedule far beyond any run's length has everything due.)
        (cumulative.floor() as u64).saturating_add(1)
    }

    /// When tuple `k` is intended, in ns after the start.
    pub fn intended(&self, k: u64) -> u64 {
        let k = k as f64;
        let secs = match *self {
            Offered::Unlimited => 0.0,
            Offered::Constant(r) => k / r,
            Offered::Ramp { from, to, over } => {
                let len = over.as_secs_f64();
                let on_ramp = (from + to) * len / 2.0;
                if k <= on_ramp {
                    // Solve from·t + a·t²/2 = k with a = (to − from) / len.
                    let a = (to - from) / len;
                    if a.abs() < 1e-12 {
                        k / from
                    } else {
                        (-from + (from * from + 2.0 * a * k).max(0.0).sqrt()) / a
                    }
                } else {
                    len + (k - on_ramp) / to
                }
            }
        };
        (secs * 1e9) as u64
    }
}

/// One source instance's part of a schedule shared by `parallelism` instances: tuple `k` of
/// instance `i` is tuple `k · parallelism + i` of the whole schedule. From a common start the
/// instances together offer exactly the whole schedule, tuple for tuple: at any moment their due
/// counts add up to its due count (no instance drifts from the others, and there is no rounding
/// to accumulate, as there would be with `rate / parallelism` each).
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct Share {
    /// The whole schedule.
    pub offered: Offered,
    /// Which instance, from 0.
    pub instance: u64,
    /// How many instances share it (≥ 1).
    pub parallelism: u64,
}

impl Share {
    /// How many of this instance's tuples are due `elapsed_ns` after the common start: those of
    /// the whole schedule's due tuples whose index is `instance` modulo `parallelism`.
    pub fn due(&self, elapsed_ns: u64) -> u64 {
        let total = self.offered.due(elapsed_ns);
        if total <= self.instance {
            0
        } else {
            (total - self.instance - 1) / self.parallelism + 1
        }
    }

    /// When this instance's tuple `k` is intended, in ns after the common start.
    pub fn intended(&self, k: u64) -> u64 {
        self.offered.intended(k.saturating_mul(self.parallelism).saturating_add(self.instance))
    }

    /// Whether the schedule is as fast as the engine takes tuples.
    pub fn is_unlimited(&self) -> bool {
        self.offered == Offered::Unlimited
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn shares_add_up_to_the_whole_schedule_exactly() {
        let ramp = Offered::Ramp { from: 1000.0, to: 3000.0, over: Duration::from_secs(2) };
        for offered in [Offered::Constant(1000.0), Offered::Constant(333.3), ramp] {
            for n in [1usize, 2, 3, 7] {
                let shares: Vec<Share> = (0..n).map(|i| offered.share(i, n)).collect();
                // At every moment the due counts add up to the whole's (no tuple lost or doubled).
                for t in (0..4_000_000_000u64).step_by(9_999_991) {
                    let sum: u64 = shares.iter().map(|s| s.due(t)).sum();
                    assert_eq!(sum, offered.due(t), "{offered:?} n {n} at {t} ns");
                }
                // The instances' intended times, merged, are the whole's, in order.
                let mut merged: Vec<u64> =
                    shares.iter().flat_map(|s| (0..1_000u64).map(move |k| s.intended(k))).collect();
                merged.sort_unstable();
                let whole: Vec<u64> = (0..1_000 * n as u64).map(|k| offered.intended(k)).collect();
                assert_eq!(merged, whole, "{offered:?} n {n}");
            }
        }
        // One instance is the whole schedule; an unlimited one stays unlimited.
        let one = Offered::Constant(1000.0).share(0, 1);
        assert_eq!((one.due(5_000_000), one.intended(5)), (6, 5_000_000));
        assert!(Offered::Unlimited.share(1, 2).is_unlimited());
        assert_eq!(Offered::Unlimited.share(1, 2).due(0), u64::MAX / 2);
    }
}

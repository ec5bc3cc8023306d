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

//! Priority normalisation (Lachesis §5.3): policies give real-numbered priorities; the OS wants
//! integers in fixed ranges — nice in [−20, 19] (lower is better), cgroup v1 `cpu.shares` in
//! [2, 262144], cgroup v2 `cpu.weight` in [1, 10000] (higher is better).
//!
//! Three ways to map priorities ([`Normalization`]):
//!
//! - **linear**: min–max, for linearly spaced priorities such as QS's queue sizes. The highest
//!   priority gets the best value of the range, the lowest the worst.
//! - **logarithmic**: min–max on `ln(1 + p − p_min)`, for priorities spanning orders of
//!   magnitude such as HR's rates.
//! - **ratio**: keeps priority *ratios* as CPU-share ratios. For nice it is Lachesis' formula
//!   `nice = n_best + (ln p_max − ln p) / ln 1.25`: CFS gives a thread 1.25× the CPU of one a nice
//!   level worse, so priority ratio 1.25 is one nice step; values past the worst nice are clamped
//!   (the top priorities, which matter, keep exact ratios). For weights it is proportional:
//!   `w = max × p / p_max`, clamped at the minimum.
//!
//! Conventions: every function maps a slice to a same-length vector, is order-preserving (a higher
//! priority never gets a worse value) and always stays in range. When all priorities are equal,
//! linear and logarithmic map them to the middle of the range (no preference, and no advantage
//! over other processes), while ratio maps them to the best value (each is `p_max`, as the formula
//! says). Ratio needs positive priorities: if the smallest is ≤ 0, all are shifted so that it
//! becomes 1. NaN or infinite priorities (which policies never produce) count as the lowest.

use serde::{Deserialize, Serialize};

/// How priorities map onto a range.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Normalization {
    /// Min–max on the priorities.
    Linear,
    /// Min–max on the logarithms of the (shifted) priorities.
    Logarithmic,
    /// Priority ratios become CPU-share ratios (the nice formula; proportional weights).
    #[default]
    Ratio,
}

/// A range of nice values: `best` for the highest priority, `worst` for the lowest; Linux allows
/// −20 (best) to 19.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct NiceRange {
    /// Nice of the highest priority, e.g. −20.
    pub best: i32,
    /// Nice of the lowest priority, e.g. 19.
    pub worst: i32,
}

impl Default for NiceRange {
    /// The whole range, [−20, 19].
    fn default() -> Self {
        NiceRange { best: -20, worst: 19 }
    }
}

impl NiceRange {
    /// Checks `−20 ≤ best ≤ worst ≤ 19`.
    pub fn validate(&self) -> Result<(), String> {
        if -20 <= self.best && self.best <= self.worst && self.worst <= 19 {
            Ok(())
        } else {
            Err(format!(
                "nice range best = {}, worst = {} is invalid: need -20 <= best <= worst <= 19 (lower nice is better)",
                self.best, self.worst
            ))
        }
    }
}

/// A range of cgroup weights, `min` for the lowest priority and `max` for the highest.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct WeightRange {
    /// Weight of the lowest priority.
    pub min: u64,
    /// Weight of the highest priority.
    pub max: u64,
}

impl WeightRange {
    /// cgroup v1 `cpu.shares`: [2, 262144].
    pub const CPU_SHARES: WeightRange = WeightRange { min: 2, max: 262_144 };
    /// cgroup v2 `cpu.weight`: [1, 10000].
    pub const CPU_WEIGHT: WeightRange = WeightRange { min: 1, max: 10_000 };

    /// Checks `limits.min ≤ min ≤ max ≤ limits.max`, e.g. against [`WeightRange::CPU_SHARES`].
    pub fn validate(&self, limits: WeightRange) -> Result<(), String> {
        if limits.min <= self.min && self.min <= self.max && self.max <= limits.max {
            Ok(())
        } else {
            Err(format!(
                "weight range [{}, {}] is invalid: need {} <= min <= max <= {}",
                self.min, self.max, limits.min, limits.max
            ))
        }
    }
}

/// Nice values for `priorities`, in `range` (whose ends are used in whichever order they come).
pub fn to_nice(priorities: &[f64], how: Normalization, range: NiceRange) -> Vec<i32> {
    let (best, worst) = (range.best.min(range.worst), range.best.max(range.worst));
    let p = sanitize(priorities);
    let values: Vec<f64> = match how {
        Normalization::Linear => unit_interval(&p).map(|t| worst as f64 - t * (worst - best) as f64).collect(),
        Normalization::Logarithmic => {
            unit_interval(&logarithms(&p)).map(|t| worst as f64 - t * (worst - best) as f64).collect()
        }
        Normalization::Ratio => {
            let p = positive(&p);
            let ln_max = p.iter().copied().fold(f64::MIN, f64::max).ln();
            p.iter().map(|&x| best as f64 + (ln_max - x.ln()) / 1.25_f64.ln()).collect()
        }
    };
    // NaN cannot arise from sanitized input; should it ever, it means "lowest priority".
    values
        .into_iter()
        .map(|v| if v.is_nan() { worst } else { v.round().clamp(best as f64, worst as f64) as i32 })
        .collect()
}

/// Weights (cgroup `cpu.shares` or `cpu.weight`) for `priorities`, in `range`.
pub fn to_weights(priorities: &[f64], how: Normalization, range: WeightRange) -> Vec<u64> {
    let (lo, hi) = (range.min.min(range.max), range.min.max(range.max));
    let p = sanitize(priorities);
    let values: Vec<f64> = match how {
        Normalization::Linear => unit_interval(&p).map(|t| lo as f64 + t * (hi - lo) as f64).collect(),
        Normalization::Logarithmic => {
            unit_interval(&logarithms(&p)).map(|t| lo as f64 + t * (hi - lo) as f64).collect()
        }
        Normalization::Ratio => {
            let p = positive(&p);
            let max = p.iter().copied().fold(f64::MIN, f64::max);
            p.iter().map(|&x| hi as f64 * (x / max)).collect()
        }
    };
    values.into_iter().map(|v| if v.is_nan() { lo } else { v.round().clamp(lo as f64, hi as f64) as u64 }).collect()
}

/// Non-finite priorities become the lowest finite one (or 0).
fn sanitize(p: &[f64]) -> Vec<f64> {
    let lowest = p.iter().copied().filter(|x| x.is_finite()).fold(f64::INFINITY, f64::min);
    let lowest = if lowest.is_finite() { lowest } else { 0.0 };
    p.iter().map(|&x| if x.is_finite() { x } else { lowest }).collect()
}

/// Each priority's position in [0, 1] between the smallest and the largest; 0.5 for all when
/// they are equal. Halving before subtracting keeps extreme inputs from overflowing.
fn unit_interval(p: &[f64]) -> impl Iterator<Item = f64> + '_ {
    let lo = p.iter().copied().fold(f64::INFINITY, f64::min);
    let hi = p.iter().copied().fold(f64::NEG_INFINITY, f64::max);
    let span = hi / 2.0 - lo / 2.0;
    p.iter().map(move |&x| if span > 0.0 { ((x / 2.0 - lo / 2.0) / span).clamp(0.0, 1.0) } else { 0.5 })
}

/// `ln(1 + p − p_min)`: non-negative, order-preserving, compresses orders of magnitude.
fn logarithms(p: &[f64]) -> Vec<f64> {
    let lo = p.iter().copied().fold(f64::INFINITY, f64::min);
    p.iter().map(|&x| (x - lo).min(f64::MAX).ln_1p()).collect()
}

/// The priorities unchanged if all are positive, else shifted so the smallest is 1.
fn positive(p: &[f64]) -> Vec<f64> {
    let lo = p.iter().copied().fold(f64::INFINITY, f64::min);
    if lo > 0.0 {
        p.to_vec()
    } else {
        // 1 + (x − lo) rather than x + (1 − lo): exact 1 for the smallest even when lo is huge.
        p.iter().map(|&x| 1.0 + (x - lo).min(f64::MAX)).collect()
    }
}

#[cfg(test)]
#[path = "normalize_tests.rs"]
mod tests;

//! Checks every workload's configuration shares.

use moirai_engine::BuildError;

/// An offered rate: a finite number of tuples/s, 0 meaning as fast as possible.
pub(crate) fn rate(rate: f64) -> Result<(), BuildError> {
    if rate.is_finite() && rate >= 0.0 {
        Ok(())
    } else {
        Err(BuildError::Config(format!("rate {rate} must be a number >= 0 (0 = as fast as possible)")))
    }
}

/// A parallelism in `1..=max`.
pub(crate) fn parallelism(parallelism: usize, max: usize) -> Result<(), BuildError> {
    if (1..=max).contains(&parallelism) {
        Ok(())
    } else {
        Err(BuildError::Config(format!("parallelism {parallelism} must be in 1..={max}")))
    }
}

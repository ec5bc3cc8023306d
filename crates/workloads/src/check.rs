//! The bounds every workload's configuration and `moirai run`'s flags share, in one place.
//!
//! Each check takes the name of what it checks (`"rate"` for a configuration, `"--rate"` for
//! the command line) and returns a message that names it, says what was wrong and how to fix it.

use std::time::Duration;

pub use moirai_engine::engine::{MAX_BATCH_SIZE, MAX_CHANNEL_CAPACITY};
pub use moirai_engine::source::MAX_RATE;

/// The longest run: sources produce for at most 30 days.
pub const MAX_DURATION: Duration = Duration::from_secs(30 * 24 * 3600);

/// The largest CPU cost of one tuple at one operator, in ns (1 s): the busy loop's iteration
/// count is this times the calibrated iterations per ns, which must stay far from overflow.
pub const MAX_COST_NS: u64 = 1_000_000_000;

/// An offered rate: a finite number of tuples/s in `0..=MAX_RATE`, 0 meaning as fast as possible.
pub fn rate(what: &str, rate: f64) -> Result<(), String> {
    if !(rate.is_finite() && rate >= 0.0) {
        Err(format!("{what} {rate} must be a number of tuples/s >= 0 (0 = as fast as possible)"))
    } else {
        schedulable(what, rate, ", or 0 for as fast as possible")
    }
}

fn schedulable(what: &str, rate: f64, or: &str) -> Result<(), String> {
    if rate > MAX_RATE {
        Err(format!(
            "{what} {rate:e} tuples/s cannot be scheduled: a source paces tuples in whole nanoseconds, so it \
             offers at most {MAX_RATE:.0} tuples/s; use a rate up to 1e9{or}"
        ))
    } else {
        Ok(())
    }
}

/// The target of a ramp that starts at `from` tuples/s (a checked [`rate`]): positive, at most
/// [`MAX_RATE`], and the start must be positive too.
pub fn ramp_to(what: &str, to: f64, from: f64) -> Result<(), String> {
    if !(to.is_finite() && to > 0.0 && from > 0.0) {
        return Err(format!("{what} {to} needs a positive target and a positive rate to start from"));
    }
    schedulable(what, to, "")
}

/// How long a run's sources produce: positive and at most [`MAX_DURATION`].
pub fn duration(what: &str, d: Duration) -> Result<(), String> {
    if d.is_zero() {
        Err(format!("{what} must be positive, e.g. 5s"))
    } else if d > MAX_DURATION {
        Err(format!(
            "{what} {} s is longer than a run may be (30 days = {} s); use at most 30days",
            d.as_secs_f64(),
            MAX_DURATION.as_secs()
        ))
    } else {
        Ok(())
    }
}

/// A window length in ms: positive and at most [`MAX_DURATION`] (`hint` names a typical length).
pub fn window_ms(what: &str, ms: u64, hint: &str) -> Result<(), String> {
    let max = MAX_DURATION.as_millis() as u64;
    if (1..=max).contains(&ms) {
        Ok(())
    } else {
        Err(format!("{what} {ms} must be in 1..={max} ms (at most 30 days; {hint})"))
    }
}

/// A CPU cost per tuple and operator, in ns: at most [`MAX_COST_NS`].
pub fn cost_ns(what: &str, ns: u64) -> Result<(), String> {
    if ns > MAX_COST_NS {
        Err(format!(
            "{what} {ns} ns per tuple is above the {MAX_COST_NS} ns (1 s per tuple and operator) the busy \
             loop is calibrated for; use at most {MAX_COST_NS}"
        ))
    } else {
        Ok(())
    }
}

/// A channel capacity and batch size, in tuples: capacity in `1..=MAX_CHANNEL_CAPACITY`, batch
/// size in `1..=capacity` and at most [`MAX_BATCH_SIZE`] (a larger batch would fill a channel
/// past its capacity in one send).
pub fn channel(capacity_what: &str, capacity: usize, batch_what: &str, batch: usize) -> Result<(), String> {
    if !(1..=MAX_CHANNEL_CAPACITY).contains(&capacity) {
        Err(format!("{capacity_what} {capacity} must be in 1..={MAX_CHANNEL_CAPACITY} tuples"))
    } else if !(1..=MAX_BATCH_SIZE).contains(&batch) {
        Err(format!("{batch_what} {batch} must be in 1..={MAX_BATCH_SIZE} tuples"))
    } else if batch > capacity {
        Err(format!(
            "{batch_what} {batch} is larger than the {capacity_what} {capacity}: one batch would overfill a \
             channel; use a batch size up to the capacity, or raise the capacity"
        ))
    } else {
        Ok(())
    }
}

/// A parallelism in `1..=max`.
pub fn parallelism(what: &str, parallelism: usize, max: usize) -> Result<(), String> {
    if (1..=max).contains(&parallelism) {
        Ok(())
    } else {
        Err(format!("{what} {parallelism} must be in 1..={max}"))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn bounds_are_inclusive_and_messages_name_the_flag() {
        assert!(rate("--rate", 0.0).is_ok() && rate("--rate", MAX_RATE).is_ok());
        for bad in [-1.0, f64::NAN, f64::INFINITY, 1e25, MAX_RATE * 1.01] {
            let e = rate("--rate", bad).unwrap_err();
            assert!(e.starts_with("--rate "), "{e}");
        }
        assert!(rate("rate", 1e25).unwrap_err().contains("at most 1000000000 tuples/s"));
        assert!(ramp_to("--ramp-to", 1e10, 1.0).is_err() && ramp_to("--ramp-to", 10.0, 0.0).is_err());
        assert!(ramp_to("--ramp-to", MAX_RATE, 1.0).is_ok());
        assert!(duration("--duration", MAX_DURATION).is_ok());
        assert!(duration("--duration", MAX_DURATION + Duration::from_secs(1)).unwrap_err().contains("30days"));
        assert!(duration("--duration", Duration::ZERO).is_err());
        assert!(cost_ns("--cost-ns", MAX_COST_NS).is_ok() && cost_ns("--cost-ns", MAX_COST_NS + 1).is_err());
        assert!(channel("--channel-capacity", 8192, "--batch-size", 8192).is_ok());
        assert!(channel("--channel-capacity", 8192, "--batch-size", 8193).unwrap_err().contains("larger than"));
        assert!(channel("--channel-capacity", 0, "--batch-size", 1).is_err());
        assert!(channel("--channel-capacity", MAX_CHANNEL_CAPACITY + 1, "--batch-size", 1).is_err());
        assert!(channel("--channel-capacity", MAX_CHANNEL_CAPACITY, "--batch-size", MAX_BATCH_SIZE + 1).is_err());
        assert!(window_ms("window_ms", 0, "e.g. 1000").is_err() && window_ms("window_ms", u64::MAX, "").is_err());
        assert!(window_ms("window_ms", 2_592_000_000, "").is_ok());
        assert!(parallelism("parallelism", 0, 4).is_err() && parallelism("parallelism", 4, 4).is_ok());
    }
}

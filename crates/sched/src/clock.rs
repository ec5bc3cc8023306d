//! The timing of Lachesis' main loop (Algorithm 1), as pure arithmetic on tick numbers.
//!
//! Each policy has its own period; the loop's tick is the GCD of the periods, and a policy is due
//! at tick `k` exactly when its period divides `k × tick`. Deadlines are absolute (`start +
//! k × tick`), so the schedule never drifts with the time the work takes, and a policy runs
//! exactly every period — unlike the original, whose `lastRun + period < now` test on
//! second-truncated wall-clock time ran a 1 s policy about every 2 s.
//!
//! A loop using it:
//!
//! ```
//! # use std::time::Duration;
//! # use moirai_sched::Clock;
//! let clock = Clock::new(&[Duration::from_millis(100), Duration::from_millis(250)]).unwrap();
//! assert_eq!(clock.tick(), Duration::from_millis(50));
//! let mut last = None;
//! # let mut elapsed = Duration::ZERO;
//! # for _ in 0..3 {
//! // let elapsed = start.elapsed();
//! let now = clock.tick_at(elapsed);
//! let due = clock.due_between(last, now); // policies due at any tick since the last round
//! last = Some(now);
//! if !due.is_empty() { /* update the metric provider, run the due policies */ }
//! let next = clock.next_due(now);
//! // sleep until start + clock.deadline(next)
//! # elapsed = clock.deadline(next);
//! # }
//! ```

use std::time::Duration;

/// The shortest tick allowed: below it the loop would mostly wake up for nothing, and the OS
/// mechanisms it drives do not act faster anyway.
pub const MIN_TICK: Duration = Duration::from_millis(1);

/// Why periods cannot be scheduled.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
pub enum ClockError {
    /// No periods were given.
    #[error("no policies to schedule: give at least one period")]
    NoPeriods,
    /// A period is zero.
    #[error("the period of policy #{0} is zero; give every policy a positive period")]
    ZeroPeriod(usize),
    /// The GCD of the periods is below [`MIN_TICK`].
    #[error("periods {periods:?} have a greatest common divisor of {tick:?}, below 1 ms; choose periods that share a larger divisor (e.g. multiples of 10 ms)")]
    TickTooShort {
        /// The periods.
        periods: Vec<Duration>,
        /// Their GCD.
        tick: Duration,
    },
}

/// When each policy of a loop is due.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Clock {
    tick_ns: u128,
    /// Each policy's period, in ticks.
    periods: Vec<u128>,
}

fn gcd(mut a: u128, mut b: u128) -> u128 {
    while b != 0 {
        (a, b) = (b, a % b);
    }
    a
}

impl Clock {
    /// A clock for policies with these periods (policy `i` has `periods[i]`).
    pub fn new(periods: &[Duration]) -> Result<Clock, ClockError> {
        if periods.is_empty() {
            return Err(ClockError::NoPeriods);
        }
        if let Some(i) = periods.iter().position(|p| p.is_zero()) {
            return Err(ClockError::ZeroPeriod(i));
        }
        let tick_ns = periods.iter().map(Duration::as_nanos).fold(0, gcd);
        if tick_ns < MIN_TICK.as_nanos() {
            return Err(ClockError::TickTooShort { periods: periods.to_vec(), tick: duration(tick_ns) });
        }
        Ok(Clock { tick_ns, periods: periods.iter().map(|p| p.as_nanos() / tick_ns).collect() })
    }

    /// The loop's tick: the GCD of the periods.
    pub fn tick(&self) -> Duration {
        duration(self.tick_ns)
    }

    /// When tick `tick` starts, measured from the loop's start (tick 0).
    pub fn deadline(&self, tick: u64) -> Duration {
        duration(self.tick_ns.saturating_mul(u128::from(tick)))
    }

    /// The tick in progress `elapsed` after the loop's start.
    pub fn tick_at(&self, elapsed: Duration) -> u64 {
        u64::try_from(elapsed.as_nanos() / self.tick_ns).unwrap_or(u64::MAX)
    }

    /// The policies due at tick `tick` (every policy is due at tick 0), in index order.
    pub fn due(&self, tick: u64) -> Vec<usize> {
        (0..self.periods.len()).filter(|&i| u128::from(tick) % self.periods[i] == 0).collect()
    }

    /// The policies due at any tick in `(after, upto]` (`[0, upto]` when `after` is `None`), each
    /// once: a loop that woke up late runs what it missed once, then is back on its grid.
    pub fn due_between(&self, after: Option<u64>, upto: u64) -> Vec<usize> {
        let from = after.map_or(0, |a| u128::from(a) + 1);
        let upto = u128::from(upto);
        (0..self.periods.len())
            .filter(|&i| {
                let p = self.periods[i];
                // The first multiple of p at or after `from`.
                let first = from.div_ceil(p) * p;
                first <= upto
            })
            .collect()
    }

    /// The first tick after `tick` at which some policy is due.
    pub fn next_due(&self, tick: u64) -> u64 {
        let t = u128::from(tick);
        let next = self.periods.iter().map(|&p| (t / p + 1) * p).min().unwrap_or(t + 1);
        u64::try_from(next).unwrap_or(u64::MAX)
    }
}

fn duration(ns: u128) -> Duration {
    let secs = u64::try_from(ns / 1_000_000_000).unwrap_or(u64::MAX);
    Duration::new(secs, (ns % 1_000_000_000) as u32)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn ms(v: u64) -> Duration {
        Duration::from_millis(v)
    }

    /// Simulates the documented loop for `total`, with work taking `work(round)` each round, and
    /// returns when each policy ran.
    fn simulate(clock: &Clock, total: Duration, mut work: impl FnMut(usize) -> Duration) -> Vec<Vec<Duration>> {
        let mut runs = vec![Vec::new(); clock.periods.len()];
        let (mut now, mut last, mut round) = (Duration::ZERO, None, 0);
        while now < total {
            let tick = clock.tick_at(now);
            let due = clock.due_between(last, tick);
            last = Some(tick);
            for &i in &due {
                runs[i].push(now);
            }
            if !due.is_empty() {
                now += work(round);
                round += 1;
            }
            // Sleep until the next due tick after this round's tick; if work overran it, go on at once.
            now = now.max(clock.deadline(clock.next_due(tick)));
        }
        runs
    }

    #[test]
    fn tick_is_the_gcd() {
        assert_eq!(Clock::new(&[ms(100), ms(250), ms(1000)]).unwrap().tick(), ms(50));
        assert_eq!(Clock::new(&[ms(1000)]).unwrap().tick(), ms(1000));
        assert_eq!(Clock::new(&[ms(300), ms(200)]).unwrap().tick(), ms(100));
    }

    #[test]
    fn each_policy_runs_exactly_every_period_over_ten_seconds() {
        let periods = [ms(100), ms(250), ms(1000)];
        let clock = Clock::new(&periods).unwrap();
        // Work takes 0..=40 ms, less than a tick, varying from round to round.
        let runs = simulate(&clock, Duration::from_secs(10), |round| ms((round as u64 * 17) % 41));
        for (i, period) in periods.iter().enumerate() {
            assert_eq!(runs[i].len() as u128, 10_000 / period.as_millis(), "policy {i}");
            assert_eq!(runs[i][0], Duration::ZERO);
            for pair in runs[i].windows(2) {
                assert_eq!(pair[1] - pair[0], *period, "policy {i} drifted: {pair:?}");
            }
        }
    }

    #[test]
    fn a_late_round_catches_up_once_and_returns_to_the_grid() {
        let clock = Clock::new(&[ms(100), ms(250)]).unwrap();
        // Round 3 overruns by 180 ms.
        let runs = simulate(&clock, Duration::from_secs(2), |round| if round == 3 { ms(180) } else { ms(5) });
        let fast = &runs[0];
        // The overrun (250..430 ms) swallowed the runs due at 300 and 400 ms: one catch-up run at
        // 430 ms, then back on multiples of 100 ms, never twice at the same time.
        assert!(fast.windows(2).all(|w| w[1] > w[0]));
        assert_eq!(&fast[..5], &[ms(0), ms(100), ms(200), ms(430), ms(500)]);
        assert!(fast[4..].iter().all(|t| t.as_millis() % 100 == 0), "{fast:?}");
        assert_eq!(runs[1].iter().filter(|t| **t >= ms(500)).count(), 6, "{:?}", runs[1]);
        assert!(fast.contains(&ms(1900)));
    }

    #[test]
    fn due_and_next_due() {
        let clock = Clock::new(&[ms(100), ms(250), ms(1000)]).unwrap();
        assert_eq!(clock.due(0), vec![0, 1, 2]);
        assert_eq!(clock.due(1), Vec::<usize>::new());
        assert_eq!(clock.due(2), vec![0]);
        assert_eq!(clock.due(5), vec![1]);
        assert_eq!(clock.due(10), vec![0, 1]);
        assert_eq!(clock.due(20), vec![0, 1, 2]);
        assert_eq!(clock.next_due(0), 2);
        assert_eq!(clock.next_due(4), 5);
        assert_eq!(clock.next_due(5), 6);
        assert_eq!(clock.due_between(Some(1), 5), vec![0, 1]);
        assert_eq!(clock.due_between(Some(2), 3), Vec::<usize>::new());
        assert_eq!(clock.due_between(None, 0), vec![0, 1, 2]);
        assert_eq!(clock.tick_at(ms(149)), 2);
        assert_eq!(clock.deadline(3), ms(150));
    }

    #[test]
    fn bad_periods_are_errors() {
        assert_eq!(Clock::new(&[]), Err(ClockError::NoPeriods));
        assert_eq!(Clock::new(&[ms(10), Duration::ZERO]), Err(ClockError::ZeroPeriod(1)));
        let err = Clock::new(&[ms(1000), Duration::from_micros(1_000_500)]).unwrap_err();
        assert!(matches!(err, ClockError::TickTooShort { tick, .. } if tick == Duration::from_micros(500)), "{err}");
        assert!(err.to_string().contains("below 1 ms"));
    }

    #[test]
    fn huge_values_saturate_instead_of_overflowing() {
        let clock = Clock::new(&[Duration::from_secs(u64::MAX / 2)]).unwrap();
        assert_eq!(clock.deadline(u64::MAX), duration(u128::MAX));
        assert_eq!(clock.tick_at(Duration::MAX), 2);
        assert!(clock.next_due(u64::MAX) == u64::MAX);
    }
}

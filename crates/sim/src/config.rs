//! How a run is simulated: [`SimConfig`].

use std::time::Duration;

use moirai_engine::Threading;

use crate::cfs::CfsParams;
use crate::event::Nanos;
use crate::SimError;

/// How a run is simulated: the machine, the engine's settings, the scheduler, the clock.
#[derive(Clone, Debug, serde::Serialize)]
pub struct SimConfig {
    /// Cores of the simulated machine.
    pub cores: usize,
    /// The CFS model's tunables and costs.
    pub cfs: CfsParams,
    /// CPU time every tuple costs besides its operator's own (channel and batch handling).
    pub tuple_overhead_ns: Nanos,
    /// Capacity of each channel, tuples.
    pub channel_capacity: usize,
    /// Most tuples per step.
    pub batch_size: usize,
    /// How long the sources offer tuples.
    pub duration_ns: Nanos,
    /// Share of the run discarded before measuring.
    pub warmup: f64,
    /// Seed of every draw of the run (selectivity, blocking, shuffles).
    pub seed: u64,
    /// The engine's threading model: dedicated, `dynamic:N` or `policy:NAME:N`.
    #[serde(serialize_with = "display")]
    pub threading: Threading,
    /// The middleware's policy at the OS level (nice values), if any. Under a pool threading model
    /// it changes nothing: no thread belongs to one operator, and the middleware leaves them alone.
    pub os_policy: Option<String>,
    /// How often the middleware's policy runs.
    pub policy_period_ns: Nanos,
    /// How long the queries may drain after the sources stop before the run is cut.
    pub drain_limit_ns: Nanos,
    /// How often queue lengths are sampled for the summary.
    pub sample_period_ns: Nanos,
}

fn display<S: serde::Serializer>(t: &Threading, s: S) -> Result<S::Ok, S::Error> {
    s.collect_str(t)
}

impl SimConfig {
    /// A dedicated-thread run on `cores` cores for `duration`, with the engine's defaults and the
    /// kernel's CFS defaults for that many cores.
    pub fn new(cores: usize, duration: Duration) -> SimConfig {
        SimConfig {
            cores,
            cfs: CfsParams::for_cores(cores),
            tuple_overhead_ns: 100,
            channel_capacity: 8192,
            batch_size: 512,
            duration_ns: duration.as_nanos() as Nanos,
            warmup: 0.2,
            seed: 0,
            threading: Threading::Dedicated,
            os_policy: None,
            policy_period_ns: 1_000_000_000,
            drain_limit_ns: duration.as_nanos() as Nanos,
            sample_period_ns: 100_000_000,
        }
    }

    /// Checks the values; the error names the setting and the fix.
    pub fn validate(&self) -> Result<(), SimError> {
        let bad = |m: String| Err(SimError::Config(m));
        if !(1..=1_000_000).contains(&self.cores) {
            return bad(format!("--cores {} must be from 1 to 1000000", self.cores));
        }
        if self.duration_ns == 0 || self.duration_ns > 30 * 86_400 * 1_000_000_000 {
            return bad("--duration must be more than 0 and at most 30 days".into());
        }
        if !(0.0..0.9).contains(&self.warmup) {
            return bad(format!("--warmup {} must be a share of the run in [0, 0.9), e.g. 0.2", self.warmup));
        }
        if self.channel_capacity == 0 || self.batch_size == 0 || self.batch_size > self.channel_capacity {
            return bad(format!(
                "channel capacity {} and batch size {} must be at least 1, the batch no larger than the capacity",
                self.channel_capacity, self.batch_size
            ));
        }
        if self.policy_period_ns < 1_000_000 || self.sample_period_ns == 0 {
            return bad("--policy-period must be at least 1ms".into());
        }
        if self.cfs.min_granularity_ns == 0 || self.cfs.latency_ns < self.cfs.min_granularity_ns {
            return bad("the CFS latency must be at least its minimum granularity, which must be positive".into());
        }
        match &self.threading {
            Threading::Dedicated => {}
            Threading::Dynamic { threads } | Threading::Policy(moirai_engine::PolicyThreading { threads, .. })
                if *threads == 0 =>
            {
                return bad("a pool needs at least 1 worker thread".into())
            }
            Threading::Dynamic { .. } | Threading::Policy(_) => {}
            other => {
                return bad(format!(
                    "threading model '{other}' is not simulated; use dedicated, dynamic:N or policy:NAME:N"
                ))
            }
        }
        Ok(())
    }
}

//! How a run is simulated: [`SimConfig`].

use std::time::Duration;

use moirai_engine::Threading;
use moirai_middleware::activity::ActivationMode;

use crate::cfs::CfsParams;
use crate::event::Nanos;
use crate::SimError;

/// Context switch, ns: `perf bench sched pipe` on one core, half a round trip less two pipe
/// syscalls (`docs/sim.md`).
pub const MEASURED_CONTEXT_SWITCH_NS: Nanos = 2_600;
/// CPU a woken thread spends besides the switch: a sink's CPU per wake-up at cost 0 (4.5 µs)
/// less the context switch.
pub const MEASURED_WAKEUP_CPU_NS: Nanos = 1_900;
/// CPU the waker spends per thread it wakes: an operator's CPU per wake-up less the sink's.
pub const MEASURED_NOTIFY_NS: Nanos = 5_400;
/// Channel and batch handling per tuple and hop: a 5-operator pipeline at cost 0 as fast as it
/// goes, CPU per tuple / 7 threads.
pub const MEASURED_TUPLE_OVERHEAD_NS: Nanos = 12;
/// From a wake-up to the woken thread running (fitted: the p50 latency per hop of a 20-operator
/// pipeline at 2000 tuples/s, less the woken thread's own CPU).
pub const MEASURED_WAKEUP_NS: Nanos = 7_500;

/// How a run is simulated: the machine, the engine's settings, the scheduler, the clock.
#[derive(Clone, Debug, serde::Serialize)]
pub struct SimConfig {
    /// Cores of the simulated machine.
    pub cores: usize,
    /// The CFS model's tunables and costs.
    pub cfs: CfsParams,
    /// CPU time every tuple costs besides its operator's own (channel and batch handling).
    pub tuple_overhead_ns: Nanos,
    /// CPU time a thread spends per wake-up besides the context switch: leaving and entering its
    /// futex wait, the empty poll before it sleeps again. Charged to the woken thread when it
    /// next runs.
    pub wakeup_cpu_ns: Nanos,
    /// CPU time a thread spends per sleeping thread it wakes (the futex wake, with the
    /// inter-processor interrupt to an idle core). Charged to the waker after its step.
    pub notify_ns: Nanos,
    /// The shortest a rate-limited source sleeps (the engine's `MIN_SLEEP_NS`): a source with
    /// nothing due wakes no earlier than this after its last step, and takes all that is due then.
    pub source_min_sleep_ns: Nanos,
    /// How late a sleeping thread's timer fires (Linux's default timer slack for a normal thread,
    /// `/proc/PID/timerslack_ns`): a source wakes this long after its next tuple is due.
    pub timer_slack_ns: Nanos,
    /// How each tuple's operator cost is drawn around the operator's mean.
    #[serde(serialize_with = "display_cost")]
    pub cost_dist: CostDist,
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
    /// How the middleware's schedule reaches the simulated kernel: nice values, or cpu cgroups
    /// with weights (`moirai schedule --translator`).
    #[serde(serialize_with = "display_translator")]
    pub translator: Translator,
    /// When the middleware enforces its policy's schedule (`moirai schedule --activation`): by
    /// default only while the activation rule ([`moirai_sched::activation`], with the moirai
    /// engine's windows) says scheduling can help, handing every thread its original value back
    /// when that ends.
    #[serde(serialize_with = "display_activation")]
    pub activation: ActivationMode,
    /// The rule's CPU threshold (`--activation-threshold`).
    pub activation_threshold: f64,
    /// The rule's lag (`--activation-lag`); `None`: the middleware's default for moirai's engine.
    #[serde(skip_serializing_if = "Option::is_none", serialize_with = "display_lag")]
    pub activation_lag: Option<std::time::Duration>,
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

fn display_activation<S: serde::Serializer>(a: &ActivationMode, s: S) -> Result<S::Ok, S::Error> {
    s.serialize_str(a.as_str())
}

/// `"25ms"`, as the flag says it.
fn display_lag<S: serde::Serializer>(lag: &Option<std::time::Duration>, s: S) -> Result<S::Ok, S::Error> {
    match lag {
        Some(d) => s.collect_str(&format_args!("{d:?}")),
        None => s.serialize_none(),
    }
}

fn display_translator<S: serde::Serializer>(t: &Translator, s: S) -> Result<S::Ok, S::Error> {
    s.collect_str(t)
}

/// How the middleware's schedule reaches the simulated kernel, as `moirai schedule
/// --translator` says it.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum Translator {
    /// A nice value per thread, ratio-normalised into −20..19 (the middleware's default).
    #[default]
    Nice,
    /// A cpu cgroup per group of the schedule (per operator of a single-priority one) with a
    /// weight, log-normalised over the version's whole range (`cpu.weight` 1..10000 for v2,
    /// `cpu.shares` 2..262144 for v1), as `moirai schedule --translator cgroup` does.
    Cgroup(crate::cfs::CgroupVersion),
}

impl std::fmt::Display for Translator {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(match self {
            Translator::Nice => "nice",
            Translator::Cgroup(crate::cfs::CgroupVersion::V2) => "cgroup",
            Translator::Cgroup(crate::cfs::CgroupVersion::V1) => "cgroup-v1",
        })
    }
}

impl std::str::FromStr for Translator {
    type Err = String;

    fn from_str(s: &str) -> Result<Translator, String> {
        match s {
            "nice" => Ok(Translator::Nice),
            "cgroup" | "cgroup-v2" => Ok(Translator::Cgroup(crate::cfs::CgroupVersion::V2)),
            "cgroup-v1" => Ok(Translator::Cgroup(crate::cfs::CgroupVersion::V1)),
            other => {
                Err(format!("unknown translator '{other}': use nice, cgroup (v2 cpu.weight) or cgroup-v1 (cpu.shares)"))
            }
        }
    }
}

fn display_cost<S: serde::Serializer>(d: &CostDist, s: S) -> Result<S::Ok, S::Error> {
    s.collect_str(d)
}

/// How the CPU cost of one tuple is drawn around its operator's mean cost `c` (the per-tuple
/// overhead is added undrawn). Every law has mean `c`.
#[derive(Clone, Copy, Debug, PartialEq)]
pub enum CostDist {
    /// Every tuple costs `c` (the default; draws nothing).
    Const,
    /// Exponential with mean `c` (coefficient of variation 1).
    Exp,
    /// Log-normal with mean `c` and this coefficient of variation (standard deviation / mean).
    LogNormal(f64),
}

impl CostDist {
    /// A tuple's cost for an operator of mean cost `mean`, drawn from `rng` (at least 0).
    pub fn draw(&self, mean: Nanos, rng: &mut fastrand::Rng) -> Nanos {
        match *self {
            CostDist::Const => mean,
            CostDist::Exp => (mean as f64 * -(1.0 - rng.f64()).ln()).round() as Nanos,
            CostDist::LogNormal(cv) => {
                // ln X ~ N(mu, sigma²) with E[X] = 1: sigma² = ln(1 + cv²), mu = −sigma²/2.
                let sigma2 = (1.0 + cv * cv).ln();
                let z = standard_normal(rng);
                (mean as f64 * (z * sigma2.sqrt() - sigma2 / 2.0).exp()).round() as Nanos
            }
        }
    }
}

/// A standard normal draw (Box–Muller).
fn standard_normal(rng: &mut fastrand::Rng) -> f64 {
    let (u, v) = (1.0 - rng.f64(), rng.f64());
    (-2.0 * u.ln()).sqrt() * (2.0 * std::f64::consts::PI * v).cos()
}

impl std::fmt::Display for CostDist {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            CostDist::Const => f.write_str("const"),
            CostDist::Exp => f.write_str("exp"),
            CostDist::LogNormal(cv) => write!(f, "lognormal:{cv}"),
        }
    }
}

impl std::str::FromStr for CostDist {
    type Err = String;

    fn from_str(s: &str) -> Result<CostDist, String> {
        let bad = || format!("cost distribution '{s}': use const, exp or lognormal:CV (e.g. lognormal:0.5)");
        match s.split_once(':') {
            None if s == "const" => Ok(CostDist::Const),
            None if s == "exp" => Ok(CostDist::Exp),
            Some(("lognormal", cv)) => match cv.parse::<f64>() {
                Ok(cv) if cv.is_finite() && (0.0..=10.0).contains(&cv) => Ok(CostDist::LogNormal(cv)),
                _ => Err(bad()),
            },
            _ => Err(bad()),
        }
    }
}

impl SimConfig {
    /// A dedicated-thread run on `cores` cores for `duration`, with the engine's defaults, the
    /// kernel's CFS tunables for that many cores, and the machine costs measured on the lab's
    /// 2-core VM (`docs/sim.md`, "Calibrating against this machine").
    pub fn new(cores: usize, duration: Duration) -> SimConfig {
        SimConfig {
            cores,
            cfs: CfsParams {
                context_switch_ns: MEASURED_CONTEXT_SWITCH_NS,
                wakeup_ns: MEASURED_WAKEUP_NS,
                ..CfsParams::for_cores(cores)
            },
            tuple_overhead_ns: MEASURED_TUPLE_OVERHEAD_NS,
            wakeup_cpu_ns: MEASURED_WAKEUP_CPU_NS,
            notify_ns: MEASURED_NOTIFY_NS,
            source_min_sleep_ns: 50_000,
            timer_slack_ns: 50_000,
            cost_dist: CostDist::Const,
            channel_capacity: 8192,
            batch_size: 512,
            duration_ns: duration.as_nanos() as Nanos,
            warmup: 0.2,
            seed: 0,
            threading: Threading::Dedicated,
            os_policy: None,
            translator: Translator::Nice,
            activation: ActivationMode::Auto,
            activation_threshold: moirai_sched::ActivationConfig::default().cpu_threshold,
            activation_lag: None,
            policy_period_ns: 1_000_000_000,
            drain_limit_ns: duration.as_nanos() as Nanos,
            sample_period_ns: 100_000_000,
        }
    }

    /// As [`SimConfig::new`], on an ideal machine: switches, wake-ups, notifications, per-tuple
    /// overhead and source timers cost nothing, so only the operators' own costs and the
    /// scheduler remain (for checks against queueing theory, or one cost at a time).
    pub fn ideal(cores: usize, duration: Duration) -> SimConfig {
        let mut c = SimConfig::new(cores, duration);
        c.cfs.context_switch_ns = 0;
        c.cfs.wakeup_ns = 0;
        c.tuple_overhead_ns = 0;
        c.wakeup_cpu_ns = 0;
        c.notify_ns = 0;
        c.source_min_sleep_ns = 0;
        c.timer_slack_ns = 0;
        c
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
        let thresholds = moirai_sched::activation::CPU_THRESHOLD_RANGE;
        if !thresholds.contains(&self.activation_threshold) {
            return bad(format!(
                "activation threshold {} is out of range: give the share of the machine's CPU at which it counts as fully used, from {} to {} (e.g. 0.9)",
                self.activation_threshold,
                thresholds.start(),
                thresholds.end()
            ));
        }
        if let Some(lag) = self.activation_lag {
            let rule = moirai_sched::ActivationConfig::default().with_lag(lag);
            rule.validate().map_err(SimError::Config)?;
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

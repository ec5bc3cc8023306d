//! The metrics policies can ask for, one name per concept (Lachesis §5.2, Haren's features).
//!
//! *Primitive* metrics are sampled by a driver from the SPE's public API. *Derived* metrics
//! declare the metrics they depend on and are computed by the
//! [`MetricProvider`](crate::MetricProvider); a driver may also provide a derived metric directly, which then
//! takes precedence (Algorithm 3, L12). How each derived metric is computed, and what happens at
//! a division by zero, is documented on its variant.

use serde::{Deserialize, Serialize};

/// A metric of a physical operator. The serialised (snake_case) names are those used in config
/// files and bound as variables in user scripts.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Metric {
    /// Primitive, cumulative counter: tuples the operator has taken from its input channels (for a
    /// source: tuples it ingested).
    TuplesIn,
    /// Primitive, cumulative counter: tuples the operator has sent, counted once per receiving
    /// channel (a tuple broadcast to 3 channels counts 3; for a sink: tuples it consumed). The
    /// per-channel count is what makes `queue_size`, `global_selectivity` and
    /// `global_average_cost` exact under fan-out; drivers of SPEs that count once per tuple
    /// should multiply by the fan-out.
    TuplesOut,
    /// Primitive gauge: tuples queued in the operator's input channels now (the Flink driver
    /// reports network buffers by default, `input_buffers`; tuples with `queue = "records"`).
    QueueLen,
    /// Primitive gauge: seconds the oldest queued tuple has waited for the operator (0 when its
    /// queues are empty). FCFS uses it as the age of the operator's head tuple.
    HeadWait,
    /// Primitive, cumulative counter: CPU nanoseconds used by the operator's threads.
    CpuNs,
    /// Primitive, cumulative counter: nanoseconds the SPE counted the operator busy processing
    /// (Flink's `accumulateBusyTimeMs`).
    BusyNs,
    /// Primitive, cumulative counter: nanoseconds the operator waited for room downstream
    /// (back-pressured; Flink's `accumulateBackPressuredTimeMs`).
    BackpressuredNs,
    /// Primitive, cumulative counter: nanoseconds the operator waited for input (Flink's
    /// `accumulateIdleTimeMs`).
    IdleNs,
    /// Primitive gauge: network buffers queued in the operator's input channels now (Flink's
    /// `Shuffle.Netty.Input.Buffers.inputQueueLength`; a buffer holds up to 32 KiB of records).
    /// Coarser than `queue_len`, but read from the SPE itself rather than estimated from counters
    /// sampled at different times. Only SPEs with network buffers report it.
    InputBuffers,
    /// Tuples in per second over the last round: Δ`tuples_in` / Δt. 0 in an operator's first
    /// round (no earlier sample), and after its counter went backwards (a restart).
    RateIn,
    /// Tuples out per second over the last round: Δ`tuples_out` / Δt; 0 like `rate_in`.
    RateOut,
    /// Share of the last round the operator was busy: Δ`busy_ns` / Δt (0..1 per instance); 0 like
    /// `rate_in`.
    Busy,
    /// Share of the last round the operator was back-pressured: Δ`backpressured_ns` / Δt.
    Backpressured,
    /// Share of the last round the operator was idle: Δ`idle_ns` / Δt.
    Idle,
    /// Tuples waiting for the operator. `queue_len` when the driver provides it; otherwise the
    /// Lachesis fallback from cumulative counters: Σ over upstream operators u of
    /// `tuples_out(u) / |downstream(u)|`, minus the operator's own `tuples_in`, clamped at 0
    /// (exact for pipelines and evenly partitioned or broadcast fan-out; approximate under key
    /// skew; 0 for sources).
    QueueSize,
    /// Tuples out per tuple in over the last round: Δ`tuples_out` / Δ`tuples_in`. In an
    /// operator's first round the deltas are taken from 0 (the counters' totals). When nothing came
    /// in during the round, the operator's previous selectivity is kept, or 1 if it has none.
    Selectivity,
    /// CPU nanoseconds per input tuple over the last round: Δ`cpu_ns` / Δ`tuples_in`; first round
    /// and no-input rounds as for `selectivity` (the previous cost is kept, or 0 if none).
    Cost,
    /// Tuples reaching the sinks per tuple entering the operator, computed from the sinks
    /// backwards: `selectivity × mean(global_selectivity of downstream)`, 1 × `selectivity` for a
    /// sink. The mean (not Lachesis' `Σ − Π`) is exact with per-channel `tuples_out`: each of the
    /// d downstream operators receives 1/d of the counted output.
    GlobalSelectivity,
    /// CPU nanoseconds spent from the operator to the sinks per tuple entering it:
    /// `cost + selectivity × mean(global_average_cost of downstream)` (the mean for the same
    /// reason as in `global_selectivity`; with one downstream operator this is Lachesis' formula).
    GlobalAverageCost,
    /// HR (Sharaf et al.): `global_selectivity / global_average_cost`, tuples to the sinks per CPU
    /// nanosecond. 0 when the path cost is 0 (nothing measured yet), so an unmeasured operator is
    /// not mistaken for an infinitely productive one.
    HighestRate,
}

/// How values of a metric of several physical operators combine into one value for the logical
/// operator they run (replicas after fission, or the chain a logical operator was fused into).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Aggregation {
    /// Quantities that add up over replicas: counters, rates, queues.
    Sum,
    /// The worst case: waiting times.
    Max,
    /// Per-tuple ratios: selectivity, cost and their global forms.
    Mean,
}

impl Metric {
    /// Every metric, primitives first, each after its dependencies.
    pub const ALL: [Metric; 20] = [
        Metric::TuplesIn,
        Metric::TuplesOut,
        Metric::QueueLen,
        Metric::HeadWait,
        Metric::CpuNs,
        Metric::BusyNs,
        Metric::BackpressuredNs,
        Metric::IdleNs,
        Metric::InputBuffers,
        Metric::RateIn,
        Metric::RateOut,
        Metric::Busy,
        Metric::Backpressured,
        Metric::Idle,
        Metric::QueueSize,
        Metric::Selectivity,
        Metric::Cost,
        Metric::GlobalSelectivity,
        Metric::GlobalAverageCost,
        Metric::HighestRate,
    ];

    /// The primitive metrics a driver may sample.
    pub const PRIMITIVES: [Metric; 9] = [
        Metric::TuplesIn,
        Metric::TuplesOut,
        Metric::QueueLen,
        Metric::HeadWait,
        Metric::CpuNs,
        Metric::BusyNs,
        Metric::BackpressuredNs,
        Metric::IdleNs,
        Metric::InputBuffers,
    ];

    /// The snake_case name used in configs and scripts (e.g. `"queue_size"`).
    pub fn name(self) -> &'static str {
        match self {
            Metric::TuplesIn => "tuples_in",
            Metric::TuplesOut => "tuples_out",
            Metric::QueueLen => "queue_len",
            Metric::HeadWait => "head_wait",
            Metric::CpuNs => "cpu_ns",
            Metric::BusyNs => "busy_ns",
            Metric::BackpressuredNs => "backpressured_ns",
            Metric::IdleNs => "idle_ns",
            Metric::InputBuffers => "input_buffers",
            Metric::RateIn => "rate_in",
            Metric::RateOut => "rate_out",
            Metric::Busy => "busy",
            Metric::Backpressured => "backpressured",
            Metric::Idle => "idle",
            Metric::QueueSize => "queue_size",
            Metric::Selectivity => "selectivity",
            Metric::Cost => "cost",
            Metric::GlobalSelectivity => "global_selectivity",
            Metric::GlobalAverageCost => "global_average_cost",
            Metric::HighestRate => "highest_rate",
        }
    }

    /// The metric called `name` (as returned by [`Metric::name`]).
    pub fn from_name(name: &str) -> Option<Metric> {
        Metric::ALL.into_iter().find(|m| m.name() == name)
    }

    /// Whether only a driver can provide it.
    pub fn is_primitive(self) -> bool {
        Metric::PRIMITIVES.contains(&self)
    }

    /// Whether it is a cumulative counter, whose previous value the provider keeps to difference.
    pub fn is_counter(self) -> bool {
        matches!(
            self,
            Metric::TuplesIn
                | Metric::TuplesOut
                | Metric::CpuNs
                | Metric::BusyNs
                | Metric::BackpressuredNs
                | Metric::IdleNs
        )
    }

    /// Alternative sets of dependencies, in order of preference: the provider uses the first set
    /// whose metrics it can all obtain. Empty for primitives.
    pub fn derivations(self) -> &'static [&'static [Metric]] {
        use Metric::*;
        match self {
            TuplesIn | TuplesOut | QueueLen | HeadWait | CpuNs | BusyNs | BackpressuredNs | IdleNs | InputBuffers => {
                &[]
            }
            RateIn => &[&[TuplesIn]],
            RateOut => &[&[TuplesOut]],
            Busy => &[&[BusyNs]],
            Backpressured => &[&[BackpressuredNs]],
            Idle => &[&[IdleNs]],
            QueueSize => &[&[QueueLen], &[TuplesIn, TuplesOut]],
            Selectivity => &[&[TuplesIn, TuplesOut]],
            Cost => &[&[CpuNs, TuplesIn]],
            GlobalSelectivity => &[&[Selectivity]],
            GlobalAverageCost => &[&[Cost, Selectivity]],
            HighestRate => &[&[GlobalSelectivity, GlobalAverageCost]],
        }
    }

    /// How values of replicas or fused operators combine for a logical operator.
    pub fn aggregation(self) -> Aggregation {
        use Metric::*;
        match self {
            TuplesIn | TuplesOut | QueueLen | CpuNs | BusyNs | BackpressuredNs | IdleNs | InputBuffers | RateIn
            | RateOut | QueueSize => Aggregation::Sum,
            HeadWait => Aggregation::Max,
            Busy | Backpressured | Idle | Selectivity | Cost | GlobalSelectivity | GlobalAverageCost | HighestRate => {
                Aggregation::Mean
            }
        }
    }

    /// The dependency alternatives in words, e.g. `"queue_len or (tuples_in and tuples_out)"`.
    pub fn describe_derivations(self) -> String {
        let sets = self.derivations();
        let set = |s: &[Metric]| s.iter().map(|m| m.name()).collect::<Vec<_>>().join(" and ");
        sets.iter()
            .map(|s| if s.len() > 1 && sets.len() > 1 { format!("({})", set(s)) } else { set(s) })
            .collect::<Vec<_>>()
            .join(" or ")
    }
}

impl std::fmt::Display for Metric {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.name())
    }
}

impl std::str::FromStr for Metric {
    type Err = String;

    fn from_str(s: &str) -> Result<Metric, String> {
        Metric::from_name(s).ok_or_else(|| {
            let names: Vec<_> = Metric::ALL.iter().map(|m| m.name()).collect();
            format!("unknown metric '{s}'; metrics are: {}", names.join(", "))
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_round_trip_and_match_serde() {
        for m in Metric::ALL {
            assert_eq!(Metric::from_name(m.name()), Some(m));
            assert_eq!(serde_json::to_string(&m).unwrap(), format!("\"{}\"", m.name()));
            assert_eq!(m.name().parse::<Metric>(), Ok(m));
        }
        let err = "queue".parse::<Metric>().unwrap_err();
        assert!(err.contains("unknown metric 'queue'") && err.contains("queue_size"), "{err}");
    }

    #[test]
    fn all_lists_dependencies_first() {
        for (i, m) in Metric::ALL.iter().enumerate() {
            for set in m.derivations() {
                for d in *set {
                    let j = Metric::ALL.iter().position(|x| x == d).unwrap();
                    assert!(j < i, "{d} must come before {m}");
                }
            }
            assert_eq!(m.is_primitive(), m.derivations().is_empty(), "{m}");
        }
    }

    #[test]
    fn derivations_read_as_words() {
        assert_eq!(Metric::QueueSize.describe_derivations(), "queue_len or (tuples_in and tuples_out)");
        assert_eq!(Metric::Cost.describe_derivations(), "cpu_ns and tuples_in");
        assert_eq!(Metric::TuplesIn.describe_derivations(), "");
    }
}

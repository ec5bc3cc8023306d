//! The engine's metrics on `/metrics` (Prometheus text exposition), by name, and the primitive
//! counters of one physical operator as a reader gets them.
//!
//! ```
//! use moirai_contract::metrics::{names, OperatorCounters};
//!
//! let mut c = OperatorCounters::default();
//! assert!(c.set(names::QUEUE_LEN, 512.0));
//! assert!(c.set(names::CPU, 0.25));
//! assert!(!c.set("some_other_metric", 1.0));
//! assert_eq!((c.queue_len, c.cpu_ns), (512.0, 0.25e9));
//! ```

/// Metric names in the Prometheus exposition (`/metrics`).
pub mod names {
    /// Counter: tuples taken from the operator's input channels.
    pub const TUPLES_IN: &str = "moirai_operator_tuples_in_total";
    /// Counter: tuples sent to the operator's output channels (or consumed, for a sink).
    pub const TUPLES_OUT: &str = "moirai_operator_tuples_out_total";
    /// Gauge: tuples queued in the operator's input channels.
    pub const QUEUE_LEN: &str = "moirai_operator_queue_len";
    /// Gauge: age of the oldest tuple queued for the operator, in seconds.
    pub const HEAD_WAIT: &str = "moirai_operator_head_wait_seconds";
    /// Counter: CPU time of the operator's thread (under a pool model: of its runs on the
    /// workers), in seconds.
    pub const CPU: &str = "moirai_operator_cpu_seconds_total";
    /// Gauge: CPU nanoseconds per input tuple since start.
    pub const COST: &str = "moirai_operator_cost_ns";
    /// Gauge: output tuples per input tuple since start.
    pub const SELECTIVITY: &str = "moirai_operator_selectivity";
    /// Counter: time the operator spent blocked on full output channels (backpressure), in seconds.
    pub const BLOCKED: &str = "moirai_operator_blocked_seconds_total";
    /// Gauge: tuples a source is behind its offered schedule — the external queue, like a Kafka
    /// consumer's lag (0 for other operators).
    pub const BACKLOG: &str = "moirai_operator_backlog";
    /// Summary: processing latency at a sink (egress − ingress), in seconds.
    pub const LATENCY: &str = "moirai_sink_latency_seconds";
    /// Summary: end-to-end latency at a sink (egress − intended send time), in seconds.
    pub const E2E_LATENCY: &str = "moirai_sink_e2e_latency_seconds";
    /// Gauge: worker threads running operators now (pool threading models; 0 for dedicated).
    pub const THREAD_LEVEL: &str = "moirai_thread_level";
    /// Gauge: 1 while the policy executor's priorities order its ready queue, 0 while the
    /// activation rule is idle (policy threading model only).
    pub const POLICY_ACTIVE: &str = "moirai_policy_active";
    /// Gauge: tuples in one outgoing queue of a Hone exchange at its last scheduling tick.
    pub const EXCHANGE_BACKLOG: &str = "moirai_exchange_backlog";
    /// Gauge: the largest backlog of any outgoing queue of a Hone exchange at any tick so far.
    pub const EXCHANGE_MAX_BACKLOG: &str = "moirai_exchange_max_backlog";
    /// Counter: tuples a Hone exchange's link carried.
    pub const EXCHANGE_SENT: &str = "moirai_exchange_sent_total";
    /// Counter: scheduling intervals (τ) a Hone exchange ran.
    pub const EXCHANGE_TICKS: &str = "moirai_exchange_ticks_total";
}

/// The primitive metrics of one physical operator, as `/metrics` gives them (and as the engine
/// reads them in-process), in the units the scheduling core takes.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct OperatorCounters {
    /// [`names::TUPLES_IN`].
    pub tuples_in: f64,
    /// [`names::TUPLES_OUT`].
    pub tuples_out: f64,
    /// [`names::QUEUE_LEN`].
    pub queue_len: f64,
    /// [`names::HEAD_WAIT`], seconds.
    pub head_wait_s: f64,
    /// [`names::CPU`], in ns.
    pub cpu_ns: f64,
    /// [`names::BACKLOG`]: how far a source is behind its schedule.
    pub backlog: f64,
}

impl OperatorCounters {
    /// Records the sample of metric `name`; false for a metric that is not one of these.
    pub fn set(&mut self, name: &str, value: f64) -> bool {
        match name {
            names::TUPLES_IN => self.tuples_in = value,
            names::TUPLES_OUT => self.tuples_out = value,
            names::QUEUE_LEN => self.queue_len = value,
            names::HEAD_WAIT => self.head_wait_s = value,
            names::CPU => self.cpu_ns = value * 1e9,
            names::BACKLOG => self.backlog = value,
            _ => return false,
        }
        true
    }
}

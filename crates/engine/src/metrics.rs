//! Metrics of a running engine: one name per concept, the names defined once in
//! `moirai-contract`.
//!
//! Counters are updated by the operator threads once per batch (relaxed atomics, no locks on the
//! hot path); gauges such as queue length and head wait are read from the channels when a
//! snapshot is taken. The names are those of the papers (`queue_len`, `head_wait`, `cost`,
//! `selectivity`) and are the public API the middleware's driver reads (docs/metrics-endpoint.md).

use std::sync::atomic::{AtomicBool, AtomicI32, AtomicU64, AtomicU8, Ordering};
use std::sync::{Arc, Mutex};

use hdrhistogram::Histogram;
use serde::Serialize;

use crate::sync::channel::Observe;
use crate::sync::lock;

/// Metric names in the Prometheus exposition (`/metrics`), defined once for the engine and its
/// readers in [`moirai_contract::metrics::names`].
pub use moirai_contract::metrics::names;

/// Live counters of one physical operator, shared by its thread and the metrics reader.
///
/// The fields a turn on a pool touches come first and the counters start a cache line, so that
/// a turn touches one line of them (`TURN_BYTES`), the line a pool hints ahead of the turn; with
/// 10 000 operators every turn finds it out of the caches.
#[derive(Default)]
#[repr(C, align(64))]
pub struct OperatorMetrics {
    /// Tuples in (written by its task alone, by a load and a store).
    pub tuples_in: AtomicU64,
    /// Tuples out (written by its task alone).
    pub tuples_out: AtomicU64,
    /// CPU time spent running it on pool workers, by worker slot ([`OperatorMetrics::pool_cpu_ns`]
    /// is their sum): in a pool of at most [`POOL_CPU_SLOTS`] workers each worker charges a slot
    /// of its own by a load and a store, in a larger one the workers share them and add
    /// atomically (a locked add per turn was ~3 % of a hand-off: [`OperatorMetrics::add`]).
    pub(crate) pool_cpu: [AtomicU64; POOL_CPU_SLOTS],
    /// The Linux thread running it (0 until it starts; under the dedicated model, its own).
    pub tid: AtomicI32,
    /// Under the policy model: the ready-queue level it is queued at (0 = lowest), published by
    /// the policy controller, read by workers when they queue it.
    pub priority_level: AtomicU8,
    /// Under a pool model: true, and its CPU time is its share of the workers' thread CPU time:
    /// each worker reads its CPU clock every few turns and shares what it spent among the turns
    /// since, by their wall time (`pool_cpu`; see the executor's `turn_cpu`).
    pub pooled: AtomicBool,
    /// CPU time of its thread when the thread ended (the thread is gone from /proc then).
    pub final_cpu_ns: AtomicU64,
    /// Under the policy model: the priority the policy gave it last (`f64` bits).
    pub priority: AtomicU64,
    /// Its input channels.
    pub(crate) inputs: Vec<Arc<dyn Observe>>,
    /// Its output channels.
    pub(crate) outputs: Vec<Arc<dyn Observe>>,
    /// For a source instance: when its schedule started (0 before) and its share of it.
    pub(crate) offered: Mutex<Option<(u64, crate::offered::Share)>>,
}

// A turn's part fits one cache line.
const _: () = assert!(OperatorMetrics::TURN_BYTES <= 64);

/// Slots of an operator's pool CPU time ([`OperatorMetrics::pool_cpu`]): a pool of at most this
/// many workers gives each worker a slot of its own.
pub(crate) const POOL_CPU_SLOTS: usize = 2;

impl OperatorMetrics {
    /// The bytes from the start of the counters that a turn on a pool reads or writes (all
    /// within the first cache line).
    pub(crate) const TURN_BYTES: usize = std::mem::offset_of!(OperatorMetrics, final_cpu_ns);

    /// Adds to a counter of the operator's own (`tuples_in`, `tuples_out`) by a load and a
    /// store, not a locked add: only the task that runs the operator writes them, on one thread
    /// at a time (a pool hands a task from worker to worker through its state word, which orders
    /// the turns), and readers see whole values either way. Two locked adds were ~8 % of the
    /// workers' CPU on the 10 000-operator pipeline (`perf annotate`).
    #[inline]
    pub(crate) fn add(counter: &AtomicU64, n: usize) {
        counter.store(counter.load(Ordering::Relaxed).wrapping_add(n as u64), Ordering::Relaxed);
    }

    /// CPU time spent running it on pool workers so far.
    pub fn pool_cpu_ns(&self) -> u64 {
        self.pool_cpu.iter().map(|slot| slot.load(Ordering::Relaxed)).sum()
    }

    /// For a source instance with an offered rate: the tuples due by `now_ns` (engine clock)
    /// that it has not yet sent; 0 for every other operator.
    pub fn backlog(&self, now_ns: u64) -> u64 {
        match *lock(&self.offered) {
            Some((start, offered)) if start > 0 && !offered.is_unlimited() => {
                offered.due(now_ns.saturating_sub(start)).saturating_sub(self.tuples_in.load(Ordering::Relaxed))
            }
            _ => 0,
        }
    }
}

/// Latency histograms of one physical sink, in nanoseconds.
pub struct SinkMetrics {
    /// Egress − ingress.
    pub processing: Mutex<Histogram<u64>>,
    /// Egress − intended send time.
    pub e2e: Mutex<Histogram<u64>>,
    /// Counts the resets ([`SinkMetrics::reset`]): latencies a sink recorded before one are
    /// dropped, not merged after it.
    epoch: AtomicU64,
}

/// A histogram of nanoseconds from 1 ns to 1 hour at 3 significant digits.
pub fn latency_histogram() -> Histogram<u64> {
    Histogram::new_with_bounds(1, 3_600_000_000_000, 3).expect("valid histogram bounds")
}

impl Default for SinkMetrics {
    fn default() -> Self {
        SinkMetrics {
            processing: Mutex::new(latency_histogram()),
            e2e: Mutex::new(latency_histogram()),
            epoch: AtomicU64::new(0),
        }
    }
}

impl SinkMetrics {
    /// The resets so far: what a sink's local latencies belong to.
    pub fn epoch(&self) -> u64 {
        self.epoch.load(Ordering::Relaxed)
    }

    /// Clears both histograms (to discard a warm-up); latencies a sink recorded before this and
    /// has not published yet are dropped when it does.
    pub fn reset(&self) {
        // Both locks, in the order every writer takes them: no merge lands half before.
        let (mut processing, mut e2e) = (lock(&self.processing), lock(&self.e2e));
        processing.reset();
        e2e.reset();
        self.epoch.fetch_add(1, Ordering::Relaxed);
    }

    /// Adds what a sink recorded since `epoch`; false (nothing added) if a reset came since.
    pub fn publish(&self, epoch: u64, processing: Recorded<'_>, e2e: Recorded<'_>) -> bool {
        let (mut shared_processing, mut shared_e2e) = (lock(&self.processing), lock(&self.e2e));
        if self.epoch() != epoch {
            return false;
        }
        processing.add_to(&mut shared_processing);
        e2e.add_to(&mut shared_e2e);
        true
    }
}

/// Latencies a sink recorded since it last published: a few runs of one latency each, or (past
/// a few) a histogram.
pub enum Recorded<'a> {
    /// (latency in ns, count).
    Runs(&'a [(u64, u64)]),
    /// A local histogram of [`latency_histogram`]'s bounds.
    Histogram(&'a Histogram<u64>),
}

impl Recorded<'_> {
    fn add_to(&self, shared: &mut Histogram<u64>) {
        match self {
            Recorded::Runs(runs) => {
                for &(ns, count) in *runs {
                    shared.saturating_record_n(ns, count);
                }
            }
            // Same bounds on both sides, and values are clamped on record, so add cannot fail.
            Recorded::Histogram(h) => {
                let _ = shared.add(*h);
            }
        }
    }
}

pub use moirai_contract::summary::Latency;

/// The latency distribution of a histogram of nanoseconds, in milliseconds (p10 and p90 not
/// taken).
pub fn latency_of(h: &Histogram<u64>) -> Latency {
    if h.is_empty() {
        return Latency::default();
    }
    let ms = |ns: u64| ns as f64 / 1e6;
    // One pass over the counts for the three quantiles (the same values as three
    // `value_at_quantile` calls).
    let mut q = h.value_at_quantiles([0.5, 0.99, 0.999]);
    let (p50, p99, p999) = (q.next().unwrap_or(0), q.next().unwrap_or(0), q.next().unwrap_or(0));
    Latency {
        count: h.len(),
        mean: h.mean() / 1e6,
        p10: None,
        p50: ms(p50),
        p90: None,
        p99: ms(p99),
        p999: ms(p999),
        max: ms(h.max()),
    }
}

/// A point-in-time reading of one physical operator.
#[derive(Clone, Debug, Serialize)]
pub struct OperatorSnapshot {
    /// Physical operator id.
    pub id: usize,
    /// Query.
    pub query: String,
    /// Physical name, `"a -> b (i/n)"`.
    pub name: String,
    /// Its thread.
    pub tid: i32,
    /// Tuples in.
    pub tuples_in: u64,
    /// Tuples out.
    pub tuples_out: u64,
    /// Tuples queued at its inputs.
    pub queue_len: u64,
    /// Age of its oldest queued tuple, ns.
    pub head_wait_ns: u64,
    /// CPU time of its thread, ns.
    pub cpu_ns: u64,
    /// Time blocked on backpressure, ns.
    pub blocked_ns: u64,
    /// For a source, tuples due but not yet taken in (its external queue).
    pub backlog: u64,
}

impl OperatorSnapshot {
    /// CPU nanoseconds per input tuple (per output tuple for a source, which has no input).
    pub fn cost_ns(&self) -> f64 {
        let n = if self.tuples_in > 0 { self.tuples_in } else { self.tuples_out };
        if n == 0 {
            0.0
        } else {
            self.cpu_ns as f64 / n as f64
        }
    }

    /// Output tuples per input tuple (1 before any input).
    pub fn selectivity(&self) -> f64 {
        if self.tuples_in == 0 {
            1.0
        } else {
            self.tuples_out as f64 / self.tuples_in as f64
        }
    }
}

/// Reads an operator's counters and gauges now.
pub(crate) fn snapshot(id: usize, query: &str, name: &str, m: &OperatorMetrics, now_ns: u64) -> OperatorSnapshot {
    let tid = m.tid.load(Ordering::Relaxed);
    let final_cpu = m.final_cpu_ns.load(Ordering::Relaxed);
    let cpu_ns = if m.pooled.load(Ordering::Relaxed) {
        m.pool_cpu_ns()
    } else if final_cpu > 0 || tid == 0 {
        final_cpu
    } else {
        moirai_os::proc::own_thread_cpu_ns(tid).unwrap_or(0)
    };
    let (mut queue_len, mut head_wait_ns) = (0, 0);
    for input in &m.inputs {
        let occ = input.occupancy(now_ns);
        queue_len += occ.queue_len as u64;
        head_wait_ns = head_wait_ns.max(occ.head_wait_ns);
    }
    OperatorSnapshot {
        id,
        query: query.to_string(),
        name: name.to_string(),
        tid,
        tuples_in: m.tuples_in.load(Ordering::Relaxed),
        tuples_out: m.tuples_out.load(Ordering::Relaxed),
        queue_len,
        head_wait_ns,
        cpu_ns,
        blocked_ns: m.outputs.iter().map(|o| o.blocked_ns()).sum(),
        backlog: m.backlog(now_ns),
    }
}

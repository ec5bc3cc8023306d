//! Flink's running jobs in moirai's terms: the jobs as the scheduling core's topology (a job vertex
//! is a chain of logical operators, each subtask a physical operator with its threads), and the
//! per-subtask counters Flink reports turned into records in and out and queued records (see
//! [`super::flink`] for what each metric means).

use std::collections::HashMap;

use moirai_sched::{LogicalOperator, OpKind, PhysicalOperator, SpeTopology, ThreadRef};

use super::flink_rest::{Job, ShipStrategy};

/// Where a physical operator comes from: (job, vertex, subtask) indices.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct SubtaskRef {
    /// Index into the jobs.
    pub job: usize,
    /// Index into the job's vertices.
    pub vertex: usize,
    /// Subtask index, from 0.
    pub subtask: usize,
}

/// Names that appear twice get a ` [2]`, ` [3]`, ... so that names stay unique.
fn unique(names: impl IntoIterator<Item = String>) -> Vec<String> {
    let mut seen: HashMap<String, usize> = HashMap::new();
    names
        .into_iter()
        .map(|n| {
            let count = seen.entry(n.clone()).or_insert(0);
            *count += 1;
            if *count == 1 {
                n
            } else {
                format!("{n} [{count}]")
            }
        })
        .collect()
}

/// Threads of each subtask as of the last dump, with their start times then:
/// (task name, subtask, parallelism) → threads.
pub type SubtaskThreads = HashMap<(String, usize, usize), Vec<ThreadRef>>;

/// The jobs as an [`SpeTopology`] with the threads of `threads`, and where each physical operator
/// comes from.
pub fn to_spe_topology(name: &str, pid: u32, jobs: &[Job], threads: &SubtaskThreads) -> (SpeTopology, Vec<SubtaskRef>) {
    let queries = unique(jobs.iter().map(|j| j.name.clone()));
    let mut t = SpeTopology {
        name: name.to_string(),
        pid,
        queries: queries.clone(),
        logical: Vec::new(),
        logical_edges: Vec::new(),
        physical: Vec::new(),
        physical_edges: Vec::new(),
    };
    let mut refs = Vec::new();
    for (j, (job, query)) in jobs.iter().zip(&queries).enumerate() {
        // Logical operators: the parts of every vertex's chain, named uniquely within the query.
        let parts: Vec<Vec<String>> =
            job.vertices.iter().map(|v| v.name.split(" -> ").map(str::to_string).collect()).collect();
        let names = unique(parts.iter().flatten().cloned());
        let mut next = t.logical.len();
        let mut chain: Vec<Vec<usize>> = Vec::new();
        let mut names = names.into_iter();
        for (v, (vertex, vparts)) in job.vertices.iter().zip(&parts).enumerate() {
            let is_source = vertex.inputs.is_empty();
            let is_sink = job.consumers(v).next().is_none();
            let mut ids = Vec::new();
            for k in 0..vparts.len() {
                let kind = match (k, is_source, is_sink) {
                    (0, true, _) => OpKind::Source,
                    (k, _, true) if k + 1 == vparts.len() => OpKind::Sink,
                    _ => OpKind::Operator,
                };
                let name = names.next().unwrap_or_default();
                t.logical.push(LogicalOperator { name, query: query.clone(), kind });
                if k > 0 {
                    t.logical_edges.push((next - 1, next));
                }
                ids.push(next);
                next += 1;
            }
            chain.push(ids);
        }
        for (v, vertex) in job.vertices.iter().enumerate() {
            for &(u, _) in &vertex.inputs {
                if let (Some(&from), Some(&to)) = (chain[u].last(), chain[v].first()) {
                    t.logical_edges.push((from, to));
                }
            }
        }
        // Physical operators: one per subtask.
        let vertex_names = unique(job.vertices.iter().map(|v| v.name.clone()));
        let mut first = Vec::new();
        for (v, vertex) in job.vertices.iter().enumerate() {
            first.push(t.physical.len());
            for s in 0..vertex.parallelism {
                let key = (vertex.name.clone(), s, vertex.parallelism);
                let threads = threads.get(&key).cloned().unwrap_or_default();
                t.physical.push(PhysicalOperator {
                    name: format!("{} ({}/{})", vertex_names[v], s + 1, vertex.parallelism),
                    query: query.clone(),
                    logical: chain[v].clone(),
                    instance: s,
                    threads,
                });
                refs.push(SubtaskRef { job: j, vertex: v, subtask: s });
            }
        }
        for (v, vertex) in job.vertices.iter().enumerate() {
            for &(u, strategy) in &vertex.inputs {
                let pu = job.vertices[u].parallelism;
                for a in 0..pu {
                    for b in 0..vertex.parallelism {
                        if strategy != ShipStrategy::Forward || pu != vertex.parallelism || a == b {
                            t.physical_edges.push((first[u] + a, first[v] + b));
                        }
                    }
                }
            }
        }
    }
    t.logical_edges.sort_unstable();
    t.logical_edges.dedup();
    t.physical_edges.sort_unstable();
    t.physical_edges.dedup();
    (t, refs)
}

/// Counters of one subtask, as Flink reports them.
#[derive(Clone, Copy, Debug, Default, PartialEq)]
pub struct SubtaskCounters {
    /// `numRecordsIn`.
    pub records_in: f64,
    /// `numRecordsOut` (once per record, however many consumers receive it).
    pub records_out: f64,
    /// `pendingRecords`, for sources that report it.
    pub pending: Option<f64>,
    /// `accumulateBusyTimeMs`, `accumulateBackPressuredTimeMs`, `accumulateIdleTimeMs`, in ns
    /// (0 where Flink reports NaN: a legacy source's task thread does not measure them).
    pub busy_ns: f64,
    /// See `busy_ns`.
    pub backpressured_ns: f64,
    /// See `busy_ns`.
    pub idle_ns: f64,
    /// `numBuffersOut`: network buffers sent (to all its output channels).
    pub buffers_out: f64,
    /// `Shuffle.Netty.Input.Buffers.inputQueueLength`: network buffers queued in its input
    /// channels now (0 for a source).
    pub input_buffers: f64,
}

/// The counters read per subtask.
pub(super) const SUBTASK_COUNTERS: [&str; 7] = [
    "numRecordsIn",
    "numRecordsOut",
    "numBuffersOut",
    "accumulateBusyTimeMs",
    "accumulateBackPressuredTimeMs",
    "accumulateIdleTimeMs",
    INPUT_QUEUE_LENGTH,
];

/// Flink's gauge of the network buffers queued in a subtask's input channels.
pub const INPUT_QUEUE_LENGTH: &str = "Shuffle.Netty.Input.Buffers.inputQueueLength";

/// Record counts of one subtask in moirai's terms.
#[derive(Clone, Copy, Debug, Default, PartialEq)]
pub struct SubtaskRecords {
    /// Tuples taken in.
    pub tuples_in: f64,
    /// Tuples sent, once per receiving subtask.
    pub tuples_out: f64,
    /// Tuples waiting for it.
    pub queue_len: f64,
    /// Network buffers waiting for it: Flink's `inputQueueLength`; for a source, its
    /// `pendingRecords` in buffers of the size it sends (its records per buffer so far), so
    /// that a source's backlog and an operator's input queue rank in one unit.
    pub queue_buffers: f64,
}

/// The record metrics of every subtask of one job, in moirai's terms, per vertex and subtask.
///
/// - `tuples_in`: `numRecordsIn`; a source's is its `numRecordsOut` (what it ingested).
/// - `tuples_out`: `numRecordsOut` once per receiving subtask, as moirai counts: × the number of
///   consumer edges (a record goes down each), × the consumer's parallelism for a broadcast edge;
///   a sink's is its `numRecordsIn` (what it consumed), as in moirai.
/// - `queue_buffers`: Flink's `inputQueueLength`; a source's `pendingRecords` / its records per
///   buffer (0 without either).
/// - `queue_len`: a source's `pendingRecords` (0 without it); otherwise the records the upstream
///   subtasks sent it — all of a forward partner's, all for a broadcast, 1/n of each upstream's
///   for the other strategies — minus its `numRecordsIn`, minus one network buffer's worth of
///   records per input channel, at least 0. Flink counts a record out when it is written into an
///   output buffer, which leaves the producer when full or when the buffer timeout flushes it
///   (100 ms by default): one partly filled buffer per channel is always on its way and no CPU
///   given to the consumer can take it sooner. Counted as queue, it would rank every operator
///   above a source with a real but smaller backlog. A buffer's worth is the producer's records
///   per buffer sent so far (`numRecordsOut` × receivers / `numBuffersOut`).
///
/// A source's queue is its whole backlog here; the driver caps it at the fullest queue of the
/// job's other operators unless told not to ([`crate::config::SourceQueue`]).
pub fn job_records(job: &Job, counters: &[Vec<SubtaskCounters>]) -> Vec<Vec<SubtaskRecords>> {
    let fanouts: Vec<f64> = (0..job.vertices.len())
        .map(|v| {
            job.consumers(v).map(|(c, s)| if s == ShipStrategy::Broadcast { c.parallelism as f64 } else { 1.0 }).sum()
        })
        .collect();
    // Records per buffer of each subtask: what one buffer in flight on one of its channels holds.
    let per_buffer = |u: usize, c: &SubtaskCounters| {
        if c.buffers_out > 0.0 {
            c.records_out * fanouts[u] / c.buffers_out
        } else {
            0.0
        }
    };
    job.vertices
        .iter()
        .enumerate()
        .map(|(v, vertex)| {
            let fanout = fanouts[v];
            (0..vertex.parallelism)
                .map(|s| {
                    let c = counters[v].get(s).copied().unwrap_or_default();
                    let tuples_out = c.records_out * fanout.max(1.0);
                    // A sink emits nothing downstream (its numRecordsOut stays 0): like moirai's
                    // sinks, it counts what it consumed, or every path's selectivity would be 0.
                    let tuples_out = if fanout == 0.0 { c.records_in } else { tuples_out };
                    if vertex.inputs.is_empty() {
                        let queue_len = c.pending.unwrap_or(0.0).max(0.0);
                        let per = per_buffer(v, &c);
                        let queue_buffers = if per > 0.0 { queue_len / per } else { 0.0 };
                        return SubtaskRecords { tuples_in: c.records_out, tuples_out, queue_len, queue_buffers };
                    }
                    let (mut sent, mut in_flight) = (0.0, 0.0);
                    for &(u, strategy) in &vertex.inputs {
                        let up = &counters[u];
                        let total: f64 = up.iter().map(|c| c.records_out).sum();
                        let buffers: f64 = up.iter().map(|c| per_buffer(u, c)).sum();
                        let (s_sent, s_in_flight) = match strategy {
                            ShipStrategy::Forward if up.len() == vertex.parallelism => {
                                up.get(s).map_or((0.0, 0.0), |c| (c.records_out, per_buffer(u, c)))
                            }
                            ShipStrategy::Broadcast => (total, buffers),
                            _ => (total / vertex.parallelism as f64, buffers),
                        };
                        sent += s_sent;
                        in_flight += s_in_flight;
                    }
                    let queue_len = (sent - c.records_in - in_flight).max(0.0);
                    SubtaskRecords { tuples_in: c.records_in, tuples_out, queue_len, queue_buffers: c.input_buffers }
                })
                .collect()
        })
        .collect()
}

//! What a run shows: the engine's per-operator snapshots (for the policies, through the engine's
//! adapter), and the run summary the lab reads — the same fields `moirai run <workload> --json`
//! prints, measured the way `BENCHMARKING.md` says: after a warm-up, open loop (end-to-end
//! latency from each tuple's intended send time), egress until the last tuple came out.

use std::collections::BTreeMap;

use hdrhistogram::Histogram;
use moirai_contract::summary::QueueLen;
use moirai_contract::RunSummary;
use moirai_engine::graph::NodeKind;
use moirai_engine::metrics::{latency_histogram, latency_of, OperatorSnapshot};

use crate::event::Nanos;
use crate::model::Model;
use crate::sim::channel::Channel;
use crate::sim::{SimConfig, Simulation, TID_BASE};
use crate::SimError;

/// Counters of the measured window.
#[derive(Clone)]
pub(crate) struct Measure {
    pub warm_end: Nanos,
    end: Nanos,
    tuples_in: u64,
    tuples_out: u64,
    ingress_window: u64,
    egress_window: u64,
    last_egress: Nanos,
    processing: Histogram<u64>,
    e2e: Histogram<u64>,
    cpu_window_ns: u64,
    /// Core time busy since the start (the middleware's `/proc/stat`).
    pub cpu_total_ns: u64,
    queues: Histogram<u64>,
    per_operator: Vec<(u64, u64)>,
}

impl Measure {
    pub fn new(model: &Model, config: &SimConfig) -> Measure {
        Measure {
            warm_end: (config.duration_ns as f64 * config.warmup) as Nanos,
            end: config.duration_ns,
            tuples_in: 0,
            tuples_out: 0,
            ingress_window: 0,
            egress_window: 0,
            last_egress: 0,
            processing: latency_histogram(),
            e2e: latency_histogram(),
            cpu_window_ns: 0,
            cpu_total_ns: 0,
            queues: Histogram::new(3).expect("valid histogram"),
            per_operator: vec![(0, 0); model.len()],
        }
    }

    /// A source took a tuple in at `at`.
    pub fn ingress(&mut self, at: Nanos) {
        self.tuples_in += 1;
        if (self.warm_end..self.end).contains(&at) {
            self.ingress_window += 1;
        }
    }

    /// A sink finished a tuple at `at`.
    pub fn egress(&mut self, at: Nanos, sent: Nanos, ingress: Nanos) {
        self.tuples_out += 1;
        if at >= self.warm_end {
            self.egress_window += 1;
            self.last_egress = self.last_egress.max(at);
            self.processing.saturating_record(at.saturating_sub(ingress).max(1));
            self.e2e.saturating_record(at.saturating_sub(sent).max(1));
        }
    }

    /// A core was busy from `from` to `to`.
    pub fn cpu(&mut self, from: Nanos, to: Nanos) {
        let (a, b) = (from.max(self.warm_end), to.min(self.end));
        self.cpu_window_ns += b.saturating_sub(a);
        self.cpu_total_ns += to.saturating_sub(from);
    }

    /// Adds another node's counters of the same window: counts add up, latency and queue
    /// histograms merge (percentiles are taken of the merged distribution, never averaged).
    fn merge(&mut self, other: &Measure) -> Result<(), SimError> {
        let histogram = |e: hdrhistogram::errors::AdditionError| SimError::Config(format!("merging histograms: {e:?}"));
        self.tuples_in += other.tuples_in;
        self.tuples_out += other.tuples_out;
        self.ingress_window += other.ingress_window;
        self.egress_window += other.egress_window;
        self.last_egress = self.last_egress.max(other.last_egress);
        self.processing.add(&other.processing).map_err(histogram)?;
        self.e2e.add(&other.e2e).map_err(histogram)?;
        self.cpu_window_ns += other.cpu_window_ns;
        self.queues.add(&other.queues).map_err(histogram)?;
        self.per_operator.extend_from_slice(&other.per_operator);
        Ok(())
    }

    /// Samples every operator's queue length (within the measured window).
    pub fn sample_queues(&mut self, now: Nanos, channels: &[Channel], inputs: &[Vec<usize>]) {
        if now < self.warm_end || now >= self.end {
            return;
        }
        for (op, ins) in inputs.iter().enumerate() {
            let len: u64 = ins.iter().map(|&c| channels[c].queue.len() as u64).sum();
            self.queues.saturating_record(len);
            self.per_operator[op].0 += len;
            self.per_operator[op].1 += 1;
        }
    }
}

impl Simulation<'_> {
    /// Every physical operator's counters now, as the engine's `Engine::snapshot` gives them.
    pub fn snapshots(&self) -> Vec<OperatorSnapshot> {
        (self.topology.physical.iter().enumerate())
            .map(|(i, p)| {
                let o = &self.ops[i];
                let inputs = &self.model.inputs[i];
                let head = inputs.iter().filter_map(|&c| self.channels[c].queue.front().map(|t| t.queued)).min();
                OperatorSnapshot {
                    id: i,
                    query: p.query.clone(),
                    name: p.name.clone(),
                    tid: o.thread.map_or(0, |t| TID_BASE + t as i32),
                    // A source's input is what it took in, as the engine counts it (the
                    // middleware's activation rule reads it as the sources' intake).
                    tuples_in: o.source.as_ref().map_or(o.tuples_in, |s| s.taken),
                    tuples_out: o.tuples_out,
                    queue_len: inputs.iter().map(|&c| self.channels[c].queue.len() as u64).sum(),
                    head_wait_ns: head.map_or(0, |h| self.now.saturating_sub(h)),
                    cpu_ns: o.cpu_ns,
                    blocked_ns: 0,
                    backlog: self.backlog(i),
                }
            })
            .collect()
    }

    /// Tuples queued in each channel now, and each channel's (pushed, popped) counts.
    pub fn channel_counts(&self) -> Vec<(u64, u64, u64)> {
        self.channels.iter().map(|c| (c.queue.len() as u64 + c.reserved as u64, c.pushed, c.popped)).collect()
    }

    /// The run's summary as the lab reads it from `moirai run <workload> --json`; `workload` and
    /// `params` (the workload's parameters) are recorded with it, `events` is what [`Simulation::run`]
    /// returned.
    pub fn summary(&self, workload: &str, params: serde_json::Value, events: u64) -> RunSummary {
        self.tally(events).summary(workload, params, &self.config)
    }

    /// What the run counted, to merge with other nodes' runs ([`Tally::merge`]).
    pub(crate) fn tally(&self, events: u64) -> Tally {
        Tally {
            measure: self.measure.clone(),
            operators: self.topology.physical.iter().map(|p| format!("{}/{}", p.query, p.name)).collect(),
            end: self.now,
            offered_rate: self.model.offered_rate(self.config.duration_ns),
            threads: self.threads.len() as u64,
            sources: self.ops.iter().filter(|o| o.kind == NodeKind::Source).count() as u64,
            events,
            context_switches: self.context_switches,
            wakeups: self.wakeups,
            policy_errors: self.policy_errors.clone(),
            nodes: 1,
        }
    }
}

/// What one node's run (or several merged) counted: enough for a [`RunSummary`].
#[derive(Clone)]
pub(crate) struct Tally {
    measure: Measure,
    /// `query/operator` of every physical operator, in the order of `measure.per_operator`.
    operators: Vec<String>,
    /// Simulated time when the last node's run ended.
    pub end: Nanos,
    offered_rate: f64,
    threads: u64,
    sources: u64,
    events: u64,
    context_switches: u64,
    wakeups: u64,
    policy_errors: (u64, Option<String>),
    nodes: usize,
}

impl Tally {
    /// Adds another node's run of the same settings (duration, warm-up): counters add up,
    /// histograms merge, the run ends when the last node's does.
    pub fn merge(&mut self, other: &Tally) -> Result<(), SimError> {
        self.measure.merge(&other.measure)?;
        self.operators.extend(other.operators.iter().cloned());
        self.end = self.end.max(other.end);
        self.offered_rate += other.offered_rate;
        self.threads += other.threads;
        self.sources += other.sources;
        self.events += other.events;
        self.context_switches += other.context_switches;
        self.wakeups += other.wakeups;
        self.policy_errors.0 += other.policy_errors.0;
        if other.policy_errors.1.is_some() {
            self.policy_errors.1 = other.policy_errors.1.clone();
        }
        self.nodes += other.nodes;
        Ok(())
    }

    /// The summary of the run(s) under `c` (the settings every node shared; its seed is the
    /// cluster's).
    pub fn summary(&self, workload: &str, params: serde_json::Value, c: &SimConfig) -> RunSummary {
        let m = &self.measure;
        let measured_s = (m.end - m.warm_end) as f64 / 1e9;
        let drained_s = self.end.saturating_sub(c.duration_ns) as f64 / 1e9;
        let egress_s = (m.last_egress.saturating_sub(m.warm_end) as f64 / 1e9).max(measured_s);
        let mut per_operator: BTreeMap<String, f64> = BTreeMap::new();
        for (name, &(sum, n)) in self.operators.iter().zip(&m.per_operator) {
            per_operator.insert(name.clone(), if n == 0 { 0.0 } else { sum as f64 / n as f64 });
        }
        let q = &m.queues;
        let queue_len = QueueLen {
            samples: q.len(),
            mean: if q.is_empty() { 0.0 } else { q.mean() },
            p50: q.value_at_quantile(0.5) as f64,
            p90: q.value_at_quantile(0.9) as f64,
            p99: q.value_at_quantile(0.99) as f64,
            max: q.max() as f64,
            per_operator,
        };
        let mut extra = serde_json::Map::new();
        let mut put = |k: &str, v: serde_json::Value| {
            extra.insert(k.to_string(), v);
        };
        put("simulated", true.into());
        put("scheduler", c.os_policy.clone().unwrap_or_else(|| "os".into()).into());
        put("cores", c.cores.into());
        put("nodes", self.nodes.into());
        put("seed", c.seed.into());
        put("egress_s", egress_s.into());
        put("drained_s", drained_s.into());
        put("events", self.events.into());
        put("context_switches", self.context_switches.into());
        put("wakeups", self.wakeups.into());
        put("policy_errors", self.policy_errors.0.into());
        if let Some(e) = &self.policy_errors.1 {
            put("last_policy_error", e.clone().into());
        }
        put("model", serde_json::to_value(c).unwrap_or_default());
        if let serde_json::Value::Object(params) = params {
            for (k, v) in params {
                extra.entry(k).or_insert(v);
            }
        }
        RunSummary {
            workload: workload.to_string(),
            threading: c.threading.to_string(),
            offered_rate: self.offered_rate,
            duration_s: c.duration_ns as f64 / 1e9,
            measured_s,
            ingress_tps: m.ingress_window as f64 / measured_s,
            egress_tps: m.egress_window as f64 / egress_s,
            tuples_in: m.tuples_in,
            tuples_out: m.tuples_out,
            latency_ms: latency_of(&m.processing),
            e2e_latency_ms: latency_of(&m.e2e),
            threads: self.threads,
            cpu_cores: m.cpu_window_ns as f64 / 1e9 / measured_s,
            queue_len,
            workload_stats: serde_json::Value::Null,
            extra: {
                extra.insert("sources".into(), self.sources.into());
                extra
            },
        }
    }
}

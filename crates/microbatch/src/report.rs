//! What a micro-batch run did and produced: the driver's [`RunReport`], with its recoveries and
//! group size changes, and the committed outputs.

use std::collections::BTreeMap;

use serde::Serialize;
use serde_json::value::RawValue;
use serde_json::Value;

use crate::aimd::GroupChange;
use crate::wordcount::WindowCount;

/// A recovery from a lost executor.
#[derive(Clone, Debug, Serialize)]
pub struct Recovery {
    /// When the loss was noticed, ms since the start.
    pub at_ms: f64,
    /// The lost executor.
    pub executor: usize,
    /// First micro-batch replayed (the one after the checkpoint).
    pub from_batch: u64,
    /// Micro-batches committed when the loss was noticed.
    pub committed: u64,
}

/// A group size change in the run's timeline.
#[derive(Clone, Debug, Serialize)]
pub struct TimedChange {
    /// When, ms since the start.
    pub at_ms: f64,
    /// The change.
    #[serde(flatten)]
    pub change: GroupChange,
}

/// What a micro-batch run did and produced.
#[derive(Clone, Debug, Serialize)]
pub struct RunReport {
    /// Micro-batches of the job.
    pub batches: u64,
    /// Scheduling decisions (messages of tasks handed out, counted once per decision).
    pub decisions: u64,
    /// Groups run (per-batch scheduling: micro-batches).
    pub groups: u64,
    /// Wall time of the run, from the first decision to the last commit, ms.
    pub wall_ms: f64,
    /// Per micro-batch: commit time minus the end of its interval (paced) or minus the start
    /// (unpaced), ms.
    pub commit_ms: Vec<f64>,
    /// Coordination overhead measured per group.
    pub overheads: Vec<f64>,
    /// Compute time: per group, the most occupied executor's time running tasks, summed, ms.
    pub compute_ms: f64,
    /// Coordination time: per group, its wall time less the least coordination-bound executor's
    /// task and input-wait time (decisions, barriers, messages, the shuffle's latency), summed, ms.
    pub coordination_ms: f64,
    /// The driver's time making and sending decisions, summed, ms (part of the coordination).
    pub decision_ms: f64,
    /// Group size of each group.
    pub group_sizes: Vec<u64>,
    /// Group size changes (AIMD).
    pub group_changes: Vec<TimedChange>,
    /// Recoveries.
    pub recoveries: Vec<Recovery>,
    /// CPU time of the driver's and the executors' processes over the run (`wall_ms`), ns; an
    /// executor lost mid-run counts up to its last reading (taken at every group's end).
    pub cpu_ns: u64,
    /// The committed outputs: (micro-batch, sink partition) → what it emitted, as the JSON
    /// text the sink committed ([`RunReport::output_values`] parses them).
    #[serde(skip)]
    pub outputs: BTreeMap<(u64, usize), Box<RawValue>>,
}

impl RunReport {
    /// The committed outputs parsed, by (micro-batch, sink partition); an output that is not
    /// valid JSON (it cannot be: the executors wrote it) is `Null`.
    pub fn output_values(&self) -> impl Iterator<Item = ((u64, usize), Value)> + '_ {
        self.outputs.iter().map(|(k, v)| (*k, serde_json::from_str(v.get()).unwrap_or(Value::Null)))
    }

    /// WordCount's outputs as window counts.
    fn word_counts(&self) -> impl Iterator<Item = WindowCount> + '_ {
        self.outputs.values().flat_map(|v| serde_json::from_str::<Vec<WindowCount>>(v.get()).unwrap_or_default())
    }

    /// WordCount: count per word over all windows.
    pub fn counts(&self) -> BTreeMap<String, u64> {
        let mut counts = BTreeMap::new();
        for (_, word, c) in self.word_counts() {
            *counts.entry(word.clone()).or_insert(0) += c;
        }
        counts
    }

    /// WordCount: count per (window start ms, word).
    pub fn window_counts(&self) -> BTreeMap<(u64, String), u64> {
        let mut counts = BTreeMap::new();
        for (w, word, c) in self.word_counts() {
            *counts.entry((w, word)).or_insert(0) += c;
        }
        counts
    }

    /// Coordination time per micro-batch, ms.
    pub fn coordination_ms_per_batch(&self) -> f64 {
        self.coordination_ms / self.batches.max(1) as f64
    }

    /// Compute time per micro-batch, ms.
    pub fn compute_ms_per_batch(&self) -> f64 {
        self.compute_ms / self.batches.max(1) as f64
    }

    /// Cores the driver and executors kept busy on average over the run.
    pub fn cpu_cores(&self) -> f64 {
        self.cpu_ns as f64 / (self.wall_ms * 1e6).max(1.0)
    }

    /// Time per micro-batch: wall time over micro-batches, ms.
    pub fn ms_per_batch(&self) -> f64 {
        self.wall_ms / self.batches.max(1) as f64
    }
}

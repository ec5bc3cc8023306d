//! [`QueryJob`]: an engine `Query` run as micro-batch tasks by its own operators.
//!
//! The engine cuts the query into stages ([`moirai_engine::stages`]): the map task of
//! (micro-batch, source partition) runs the source's tuples intended in the micro-batch's
//! interval through the map-side chain (map/filter/flat_map/process) and splits them by key into
//! one bucket per reduce partition; the reduce task of (micro-batch, reduce partition) adds the
//! buckets of every map partition to its window aggregate, advances its event time to the
//! micro-batch's **watermark** — the smallest over map partitions of the largest event time each
//! has produced, less the source's out-of-orderness, as the continuous engine's watermarks — and
//! returns the window results that closed; the last micro-batch closes every window, as the end
//! of a finite input does in the continuous engine. So the outputs are the continuous engine's.
//!
//! Executors are separate processes and cannot receive closures: each rebuilds the same `Query`
//! from the workload's arguments and runs its operators by index. A reduce partition's
//! checkpoint is its watermark and the input of its open windows; restoring replays that input
//! into a fresh window aggregate (and drops the results that replay re-emits, committed before).

use std::collections::BTreeMap;
use std::rc::Rc;
use std::time::Duration;

use moirai_engine::source::Offered;
use moirai_engine::stages::{self, MapSide, ReduceSide, SinkSide, Stages};
use moirai_engine::BuiltQuery;
use serde_json::{json, Value};

use crate::bounds::{self, QueryShape, Sample};
use crate::job::{Job, OutputBounds};
use crate::Error;

/// An engine query as micro-batch tasks.
pub struct QueryJob {
    stages: Rc<Stages>,
    interval_ms: u64,
    batches: u64,
    maps: Vec<Option<MapSide>>,
    reduces: BTreeMap<usize, ReduceSide>,
    bounds: OutputBounds,
}

impl QueryJob {
    /// `query` cut into micro-batches of `interval`: `tuples` in total (a finite input), or, for
    /// an endless input (`None`), as many micro-batches as `duration` holds. Errors name the
    /// operator or the setting to fix.
    pub fn new(query: BuiltQuery, interval: Duration, tuples: Option<u64>, duration: Duration) -> Result<Self, Error> {
        crate::check_interval(interval)?;
        let stages = Rc::new(query.stages().map_err(|e| Error::Unsupported(e.to_string()))?);
        let interval_ms = interval.as_millis() as u64;
        let batches = match tuples {
            Some(n) => stages.batches(n, interval_ms * 1_000_000),
            None => (duration.as_millis() as u64).div_ceil(interval_ms),
        };
        if batches == 0 {
            return Err(Error::Config("the input is empty: give a number of events > 0 or a --duration".into()));
        }
        let maps = (0..stages.map_partitions()).map(|_| None).collect();
        let interval_ns = interval_ms * 1_000_000;
        let window = stages.window().map_or((0, 0), |w| (w.size_ns, w.slide_ns));
        let bounds = bounds::query(QueryShape {
            rate: stages.rate(),
            map_partitions: stages.map_partitions(),
            single_stage: stages.reduce_partitions() == 0,
            interval_ns,
            window_ns: window,
            min_whole: MIN_WHOLE as u64,
            sample: sample(&stages, interval_ns),
        });
        Ok(QueryJob { stages, interval_ms, batches, maps, reduces: BTreeMap::new(), bounds })
    }

    /// The query's sink, to feed committed outputs to (in the driver's process).
    pub fn sink(&self) -> SinkSide {
        self.stages.sink_side()
    }

    /// The source's rate, tuples/s.
    pub fn rate(&self) -> f64 {
        self.stages.rate()
    }

    fn reduce_side(&mut self, partition: usize) -> &mut ReduceSide {
        let stages = &self.stages;
        self.reduces.entry(partition).or_insert_with(|| stages.reduce_side(partition))
    }
}

/// The fewest tuples the appended incremental checkpoints of a partition hold before a reduce
/// task sends its whole log instead.
const MIN_WHOLE: usize = 4096;

/// Tuples of source partition 0 the sample of the map side covers, at least (a batch interval's
/// worth when that is more).
const SAMPLE: f64 = 256.0;

/// Runs a fresh map side of source partition 0 over the start of the input: what its output
/// tuples look like, for the wire's bounds ([`bounds::query`]). Every process of the run takes
/// the same sample (the input is regenerated deterministically).
fn sample(stages: &Rc<Stages>, interval_ns: u64) -> Sample {
    let per_partition = Offered::Constant(stages.rate()).split(stages.map_partitions());
    let Offered::Constant(rate) = per_partition else { return Sample::default() };
    let span_ns = interval_ns.max((SAMPLE / rate * 1e9).min(1e15).ceil() as u64);
    let out = stages.map_side(0).run(0, span_ns);
    let tuples: Vec<&Value> = out.buckets.iter().flatten().collect();
    let largest = tuples.iter().map(|t| serde_json::to_string(t).map_or(0, |j| j.len() as u64)).max();
    let latest = tuples.iter().filter_map(|t| stages::event_ns(t)).max();
    Sample {
        input: per_partition.due(span_ns),
        output: tuples.len() as u64,
        largest: largest.unwrap_or(0),
        out_of_order_ns: latest.zip(out.watermark).map_or(0, |(l, w)| l.saturating_sub(w)),
    }
}

fn protocol(e: impl ToString) -> Error {
    Error::Protocol(e.to_string())
}

impl Job for QueryJob {
    fn batches(&self) -> u64 {
        self.batches
    }

    fn interval_ms(&self) -> u64 {
        self.interval_ms
    }

    fn map_partitions(&self) -> usize {
        self.stages.map_partitions()
    }

    fn reduce_partitions(&self) -> usize {
        self.stages.reduce_partitions()
    }

    fn map(&mut self, batch: u64, partition: usize) -> Result<Vec<Value>, Error> {
        let ns = self.interval_ms * 1_000_000;
        let stages = &self.stages;
        let side = self.maps[partition].get_or_insert_with(|| stages.map_side(partition));
        let out = side.run(batch * ns, (batch + 1) * ns);
        if self.stages.reduce_partitions() == 0 {
            return Ok(vec![Value::Array(out.buckets.into_iter().flatten().collect())]);
        }
        Ok(out.buckets.into_iter().map(|t| json!({ "watermark": out.watermark, "tuples": t })).collect())
    }

    fn reduce(&mut self, batch: u64, partition: usize, inputs: Vec<Value>) -> Result<Value, Error> {
        let last = batch + 1 >= self.batches;
        let maps = self.map_partitions();
        let side = self.reduce_side(partition);
        // The micro-batch's watermark: the slowest map partition's (none until each has one).
        let mut watermark = (inputs.len() == maps).then_some(u64::MAX);
        for mut input in inputs {
            let w = input.get("watermark").and_then(Value::as_u64);
            watermark = watermark.zip(w).map(|(a, b)| a.min(b));
            if let Value::Array(tuples) = input["tuples"].take() {
                side.push(tuples).map_err(protocol)?;
            }
        }
        let out = if last {
            side.finish()
        } else {
            match watermark {
                Some(w) => side.watermark(w),
                None => Vec::new(),
            }
        };
        Ok(Value::Array(out))
    }

    /// Incremental: the watermark and the input since the partition's previous checkpoint, or
    /// now and then the whole input of its open windows ([`ReduceSide::checkpoint`]).
    fn checkpoint(&mut self, partition: usize) -> Value {
        match self.reduces.get_mut(&partition) {
            Some(side) => {
                let c = side.checkpoint(MIN_WHOLE);
                json!({ "watermark": c.watermark, "log": c.log, "whole": c.whole })
            }
            None => Value::Null,
        }
    }

    /// A whole checkpoint replaces the previous one; an incremental one is appended to its log,
    /// at the new watermark. No tuple is parsed: the driver only moves values.
    fn merge_checkpoint(&self, _partition: usize, mut previous: Value, mut next: Value) -> Result<Value, Error> {
        if previous.is_null() || next.is_null() || next["whole"] == Value::Bool(true) {
            return Ok(if next.is_null() { previous } else { next });
        }
        let mut log = match previous["log"].take() {
            Value::Array(log) => log,
            _ => Vec::new(),
        };
        if let Value::Array(more) = next["log"].take() {
            log.extend(more);
        }
        Ok(json!({ "watermark": next["watermark"], "log": log, "whole": false }))
    }

    fn restore(&mut self, states: Vec<(usize, Value)>) -> Result<(), Error> {
        self.reduces.clear();
        for (partition, mut state) in states {
            let side = self.reduce_side(partition);
            if let Value::Array(log) = state["log"].take() {
                side.restore(state["watermark"].as_u64(), log).map_err(protocol)?;
            }
        }
        Ok(())
    }

    fn output_bounds(&self) -> OutputBounds {
        self.bounds
    }
}

#[cfg(test)]
mod tests {
    use std::time::Duration;

    use moirai_engine::{Agg, Query, Source, Window};

    use super::*;

    /// Numbers 0..n at 20 000/s over 2 partitions, counted per key (x % 2) in 500 ms windows.
    fn job(n: u64) -> QueryJob {
        let q = Query::new("q");
        q.source("numbers", Source::new(move |i, p| (0..n).filter(move |x| x % p as u64 == i as u64)).rate(20_000.0))
            .parallelism(2)
            .serde()
            .key_by(|x: &u64| x % 2)
            .window("count", Window::tumbling(Duration::from_millis(500)), Agg::count())
            .serde()
            .discard("out");
        QueryJob::new(q.build().unwrap(), Duration::from_millis(10), Some(n), Duration::ZERO).unwrap()
    }

    fn run_batch(job: &mut QueryJob, b: u64) -> Vec<Value> {
        let maps: Vec<Vec<Value>> = (0..job.map_partitions()).map(|m| job.map(b, m).unwrap()).collect();
        (0..job.reduce_partitions())
            .map(|r| job.reduce(b, r, maps.iter().map(|buckets| buckets[r].clone()).collect()).unwrap())
            .collect()
    }

    #[test]
    fn merged_incremental_checkpoints_stay_bounded_and_restore_the_state() {
        let n = 30_000;
        let mut original = job(n);
        let batches = original.batches();
        let mut driver = vec![Value::Null; original.reduce_partitions()];
        let (mut largest, mut full, mut compacted) = (0, 0, false);
        // A checkpoint after every micro-batch until the middle, merged as the driver merges.
        for b in 0..batches / 2 {
            run_batch(&mut original, b);
            for (r, state) in driver.iter_mut().enumerate() {
                full = full.max(original.reduces.get(&r).map_or(0, |side| side.log().1.len()));
                let next = original.checkpoint(r);
                compacted |= b > 0 && next["whole"] == Value::Bool(true);
                *state = original.merge_checkpoint(r, std::mem::take(state), next).unwrap();
                largest = largest.max(state["log"].as_array().map_or(0, Vec::len));
            }
        }
        // A whole checkpoint now and then keeps the merged log within twice the largest state
        // (the open windows' input) plus the threshold, however many checkpoints it took.
        assert!(compacted, "a whole checkpoint replaced the appended ones at least once");
        assert!(full >= 5_000, "a 500 ms window holds 5 000 tuples of a key: {full}");
        assert!(largest <= 2 * full + MIN_WHOLE, "the merged log stays bounded: {largest} tuples, state {full}");
        // A fresh job restored from the merged checkpoints goes on as the original.
        let mut restored = job(n);
        restored.restore(driver.into_iter().enumerate().collect()).unwrap();
        for b in batches / 2..batches {
            assert_eq!(run_batch(&mut restored, b), run_batch(&mut original, b), "micro-batch {b}");
        }
    }
}

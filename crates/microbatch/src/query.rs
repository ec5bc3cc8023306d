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

use moirai_engine::stages::{MapSide, ReduceSide, SinkSide, Stages};
use moirai_engine::BuiltQuery;
use serde_json::{json, Value};

use crate::job::Job;
use crate::Error;

/// An engine query as micro-batch tasks.
pub struct QueryJob {
    stages: Rc<Stages>,
    interval_ms: u64,
    batches: u64,
    maps: Vec<Option<MapSide>>,
    reduces: BTreeMap<usize, ReduceSide>,
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
        Ok(QueryJob { stages, interval_ms, batches, maps, reduces: BTreeMap::new() })
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

fn protocol(e: String) -> Error {
    Error::Protocol(e)
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

    fn checkpoint(&self, partition: usize) -> Value {
        match self.reduces.get(&partition) {
            Some(side) => {
                let (watermark, log) = side.log();
                json!({ "watermark": watermark, "log": log })
            }
            None => Value::Null,
        }
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
}

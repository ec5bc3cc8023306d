//! The job of a micro-batch run as the driver and the executors see it: micro-batches of a
//! batch interval, each a map stage of one task per source partition and (unless the job is a
//! single stage) a reduce stage of one task per reduce partition, with a shuffle in between.
//!
//! Every process builds the same job from the run's arguments, so tasks are named by
//! (micro-batch, partition) and their data travels as JSON values ([`serde_json::Value`]):
//!
//! - a **map task**'s output is one value per reduce partition (pushed to its owner), or, for a
//!   single-stage job, one value for the sink (sent to the driver);
//! - a **reduce task** takes the values of every map partition and returns its output for the
//!   sink; a reduce partition's state stays in the executor's job between its tasks, and is
//!   checkpointed and restored as a value.
//!
//! Jobs: [`crate::WordCountJob`] (WordCount cut by hand, with a map-side combiner) and
//! [`crate::QueryJob`] (any engine `Query` of the supported shape, by its operators).

use serde_json::Value;

use crate::Error;

/// Upper bounds of the JSON texts a job's tasks produce, in bytes, at the job's largest
/// micro-batch (its highest rate): what sizes the wire's message limits
/// ([`crate::limits::WireLimits`]). Derived from the job's settings — rate, batch interval,
/// partitions, window, what a tuple can hold — so that the limits grow with the job and nothing
/// else.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct OutputBounds {
    /// One map task's output for one reduce partition (a shuffle message's payload).
    pub map_output: u64,
    /// One task's output for the sink: a reduce task's closed windows, or a single-stage map
    /// task's output.
    pub sink_output: u64,
    /// One reduce partition's checkpoint, as an executor sends it and as the driver holds and
    /// restores it (merged).
    pub checkpoint: u64,
}

/// A job cut into micro-batch tasks; deterministic, so that a replayed task repeats its output.
pub trait Job {
    /// Micro-batches of the run.
    fn batches(&self) -> u64;
    /// The batch interval, ms.
    fn interval_ms(&self) -> u64;
    /// Source partitions: the map tasks of each micro-batch.
    fn map_partitions(&self) -> usize;
    /// Reduce partitions: the reduce tasks of each micro-batch; 0 for a single-stage job.
    fn reduce_partitions(&self) -> usize;
    /// Runs map task (`batch`, `partition`): one value per reduce partition, or one output for
    /// the sink when the job is a single stage.
    fn map(&mut self, batch: u64, partition: usize) -> Result<Vec<Value>, Error>;
    /// Runs reduce task (`batch`, `partition`) over the map outputs of every map partition (in
    /// map-partition order); returns its output for the sink.
    fn reduce(&mut self, batch: u64, partition: usize, inputs: Vec<Value>) -> Result<Value, Error>;
    /// Reduce partition `partition`'s state, for a checkpoint: the whole state, or what changed
    /// since this process's previous checkpoint of it (or restore), which
    /// [`merge_checkpoint`](Self::merge_checkpoint) adds to the previous checkpoint.
    fn checkpoint(&mut self, partition: usize) -> Value;
    /// The driver's side of [`checkpoint`](Self::checkpoint): the partition's state after
    /// `previous` (`Value::Null`: none yet) and then `next`. By default a checkpoint is the whole
    /// state and replaces the previous one.
    fn merge_checkpoint(&self, partition: usize, previous: Value, next: Value) -> Result<Value, Error> {
        let _ = (partition, previous);
        Ok(next)
    }
    /// Forgets every reduce partition's state and takes these (`Value::Null`: empty).
    fn restore(&mut self, states: Vec<(usize, Value)>) -> Result<(), Error>;
    /// Upper bounds of what the tasks produce, for the wire's message limits; the same in every
    /// process of the run (each builds the same job).
    fn output_bounds(&self) -> OutputBounds;
}

//! The wire: messages between the driver and its executors, and between executors (the shuffle),
//! as JSON lines (one `serde_json` object per `\n`-terminated line) over TCP on loopback.
//!
//! JSON lines is a framing every tool can read (`nc`, `jq`) and that `serde_json` and the
//! standard library's `BufRead::read_line` implement completely; a JSON text never contains a raw
//! newline, so the newline is an unambiguous frame end.

use std::io::{self, BufRead, Write};

use serde::de::DeserializeOwned;
use serde::{Deserialize, Serialize};
use serde_json::value::RawValue;
use serde_json::Value;

/// A map task: run the input of source partition `partition` that falls into micro-batch
/// `batch` through the map side, and push one bucket per reduce partition to its owner (or, for
/// a single-stage job, report the output to the driver).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct MapTask {
    /// Micro-batch.
    pub batch: u64,
    /// Source (map) partition.
    pub partition: usize,
}

/// A reduce task: add the map outputs of `batch` for reduce partition `partition` to its state,
/// and report what the micro-batch emits for the sink's commit.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct ReduceTask {
    /// Micro-batch.
    pub batch: u64,
    /// Reduce partition.
    pub partition: usize,
    /// The last micro-batch of its group: send the partition's state along (the checkpoint).
    pub checkpoint: bool,
}

/// Driver → executor.
#[derive(Clone, Debug, Serialize, Deserialize)]
pub enum ToExecutor {
    /// Once, after every executor said hello: where the others listen for shuffle data, and the
    /// clock of the micro-batches.
    Setup {
        /// Shuffle address of each executor, by executor id.
        peers: Vec<String>,
        /// Unix time (ns) at which micro-batch 0 starts; 0 = unpaced (run tasks as soon as they
        /// are assigned, for measuring time per micro-batch).
        origin_unix_ns: u64,
    },
    /// One scheduling decision: tasks to run (for one stage of one micro-batch under per-batch
    /// scheduling, for all stages of a group's micro-batches under group scheduling).
    Tasks {
        /// Recovery epoch the decision belongs to.
        epoch: u64,
        /// Map tasks, in micro-batch order.
        map: Vec<MapTask>,
        /// Reduce tasks, in micro-batch order; pre-scheduled ones start when their map outputs
        /// have announced themselves.
        reduce: Vec<ReduceTask>,
        /// Owner (executor id) of each reduce partition, where map outputs are pushed.
        reducers: Vec<usize>,
    },
    /// Recovery: forget every task and shuffle input of older epochs, and restore these reduce
    /// partitions from the checkpoint (the executor owns exactly these afterwards).
    Restore {
        /// The new epoch.
        epoch: u64,
        /// State of each reduce partition this executor now owns, at the checkpoint.
        states: Vec<(usize, Value)>,
    },
    /// End of the run: exit.
    Stop,
}

/// Executor → driver.
#[derive(Clone, Debug, Serialize, Deserialize)]
pub enum ToDriver {
    /// First message on the connection.
    Hello {
        /// Executor id (the driver's index).
        id: usize,
        /// Process id.
        pid: u32,
        /// Where this executor accepts shuffle data.
        shuffle_addr: String,
        /// The job as this executor built it: micro-batches, map partitions, reduce partitions
        /// (the driver checks that it built the same).
        job: [u64; 3],
    },
    /// Liveness, every heartbeat interval.
    Heartbeat,
    /// Tasks finished since the executor's previous report. An executor reports when it runs
    /// out of ready work (before it waits), so one report covers every task it ran back to back:
    /// one message per stage under per-batch scheduling, and as few as one per group under group
    /// scheduling when micro-batches run back to back.
    Completed {
        /// Epoch of the tasks.
        epoch: u64,
        /// The tasks, in the order they ran.
        tasks: Vec<Completion>,
        /// Time the executor spent running tasks since its previous report, ns.
        busy_ns: u64,
        /// Time the executor spent waiting for a micro-batch's input to arrive (its interval to
        /// pass) since its previous report, ns.
        wait_ns: u64,
    },
    /// The executor cannot go on (bad input, a lost driver); the message says why.
    Failed {
        /// What went wrong.
        message: String,
    },
}

/// A finished task, in a [`ToDriver::Completed`] report.
#[derive(Clone, Debug, Serialize, Deserialize)]
pub enum Completion {
    /// A map task finished (its outputs are pushed).
    Map {
        /// The task.
        task: MapTask,
        /// The output for the sink, when the job is a single stage, as the JSON text the sink
        /// commits (the driver keeps it unparsed).
        output: Option<Box<RawValue>>,
    },
    /// A reduce task finished: the windows it closed, for the sink.
    Reduce {
        /// The task.
        task: ReduceTask,
        /// What this micro-batch emits in this partition, for the sink, as JSON text.
        output: Box<RawValue>,
        /// The partition's state after the task, when the task is a checkpoint.
        state: Option<Value>,
    },
}

/// Executor → executor: a map output, pushed to the reduce partition's owner (pre-scheduling's
/// announcement: its arrival is what starts a waiting reduce task).
#[derive(Clone, Debug, Serialize, Deserialize)]
pub struct MapOutput {
    /// Epoch of the map task.
    pub epoch: u64,
    /// Micro-batch.
    pub batch: u64,
    /// Map partition that produced it.
    pub map_partition: usize,
    /// Reduce partition it is for.
    pub reduce_partition: usize,
    /// The bucket.
    pub data: Value,
}

/// Writes `message` as one JSON line and flushes.
pub fn send<T: Serialize>(out: &mut impl Write, message: &T) -> io::Result<()> {
    out.write_all(&encode(message)?)?;
    out.flush()
}

/// `message` as one JSON line, `\n` included: what [`send`] writes, for a caller that writes
/// several lines and flushes once (the shuffle's pushes, before the executor waits).
pub fn encode<T: Serialize>(message: &T) -> io::Result<Vec<u8>> {
    let mut line = serde_json::to_vec(message).map_err(io::Error::other)?;
    line.push(b'\n');
    Ok(line)
}

/// Reads one JSON line; `Ok(None)` at the end of the stream.
pub fn receive<T: DeserializeOwned>(input: &mut impl BufRead) -> io::Result<Option<T>> {
    let mut line = String::new();
    if input.read_line(&mut line)? == 0 {
        return Ok(None);
    }
    serde_json::from_str(&line)
        .map(Some)
        .map_err(|e| io::Error::new(io::ErrorKind::InvalidData, format!("a malformed message: {e}")))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn messages_round_trip_as_json_lines() {
        let mut wire = Vec::new();
        let out = MapOutput {
            epoch: 1,
            batch: 7,
            map_partition: 0,
            reduce_partition: 1,
            data: serde_json::json!([[0, "a b", 3]]),
        };
        send(&mut wire, &out).unwrap();
        send(&mut wire, &ToDriver::Heartbeat).unwrap();
        assert_eq!(wire.iter().filter(|b| **b == b'\n').count(), 2, "one line per message");
        let mut input = io::Cursor::new(wire);
        let back: MapOutput = receive(&mut input).unwrap().unwrap();
        assert_eq!((back.batch, back.data), (7, serde_json::json!([[0, "a b", 3]])));
        assert!(matches!(receive::<ToDriver>(&mut input).unwrap(), Some(ToDriver::Heartbeat)));
        assert!(receive::<ToDriver>(&mut input).unwrap().is_none());
    }

    #[test]
    fn a_malformed_line_is_an_error_not_a_panic() {
        let mut input = io::Cursor::new(b"{not json\n".to_vec());
        let e = receive::<ToDriver>(&mut input).unwrap_err();
        assert_eq!(e.kind(), io::ErrorKind::InvalidData);
    }
}

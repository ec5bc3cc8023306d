//! The wire: messages between the driver and its executors, and between executors (the shuffle),
//! as JSON lines (one `serde_json` object per `\n`-terminated line) over TCP on loopback.
//!
//! JSON lines is a framing every tool can read (`nc`, `jq`) and that `serde_json` implements
//! completely; a JSON text never contains a raw newline, so the newline is an unambiguous frame
//! end. Every line is read with a bound ([`receive`]): a message longer than the connection's
//! limit ([`crate::limits::WireLimits`]), or one that stalls half-way, is an error that ends the
//! connection, after at most the limit was held in memory. Before any message, a connection
//! proves its token ([`crate::gate`]).

use std::io::{self, BufRead, ErrorKind, Write};
use std::time::Instant;

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
    /// First message on the connection, after the token (which is what tells the driver which
    /// of its executors this is; no process id is taken on its word).
    Hello {
        /// Executor id (the driver's index; must be the one its token was given to).
        id: usize,
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
        /// The partition's state after the task, when the task is a checkpoint, as JSON text.
        state: Option<Box<RawValue>>,
    },
}

impl Completion {
    /// Bytes of JSON text it carries (outputs and state): what sizes a report.
    pub fn payload(&self) -> usize {
        match self {
            Completion::Map { output, .. } => output.as_ref().map_or(0, |o| o.get().len()),
            Completion::Reduce { output, state, .. } => {
                output.get().len() + state.as_ref().map_or(0, |s| s.get().len())
            }
        }
    }
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

/// Reads one JSON line of at most `limit` bytes (its newline included); `Ok(None)` at the end of
/// the stream. Memory held: at most `limit`. Errors end the connection: a longer line
/// (`InvalidData`, "longer than"), a malformed one (`InvalidData`), a line that stalls half-way
/// (`TimedOut`: the stream's read timeout passed with part of a message read; with none read the
/// connection is idle and reading goes on), the end of the stream inside a line.
pub fn receive<T: DeserializeOwned>(input: &mut impl BufRead, limit: usize) -> io::Result<Option<T>> {
    receive_by(input, limit, None)
}

/// [`receive`] for a message that must arrive — whole — by `deadline` (checked whenever the
/// stream's read timeout passes): a connection's first message.
pub fn receive_by<T: DeserializeOwned>(
    input: &mut impl BufRead,
    limit: usize,
    deadline: Option<Instant>,
) -> io::Result<Option<T>> {
    let mut line = Vec::new();
    loop {
        let chunk = match input.fill_buf() {
            Ok(chunk) => chunk,
            Err(e) if e.kind() == ErrorKind::Interrupted => continue,
            Err(e) if matches!(e.kind(), ErrorKind::WouldBlock | ErrorKind::TimedOut) => {
                if deadline.is_some_and(|d| Instant::now() >= d) {
                    return Err(io::Error::new(ErrorKind::TimedOut, "no whole message in time"));
                }
                if line.is_empty() {
                    continue;
                }
                return Err(io::Error::new(
                    ErrorKind::TimedOut,
                    format!("a message stalled after {} bytes (no more within the read timeout)", line.len()),
                ));
            }
            Err(e) => return Err(e),
        };
        if chunk.is_empty() {
            if line.is_empty() {
                return Ok(None);
            }
            return Err(io::Error::new(
                ErrorKind::UnexpectedEof,
                format!("the connection ended inside a message, after {} bytes", line.len()),
            ));
        }
        let (take, complete) = match chunk.iter().position(|&b| b == b'\n') {
            Some(i) => (i + 1, true),
            None => (chunk.len(), false),
        };
        if line.len() + take > limit {
            return Err(io::Error::new(
                ErrorKind::InvalidData,
                format!("a message longer than {limit} bytes, the most this run's job can send on this connection"),
            ));
        }
        line.extend_from_slice(&chunk[..take]);
        input.consume(take);
        if complete {
            break;
        }
    }
    serde_json::from_slice(&line)
        .map(Some)
        .map_err(|e| io::Error::new(ErrorKind::InvalidData, format!("a malformed message: {e}")))
}

/// Whether a [`receive`] error is the peer breaking the wire (a message too long, malformed,
/// stalled or cut off) rather than the connection failing.
pub fn is_violation(e: &io::Error) -> bool {
    matches!(e.kind(), ErrorKind::InvalidData | ErrorKind::TimedOut | ErrorKind::UnexpectedEof)
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
        let back: MapOutput = receive(&mut input, 1 << 10).unwrap().unwrap();
        assert_eq!((back.batch, back.data), (7, serde_json::json!([[0, "a b", 3]])));
        assert!(matches!(receive::<ToDriver>(&mut input, 1 << 10).unwrap(), Some(ToDriver::Heartbeat)));
        assert!(receive::<ToDriver>(&mut input, 1 << 10).unwrap().is_none());
    }

    #[test]
    fn a_malformed_long_or_cut_line_is_an_error_not_a_panic() {
        let mut input = io::Cursor::new(b"{not json\n".to_vec());
        let e = receive::<ToDriver>(&mut input, 1 << 10).unwrap_err();
        assert!(e.kind() == ErrorKind::InvalidData && is_violation(&e), "{e}");
        // 1 MiB without a newline against a limit of 1 KiB: refused with at most the limit read.
        let mut input = io::BufReader::with_capacity(256, io::Cursor::new(vec![b'a'; 1 << 20]));
        let e = receive::<ToDriver>(&mut input, 1 << 10).unwrap_err();
        assert!(e.to_string().contains("longer than 1024 bytes"), "{e}");
        assert!(input.get_ref().position() <= 2048, "read {} bytes", input.get_ref().position());
        // A line exactly at the limit passes.
        let line = format!("\"{}\"\n", "x".repeat(1021));
        assert_eq!(receive::<String>(&mut io::Cursor::new(line), 1024).unwrap().map(|s| s.len()), Some(1021));
        let e = receive::<ToDriver>(&mut io::Cursor::new(b"\"Heart".to_vec()), 1 << 10).unwrap_err();
        assert_eq!(e.kind(), ErrorKind::UnexpectedEof);
    }

    #[test]
    fn a_message_that_stalls_half_way_times_out_an_idle_connection_does_not() {
        let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
        let mut peer = std::net::TcpStream::connect(listener.local_addr().unwrap()).unwrap();
        let (conn, _) = listener.accept().unwrap();
        conn.set_read_timeout(Some(std::time::Duration::from_millis(100))).unwrap();
        let mut reader = io::BufReader::new(conn);
        let writer = std::thread::spawn(move || {
            // Idle for three read timeouts, then a whole message, then half of one.
            std::thread::sleep(std::time::Duration::from_millis(350));
            peer.write_all(b"\"Heartbeat\"\n{\"Fail").unwrap();
            std::thread::sleep(std::time::Duration::from_millis(600));
            peer
        });
        assert!(matches!(receive::<ToDriver>(&mut reader, 1 << 10).unwrap(), Some(ToDriver::Heartbeat)));
        let e = receive::<ToDriver>(&mut reader, 1 << 10).unwrap_err();
        assert_eq!(e.kind(), ErrorKind::TimedOut, "{e}");
        drop(writer.join());
        // A first message with a deadline: an idle connection is not waited for past it.
        let _idle = std::net::TcpStream::connect(listener.local_addr().unwrap()).unwrap();
        let (conn, _) = listener.accept().unwrap();
        conn.set_read_timeout(Some(std::time::Duration::from_millis(50))).unwrap();
        let started = Instant::now();
        let deadline = Some(started + std::time::Duration::from_millis(200));
        let e = receive_by::<ToDriver>(&mut io::BufReader::new(conn), 1 << 10, deadline).unwrap_err();
        assert_eq!(e.kind(), ErrorKind::TimedOut, "{e}");
        assert!(started.elapsed() < std::time::Duration::from_secs(2));
    }
}

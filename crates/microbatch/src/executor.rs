//! An executor process: runs the map and reduce tasks the driver assigns, pushes map outputs to
//! the owners of their reduce partitions, keeps the window state of the reduce partitions it
//! owns, and reports to the driver (task completions, checkpoints, heartbeats).
//!
//! Threads, no async runtime: the main thread runs tasks one at a time; a thread reads the
//! driver's connection, a thread accepts shuffle connections and one reads each, a thread sends
//! heartbeats. Everything that arrives goes through one channel to the main thread.
//!
//! **Only the run's processes are heard.** The executor proves its own token to the driver, and
//! the run's shuffle token to every peer it pushes to; its shuffle port admits a connection only
//! once that proves the shuffle token ([`crate::gate`]), and at most
//! [`limits::max_peers`] at once. Every message is read with its limit ([`WireLimits`]); a peer
//! that sends a message too long, malformed or stalled loses its connection — reported once,
//! with its address — and the run goes on.
//!
//! **Pre-scheduling**: a reduce task the driver has placed in advance runs as soon as the map
//! outputs of its micro-batch from every map partition have arrived (each arrival is the map
//! task's announcement), with no round trip to the driver. Under per-batch scheduling the same
//! code runs a reduce task that the driver sends after the map stage's barrier.

use std::collections::VecDeque;
use std::io::{BufReader, BufWriter, Write};
use std::net::{SocketAddr, TcpListener, TcpStream};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::mpsc::{self, Receiver, RecvTimeoutError, Sender};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

use rustc_hash::FxHashMap;
use serde_json::Value;

use crate::gate::{Gate, Incidents};
use crate::job::Job;
use crate::limits::{self, WireLimits, STALL_TIMEOUT};
use crate::protocol::{self, receive, send, Completion, MapOutput, MapTask, ReduceTask, ToDriver, ToExecutor};
use crate::secret::Secrets;
use crate::Error;

/// How often an executor tells the driver it is alive.
pub const HEARTBEAT: Duration = Duration::from_millis(100);

enum Event {
    Driver(ToExecutor),
    DriverLost(String),
    Shuffle(MapOutput),
}

type DriverLink = Arc<Mutex<BufWriter<TcpStream>>>;

/// Runs executor `id` of the driver at `driver` with the run's `secrets` until the driver says
/// stop (`Ok`) or is lost.
pub fn run(driver: SocketAddr, id: usize, job: Box<dyn Job>, secrets: Secrets) -> Result<(), Error> {
    let (tx, rx) = mpsc::channel();
    let limits = WireLimits::of(job.as_ref());
    let incidents = Arc::new(Incidents::new(format!("moirai micro-batch-executor {id}")));
    let listener = TcpListener::bind("127.0.0.1:0").map_err(|e| Error::Io("bind the shuffle port".into(), e))?;
    let shuffle_addr = listener.local_addr().map_err(|e| Error::Io("read the shuffle port".into(), e))?;
    let gate = Gate::new(listener, vec![secrets.shuffle.clone()])
        .map_err(|e| Error::Io("configure the shuffle port".into(), e))?;
    // Until the driver says how many executors there are: as many as a run may have.
    let max_peers = Arc::new(AtomicUsize::new(limits::max_peers(limits::MAX_EXECUTORS)));
    spawn_shuffle_acceptor(gate, tx.clone(), limits, max_peers.clone(), incidents);

    let mut stream =
        TcpStream::connect(driver).map_err(|e| Error::Io(format!("connect to the driver at {driver}"), e))?;
    let _ = stream.set_nodelay(true);
    stream.write_all(&secrets.link.proof()).map_err(|e| Error::Io("prove this executor to the driver".into(), e))?;
    let reader = stream.try_clone().map_err(|e| Error::Io("clone the driver connection".into(), e))?;
    let _ = reader.set_read_timeout(Some(STALL_TIMEOUT));
    let link: DriverLink = Arc::new(Mutex::new(BufWriter::new(stream)));
    let shape = [job.batches(), job.map_partitions() as u64, job.reduce_partitions() as u64];
    report(&link, &ToDriver::Hello { id, shuffle_addr: shuffle_addr.to_string(), job: shape })?;
    std::thread::spawn(move || {
        let mut reader = BufReader::new(reader);
        loop {
            let event = match receive::<ToExecutor>(&mut reader, limits.control) {
                Ok(Some(m)) => Event::Driver(m),
                Ok(None) => Event::DriverLost("the driver closed the connection".into()),
                Err(e) => Event::DriverLost(format!("reading from the driver: {e}")),
            };
            let lost = matches!(event, Event::DriverLost(_));
            if tx.send(event).is_err() || lost {
                return;
            }
        }
    });
    let heartbeat = link.clone();
    std::thread::spawn(move || loop {
        std::thread::sleep(HEARTBEAT);
        if report(&heartbeat, &ToDriver::Heartbeat).is_err() {
            return;
        }
    });

    let mut executor = Executor::new(id, job, link, secrets, limits, max_peers);
    let result = executor.run(rx);
    if let Err(e) = &result {
        // The driver hears why before the connection ends (it may be gone already).
        let _ = report(&executor.link, &ToDriver::Failed { message: e.to_string() });
    }
    result
}

/// Admits shuffle connections that prove the run's token, at most `max_peers` at once, and
/// reads each on a thread of its own; reports every refusal and every connection a peer broke.
fn spawn_shuffle_acceptor(
    mut gate: Gate,
    tx: Sender<Event>,
    limits: WireLimits,
    max_peers: Arc<AtomicUsize>,
    incidents: Arc<Incidents>,
) {
    let open = Arc::new(AtomicUsize::new(0));
    std::thread::spawn(move || loop {
        let admitted = gate.next(Duration::from_secs(1));
        let (refused, more) = gate.take_refused();
        for (i, (peer, why)) in refused.iter().enumerate() {
            let count = if i + 1 == refused.len() { 1 + more } else { 1 };
            incidents.report_many(&format!("refused a shuffle connection from {peer}: {why}"), count);
        }
        let Some(a) = admitted else { continue };
        let cap = max_peers.load(Ordering::SeqCst);
        if open.load(Ordering::SeqCst) >= cap {
            incidents.report(&format!(
                "refused a shuffle connection from {}: {cap} connections of the run's executors are open already",
                a.peer
            ));
            continue;
        }
        open.fetch_add(1, Ordering::SeqCst);
        let (tx, open, incidents) = (tx.clone(), open.clone(), incidents.clone());
        std::thread::spawn(move || {
            let _ = a.stream.set_read_timeout(Some(STALL_TIMEOUT));
            let mut reader = BufReader::new(a.stream);
            loop {
                match receive::<MapOutput>(&mut reader, limits.shuffle) {
                    Ok(Some(m)) => {
                        if tx.send(Event::Shuffle(m)).is_err() {
                            break;
                        }
                    }
                    // A peer that dies ends its stream; what it sent before stays valid.
                    Ok(None) => break,
                    Err(e) => {
                        if protocol::is_violation(&e) {
                            incidents.report(&format!("closed the shuffle connection from {}: {e}", a.peer));
                        }
                        break;
                    }
                }
            }
            open.fetch_sub(1, Ordering::SeqCst);
        });
    });
}

/// Bytes of a report besides its tasks' payloads, and of one task besides its payload.
const REPORT_SLACK: usize = 1024;
const COMPLETION_SLACK: usize = 256;

/// A message this executor will not send: longer than the wire's limit, which its receiver would
/// refuse. The run fails with the bound named rather than lose the message.
fn too_long(what: &str, bytes: usize, limit: usize) -> Error {
    Error::Protocol(format!(
        "a {what} of {bytes} bytes is longer than the wire's limit of {limit} bytes, derived from the job's rate, \
         batch interval, partitions and window; a shorter --batch-interval or more --parallelism makes messages \
         smaller"
    ))
}

/// A sink output as the JSON text the driver commits.
fn raw(output: &Value) -> Result<Box<serde_json::value::RawValue>, Error> {
    serde_json::value::to_raw_value(output)
        .map_err(|e| Error::Protocol(format!("a task output cannot be written as JSON: {e}")))
}

fn report(link: &DriverLink, message: &ToDriver) -> Result<(), Error> {
    let mut w = link.lock().unwrap_or_else(|e| e.into_inner());
    send(&mut *w, message).map_err(|e| Error::Io("write to the driver".into(), e))
}

struct Executor {
    id: usize,
    job: Box<dyn Job>,
    link: DriverLink,
    secrets: Secrets,
    limits: WireLimits,
    /// The cap on shuffle connections, set once the driver says how many executors there are.
    max_peers: Arc<AtomicUsize>,
    epoch: u64,
    peers: Vec<String>,
    /// Shuffle connections to the other executors, opened on first use.
    shuffle: Vec<Option<BufWriter<TcpStream>>>,
    /// Start of micro-batch 0; `None` = unpaced.
    origin: Option<SystemTime>,
    maps: VecDeque<MapTask>,
    /// Pre-scheduled (or just scheduled) reduce tasks, in micro-batch order.
    reduces: Vec<ReduceTask>,
    reducers: Vec<usize>,
    /// Map outputs received, by (micro-batch, reduce partition), one slot per map partition.
    inputs: FxHashMap<(u64, usize), Vec<Option<Value>>>,
    /// Map outputs of a later epoch than the one this executor has been told of yet.
    later: Vec<MapOutput>,
    /// Tasks finished and not yet reported: reported together when the executor runs out of
    /// ready work.
    completed: Vec<Completion>,
    busy: Duration,
    wait: Duration,
}

impl Executor {
    fn new(
        id: usize,
        job: Box<dyn Job>,
        link: DriverLink,
        secrets: Secrets,
        limits: WireLimits,
        max_peers: Arc<AtomicUsize>,
    ) -> Self {
        Executor {
            id,
            job,
            link,
            secrets,
            limits,
            max_peers,
            epoch: 0,
            peers: Vec::new(),
            shuffle: Vec::new(),
            origin: None,
            maps: VecDeque::new(),
            reduces: Vec::new(),
            reducers: Vec::new(),
            inputs: FxHashMap::default(),
            later: Vec::new(),
            completed: Vec::new(),
            busy: Duration::ZERO,
            wait: Duration::ZERO,
        }
    }

    fn run(&mut self, rx: Receiver<Event>) -> Result<(), Error> {
        loop {
            while let Ok(event) = rx.try_recv() {
                if self.handle(event)? {
                    return Ok(());
                }
            }
            if let Some(i) = self.ready_reduce() {
                let task = self.reduces.remove(i);
                self.reduce(task)?;
                continue;
            }
            let due = self.maps.front().map(|t| self.due(t.batch));
            let timeout = match due {
                Some(None) => {
                    let task = self.maps.pop_front().expect("a front task");
                    self.map(task)?;
                    continue;
                }
                Some(Some(wait)) => wait.min(Duration::from_millis(50)),
                None => Duration::from_secs(1),
            };
            // Out of ready work: what ran since the last wait goes out now, in one report and
            // one flush per shuffle connection.
            self.flush()?;
            let start = Instant::now();
            let event = rx.recv_timeout(timeout);
            if due.is_some() {
                // Idle with a micro-batch whose interval has not passed: waiting for input.
                self.wait += start.elapsed();
            }
            match event {
                Ok(event) => {
                    if self.handle(event)? {
                        return Ok(());
                    }
                }
                Err(RecvTimeoutError::Timeout) => {}
                Err(RecvTimeoutError::Disconnected) => return Err(Error::Protocol("every input thread ended".into())),
            }
        }
    }

    /// How long until micro-batch `batch`'s interval has passed (`None`: it has).
    fn due(&self, batch: u64) -> Option<Duration> {
        let origin = self.origin?;
        let end = origin + Duration::from_millis((batch + 1) * self.job.interval_ms());
        end.duration_since(SystemTime::now()).ok().filter(|d| !d.is_zero())
    }

    /// Handles one event; `true` when the driver said stop.
    fn handle(&mut self, event: Event) -> Result<bool, Error> {
        match event {
            Event::DriverLost(why) => return Err(Error::Protocol(why)),
            Event::Shuffle(output) => self.receive(output),
            Event::Driver(ToExecutor::Stop) => return Ok(true),
            Event::Driver(ToExecutor::Setup { peers, origin_unix_ns }) => {
                self.max_peers.store(limits::max_peers(peers.len()), Ordering::SeqCst);
                self.shuffle = peers.iter().map(|_| None).collect();
                self.peers = peers;
                self.origin = (origin_unix_ns > 0).then(|| UNIX_EPOCH + Duration::from_nanos(origin_unix_ns));
            }
            Event::Driver(ToExecutor::Tasks { epoch, map, reduce, reducers }) => {
                if epoch == self.epoch {
                    self.maps.extend(map);
                    self.reduces.extend(reduce);
                    self.reduces.sort_by_key(|t| t.batch);
                    self.reducers = reducers;
                }
            }
            Event::Driver(ToExecutor::Restore { epoch, states }) => {
                self.epoch = epoch;
                self.maps.clear();
                self.reduces.clear();
                self.inputs.clear();
                self.completed.clear();
                self.job.restore(states)?;
                for output in std::mem::take(&mut self.later) {
                    self.receive(output);
                }
            }
        }
        Ok(false)
    }

    /// A map output arrived: keep it for its reduce task (or for a later epoch).
    fn receive(&mut self, output: MapOutput) {
        if output.epoch > self.epoch {
            self.later.push(output);
        } else if output.epoch == self.epoch {
            let maps = self.job.map_partitions();
            let slots = self.inputs.entry((output.batch, output.reduce_partition)).or_insert_with(|| vec![None; maps]);
            if let Some(slot) = slots.get_mut(output.map_partition) {
                *slot = Some(output.data);
            }
        }
    }

    /// The first reduce task whose inputs are all here and that has no earlier micro-batch of
    /// its partition still waiting (a partition's state is updated in micro-batch order).
    fn ready_reduce(&self) -> Option<usize> {
        let mut seen = Vec::new();
        for (i, task) in self.reduces.iter().enumerate() {
            if seen.contains(&task.partition) {
                continue;
            }
            seen.push(task.partition);
            let complete =
                self.inputs.get(&(task.batch, task.partition)).is_some_and(|slots| slots.iter().all(Option::is_some));
            if complete {
                return Some(i);
            }
        }
        None
    }

    /// Runs a map task. Its time (`busy`) includes writing its output — the sink's JSON text,
    /// or the shuffle's buckets encoded for their owners — as a task's output write is part of
    /// the task in Spark and Drizzle; sending the bytes is not.
    fn map(&mut self, task: MapTask) -> Result<(), Error> {
        let start = Instant::now();
        let mut buckets = self.job.map(task.batch, task.partition)?;
        if self.job.reduce_partitions() == 0 {
            let output = buckets.pop().map(|v| raw(&v)).transpose()?;
            self.busy += start.elapsed();
            self.completed.push(Completion::Map { task, output });
            return Ok(());
        }
        let mut pushes = Vec::new();
        for (r, data) in buckets.into_iter().enumerate() {
            let output = MapOutput {
                epoch: self.epoch,
                batch: task.batch,
                map_partition: task.partition,
                reduce_partition: r,
                data,
            };
            let owner = self.reducers.get(r).copied().ok_or_else(|| {
                Error::Protocol(format!("reduce partition {r} has no owner in the driver's decision"))
            })?;
            if owner == self.id {
                self.receive(output);
            } else {
                let line = protocol::encode(&output)
                    .map_err(|e| Error::Protocol(format!("a map output cannot be written as JSON: {e}")))?;
                if line.len() > self.limits.shuffle {
                    return Err(too_long("map output", line.len(), self.limits.shuffle));
                }
                pushes.push((owner, line));
            }
        }
        self.busy += start.elapsed();
        for (owner, line) in pushes {
            self.push(owner, &line);
        }
        self.completed.push(Completion::Map { task, output: None });
        Ok(())
    }

    /// Pushes a map output to executor `owner` (buffered: it leaves at the latest when this
    /// executor next waits). A failed push is dropped: the owner is dead, and the driver will
    /// notice (heartbeat) and replay from the checkpoint.
    fn push(&mut self, owner: usize, line: &[u8]) {
        let Some(slot) = self.shuffle.get_mut(owner) else { return };
        if slot.is_none() {
            if let Ok(mut s) = TcpStream::connect(&self.peers[owner]) {
                let _ = s.set_nodelay(true);
                // The proof goes out at once: the owner waits for it only a few seconds, and the
                // buffered map outputs may wait until this executor runs out of work.
                if s.write_all(&self.secrets.shuffle.proof()).is_ok() {
                    *slot = Some(BufWriter::new(s));
                }
            }
        }
        if let Some(w) = slot {
            if w.write_all(line).is_err() {
                *slot = None;
            }
        }
    }

    /// Sends the tasks finished since the last report to the driver, and flushes the pushes.
    fn flush(&mut self) -> Result<(), Error> {
        for slot in &mut self.shuffle {
            if slot.as_mut().is_some_and(|w| w.flush().is_err()) {
                *slot = None;
            }
        }
        if self.completed.is_empty() {
            return Ok(());
        }
        // As few reports as fit the wire's limit (the times go with the first).
        let (mut busy_ns, mut wait_ns) = self.take_times();
        let budget = self.limits.report.saturating_sub(REPORT_SLACK);
        let mut tasks = std::mem::take(&mut self.completed).into_iter().peekable();
        while tasks.peek().is_some() {
            let mut chunk = Vec::new();
            let mut size = 0;
            while let Some(c) = tasks.peek() {
                let bytes = c.payload() + COMPLETION_SLACK;
                if !chunk.is_empty() && size + bytes > budget {
                    break;
                }
                if bytes > budget {
                    return Err(too_long("task report", bytes, budget));
                }
                size += bytes;
                chunk.extend(tasks.next());
            }
            let message = ToDriver::Completed { epoch: self.epoch, tasks: chunk, busy_ns, wait_ns };
            report(&self.link, &message)?;
            (busy_ns, wait_ns) = (0, 0);
        }
        Ok(())
    }

    /// Runs a reduce task; its time includes writing its output for the sink (and its state, when
    /// it checkpoints).
    fn reduce(&mut self, task: ReduceTask) -> Result<(), Error> {
        let start = Instant::now();
        let inputs = self.inputs.remove(&(task.batch, task.partition)).unwrap_or_default();
        let output = self.job.reduce(task.batch, task.partition, inputs.into_iter().flatten().collect())?;
        let state = task.checkpoint.then(|| raw(&self.job.checkpoint(task.partition))).transpose()?;
        let output = raw(&output)?;
        self.busy += start.elapsed();
        self.completed.push(Completion::Reduce { task, output, state });
        Ok(())
    }

    fn take_times(&mut self) -> (u64, u64) {
        let times = (self.busy.as_nanos() as u64, self.wait.as_nanos() as u64);
        (self.busy, self.wait) = (Duration::ZERO, Duration::ZERO);
        times
    }
}

//! The driver: starts the executor processes, schedules the tasks of every micro-batch on them,
//! commits the reduce outputs (the sink), keeps the checkpoints, and recovers from a lost
//! executor.
//!
//! - **Per-batch scheduling** (Spark Streaming): for every micro-batch, one decision for its map
//!   stage, a barrier (every map task reported done), one decision for its reduce stage, a barrier.
//!   Two scheduling round trips per micro-batch.
//! - **Group scheduling** (Drizzle §3.1): one decision hands out the map *and* reduce tasks of G
//!   micro-batches; the reduce tasks are **pre-scheduled** (§3.2): placed in advance, they start
//!   when their map outputs arrive from the other executors, without the driver. The only barrier
//!   is at the end of the group, where the reduce partitions' state is checkpointed. With
//!   `GroupSize::Auto` the [`Aimd`] controller sets G from the measured coordination overhead.
//! - **Exactly-once sink**: the output of reduce task (micro-batch, partition) is committed once;
//!   a replayed task's output (identical, the job being deterministic) is not committed again.
//! - **Recovery**: an executor whose connection ends or whose heartbeats stop for
//!   `heartbeat_timeout` is lost. The driver kills it (by PID), starts a new epoch, moves its
//!   reduce partitions to the remaining executors, restores every reduce partition's state from
//!   the last checkpoint and replays the micro-batches after it.

use std::collections::BTreeMap;
use std::io::Write;
use std::path::PathBuf;
use std::sync::mpsc::{Receiver, RecvTimeoutError};
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

use serde::Serialize;
use serde_json::value::RawValue;
use serde_json::Value;

use crate::aimd::{Aimd, AimdConfig};
use crate::job::Job;
use crate::launch::{self, Event, Executors, Link, Started};
use crate::limits::{WireLimits, MAX_EXECUTORS};
use crate::protocol::{encode, Completion, MapTask, ReduceTask, ToDriver, ToExecutor};
pub use crate::report::{Recovery, RunReport, TimedChange};
use crate::Error;

/// How tasks are handed out.
#[derive(Clone, Copy, Debug, PartialEq, Serialize)]
#[serde(rename_all = "kebab-case")]
pub enum Scheduling {
    /// A decision and a barrier per stage per micro-batch.
    PerBatch,
    /// One decision per group of micro-batches, reduce tasks pre-scheduled.
    Group(GroupSize),
}

/// The group size of group scheduling.
#[derive(Clone, Copy, Debug, PartialEq, Serialize)]
#[serde(rename_all = "kebab-case")]
pub enum GroupSize {
    /// Always G micro-batches.
    Fixed(u64),
    /// Tuned by AIMD.
    Auto(AimdConfig),
}

/// Kill an executor (SIGKILL, as `kill -9`) once a micro-batch has been committed: the failure of
/// the recovery tests and benchmark.
#[derive(Clone, Copy, Debug, PartialEq, Serialize)]
pub struct KillAt {
    /// The executor's id.
    pub executor: usize,
    /// After this micro-batch is committed.
    pub batch: u64,
}

/// Settings of the driver.
#[derive(Clone, Debug)]
pub struct DriverConfig {
    /// Executor processes.
    pub executors: usize,
    /// Per-batch or group scheduling.
    pub scheduling: Scheduling,
    /// The executable started as executor (`moirai`, with the hidden `micro-batch-executor`).
    pub program: PathBuf,
    /// The job's description as the executor's command line after `--` (the workload and its
    /// arguments); executors rebuild the job from it.
    pub job_args: Vec<String>,
    /// Start a micro-batch's tasks when its interval has passed (`false`: as soon as scheduled,
    /// to measure time per micro-batch).
    pub paced: bool,
    /// An executor silent this long is lost.
    pub heartbeat_timeout: Duration,
    /// Checkpoint at the first group boundary at least this many micro-batches after the last
    /// checkpoint (under group scheduling with G >= this: every group; under per-batch
    /// scheduling: every this many micro-batches), and after the last micro-batch.
    pub checkpoint_every: u64,
    /// Fault injection.
    pub kill: Option<KillAt>,
    /// Log decisions, group changes and recoveries on stderr.
    pub verbose: bool,
}

impl DriverConfig {
    /// Checks the settings; the error names the flag to fix.
    pub fn validate(&self) -> Result<(), Error> {
        if !(1..=MAX_EXECUTORS).contains(&self.executors) {
            return Err(Error::Config(format!("--executors {} must be in 1..={MAX_EXECUTORS}", self.executors)));
        }
        match self.scheduling {
            Scheduling::Group(GroupSize::Fixed(g)) if !(1..=100_000).contains(&g) => {
                return Err(Error::Config(format!("--group {g} must be in 1..=100000, or auto")))
            }
            Scheduling::Group(GroupSize::Auto(a)) => a.validate().map_err(Error::Config)?,
            _ => {}
        }
        if self.checkpoint_every == 0 {
            return Err(Error::Config("checkpoint interval must be >= 1 micro-batch".into()));
        }
        if let Some(k) = self.kill {
            if k.executor >= self.executors {
                return Err(Error::Config(format!(
                    "cannot kill executor {}: there are {} (ids 0..{})",
                    k.executor, self.executors, self.executors
                )));
            }
        }
        Ok(())
    }
}

/// Runs `job` on executor processes as `config` says.
pub fn run(config: &DriverConfig, job: &dyn Job) -> Result<RunReport, Error> {
    config.validate()?;
    let mut driver = Driver::start(config, job)?;
    let result = driver.schedule();
    driver.stop();
    result
}

struct Driver<'a> {
    config: &'a DriverConfig,
    /// The job, for merging incremental checkpoints.
    job: &'a dyn Job,
    batches: u64,
    interval_ms: u64,
    maps: usize,
    reduces: usize,
    /// Partitions whose outputs the sink commits per micro-batch: the reduce partitions, or the
    /// map partitions of a single-stage job.
    sinks: usize,
    links: Vec<Option<Link>>,
    events: Receiver<Event>,
    epoch: u64,
    origin: SystemTime,
    start: Instant,
    last_pump: Instant,
    decisions: u64,
    /// Last checkpoint: the micro-batch it follows, and every reduce partition's state.
    checkpoint: (Option<u64>, Vec<Value>),
    /// States reported for the checkpoint being taken.
    taking: BTreeMap<usize, Value>,
    outputs: BTreeMap<(u64, usize), Box<RawValue>>,
    /// Reduce partitions committed per micro-batch, and the commit time of complete ones.
    committed: BTreeMap<u64, usize>,
    commit_ms: BTreeMap<u64, f64>,
    maps_left: usize,
    reduces_left: usize,
    /// Busy and input-wait time reported per executor in the current group, ns.
    work: Vec<(u64, u64)>,
    killed: bool,
    /// CPU time of each process at the run's start and at its last reading (driver last), ns.
    cpu: Vec<(u64, u64)>,
    report: RunReport,
    /// The wire's message limits.
    limits: WireLimits,
}

impl<'a> Driver<'a> {
    fn start(config: &'a DriverConfig, job: &'a dyn Job) -> Result<Self, Error> {
        let limits = WireLimits::of(job);
        let executors = Executors { program: &config.program, job_args: &config.job_args, executors: config.executors };
        let Started { links, peers, events } = launch::start(executors, job, limits)?;
        // Micro-batch 0 starts a little after setup, so that every executor has its clock.
        let origin = SystemTime::now() + Duration::from_millis(20);
        let origin_unix_ns =
            if config.paced { origin.duration_since(UNIX_EPOCH).map_or(1, |d| d.as_nanos() as u64) } else { 0 };
        let (maps, reduces) = (job.map_partitions(), job.reduce_partitions());
        let mut driver = Driver {
            config,
            job,
            batches: job.batches(),
            interval_ms: job.interval_ms(),
            maps,
            reduces,
            sinks: if reduces == 0 { maps } else { reduces },
            links,
            events,
            epoch: 0,
            origin,
            start: Instant::now(),
            last_pump: Instant::now(),
            decisions: 0,
            checkpoint: (None, vec![Value::Null; reduces]),
            taking: BTreeMap::new(),
            outputs: BTreeMap::new(),
            committed: BTreeMap::new(),
            commit_ms: BTreeMap::new(),
            maps_left: 0,
            reduces_left: 0,
            work: vec![(0, 0); config.executors],
            killed: false,
            cpu: vec![(0, 0); config.executors + 1],
            report: RunReport {
                batches: job.batches(),
                decisions: 0,
                groups: 0,
                wall_ms: 0.0,
                commit_ms: Vec::new(),
                overheads: Vec::new(),
                compute_ms: 0.0,
                coordination_ms: 0.0,
                decision_ms: 0.0,
                group_sizes: Vec::new(),
                group_changes: Vec::new(),
                recoveries: Vec::new(),
                cpu_ns: 0,
                outputs: BTreeMap::new(),
            },
            limits,
        };
        for id in 0..config.executors {
            driver.send(id, &ToExecutor::Setup { peers: peers.clone(), origin_unix_ns })?;
        }
        Ok(driver)
    }

    fn live(&self) -> Vec<usize> {
        (0..self.links.len()).filter(|&i| self.links[i].is_some()).collect()
    }

    fn ms_since_start(&self) -> f64 {
        self.start.elapsed().as_secs_f64() * 1e3
    }

    /// Sends to executor `id`; a failed send is noticed as its loss by the next pump. A message
    /// longer than the wire's limit is not sent (the executor would refuse it): an error.
    fn send(&mut self, id: usize, message: &ToExecutor) -> Result<(), Error> {
        let line = encode(message).map_err(|e| Error::Protocol(format!("a message cannot be written: {e}")))?;
        if line.len() > self.limits.control {
            return Err(self.too_long(id, line.len()));
        }
        self.send_line(id, &line);
        Ok(())
    }

    /// A message to executor `id` that the wire's limit does not allow (it would be refused).
    fn too_long(&self, id: usize, bytes: usize) -> Error {
        Error::Protocol(format!(
            "a message to executor {id} of {bytes} bytes is longer than the wire's limit of {} bytes, derived from \
             the job's rate, batch interval, partitions and window",
            self.limits.control
        ))
    }

    fn send_line(&mut self, id: usize, line: &[u8]) {
        if let Some(link) = self.links[id].as_mut() {
            if link.writer.write_all(line).and_then(|()| link.writer.flush()).is_err() {
                link.last_seen = Instant::now() - self.config.heartbeat_timeout * 2;
            }
        }
    }

    /// Sends executor `id` its part of a decision: one message, or as many as the wire's limit
    /// needs (halves, in order; the executor adds each to its queues).
    fn send_tasks(
        &mut self,
        id: usize,
        map: Vec<MapTask>,
        reduce: Vec<ReduceTask>,
        reducers: &[usize],
    ) -> Result<(), Error> {
        let tasks = ToExecutor::Tasks { epoch: self.epoch, map, reduce, reducers: reducers.to_vec() };
        let line = encode(&tasks).map_err(|e| Error::Protocol(format!("a decision cannot be written: {e}")))?;
        let ToExecutor::Tasks { mut map, mut reduce, .. } = tasks else { unreachable!("built above") };
        if line.len() <= self.limits.control {
            self.send_line(id, &line);
            return Ok(());
        }
        if map.len() + reduce.len() <= 1 {
            return Err(self.too_long(id, line.len()));
        }
        let (map_rest, reduce_rest) = (map.split_off(map.len() / 2), reduce.split_off(reduce.len() / 2));
        self.send_tasks(id, map, reduce, reducers)?;
        self.send_tasks(id, map_rest, reduce_rest, reducers)
    }

    /// Owner of each reduce partition among the live executors.
    fn reducers(&self) -> Vec<usize> {
        let live = self.live();
        (0..self.reduces).map(|r| live[r % live.len()]).collect()
    }

    fn schedule(&mut self) -> Result<RunReport, Error> {
        let mut aimd = match self.config.scheduling {
            Scheduling::Group(GroupSize::Auto(a)) => Some(Aimd::new(a)),
            _ => None,
        };
        self.start = Instant::now();
        self.read_cpu(true);
        let mut next = 0;
        while next < self.batches {
            let group = match self.config.scheduling {
                Scheduling::PerBatch => 1,
                Scheduling::Group(GroupSize::Fixed(g)) => g,
                Scheduling::Group(GroupSize::Auto(_)) => aimd.as_ref().map_or(1, Aimd::group),
            };
            let end = (next + group).min(self.batches);
            let started = Instant::now();
            let outcome = match self.config.scheduling {
                Scheduling::PerBatch => self.run_batch(next),
                Scheduling::Group(_) => self.run_group(next, end),
            }?;
            if let Some(lost) = outcome {
                next = self.recover(lost)?;
                continue;
            }
            self.report.groups += 1;
            self.report.group_sizes.push(end - next);
            self.read_cpu(false);
            let overhead = self.overhead(started.elapsed());
            self.report.overheads.push(overhead);
            if let Some(change) = aimd.as_mut().and_then(|a| a.observe(overhead)) {
                let at_ms = self.ms_since_start();
                if self.config.verbose {
                    eprintln!(
                        "micro-batch: at {:.1} s, coordination overhead {:.3}: group {} -> {}",
                        at_ms / 1e3,
                        change.overhead,
                        change.from,
                        change.to
                    );
                }
                self.report.group_changes.push(TimedChange { at_ms, change });
            }
            next = end;
        }
        self.report.wall_ms = self.ms_since_start();
        self.read_cpu(false);
        self.report.cpu_ns = self.cpu.iter().map(|(start, last)| last.saturating_sub(*start)).sum();
        self.report.decisions = self.decisions;
        self.report.commit_ms = self.commit_ms.values().copied().collect();
        self.report.outputs = std::mem::take(&mut self.outputs);
        Ok(self.report.clone())
    }

    /// Reads the CPU time of the live executors and of the driver (at the start: both readings).
    fn read_cpu(&mut self, start: bool) {
        let pids = self.links.iter().map(|l| l.as_ref().map(|l| l.process.pid()));
        let pids = pids.chain([Some(std::process::id())]);
        for (reading, pid) in self.cpu.iter_mut().zip(pids.collect::<Vec<_>>()) {
            if let Some(ns) = pid.and_then(|pid| moirai_os::proc::process_cpu_ns(pid).ok()) {
                if start {
                    reading.0 = ns;
                }
                reading.1 = ns;
            }
        }
    }

    /// The group's coordination overhead: the share of its wall time the most occupied executor
    /// spent neither running tasks nor waiting for a micro-batch's input.
    fn overhead(&mut self, wall: Duration) -> f64 {
        let wall_ns = wall.as_nanos().max(1) as f64;
        let live = self.live();
        let compute = live.iter().map(|&e| self.work[e].0).max().unwrap_or(0) as f64;
        let coordination = live
            .iter()
            .map(|&e| (wall_ns - self.work[e].0 as f64 - self.work[e].1 as f64).max(0.0))
            .fold(wall_ns, f64::min);
        self.report.compute_ms += compute / 1e6;
        self.report.coordination_ms += coordination / 1e6;
        let overhead = live
            .iter()
            .map(|&e| {
                let (busy, wait) = self.work[e];
                ((wall_ns - busy as f64 - wait as f64) / wall_ns).clamp(0.0, 1.0)
            })
            .fold(1.0, f64::min);
        self.work.iter_mut().for_each(|w| *w = (0, 0));
        overhead
    }

    /// Per-batch scheduling of micro-batch `b`: map stage, barrier, reduce stage, barrier.
    fn run_batch(&mut self, b: u64) -> Result<Option<usize>, Error> {
        if self.config.paced {
            let due = self.origin + Duration::from_millis((b + 1) * self.interval_ms);
            while let Ok(left) = due.duration_since(SystemTime::now()) {
                if let Some(lost) = self.pump(left.min(Duration::from_millis(50)))? {
                    return Ok(Some(lost));
                }
            }
        }
        let decided = Instant::now();
        let live = self.live();
        let reducers = self.reducers();
        self.maps_left = self.maps;
        for &e in &live {
            let map = (0..self.maps)
                .filter(|m| live[m % live.len()] == e)
                .map(|partition| MapTask { batch: b, partition })
                .collect();
            self.send_tasks(e, map, Vec::new(), &reducers)?;
        }
        self.decisions += 1;
        self.report.decision_ms += decided.elapsed().as_secs_f64() * 1e3;
        while self.maps_left > 0 {
            if let Some(lost) = self.pump(Duration::from_millis(50))? {
                return Ok(Some(lost));
            }
        }
        let checkpoint = self.checkpoint_due(b + 1);
        if self.reduces == 0 {
            return self.finish_group(checkpoint.then_some(b));
        }
        let decided = Instant::now();
        self.reduces_left = self.reduces;
        for &e in &live {
            let reduce = (0..self.reduces)
                .filter(|&r| reducers[r] == e)
                .map(|partition| ReduceTask { batch: b, partition, checkpoint })
                .collect();
            self.send_tasks(e, Vec::new(), reduce, &reducers)?;
        }
        self.decisions += 1;
        self.report.decision_ms += decided.elapsed().as_secs_f64() * 1e3;
        self.finish_group(checkpoint.then_some(b))
    }

    /// Group scheduling of micro-batches `from..to`: one decision, reduce tasks pre-scheduled.
    fn run_group(&mut self, from: u64, to: u64) -> Result<Option<usize>, Error> {
        let decided = Instant::now();
        let live = self.live();
        let reducers = self.reducers();
        let checkpoint = self.checkpoint_due(to);
        for &e in &live {
            let mut map = Vec::new();
            let mut reduce = Vec::new();
            for b in from..to {
                map.extend(
                    (0..self.maps)
                        .filter(|m| live[m % live.len()] == e)
                        .map(|partition| MapTask { batch: b, partition }),
                );
                reduce.extend((0..self.reduces).filter(|&r| reducers[r] == e).map(|partition| ReduceTask {
                    batch: b,
                    partition,
                    checkpoint: checkpoint && b + 1 == to,
                }));
            }
            self.send_tasks(e, map, reduce, &reducers)?;
        }
        self.decisions += 1;
        self.report.decision_ms += decided.elapsed().as_secs_f64() * 1e3;
        // With a shuffle the reduce tasks' completions end the group (map tasks' are counted
        // only for the overhead); a single stage ends with its map tasks.
        let batches = (to - from) as usize;
        self.maps_left = if self.reduces == 0 { batches * self.maps } else { 0 };
        self.reduces_left = batches * self.reduces;
        self.finish_group(checkpoint.then_some(to - 1))
    }

    /// Whether the group boundary before micro-batch `next` takes a checkpoint.
    fn checkpoint_due(&self, next: u64) -> bool {
        let since = next - self.checkpoint.0.map_or(0, |b| b + 1);
        since >= self.config.checkpoint_every || next == self.batches
    }

    /// Waits for the outstanding tasks; takes the checkpoint after `checkpoint`.
    fn finish_group(&mut self, checkpoint: Option<u64>) -> Result<Option<usize>, Error> {
        while self.reduces_left > 0 || self.maps_left > 0 {
            if let Some(lost) = self.pump(Duration::from_millis(50))? {
                return Ok(Some(lost));
            }
        }
        if let Some(b) = checkpoint {
            let taken = std::mem::take(&mut self.taking);
            if taken.len() != self.reduces {
                return Err(Error::Protocol(format!("checkpoint after micro-batch {b} misses partitions")));
            }
            // A partition's checkpoint may hold only what changed since its previous one.
            let mut states = Vec::with_capacity(self.reduces);
            for (r, next) in taken {
                let previous = std::mem::take(&mut self.checkpoint.1[r]);
                states.push(self.job.merge_checkpoint(r, previous, next)?);
            }
            self.checkpoint = (Some(b), states);
        }
        Ok(None)
    }

    /// Handles events for up to `timeout`; returns an executor found lost.
    fn pump(&mut self, timeout: Duration) -> Result<Option<usize>, Error> {
        // A driver that was paused (SIGSTOP) must not blame its executors for its own silence.
        if self.last_pump.elapsed() > self.config.heartbeat_timeout / 2 {
            self.links.iter_mut().flatten().for_each(|l| l.last_seen = Instant::now());
        }
        let event = self.events.recv_timeout(timeout);
        self.last_pump = Instant::now();
        match event {
            Ok(Event::Closed(id, why)) => {
                if self.links[id].is_some() {
                    if self.config.verbose {
                        eprintln!("micro-batch: executor {id} lost: {why}");
                    }
                    return Ok(Some(id));
                }
            }
            Ok(Event::Message(id, message)) => {
                if let Some(link) = self.links[id].as_mut() {
                    link.last_seen = Instant::now();
                }
                self.message(id, message)?;
            }
            Err(RecvTimeoutError::Timeout) => {}
            Err(RecvTimeoutError::Disconnected) => {
                return Err(Error::Protocol("every executor connection ended".into()))
            }
        }
        let timeout = self.config.heartbeat_timeout;
        if let Some(id) =
            (0..self.links.len()).find(|&i| self.links[i].as_ref().is_some_and(|l| l.last_seen.elapsed() > timeout))
        {
            if self.config.verbose {
                eprintln!("micro-batch: executor {id} lost: no heartbeat for {timeout:?}");
            }
            return Ok(Some(id));
        }
        Ok(None)
    }

    fn message(&mut self, id: usize, message: ToDriver) -> Result<(), Error> {
        match message {
            ToDriver::Heartbeat | ToDriver::Hello { .. } => {}
            ToDriver::Failed { message } => return Err(Error::Protocol(format!("executor {id} failed: {message}"))),
            ToDriver::Completed { epoch, tasks, busy_ns, wait_ns } => {
                if epoch != self.epoch {
                    return Ok(());
                }
                self.work[id].0 += busy_ns;
                self.work[id].1 += wait_ns;
                for completion in tasks {
                    match completion {
                        Completion::Map { task, output } => {
                            self.maps_left = self.maps_left.saturating_sub(1);
                            if let Some(output) = output {
                                self.commit(task.batch, task.partition, output);
                            }
                        }
                        Completion::Reduce { task, output, state } => {
                            self.reduces_left = self.reduces_left.saturating_sub(1);
                            if let Some(state) = state {
                                let state = serde_json::from_str(state.get()).map_err(|e| {
                                    Error::Protocol(format!("executor {id} sent a bad checkpoint: {e}"))
                                })?;
                                self.taking.insert(task.partition, state);
                            }
                            self.commit(task.batch, task.partition, output);
                        }
                    }
                }
            }
        }
        Ok(())
    }

    /// The sink: commits a reduce task's output once per (micro-batch, partition).
    fn commit(&mut self, batch: u64, partition: usize, output: Box<RawValue>) {
        if self.outputs.contains_key(&(batch, partition)) {
            return;
        }
        self.outputs.insert((batch, partition), output);
        let done = self.committed.entry(batch).or_insert(0);
        *done += 1;
        if *done < self.sinks {
            return;
        }
        let ms = if self.config.paced {
            let due = self.origin + Duration::from_millis((batch + 1) * self.interval_ms);
            SystemTime::now().duration_since(due).map_or(0.0, |d| d.as_secs_f64() * 1e3)
        } else {
            self.ms_since_start()
        };
        self.commit_ms.insert(batch, ms);
        if let Some(kill) = self.config.kill.filter(|k| !self.killed && k.batch == batch) {
            if let Some(link) = self.links[kill.executor].as_mut() {
                if self.config.verbose {
                    eprintln!("micro-batch: kill -9 executor {} (pid {})", kill.executor, link.process.pid());
                }
                link.process.kill();
                self.killed = true;
            }
        }
    }

    /// Recovers from the loss of executor `lost`; returns the micro-batch to go on from.
    fn recover(&mut self, lost: usize) -> Result<u64, Error> {
        if let Some(mut link) = self.links[lost].take() {
            link.process.kill();
        }
        if self.live().is_empty() {
            return Err(Error::Protocol("every executor was lost".into()));
        }
        self.epoch += 1;
        self.taking.clear();
        self.work.iter_mut().for_each(|w| *w = (0, 0));
        let reducers = self.reducers();
        for e in self.live() {
            let states =
                (0..self.reduces).filter(|&r| reducers[r] == e).map(|r| (r, self.checkpoint.1[r].clone())).collect();
            self.send(e, &ToExecutor::Restore { epoch: self.epoch, states })?;
        }
        let from = self.checkpoint.0.map_or(0, |b| b + 1);
        let recovery = Recovery {
            at_ms: self.ms_since_start(),
            executor: lost,
            from_batch: from,
            committed: self.commit_ms.len() as u64,
        };
        if self.config.verbose {
            eprintln!(
                "micro-batch: recovery at {:.1} s: executor {lost} lost, {} micro-batches committed, replaying from {from}",
                recovery.at_ms / 1e3,
                recovery.committed
            );
        }
        self.report.recoveries.push(recovery);
        Ok(from)
    }

    /// Tells every executor to stop and reaps them (killing those that do not exit).
    fn stop(&mut self) {
        for id in self.live() {
            let _ = self.send(id, &ToExecutor::Stop);
        }
        for link in self.links.iter_mut().flatten() {
            link.process.stop(Duration::from_secs(2));
        }
    }
}

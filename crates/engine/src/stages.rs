//! A query cut into Drizzle's stages, for micro-batch execution (`moirai-microbatch`).
//!
//! Micro-batch execution runs a query not as a dataflow of long-lived tasks but as short tasks
//! per micro-batch on executor processes. [`BuiltQuery::stages`] checks that the query has the
//! shape this needs and cuts it:
//!
//! ```text
//! source ─ map-side chain ─key_by (the shuffle)─ window aggregate ─ reduce-side chain ─ sink
//! ```
//!
//! - **Map side** ([`MapSide`]): a source partition (one instance of the source, at its constant
//!   rate) and the one-input operators after it — `map`, `filter`, `flat_map`, `process` — run
//!   over the tuples whose intended send time falls into a micro-batch, and the output is split
//!   into one bucket per reduce partition by the key's hash (as the continuous engine's router).
//! - **Reduce side** ([`ReduceSide`]): one instance of the event-time window aggregate after the
//!   `key_by`, and the stateless operators after it; it takes the buckets of every map partition,
//!   then the micro-batch's watermark, and emits the window results that closed.
//! - **Sink** ([`SinkSide`]): the query's own sink, fed the committed outputs.
//!
//! A query without `key_by` is a **single stage**: the map side's output goes to the sink.
//!
//! The map and reduce sides run in other processes than the sink, so the data that crosses —
//! the shuffled stream and the sink's input — travels as JSON: the query declares it with
//! [`crate::Stream::serde`]. Each process builds the same query (same code, same arguments) and
//! runs its operators by their index in it; operators are instantiated here exactly as the
//! continuous engine instantiates them (the same code and closures), only driven per
//! micro-batch. Operators of the map side are made afresh for every map task, so state they keep
//! does not outlive a micro-batch; per-key state lives in the window aggregate only, whose
//! checkpoint is its input since the oldest open window ([`ReduceSide::log`]).
//!
//! Anything else — joins, unions, keyed `process`/`operator`, processing-time windows, a second
//! `key_by`, broadcast, a Hone exchange, branches, several sources, sources without a constant
//! rate — is refused with an [`Unsupported`] error naming the operator.

use std::rc::Rc;
use std::sync::{Arc, Mutex};

use serde_json::Value;

use crate::code::{InstanceContext, Role};
use crate::cursor::SourceCursor;
use crate::erase::AnyBox;
use crate::graph::{NodeId, Partitioning};
use crate::metrics::{OperatorMetrics, SinkMetrics};
use crate::offered::Offered;
use crate::query::BuiltQuery;
use crate::sync::{lock, Signal};
use crate::task::StopFlag;
use crate::window::{TimeDomain, Window};
pub use crate::wire::{event_ns, WireError};
use crate::wire::{Buckets, WireCode};

/// What micro-batch execution runs, said in every refusal.
pub const SUPPORTED: &str = "micro-batch mode runs one source at a constant rate, then map/filter/flat_map/process, \
     one key_by, one event-time window aggregate, then map/filter/flat_map, and one sink";

/// A query micro-batch execution cannot run, and why.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("operator '{operator}': {reason} ({SUPPORTED})")]
pub struct Unsupported {
    /// The operator's name.
    pub operator: String,
    /// What it does that micro-batch mode does not support.
    pub reason: String,
}

fn unsupported<T>(operator: &str, reason: impl Into<String>) -> Result<T, Unsupported> {
    Err(Unsupported { operator: operator.to_string(), reason: reason.into() })
}

/// A query cut into a map side, an optional shuffle and reduce side, and a sink.
pub struct Stages {
    query: BuiltQuery,
    source: NodeId,
    map_chain: Vec<NodeId>,
    /// The `key_by` edge's index, and the window aggregate it feeds.
    shuffle: Option<(usize, Window)>,
    /// The window aggregate and the stateless operators after it.
    reduce_chain: Vec<NodeId>,
    sink: NodeId,
    rate: f64,
}

fn context(instance: usize, parallelism: usize, sink: bool) -> InstanceContext {
    InstanceContext {
        instance,
        parallelism,
        batch_size: 1024,
        metrics: Arc::new(OperatorMetrics::default()),
        sink: sink.then(|| Arc::new(SinkMetrics::default())),
        signal: Arc::new(Signal::default()),
        stop: Arc::new(StopFlag::default()),
        ramp: None,
        source_start: None,
        source_slack_ns: 0,
    }
}

impl BuiltQuery {
    /// Cuts the query into micro-batch stages; refuses a query it cannot run, naming the operator.
    pub fn stages(self) -> Result<Stages, Unsupported> {
        let nodes = &self.nodes;
        let edges = &self.edges;
        let name = |n: NodeId| nodes[n].node.name.as_str();
        let sources: Vec<NodeId> = (0..nodes.len()).filter(|&n| nodes[n].role == Role::Source).collect();
        let source = match sources[..] {
            [s] => s,
            _ => return unsupported(name(sources[1]), "a second source"),
        };
        let rate = match nodes[source].code.offered() {
            Some(Offered::Constant(r)) => r,
            _ => {
                return unsupported(
                    name(source),
                    "the source must offer a constant rate (--rate > 0): micro-batches are intervals of its \
                     intended send times",
                )
            }
        };
        let (mut map_chain, mut reduce_chain, mut shuffle) = (Vec::new(), Vec::new(), None);
        let mut at = source;
        let sink = loop {
            let out: Vec<usize> = (0..edges.len()).filter(|&e| edges[e].edge.from == at).collect();
            let e = match out[..] {
                [e] => e,
                [] => return unsupported(name(at), "the stream ends without a sink"),
                _ => return unsupported(name(at), "its stream branches to several operators"),
            };
            let edge = &edges[e].edge;
            let next = edge.to;
            if edge.exchange.is_some() {
                return unsupported(name(at), "a Hone exchange after it is an operator of the continuous engine");
            }
            if edges.iter().filter(|x| x.edge.to == next).count() > 1 {
                return unsupported(name(next), "it has several inputs (union or join)");
            }
            match edge.partitioning {
                Partitioning::Broadcast => return unsupported(name(next), "a broadcast input"),
                Partitioning::KeyBy if shuffle.is_some() => {
                    return unsupported(name(next), "a second key_by: micro-batch mode runs one shuffle per query")
                }
                _ => {}
            }
            let keyed = edge.partitioning == Partitioning::KeyBy;
            match nodes[next].role {
                Role::Sink => break next,
                Role::Stateless(_) | Role::Process if keyed => {
                    return unsupported(name(next), "after key_by only a window aggregate runs")
                }
                Role::Stateless(_) if shuffle.is_some() => reduce_chain.push(next),
                Role::Stateless(_) => map_chain.push(next),
                Role::Process if shuffle.is_none() => map_chain.push(next),
                Role::Process => {
                    return unsupported(name(next), "a custom operator after the window: its state is not checkpointed")
                }
                Role::Window(w) if keyed => {
                    if w.domain == TimeDomain::Processing {
                        return unsupported(name(next), "a processing-time window; use an event-time window");
                    }
                    if nodes[at].wire.is_none() {
                        return unsupported(
                            name(at),
                            "its output is shuffled between processes; declare it with .serde() before key_by",
                        );
                    }
                    shuffle = Some((e, w));
                    reduce_chain.push(next);
                }
                Role::Window(_) => return unsupported(name(next), "a window without key_by"),
                Role::Keyed(what) => {
                    return unsupported(name(next), format!("a {what}: its per-key state cannot be checkpointed"))
                }
                Role::Union => return unsupported(name(next), "a union"),
                Role::Join => return unsupported(name(next), "a join"),
                Role::Source => return unsupported(name(next), "a source as input"),
            }
            at = next;
        };
        if nodes[at].wire.is_none() {
            return unsupported(
                name(at),
                "its output goes to the sink in the driver's process; declare it with .serde() before the sink",
            );
        }
        if let Some(n) = (0..nodes.len()).find(|&n| n != sink && nodes[n].role == Role::Sink) {
            return unsupported(name(n), "a second sink");
        }
        Ok(Stages { query: self, source, map_chain, shuffle, reduce_chain, sink, rate })
    }
}

impl Stages {
    /// Source partitions: the map tasks of a micro-batch.
    pub fn map_partitions(&self) -> usize {
        self.query.nodes[self.source].node.parallelism
    }

    /// Partitions of the window aggregate: the reduce tasks of a micro-batch (0: a single stage).
    pub fn reduce_partitions(&self) -> usize {
        self.reduce_chain
            .first()
            .filter(|_| self.shuffle.is_some())
            .map_or(0, |&w| self.query.nodes[w].node.parallelism)
    }

    /// The window of the reduce side.
    pub fn window(&self) -> Option<Window> {
        self.shuffle.map(|(_, w)| w)
    }

    /// The source's rate, tuples/s in total.
    pub fn rate(&self) -> f64 {
        self.rate
    }

    /// The query's name.
    pub fn name(&self) -> &str {
        &self.query.name
    }

    /// Builds `nodes` (last first) in front of `tail`, as links of instance `instance`.
    fn chain(&self, nodes: &[NodeId], instance: usize, mut tail: AnyBox) -> AnyBox {
        for &n in nodes.iter().rev() {
            let entry = &self.query.nodes[n];
            tail = entry.code.link(&context(instance, entry.node.parallelism, false), Some(tail));
        }
        tail
    }

    /// The node whose output leaves the map side (shuffled, or to the sink).
    fn map_end(&self) -> NodeId {
        match self.shuffle {
            Some((e, _)) => self.query.edges[e].edge.from,
            None => self.map_chain.last().copied().unwrap_or(self.source),
        }
    }

    fn wire(&self, n: NodeId) -> &Arc<dyn WireCode> {
        self.query.nodes[n].wire.as_ref().expect("checked by stages()")
    }

    /// Map tasks of source partition `partition`: a cursor over its input and the operators
    /// after it, made afresh for every task.
    pub fn map_side(self: &Rc<Self>, partition: usize) -> MapSide {
        MapSide { stages: self.clone(), partition, cursor: None, buckets: Arc::default() }
    }

    /// The micro-batches of an input of `tuples` in total (split over the source partitions as
    /// the engine splits a finite source: the first `tuples % n` get one more) at `interval_ns`.
    pub fn batches(&self, tuples: u64, interval_ns: u64) -> u64 {
        let n = self.map_partitions() as u64;
        let offered = Offered::Constant(self.rate).split(n as usize);
        (0..n)
            .filter_map(|i| (tuples / n + u64::from(i < tuples % n)).checked_sub(1))
            .map(|last| offered.intended(last) / interval_ns.max(1) + 1)
            .max()
            .unwrap_or(0)
    }

    /// The reduce side of reduce partition `partition`, with empty state.
    pub fn reduce_side(&self, partition: usize) -> ReduceSide {
        let out: Buckets = Arc::new(Mutex::new(vec![Vec::new()]));
        let last = *self.reduce_chain.last().expect("a shuffle has a window");
        let tail = self.wire(last).bucketer(None, out.clone());
        let head = self.chain(&self.reduce_chain, partition, tail);
        let (e, window) = self.shuffle.expect("reduce_side needs a shuffle");
        let wire = self.wire(self.query.edges[e].edge.from).clone();
        ReduceSide { head, wire, out, window, log: Vec::new(), unsent: 0, held: 0, watermark: None }
    }

    /// The query's sink, fed with committed outputs.
    pub fn sink_side(&self) -> SinkSide {
        let entry = &self.query.nodes[self.sink];
        let head = entry.code.link(&context(0, 1, true), None);
        let wire = self.wire(self.reduce_chain.last().copied().unwrap_or_else(|| self.map_end())).clone();
        SinkSide { head, wire }
    }
}

/// Map tasks of one source partition.
pub struct MapSide {
    stages: Rc<Stages>,
    partition: usize,
    /// The source's generator stays between tasks (so that a micro-batch does not regenerate
    /// the input before it); the operators after it are made afresh for every task.
    cursor: Option<Box<dyn SourceCursor>>,
    buckets: Buckets,
}

/// A map task's output: per reduce partition (one bucket for a single stage), the tuples on the
/// wire, and the watermark after the micro-batch.
pub struct MapOutput {
    /// Encoded tuples per bucket.
    pub buckets: Vec<Vec<Value>>,
    /// The source partition's watermark after this micro-batch (none before its first tuple).
    pub watermark: Option<u64>,
}

impl MapSide {
    /// Runs the map task of the micro-batch of intended send times `[from_ns, to_ns)`.
    pub fn run(&mut self, from_ns: u64, to_ns: u64) -> MapOutput {
        let s = &*self.stages;
        let n = s.reduce_partitions().max(1);
        *lock(&self.buckets) = vec![Vec::new(); n];
        let key_hash = s.shuffle.and_then(|(e, _)| s.query.edges[e].key_hash.clone());
        let tail = s.wire(s.map_end()).bucketer(key_hash, self.buckets.clone());
        let head = s.chain(&s.map_chain, self.partition, tail);
        let parallelism = s.map_partitions();
        let cursor = match self.cursor.take() {
            Some(mut c) => {
                c.set_head(head);
                c
            }
            None => {
                let code = &s.query.nodes[s.source].code;
                code.source_cursor(self.partition, parallelism, head).expect("the source node has a cursor")
            }
        };
        let cursor = self.cursor.insert(cursor);
        let watermark = cursor.run(from_ns, to_ns);
        MapOutput { buckets: std::mem::take(&mut *lock(&self.buckets)), watermark }
    }
}

/// One reduce partition: the window aggregate (and what follows it) and its input log.
pub struct ReduceSide {
    head: AnyBox,
    wire: Arc<dyn WireCode>,
    out: Buckets,
    window: Window,
    /// Input tuples that still belong to an open window: the checkpoint of the partition's state.
    log: Vec<Value>,
    /// How many of `log`'s last entries no checkpoint holds yet ([`ReduceSide::checkpoint`]).
    unsent: usize,
    /// Tuples the checkpoints since the last whole one hold in all (the whole one included):
    /// what a driver that appends incremental checkpoints keeps.
    held: usize,
    watermark: Option<u64>,
}

impl ReduceSide {
    /// Adds tuples (on the wire) to the open windows.
    pub fn push(&mut self, values: Vec<Value>) -> Result<(), WireError> {
        self.log.extend(values.iter().cloned());
        self.unsent += values.len();
        self.wire.push(&mut self.head, values)
    }

    /// Advances event time to `watermark`; returns the results of the windows that closed.
    pub fn watermark(&mut self, watermark: u64) -> Vec<Value> {
        if self.watermark.is_none_or(|w| watermark > w) {
            self.watermark = Some(watermark);
            self.wire.control(&mut self.head).watermark(watermark);
            let w = self.window;
            // A tuple is needed while its latest window is open.
            let open = |v: &Value| event_ns(v).is_none_or(|t| t - t % w.slide_ns + w.size_ns > watermark);
            let mut unsent = self.log.split_off(self.log.len() - self.unsent);
            self.log.retain(open);
            unsent.retain(open);
            self.unsent = unsent.len();
            self.log.append(&mut unsent);
        }
        self.take()
    }

    /// The input has ended: returns the results of every window still open.
    pub fn finish(&mut self) -> Vec<Value> {
        self.wire.control(&mut self.head).finish();
        self.log.clear();
        (self.unsent, self.held) = (0, 0);
        self.take()
    }

    fn take(&mut self) -> Vec<Value> {
        std::mem::take(&mut lock(&self.out)[0])
    }

    /// The partition's state as a checkpoint: the watermark and the input of the open windows.
    pub fn log(&self) -> (Option<u64>, &[Value]) {
        (self.watermark, &self.log)
    }

    /// A checkpoint of the partition: usually *incremental* — the input that arrived since the
    /// previous checkpoint (or restore) and still belongs to an open window, to be appended to
    /// the previous checkpoints' logs, which then hold every tuple of the [`log`](Self::log) and
    /// perhaps tuples of windows closed since (a [`restore`](Self::restore) drops them again).
    /// When those appended logs would hold more than twice the log (and at least
    /// `min_whole` tuples), it is the *whole* log instead, which replaces them: a tuple is sent a
    /// constant number of times, amortised, however long its window stays open.
    pub fn checkpoint(&mut self, min_whole: usize) -> Checkpoint {
        let since = self.log.len() - self.unsent;
        self.unsent = 0;
        let appended = self.held + self.log.len() - since;
        if appended > min_whole.max(2 * self.log.len()) {
            self.held = self.log.len();
            return Checkpoint { watermark: self.watermark, log: self.log.clone(), whole: true };
        }
        self.held = appended;
        Checkpoint { watermark: self.watermark, log: self.log[since..].to_vec(), whole: false }
    }

    /// Restores a checkpoint into this (fresh) partition; the window results this replays were
    /// emitted before the checkpoint and are dropped (also those of windows the log still holds
    /// tuples of but the watermark had closed). Afterwards no input is unsent: the checkpoint
    /// holds it.
    pub fn restore(&mut self, watermark: Option<u64>, log: Vec<Value>) -> Result<(), WireError> {
        self.push(log)?;
        if let Some(w) = watermark {
            self.watermark(w);
        }
        (self.unsent, self.held) = (0, self.log.len());
        Ok(())
    }
}

/// A reduce partition's checkpoint ([`ReduceSide::checkpoint`]).
#[derive(Clone, Debug, PartialEq)]
pub struct Checkpoint {
    /// The partition's watermark.
    pub watermark: Option<u64>,
    /// Input tuples on the wire: the whole log, or what arrived since the previous checkpoint.
    pub log: Vec<Value>,
    /// Whether `log` is the whole log (replacing the previous checkpoints) or to be appended.
    pub whole: bool,
}

/// The query's sink in the driver's process.
pub struct SinkSide {
    head: AnyBox,
    wire: Arc<dyn WireCode>,
}

impl SinkSide {
    /// Delivers committed outputs (on the wire) to the sink.
    pub fn push(&mut self, values: Vec<Value>) -> Result<(), WireError> {
        self.wire.push(&mut self.head, values)
    }

    /// The input has ended.
    pub fn finish(&mut self) {
        self.wire.control(&mut self.head).finish();
    }
}

#[cfg(test)]
mod tests {
    use std::time::Duration;

    use super::*;
    use crate::{Agg, Query, Source, Tuple, WindowResult};

    /// Numbers 0..n at 1000/s over 2 partitions: tuple k of a partition at 2k ms.
    fn numbers(q: &Query, n: u64) -> crate::Stream<u64> {
        q.source("numbers", Source::new(move |i, p| (0..n).filter(move |x| x % p as u64 == i as u64)).rate(1000.0))
            .parallelism(2)
    }

    fn err(q: Query) -> Unsupported {
        q.build().unwrap().stages().err().expect("refused")
    }

    #[test]
    fn what_is_not_supported_is_refused_naming_the_operator() {
        let q = Query::new("q");
        numbers(&q, 10)
            .serde()
            .key_by(|x: &u64| x % 3)
            .process(
                "state",
                |_: &u64| 0u64,
                |_: &u64, s: &mut u64, t: Tuple<u64>, out: &mut crate::Output<'_, u64>| {
                    *s += 1;
                    out.emit(t)
                },
            )
            .serde()
            .discard("out");
        let e = err(q);
        assert_eq!(e.operator, "state");
        assert!(e.to_string().contains("keyed process") && e.to_string().contains("map/filter"), "{e}");

        let q = Query::new("q");
        numbers(&q, 10)
            .key_by(|x: &u64| x % 3)
            .window("w", Window::tumbling(Duration::from_millis(10)), Agg::count())
            .serde()
            .discard("out");
        let e = err(q);
        assert_eq!(e.operator, "numbers", "{e}");
        assert!(e.reason.contains(".serde()"), "{e}");

        let q = Query::new("q");
        let a = numbers(&q, 10);
        a.clone().map("m", |x: u64| x).union("u", vec![a]).serde().discard("out");
        let e = err(q);
        assert_eq!(e.operator, "numbers");
        assert!(e.reason.contains("branches"), "{e}");
    }

    #[test]
    fn a_keyed_window_runs_as_map_and_reduce_tasks() {
        let q = Query::new("q");
        let got = Arc::new(Mutex::new(Vec::new()));
        let g = got.clone();
        numbers(&q, 40)
            .filter("even", |x: &u64| x % 2 == 0)
            .serde()
            .key_by(|x: &u64| x % 4)
            .window("sum", Window::tumbling(Duration::from_millis(10)), Agg::sum(|x: &u64| *x as f64))
            .parallelism(2)
            .serde()
            .sink("out", move |t: Tuple<WindowResult<u64, f64>>| lock(&g).push(t.data));
        let stages = Rc::new(q.build().unwrap().stages().unwrap());
        assert_eq!((stages.map_partitions(), stages.reduce_partitions()), (2, 2));
        // 20 tuples per partition, one every 2 ms: the last at 38 ms.
        assert_eq!(stages.batches(40, 10_000_000), 4);
        let mut maps: Vec<MapSide> = (0..2).map(|m| stages.map_side(m)).collect();
        let mut reduces: Vec<ReduceSide> = (0..2).map(|r| stages.reduce_side(r)).collect();
        let mut sink = stages.sink_side();
        for b in 0..4u64 {
            let outs: Vec<MapOutput> = maps.iter_mut().map(|m| m.run(b * 10_000_000, (b + 1) * 10_000_000)).collect();
            let watermark = outs.iter().map(|o| o.watermark.unwrap()).min().unwrap();
            for (r, side) in reduces.iter_mut().enumerate() {
                for o in &outs {
                    side.push(o.buckets[r].clone()).unwrap();
                }
                let out = if b == 3 { side.finish() } else { side.watermark(watermark) };
                sink.push(out).unwrap();
            }
        }
        let mut got: Vec<(u64, u64, f64)> =
            lock(&got).iter().map(|r| (r.start_ns / 1_000_000, r.key, r.value)).collect();
        got.sort_by(|a, b| a.partial_cmp(b).unwrap());
        // Window [0, 10 ms) holds 0..10; its even numbers by key x % 4: {0, 4, 8} and {2, 6}.
        assert_eq!(&got[..2], &[(0, 0, 12.0), (0, 2, 8.0)]);
        assert_eq!(got.iter().map(|g| g.2).sum::<f64>(), (0..40).filter(|x| x % 2 == 0).sum::<u64>() as f64);
    }

    /// Numbers 0..n counted per key (x % 2) in tumbling 15 ms windows, cut into stages.
    fn counted_in_windows(n: u64) -> Rc<Stages> {
        let q = Query::new("q");
        numbers(&q, n)
            .serde()
            .key_by(|x: &u64| x % 2)
            .window("count", Window::tumbling(Duration::from_millis(15)), Agg::count())
            .serde()
            .discard("out");
        Rc::new(q.build().unwrap().stages().unwrap())
    }

    #[test]
    fn incremental_checkpoints_add_up_to_the_state_and_restore_it() {
        let stages = counted_in_windows(60);
        let mut map = [stages.map_side(0), stages.map_side(1)];
        let mut original = stages.reduce_side(0);
        // A checkpoint after every micro-batch of 10 ms: each holds only what arrived since the
        // previous one; together they hold at least the full log (and tuples of closed windows).
        let mut merged = Vec::new();
        let mut last_watermark = None;
        for b in 0..4u64 {
            for m in &mut map {
                original.push(m.run(b * 10_000_000, (b + 1) * 10_000_000).buckets.remove(0)).unwrap();
            }
            original.watermark((b + 1) * 10_000_000 - 2_000_000);
            let c = original.checkpoint(usize::MAX);
            assert!(!c.whole && c.log.len() <= original.log().1.len(), "a delta is never more than the open input");
            merged.extend(c.log);
            last_watermark = c.watermark;
        }
        let full = original.log().1.to_vec();
        assert!(merged.len() > full.len(), "the deltas also hold tuples of windows closed since");
        assert!(full.iter().all(|v| merged.contains(v)), "every tuple of the state is in some delta");
        assert!(original.checkpoint(usize::MAX).log.is_empty(), "nothing new since the last checkpoint");
        // Past twice the log, the checkpoint is the whole log, and the next one a delta again.
        let whole = original.checkpoint(0);
        assert!(whole.whole && whole.log == full, "the whole log once the deltas hold more than twice it");
        assert!(!original.checkpoint(0).whole, "then incremental again");
        let mut restored = stages.reduce_side(0);
        restored.restore(last_watermark, merged).unwrap();
        assert_eq!(restored.log().1, full, "a restore drops the closed windows' tuples again");
        assert!(restored.checkpoint(usize::MAX).log.is_empty(), "a restored partition has nothing unsent");
        for m in &mut map {
            let bucket = m.run(40_000_000, 60_000_000).buckets.remove(0);
            original.push(bucket.clone()).unwrap();
            restored.push(bucket).unwrap();
        }
        assert_eq!(restored.finish(), original.finish(), "the same windows after the restore");
    }

    #[test]
    fn a_restored_reduce_partition_goes_on_as_the_original() {
        let stages = counted_in_windows(40);
        let mut map = [stages.map_side(0), stages.map_side(1)];
        let mut original = stages.reduce_side(0);
        let mut outputs = Vec::new();
        for b in 0..2u64 {
            for m in &mut map {
                original.push(m.run(b * 10_000_000, (b + 1) * 10_000_000).buckets.remove(0)).unwrap();
            }
            outputs.push(original.watermark((b + 1) * 10_000_000 - 2_000_000));
        }
        let (watermark, log) = original.log();
        assert!(!log.is_empty() && log.iter().all(|v| event_ns(v).unwrap() >= 15_000_000), "only open windows' input");
        let mut restored = stages.reduce_side(0);
        restored.restore(watermark, log.to_vec()).unwrap();
        for m in &mut map {
            let bucket = m.run(20_000_000, 40_000_000).buckets.remove(0);
            original.push(bucket.clone()).unwrap();
            restored.push(bucket).unwrap();
        }
        assert_eq!(restored.finish(), original.finish(), "the same windows after the restore");
    }
}

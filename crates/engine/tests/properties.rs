//! Property tests over random DAGs: no tuple is lost or duplicated, per-channel FIFO order holds,
//! and every partitioning does what it promises.
//!
//! A random DAG has 1–3 sources, each instance of which produces a known finite sequence of
//! `(source, instance, seq)` tuples, then pass-through operators, unions and keyed operators with
//! random parallelism (1–4) and random partitioning into each (forward where parallelisms are
//! equal, rebalance, shuffle, broadcast, the default, key_by into keyed operators), and a sink at
//! the end of every stream nothing else consumes. Channel capacity (1–64), batch size (1–32),
//! chaining and the threading model are random too: dedicated, a dynamic pool of 1–4 workers, an
//! elastic pool of 1–4 whose level moves every 20 ms, fused (one thread for everything), and the
//! user-level policy executor under every policy with 1–4 workers, turns of a batch or a
//! quantum, priorities recomputed every 2 ms. A
//! pool of one worker with channels of one tuple is where a blocking design deadlocks (a
//! producer waits on a full channel whose consumer only that same thread could run): tasks that
//! never block must finish there too.
//!
//! Every operator appends `(node, instance)` to the tuple's *path*, so at a sink each tuple tells
//! which physical operators it went through. That is enough to check, exactly:
//!
//! - conservation: each generated tuple reaches each sink exactly as often as there are routes
//!   to it, a broadcast counting once per consumer instance; no two copies share a route;
//! - FIFO: tuples of one source instance that took the same route arrive in the order generated
//!   (per-channel order composed along the route; nothing stronger holds across routes);
//! - forward: instance *i* feeds instance *i*;
//! - key_by: all tuples of one key reach one instance of the keyed operator, whose state for the
//!   key sees each of them once (it counts 1, 2, ..., n);
//! - rebalance: each producer instance spreads its tuples round-robin, so the counts per
//!   consumer instance differ by at most one.

mod common;

use std::collections::{BTreeMap, BTreeSet, HashMap};
use std::sync::{Arc, Mutex};

use moirai_engine::{Engine, EngineConfig, Operator, Output, Partitioning, Query, Source, Stream, Threading, Tuple};
use proptest::prelude::*;
use proptest::sample::Index;

/// One hop of a tuple's route: (node in [`Dag::nodes`], instance).
type Hop = (u16, u16);

/// A tuple of the test: where it was born and the route it took.
#[derive(Clone, Debug)]
struct Item {
    /// The source node.
    src: u16,
    /// Its index in the source instance's sequence.
    seq: u64,
    /// Hops so far, starting with the source instance.
    path: Vec<Hop>,
    /// For each keyed operator passed: its state for the tuple's key after the tuple (the
    /// number of tuples of that key it has seen).
    states: Vec<(u16, u64)>,
}

impl Item {
    fn src_instance(&self) -> u16 {
        self.path[0].1
    }
}

/// Appends its node and instance to every tuple's path.
struct Tag {
    node: u16,
    instance: u16,
}

impl Operator<Item, Item> for Tag {
    fn process(&mut self, mut t: Tuple<Item>, out: &mut Output<'_, Item>) {
        t.data.path.push((self.node, self.instance));
        out.emit(t);
    }
}

/// The key a keyed operator with `keys` keys sees.
fn key_of(it: &Item, keys: u64) -> u64 {
    (it.seq * 7 + it.src_instance() as u64 * 3 + it.src as u64 * 5) % keys
}

// ---------------------------------------------------------------------------------------------
// The random specification, and the concrete DAG it resolves to.

#[derive(Clone, Debug)]
struct OpSpec {
    /// 0: pass-through, 1: union, 2: keyed.
    kind: u8,
    inputs: Vec<Index>,
    /// 1–4, or 0 for the parallelism of the first input.
    parallelism: usize,
    /// Raw partitioning choices, one per input (cycled).
    parts: Vec<u8>,
    keys: u64,
}

#[derive(Clone, Debug)]
struct Spec {
    /// (parallelism, length of instance 0's sequence; instance i produces `len + i`).
    sources: Vec<(usize, u64)>,
    ops: Vec<OpSpec>,
    /// Raw partitioning choices of the sinks (cycled).
    sink_parts: Vec<u8>,
    capacity: usize,
    batch: usize,
    chaining: bool,
    threading: Threading,
}

/// How the test asks for a partitioning: by default (let the builder choose) or explicitly.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Req {
    Default,
    Explicit(Partitioning),
}

#[derive(Clone, Debug, PartialEq, Eq)]
enum Kind {
    Source { len: u64 },
    Pass,
    Union,
    Keyed { keys: u64 },
    Sink,
}

#[derive(Clone, Debug)]
struct Node {
    kind: Kind,
    parallelism: usize,
    /// (producer, what the test asks for, what the engine must do).
    inputs: Vec<(usize, Req, Partitioning)>,
}

#[derive(Clone, Debug)]
struct Dag {
    nodes: Vec<Node>,
    capacity: usize,
    batch: usize,
    chaining: bool,
    threading: Threading,
}

/// Broadcasts are capped so that no tuple reaches a sink more than this many times.
const MAX_COPIES: u64 = 8;

impl Dag {
    fn resolve(spec: &Spec) -> Dag {
        let mut dag = Dag {
            nodes: Vec::new(),
            capacity: spec.capacity,
            batch: spec.batch,
            chaining: spec.chaining,
            threading: spec.threading.clone(),
        };
        for &(parallelism, len) in &spec.sources {
            dag.nodes.push(Node { kind: Kind::Source { len }, parallelism, inputs: vec![] });
        }
        for op in &spec.ops {
            let available = dag.nodes.len();
            let mut inputs: Vec<usize> = Vec::new();
            for ix in &op.inputs {
                let i = ix.index(available);
                if !inputs.contains(&i) {
                    inputs.push(i);
                }
            }
            let mut kind = match op.kind {
                0 => Kind::Pass,
                1 => Kind::Union,
                _ => Kind::Keyed { keys: op.keys },
            };
            if kind == Kind::Union && inputs.len() < 2 {
                kind = Kind::Pass;
            }
            if kind != Kind::Union {
                inputs.truncate(1);
            }
            let choices: Vec<u8> = inputs.iter().enumerate().map(|(j, _)| op.parts[j % op.parts.len()]).collect();
            // 0: the first input's parallelism, so that forward streams and chains are common.
            let parallelism = if op.parallelism == 0 { dag.nodes[inputs[0]].parallelism } else { op.parallelism };
            dag.add(kind, parallelism, inputs, choices);
        }
        let leaves: Vec<usize> = (0..dag.nodes.len()).filter(|&n| !dag.consumed(n)).collect();
        for (j, leaf) in leaves.into_iter().enumerate() {
            // The API gives a sink its input's parallelism.
            let parallelism = dag.nodes[leaf].parallelism;
            dag.add(Kind::Sink, parallelism, vec![leaf], vec![spec.sink_parts[j % spec.sink_parts.len()]]);
        }
        dag
    }

    fn consumed(&self, n: usize) -> bool {
        self.nodes.iter().any(|m| m.inputs.iter().any(|(f, _, _)| *f == n))
    }

    /// Adds a node, turning raw choices into valid partitionings and capping broadcast fan-out.
    fn add(&mut self, kind: Kind, parallelism: usize, inputs: Vec<usize>, choices: Vec<u8>) {
        let mut resolved = Vec::new();
        for (from, choice) in inputs.into_iter().zip(choices) {
            let equal = self.nodes[from].parallelism == parallelism;
            let (req, part) = if matches!(kind, Kind::Keyed { .. }) {
                (Req::Explicit(Partitioning::KeyBy), Partitioning::KeyBy)
            } else {
                match choice % 5 {
                    0 => (Req::Default, if equal { Partitioning::Forward } else { Partitioning::Rebalance }),
                    1 if equal => (Req::Explicit(Partitioning::Forward), Partitioning::Forward),
                    1 | 2 => (Req::Explicit(Partitioning::Rebalance), Partitioning::Rebalance),
                    3 => (Req::Explicit(Partitioning::Shuffle), Partitioning::Shuffle),
                    _ => (Req::Explicit(Partitioning::Broadcast), Partitioning::Broadcast),
                }
            };
            resolved.push((from, req, part));
        }
        self.nodes.push(Node { kind, parallelism, inputs: resolved });
        let id = self.nodes.len() - 1;
        let too_many = self.copies(id).values().any(|&c| c > MAX_COPIES);
        if too_many {
            for input in &mut self.nodes[id].inputs {
                if input.2 == Partitioning::Broadcast {
                    *input = (input.0, Req::Explicit(Partitioning::Rebalance), Partitioning::Rebalance);
                }
            }
        }
    }

    /// How many copies of each tuple of each source reach `node`: the routes from the source,
    /// each broadcast multiplying by the consumer's parallelism.
    fn copies(&self, node: usize) -> BTreeMap<usize, u64> {
        let n = &self.nodes[node];
        if let Kind::Source { .. } = n.kind {
            return BTreeMap::from([(node, 1)]);
        }
        let mut total = BTreeMap::new();
        for &(from, _, part) in &n.inputs {
            let factor = if part == Partitioning::Broadcast { n.parallelism as u64 } else { 1 };
            for (src, c) in self.copies(from) {
                *total.entry(src).or_insert(0) += c * factor;
            }
        }
        total
    }

    fn partitioning(&self, from: usize, to: usize) -> Option<Partitioning> {
        self.nodes[to].inputs.iter().find(|(f, _, _)| *f == from).map(|(_, _, p)| *p)
    }
}

// ---------------------------------------------------------------------------------------------
// Building and running the DAG.

type Store = Arc<Mutex<Vec<Item>>>;

fn apply(s: Stream<Item>, req: Req) -> Stream<Item> {
    match req {
        Req::Default => s,
        Req::Explicit(Partitioning::Forward) => s.forward(),
        Req::Explicit(Partitioning::Rebalance) => s.rebalance(),
        Req::Explicit(Partitioning::Shuffle) => s.shuffle(),
        Req::Explicit(Partitioning::Broadcast) => s.broadcast(),
        Req::Explicit(Partitioning::KeyBy) => unreachable!("key_by goes through KeyedStream"),
    }
}

fn tag(s: Stream<Item>, name: &str, node: usize) -> Stream<Item> {
    s.process(name, move |instance| Tag { node: node as u16, instance: instance as u16 })
}

/// Builds the query; returns a store per sink node (shared by its instances).
fn build(dag: &Dag) -> (Query, BTreeMap<usize, Store>) {
    let q = Query::new("prop");
    let mut streams: Vec<Option<Stream<Item>>> = Vec::new();
    let mut stores = BTreeMap::new();
    for (id, node) in dag.nodes.iter().enumerate() {
        let name = format!("n{id}");
        let p = node.parallelism;
        let input = |k: usize| {
            let (from, req, _) = node.inputs[k];
            apply(streams[from].clone().expect("inputs come first"), req)
        };
        let stream = match node.kind {
            Kind::Source { len } => {
                let src = id as u16;
                let source = Source::new(move |i, _n| {
                    (0..len + i as u64).map(move |seq| Item { src, seq, path: vec![(src, i as u16)], states: vec![] })
                });
                Some(q.source(&name, source).parallelism(p))
            }
            Kind::Pass => Some(tag(input(0), &name, id).parallelism(p)),
            Kind::Union => {
                let others = (1..node.inputs.len()).map(input).collect();
                let union = input(0).union(&name, others).parallelism(p);
                // A union does not know its instance: a forward tag right after it does.
                Some(tag(union.forward(), &format!("{name}_tag"), id).parallelism(p))
            }
            Kind::Keyed { keys } => {
                let (from, _, _) = node.inputs[0];
                let keyed = streams[from]
                    .clone()
                    .expect("inputs come first")
                    .key_by(move |it: &Item| key_of(it, keys))
                    .process(
                        &name,
                        |_key: &u64| 0u64,
                        move |_key: &u64, seen: &mut u64, mut t: Tuple<Item>, out: &mut Output<'_, Item>| {
                            *seen += 1;
                            t.data.states.push((id as u16, *seen));
                            out.emit(t);
                        },
                    )
                    .parallelism(p);
                Some(tag(keyed.forward(), &format!("{name}_tag"), id).parallelism(p))
            }
            Kind::Sink => {
                let store: Store = Arc::default();
                let s = store.clone();
                input(0).sink_with(&name, move |instance| {
                    let s = s.clone();
                    move |t: Tuple<Item>| {
                        let mut item = t.data;
                        item.path.push((id as u16, instance as u16));
                        s.lock().unwrap().push(item);
                    }
                });
                stores.insert(id, store);
                None
            }
        };
        streams.push(stream);
    }
    (q, stores)
}

/// Runs the DAG and checks every property; returns a description of the first violation.
fn check(dag: &Dag) -> Result<(), String> {
    let (q, stores) = build(dag);
    let query = q.build().map_err(|e| format!("build failed: {e}"))?;
    let config =
        EngineConfig { threading: dag.threading.clone(), ..common::config(dag.capacity, dag.batch, dag.chaining) };
    let engine = Engine::start(config, vec![query]).map_err(|e| format!("start failed: {e}"))?;
    let summary = common::wait_or_fail(engine, common::HANG).map_err(|e| format!("run failed: {e}"))?;

    let generated: u64 = dag
        .nodes
        .iter()
        .filter_map(|n| match n.kind {
            Kind::Source { len } => Some((0..n.parallelism as u64).map(|i| len + i).sum::<u64>()),
            _ => None,
        })
        .sum();
    let mut delivered = 0u64;
    // Tuples that crossed each rebalance channel, deduplicated by route prefix:
    // (from, to) -> producer instance -> consumer instance -> count.
    let mut rebalanced: HashMap<(usize, usize), BTreeMap<u16, BTreeMap<u16, BTreeSet<(u64, Vec<Hop>)>>>> =
        HashMap::new();
    let mut key_owner: HashMap<(usize, u64), u16> = HashMap::new();
    // Keyed operator and key -> each distinct tuple that crossed it -> the key's state then.
    let mut key_states: HashMap<(usize, u64), BTreeMap<(u64, Vec<Hop>), u64>> = HashMap::new();

    for (&sink, store) in &stores {
        let items = std::mem::take(&mut *store.lock().unwrap());
        delivered += items.len() as u64;

        // Conservation: every (source, instance, seq) exactly `copies` times, nothing else.
        let copies = dag.copies(sink);
        let mut expected: BTreeMap<(u16, u16, u64), u64> = BTreeMap::new();
        for (&src, &c) in &copies {
            let Kind::Source { len } = dag.nodes[src].kind else { unreachable!() };
            for i in 0..dag.nodes[src].parallelism as u64 {
                for seq in 0..len + i {
                    expected.insert((src as u16, i as u16, seq), c);
                }
            }
        }
        let mut got: BTreeMap<(u16, u16, u64), u64> = BTreeMap::new();
        for it in &items {
            *got.entry((it.src, it.src_instance(), it.seq)).or_insert(0) += 1;
        }
        if got != expected {
            let lost: Vec<_> = expected.iter().filter(|(k, c)| got.get(*k) != Some(*c)).take(5).collect();
            let extra: Vec<_> = got.iter().filter(|(k, c)| expected.get(*k) != Some(*c)).take(5).collect();
            return Err(format!(
                "sink n{sink}: got {} tuples, expected {}; expected vs got differ at {lost:?} (expected) / {extra:?} (got)",
                got.values().sum::<u64>(),
                expected.values().sum::<u64>()
            ));
        }

        // No two copies of a tuple share a route; every route is a path of the DAG.
        let mut routes = BTreeSet::new();
        for it in &items {
            if !routes.insert((it.seq, it.path.clone())) {
                return Err(format!("sink n{sink}: tuple {} delivered twice along {:?}", it.seq, it.path));
            }
            let (last, instance) = *it.path.last().unwrap();
            if it.path[0].0 != it.src || last != sink as u16 || instance as usize >= dag.nodes[sink].parallelism {
                return Err(format!("sink n{sink}: bad route {:?} for source n{}", it.path, it.src));
            }
            for w in it.path.windows(2) {
                let ((a, i), (b, j)) = (w[0], w[1]);
                let (a, b) = (a as usize, b as usize);
                let Some(part) = dag.partitioning(a, b) else {
                    return Err(format!("route {:?} takes n{a} -> n{b}, which is no stream", it.path));
                };
                if i as usize >= dag.nodes[a].parallelism || j as usize >= dag.nodes[b].parallelism {
                    return Err(format!("route {:?}: instance out of range", it.path));
                }
                if part == Partitioning::Forward && i != j {
                    return Err(format!("forward n{a} -> n{b} took instance {i} to instance {j}: {:?}", it.path));
                }
            }
        }

        // FIFO: along one route, one source instance's tuples keep their order.
        let mut last: HashMap<&[Hop], u64> = HashMap::new();
        for it in &items {
            if let Some(prev) = last.insert(&it.path, it.seq) {
                if prev >= it.seq {
                    return Err(format!("sink n{sink}: route {:?} delivered seq {} after {prev}", it.path, it.seq));
                }
            }
        }

        for it in &items {
            for (k, w) in it.path.windows(2).enumerate() {
                let ((a, i), (b, j)) = (w[0], w[1]);
                let (a, b) = (a as usize, b as usize);
                match dag.partitioning(a, b) {
                    Some(Partitioning::KeyBy) => {
                        let Kind::Keyed { keys } = dag.nodes[b].kind else { unreachable!() };
                        let owner = *key_owner.entry((b, key_of(it, keys))).or_insert(j);
                        if owner != j {
                            return Err(format!(
                                "key {} of keyed n{b} reached instances {owner} and {j}",
                                key_of(it, keys)
                            ));
                        }
                        let Some(&(_, state)) = it.states.iter().find(|(n, _)| *n as usize == b) else {
                            return Err(format!("keyed n{b} left no state on {it:?}"));
                        };
                        let crossing = (it.seq, it.path[..k + 2].to_vec());
                        let known = key_states.entry((b, key_of(it, keys))).or_default().insert(crossing, state);
                        if known.is_some_and(|s| s != state) {
                            return Err(format!("keyed n{b}: one tuple with two states: {it:?}"));
                        }
                    }
                    Some(Partitioning::Rebalance) => {
                        rebalanced
                            .entry((a, b))
                            .or_default()
                            .entry(i)
                            .or_default()
                            .entry(j)
                            .or_default()
                            .insert((it.seq, it.path[..k + 2].to_vec()));
                    }
                    _ => {}
                }
            }
        }
    }

    // One state per key, which saw each of the key's tuples once: 1, 2, ..., n.
    for ((b, key), states) in &key_states {
        let mut seen: Vec<u64> = states.values().copied().collect();
        seen.sort_unstable();
        if !seen.iter().copied().eq(1..=seen.len() as u64) {
            return Err(format!("keyed n{b}, key {key}: states {seen:?}, expected 1..={}", seen.len()));
        }
    }

    for ((a, b), producers) in &rebalanced {
        let n = dag.nodes[*b].parallelism as u16;
        for (i, consumers) in producers {
            let counts: Vec<usize> = (0..n).map(|j| consumers.get(&j).map_or(0, |s| s.len())).collect();
            let (min, max) = (counts.iter().min().unwrap(), counts.iter().max().unwrap());
            if max - min > 1 {
                return Err(format!("rebalance n{a} -> n{b}: instance {i} sent {counts:?} (not round-robin)"));
            }
        }
    }

    if summary.tuples_in != generated || summary.tuples_out != delivered {
        return Err(format!(
            "summary says {} in / {} out; the test generated {generated} and the sinks got {delivered}",
            summary.tuples_in, summary.tuples_out
        ));
    }
    Ok(())
}

// ---------------------------------------------------------------------------------------------
// Strategies and tests.

fn op_spec() -> impl Strategy<Value = OpSpec> {
    (
        0u8..3,
        prop::collection::vec(any::<Index>(), 1..=3),
        0usize..=4,
        prop::collection::vec(any::<u8>(), 1..=3),
        1u64..12,
    )
        .prop_map(|(kind, inputs, parallelism, parts, keys)| OpSpec { kind, inputs, parallelism, parts, keys })
}

/// Every threading model, pools of 1–4 workers.
fn threading() -> impl Strategy<Value = Threading> {
    prop_oneof![
        Just("dedicated".to_string()),
        (1usize..=4).prop_map(|n| format!("dynamic:{n}")),
        (1usize..=4).prop_map(|n| format!("elastic:1-{n}:period=20ms")),
        Just("fused".to_string()),
        // The user-level policy executor: every policy, a batch or a quantum per turn, priorities
        // recomputed every 2 ms so that they change while tuples flow.
        (
            prop::sample::select(vec!["qs", "hr", "fcfs", "random", "rr", "qbs", "rb", "script:\"queue_size * cost\""]),
            1usize..=4,
            prop::sample::select(vec!["", ":batch=1", ":quantum=200us"])
        )
            .prop_map(|(p, n, turn)| format!("policy:{p}:{n}{turn}:period=2ms")),
    ]
    .prop_map(|s| s.parse::<Threading>().expect("a valid threading model"))
}

fn spec() -> impl Strategy<Value = Spec> {
    (
        prop::collection::vec((1usize..=4, 0u64..150), 1..=3),
        prop::collection::vec(op_spec(), 0..=6),
        prop::collection::vec(any::<u8>(), 1..=4),
        1usize..=64,
        1usize..=32,
        any::<bool>(),
        threading(),
    )
        .prop_map(|(sources, ops, sink_parts, capacity, batch, chaining, threading)| Spec {
            sources,
            ops,
            sink_parts,
            capacity,
            batch,
            chaining,
            threading,
        })
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 80, max_shrink_time: 60_000, ..ProptestConfig::default() })]

    #[test]
    fn random_dags_lose_nothing_and_keep_order(spec in spec()) {
        let dag = Dag::resolve(&spec);
        if let Err(e) = check(&dag) {
            return Err(TestCaseError::fail(format!("{e}\nDAG: {dag:#?}")));
        }
    }
}

/// One fixed DAG that surely uses every partitioning, fan-out, a diamond, a union of three and
/// a keyed operator behind a broadcast, with tiny channels and chaining off and on.
#[test]
fn a_dag_with_every_partitioning() {
    use Partitioning::*;
    let node = |kind, parallelism, inputs| Node { kind, parallelism, inputs };
    let ex = Req::Explicit;
    let nodes = vec![
        // 0, 1: sources.
        node(Kind::Source { len: 200 }, 2, vec![]),
        node(Kind::Source { len: 80 }, 3, vec![]),
        // 2, 3: source 0 forward to one operator, broadcast to another.
        node(Kind::Pass, 2, vec![(0, ex(Forward), Forward)]),
        node(Kind::Pass, 3, vec![(0, ex(Broadcast), Broadcast)]),
        // 4: a union of three streams, each partitioned its own way.
        node(
            Kind::Union,
            4,
            vec![(2, ex(Shuffle), Shuffle), (3, ex(Rebalance), Rebalance), (1, Req::Default, Rebalance)],
        ),
        // 5: keyed.
        node(Kind::Keyed { keys: 5 }, 3, vec![(4, ex(KeyBy), KeyBy)]),
        // 6: a third consumer of source 0, forward by default.
        node(Kind::Pass, 2, vec![(0, Req::Default, Forward)]),
        // 7: closes the diamonds from source 0.
        node(Kind::Union, 2, vec![(5, ex(Broadcast), Broadcast), (6, ex(Forward), Forward)]),
        // A sink runs as many instances as its input (2).
        node(Kind::Sink, 2, vec![(7, ex(Rebalance), Rebalance)]),
    ];
    for threading in [
        "dedicated",
        "dynamic:1",
        "dynamic:3",
        "elastic:1-3:period=10ms",
        "fused",
        "policy:qs:1:period=2ms",
        "policy:rr:3",
    ] {
        let threading: Threading = threading.parse().unwrap();
        for chaining in [false, true] {
            for (capacity, batch) in [(1, 1), (3, 7), (64, 32)] {
                let dag = Dag { nodes: nodes.clone(), capacity, batch, chaining, threading: threading.clone() };
                check(&dag).unwrap_or_else(|e| {
                    panic!("{threading}, chaining {chaining}, capacity {capacity}, batch {batch}: {e}")
                });
            }
        }
    }
}

/// A graph long enough for `dynamic` to cut it into one segment per worker (at least 8 tasks per
/// worker on its longest path, no parallel instances: the pool's `affinity` module): two chains
/// of twenty operators joined by a union, a keyed operator and a sink (24 tasks on a path), with
/// tiny channels, so that batches cross from one worker's segment to another's and workers take
/// tasks homed on others.
#[test]
fn a_graph_cut_into_segments_loses_nothing_and_keeps_order() {
    use Partitioning::*;
    let node = |kind, inputs| Node { kind, parallelism: 1, inputs };
    let mut nodes = vec![node(Kind::Source { len: 300 }, vec![]), node(Kind::Source { len: 200 }, vec![])];
    let mut ends = Vec::new();
    for source in [0, 1] {
        let mut last = source;
        for _ in 0..20 {
            nodes.push(node(Kind::Pass, vec![(last, Req::Default, Forward)]));
            last = nodes.len() - 1;
        }
        ends.push(last);
    }
    nodes.push(node(Kind::Union, ends.iter().map(|&e| (e, Req::Default, Forward)).collect()));
    nodes.push(node(Kind::Keyed { keys: 7 }, vec![(nodes.len() - 1, Req::Explicit(KeyBy), KeyBy)]));
    nodes.push(node(Kind::Sink, vec![(nodes.len() - 1, Req::Default, Forward)]));
    for threading in ["dynamic:2", "dynamic:3"] {
        let threading: Threading = threading.parse().unwrap();
        for (capacity, batch) in [(1, 1), (3, 7), (64, 32)] {
            let dag = Dag { nodes: nodes.clone(), capacity, batch, chaining: false, threading: threading.clone() };
            check(&dag).unwrap_or_else(|e| panic!("{threading}, capacity {capacity}, batch {batch}: {e}"));
        }
    }
}

//! The query API: build a continuous query as a DAG of typed streams.
//!
//! ```
//! use moirai_engine::{Query, Source, Window, Agg};
//! use std::time::Duration;
//!
//! let q = Query::new("words");
//! let counts = q
//!     .source("lines", Source::new(|_, _| ["a b", "b c"].into_iter().map(String::from)))
//!     .flat_map("split", |line: String| line.split(' ').map(str::to_string).collect::<Vec<_>>())
//!     .key_by(|w: &String| w.clone())
//!     .window("count", Window::tumbling(Duration::from_secs(1)), Agg::count())
//!     .parallelism(2)
//!     .collect("out");
//! let query = q.build().unwrap();
//! moirai_engine::Engine::start(moirai_engine::EngineConfig::default(), vec![query]).unwrap().wait().unwrap();
//! let mut got: Vec<(String, f64)> = counts.take().into_iter().map(|t| (t.data.key, t.data.value)).collect();
//! got.sort_by(|a, b| a.0.cmp(&b.0));
//! assert_eq!(got, vec![("a".into(), 1.0), ("b".into(), 2.0), ("c".into(), 1.0)]);
//! ```
//!
//! Every operator has a name (unique in its query) and a parallelism (`.parallelism(n)` after
//! it; 1 by default; a sink runs as many instances as its input). How a stream is spread over the next operator's instances is set before
//! that operator: `.rebalance()`, `.shuffle()`, `.broadcast()`, `.forward()`, or `.key_by(..)`;
//! by default forward where parallelisms are equal, else rebalance. Mistakes are collected and
//! reported by [`Query::build`].
//!
//! Under the hood each logical operator keeps, beside its place in the [`LogicalGraph`], the
//! code that instantiates it for a physical operator (`NodeCode`, in `code.rs`); types are erased there and
//! restored by the same generic code, so the engine itself never sees user types.

use std::hash::{BuildHasher, Hash};
use std::marker::PhantomData;
use std::sync::{Arc, Mutex};

use rustc_hash::{FxBuildHasher, FxHashMap};

use crate::code::{
    EdgeEntry, NodeCode, NodeEntry, OneInputCode, OutputCode, Role, SinkCode, SourceCode, TwoInputCode, Typed,
};
use crate::erase::AnyShared;
use crate::exchange::Hone;
use crate::graph::{BuildError, LogicalEdge, LogicalGraph, LogicalNode, NodeId, NodeKind, Partitioning};
use crate::join::IntervalJoin;
use crate::operator::{Operator, Output};
use crate::ops::{Filter, FlatMap, Identity, KeyedProcess, Map};
use crate::router::KeyHash;
use crate::sink::SinkFn;
use crate::source::Source;
use crate::sync::lock;
use crate::tuple::{Data, Tuple};
use crate::window::{Aggregate, Window, WindowAggregate, WindowResult};
use crate::wire::Wire;

struct QueryGraph {
    name: String,
    nodes: Vec<NodeEntry>,
    edges: Vec<EdgeEntry>,
    /// Mistakes made while building, reported by `build`.
    errors: Vec<BuildError>,
}

/// A continuous query under construction.
#[derive(Clone)]
pub struct Query {
    graph: Arc<Mutex<QueryGraph>>,
}

/// A query that passed every check, ready for [`crate::Engine::start`].
pub struct BuiltQuery {
    pub(crate) name: String,
    pub(crate) graph: LogicalGraph,
    pub(crate) nodes: Vec<NodeEntry>,
    pub(crate) edges: Vec<EdgeEntry>,
}

impl BuiltQuery {
    /// The query's name.
    /// ```
    /// # use moirai_engine::{Engine, EngineConfig, Query, Source};
    /// let q = Query::new("clicks"); q.source("s", Source::new(|_, _| 0..1u64)).discard("out");
    /// assert_eq!(q.build().unwrap().name(), "clicks");
    /// ```
    pub fn name(&self) -> &str {
        &self.name
    }

    /// Its logical graph.
    /// ```
    /// # use moirai_engine::{Engine, EngineConfig, Query, Source};
    /// let q = Query::new("q"); q.source("s", Source::new(|_, _| 0..1u64)).discard("out");
    /// assert_eq!(q.build().unwrap().graph().nodes.len(), 2);
    /// ```
    pub fn graph(&self) -> &LogicalGraph {
        &self.graph
    }
}

impl Query {
    /// A new, empty query.
    /// ```
    /// # use moirai_engine::{Engine, EngineConfig, Query, Source};
    /// let q = Query::new("words");
    /// assert!(q.build().is_err(), "an empty query does not build");
    /// ```
    pub fn new(name: &str) -> Self {
        let mut errors = Vec::new();
        if name.trim().is_empty() {
            errors.push(BuildError::Config("a query needs a non-empty name".into()));
        }
        Query {
            graph: Arc::new(Mutex::new(QueryGraph {
                name: name.to_string(),
                nodes: Vec::new(),
                edges: Vec::new(),
                errors,
            })),
        }
    }

    /// Adds a source.
    /// ```
    /// # use moirai_engine::{Engine, EngineConfig, Query, Source};
    /// let q = Query::new("q");
    /// q.source("numbers", Source::new(|_, _| 0..1000u64).rate(500.0)).discard("out");
    /// ```
    pub fn source<T: Data>(&self, name: &str, source: Source<T>) -> Stream<T> {
        if let Err(e) = source.offered.validate() {
            let mut g = lock(&self.graph);
            let query = g.name.clone();
            g.errors.push(BuildError::Config(format!("query '{query}', source '{name}': {e}")));
        }
        let id = self.add(
            name,
            NodeKind::Source,
            Role::Source,
            Box::new(SourceCode(source)),
            Some(Box::new(Typed::<T>(PhantomData))),
        );
        Stream::new(self.graph.clone(), id)
    }

    fn add(
        &self,
        name: &str,
        kind: NodeKind,
        role: Role,
        code: Box<dyn NodeCode>,
        output: Option<Box<dyn OutputCode>>,
    ) -> NodeId {
        let ports = match role {
            Role::Source => 0,
            Role::Join => 2,
            _ => 1,
        };
        let mut g = lock(&self.graph);
        let node =
            LogicalNode { query: g.name.clone(), name: name.to_string(), kind, ports, parallelism: 1, thread: None };
        g.nodes.push(NodeEntry { node, code, output, role, wire: None });
        g.nodes.len() - 1
    }

    /// Checks the query and resolves default partitionings.
    /// ```
    /// # use moirai_engine::{Engine, EngineConfig, Query, Source};
    /// let q = Query::new("q"); q.source("s", Source::new(|_, _| 0..1u64)).parallelism(0).discard("out");
    /// assert!(q.build().err().unwrap().to_string().contains("parallelism 0"));
    /// ```
    pub fn build(self) -> Result<BuiltQuery, BuildError> {
        let g = std::mem::replace(
            &mut *lock(&self.graph),
            QueryGraph {
                name: String::new(),
                nodes: Vec::new(),
                edges: Vec::new(),
                errors: vec![BuildError::Config("this query was already built".into())],
            },
        );
        if let Some(e) = g.errors.into_iter().next() {
            return Err(e);
        }
        if g.nodes.is_empty() {
            return Err(BuildError::EmptyQuery { query: g.name });
        }
        let mut edges = g.edges;
        for e in &mut edges {
            let (pf, pt) = (g.nodes[e.edge.from].node.parallelism, g.nodes[e.edge.to].node.parallelism);
            e.edge.partitioning =
                e.partitioning.unwrap_or(if pf == pt { Partitioning::Forward } else { Partitioning::Rebalance });
        }
        let graph = LogicalGraph {
            nodes: g.nodes.iter().map(|n| n.node.clone()).collect(),
            edges: edges.iter().map(|e| e.edge.clone()).collect(),
        };
        graph.validate()?;
        Ok(BuiltQuery { name: g.name, graph, nodes: g.nodes, edges })
    }
}

/// A stream of tuples of type `T`: the output of one logical operator.
pub struct Stream<T> {
    graph: Arc<Mutex<QueryGraph>>,
    node: NodeId,
    partitioning: Option<Partitioning>,
    key_hash: Option<AnyShared>,
    exchange: Option<Hone>,
    _type: PhantomData<fn() -> T>,
}

impl<T> Clone for Stream<T> {
    fn clone(&self) -> Self {
        Stream {
            graph: self.graph.clone(),
            node: self.node,
            partitioning: self.partitioning,
            key_hash: self.key_hash.clone(),
            exchange: self.exchange.clone(),
            _type: PhantomData,
        }
    }
}

/// Hashes keys the same way everywhere (partitioning and tests).
/// ```
/// assert_eq!(moirai_engine::query::key_hash(&"a"), moirai_engine::query::key_hash(&"a"));
/// ```
pub fn key_hash<K: Hash>(key: &K) -> u64 {
    FxBuildHasher.hash_one(key)
}

impl<T: Data> Stream<T> {
    fn new(graph: Arc<Mutex<QueryGraph>>, node: NodeId) -> Self {
        Stream { graph, node, partitioning: None, key_hash: None, exchange: None, _type: PhantomData }
    }

    fn query(&self) -> Query {
        Query { graph: self.graph.clone() }
    }

    fn connect(&self, to: NodeId, port: usize) {
        let mut g = lock(&self.graph);
        let edge = LogicalEdge {
            from: self.node,
            to,
            port,
            partitioning: Partitioning::Forward,
            exchange: self.exchange.clone(),
        };
        g.edges.push(EdgeEntry { edge, partitioning: self.partitioning, key_hash: self.key_hash.clone() });
    }

    fn then<U: Data>(self, name: &str, kind: NodeKind, role: Role, code: Box<dyn NodeCode>) -> Stream<U> {
        let output: Option<Box<dyn OutputCode>> = match kind {
            NodeKind::Sink => None,
            _ => Some(Box::new(Typed::<U>(PhantomData))),
        };
        let id = self.query().add(name, kind, role, code, output);
        if kind == NodeKind::Sink {
            // A sink has no stream to call `.parallelism` on: it runs as many instances as its
            // input, so that it can be chained and no single sink thread bottlenecks the query.
            let mut g = lock(&self.graph);
            g.nodes[id].node.parallelism = g.nodes[self.node].node.parallelism;
        }
        self.connect(id, 0);
        Stream::new(self.graph, id)
    }

    /// Sets how many instances run the operator that produces this stream.
    /// ```
    /// # use moirai_engine::{Engine, EngineConfig, Query, Source};
    /// let q = Query::new("q");
    /// q.source("s", Source::new(|_, _| 0..10u64)).map("double", |x| 2 * x).parallelism(4).discard("out");
    /// ```
    pub fn parallelism(self, n: usize) -> Self {
        lock(&self.graph).nodes[self.node].node.parallelism = n;
        self
    }

    /// Places the operator that produces this stream on the named thread of the `fused`
    /// threading model (`--threading fused:NAME,...`; a name it does not declare is an error).
    /// Other threading models ignore it. A chain runs on the thread of its first placed operator.
    /// ```
    /// # use moirai_engine::{Engine, EngineConfig, Query, Source};
    /// let q = Query::new("q");
    /// q.source("s", Source::new(|_, _| 0..10u64)).thread("io").map("work", |x| x + 1).thread("cpu").discard("out");
    /// ```
    pub fn thread(self, name: &str) -> Self {
        lock(&self.graph).nodes[self.node].node.thread = Some(name.to_string());
        self
    }

    fn partitioned(mut self, p: Partitioning) -> Self {
        self.partitioning = Some(p);
        self.key_hash = None;
        self
    }

    /// Instance *i* feeds instance *i* of the next operator (needs equal parallelism).
    /// ```
    /// # use moirai_engine::{Engine, EngineConfig, Query, Source};
    /// let q = Query::new("q");
    /// q.source("s", Source::new(|_, _| 0..10u64)).forward().map("inc", |x| x + 1).discard("out");
    /// ```
    pub fn forward(self) -> Self {
        self.partitioned(Partitioning::Forward)
    }
    /// Round-robin over the next operator's instances.
    /// ```
    /// # use moirai_engine::{Engine, EngineConfig, Query, Source};
    /// let q = Query::new("q");
    /// q.source("s", Source::new(|_, _| 0..10u64)).rebalance().map("inc", |x| x + 1).parallelism(2).discard("out");
    /// ```
    pub fn rebalance(self) -> Self {
        self.partitioned(Partitioning::Rebalance)
    }
    /// A random instance of the next operator per tuple.
    /// ```
    /// # use moirai_engine::{Engine, EngineConfig, Query, Source};
    /// let q = Query::new("q");
    /// q.source("s", Source::new(|_, _| 0..10u64)).shuffle().map("inc", |x| x + 1).parallelism(2).discard("out");
    /// ```
    pub fn shuffle(self) -> Self {
        self.partitioned(Partitioning::Shuffle)
    }
    /// Every tuple to every instance of the next operator.
    /// ```
    /// # use moirai_engine::{Engine, EngineConfig, Query, Source};
    /// let q = Query::new("q");
    /// q.source("s", Source::new(|_, _| 0..10u64)).broadcast().map("inc", |x| x + 1).parallelism(2).discard("out");
    /// ```
    pub fn broadcast(self) -> Self {
        self.partitioned(Partitioning::Broadcast)
    }

    /// Sends this stream through a Hone exchange: the instances of the operator producing it
    /// share a link of `hone.capacity` tuples/s, and every `hone.tau` its scheduler (LBF, RR or
    /// FIFO) decides whose queued tuples cross ([`crate::exchange`]). Which consumer instance a
    /// tuple reaches is still the partitioning's choice; the edge is never chained.
    /// ```
    /// # use moirai_engine::{Hone, Query, Source};
    /// # use std::time::Duration;
    /// let q = Query::new("q");
    /// q.source("s", Source::new(|_, _| 0..10u64)).parallelism(2).exchange(Hone::lbf(Duration::from_millis(10)).capacity(20_000)).map("m", |x| x).discard("out");
    /// ```
    pub fn exchange(mut self, hone: Hone) -> Self {
        if let Err(e) = hone.validate() {
            let mut g = lock(&self.graph);
            let (query, name) = (g.name.clone(), g.nodes[self.node].node.name.clone());
            g.errors.push(BuildError::Config(format!("query '{query}', exchange after '{name}': {e}")));
        }
        self.exchange = Some(hone);
        self
    }

    /// Applies `f` to each tuple's data.
    /// ```
    /// # use moirai_engine::{Engine, EngineConfig, Query, Source};
    /// let q = Query::new("q");
    /// let out = q.source("s", Source::new(|_, _| 1..4u64)).map("square", |x| x * x).collect("out");
    /// # Engine::start(EngineConfig::default(), vec![q.build().unwrap()]).unwrap().wait().unwrap();
    /// # assert_eq!(out.take().iter().map(|t| t.data).collect::<Vec<_>>(), [1, 4, 9]);
    /// ```
    pub fn map<U: Data>(self, name: &str, f: impl Fn(T) -> U + Send + Sync + 'static) -> Stream<U> {
        let f = Arc::new(f);
        self.process_as(name, Role::Stateless("map"), move |_| Map(f.clone()))
    }

    /// Keeps the tuples for which `f` is true.
    /// ```
    /// # use moirai_engine::{Engine, EngineConfig, Query, Source};
    /// let q = Query::new("q");
    /// let out = q.source("s", Source::new(|_, _| 0..10u64)).filter("even", |x| x % 2 == 0).collect("out");
    /// # Engine::start(EngineConfig::default(), vec![q.build().unwrap()]).unwrap().wait().unwrap();
    /// # assert_eq!(out.take().len(), 5);
    /// ```
    pub fn filter(self, name: &str, f: impl Fn(&T) -> bool + Send + Sync + 'static) -> Stream<T> {
        let f = Arc::new(f);
        self.process_as(name, Role::Stateless("filter"), move |_| Filter(f.clone()))
    }

    /// Replaces each tuple by the items `f` returns.
    /// ```
    /// # use moirai_engine::{Engine, EngineConfig, Query, Source};
    /// let q = Query::new("q");
    /// q.source("lines", Source::new(|_, _| ["a b", "c"].into_iter())).flat_map("split", |l: &str| l.split(' ').map(String::from).collect::<Vec<_>>()).discard("out");
    /// ```
    pub fn flat_map<U: Data, I: IntoIterator<Item = U>>(
        self,
        name: &str,
        f: impl Fn(T) -> I + Send + Sync + 'static,
    ) -> Stream<U> {
        let f = Arc::new(f);
        self.process_as(name, Role::Stateless("flat_map"), move |_| FlatMap(f.clone()))
    }

    /// Runs a custom [`Operator`], made per instance by `make(instance)`.
    /// ```
    /// # use moirai_engine::{Operator, Output, Query, Source, Tuple};
    /// struct Double; impl Operator<u64, u64> for Double { fn process(&mut self, t: Tuple<u64>, out: &mut Output<'_, u64>) { out.emit(t.with(2 * t.data)) } }
    /// let q = Query::new("q");
    /// q.source("s", Source::new(|_, _| 0..10u64)).process("double", |_instance| Double).discard("out");
    /// ```
    pub fn process<U: Data, Op: Operator<T, U>>(
        self,
        name: &str,
        make: impl Fn(usize) -> Op + Send + 'static,
    ) -> Stream<U> {
        self.process_as(name, Role::Process, make)
    }

    fn process_as<U: Data, Op: Operator<T, U>>(
        self,
        name: &str,
        role: Role,
        make: impl Fn(usize) -> Op + Send + 'static,
    ) -> Stream<U> {
        self.then(name, NodeKind::Operator, role, Box::new(OneInputCode { make, _types: PhantomData }))
    }

    /// Declares that this stream's data can cross processes as JSON (serde), which micro-batch
    /// execution needs where the stream is shuffled (before `key_by`) or reaches the sink.
    ///
    /// ```
    /// # use moirai_engine::{Query, Source};
    /// let q = Query::new("q");
    /// q.source("s", Source::new(|_, _| 0..3u64)).map("double", |x: u64| 2 * x).serde().discard("out");
    /// ```
    pub fn serde(self) -> Self
    where
        T: serde::Serialize + serde::de::DeserializeOwned,
    {
        lock(&self.graph).nodes[self.node].wire = Some(Arc::new(Wire::<T>::new()));
        self
    }

    /// Merges this stream with `others` (of the same query) into one.
    /// ```
    /// # use moirai_engine::{Engine, EngineConfig, Query, Source};
    /// let q = Query::new("q"); let (a, b) = (q.source("a", Source::new(|_, _| 0..3u64)), q.source("b", Source::new(|_, _| 3..5u64)));
    /// let out = a.union("both", vec![b]).collect("out");
    /// # Engine::start(EngineConfig::default(), vec![q.build().unwrap()]).unwrap().wait().unwrap();
    /// # assert_eq!(out.take().len(), 5);
    /// ```
    pub fn union(self, name: &str, others: Vec<Stream<T>>) -> Stream<T> {
        let merged: Stream<T> = self.clone().then(
            name,
            NodeKind::Operator,
            Role::Union,
            Box::new(OneInputCode::<T, T, Identity, _> { make: |_| Identity, _types: PhantomData }),
        );
        for other in others {
            if !Arc::ptr_eq(&other.graph, &self.graph) {
                let mut g = lock(&self.graph);
                let query = g.name.clone();
                g.errors.push(BuildError::InvalidEdge {
                    query,
                    detail: format!("union '{name}' takes a stream of another query"),
                });
                continue;
            }
            other.connect(merged.node, 0);
        }
        merged
    }

    /// Partitions by key: all tuples with one key reach one instance of the next operator.
    ///
    /// ```
    /// # use moirai_engine::{Agg, Query, Source, Window};
    /// # use std::time::Duration;
    /// let q = Query::new("q");
    /// q.source("s", Source::new(|_, _| 0..100u64)).key_by(|x: &u64| x % 10).window("n", Window::tumbling(Duration::from_secs(1)), Agg::count()).discard("out");
    /// ```
    pub fn key_by<K: Data + Hash + Eq>(self, key: impl Fn(&T) -> K + Send + Sync + 'static) -> KeyedStream<K, T> {
        let key: Arc<dyn Fn(&T) -> K + Send + Sync> = Arc::new(key);
        let k = key.clone();
        let hash: KeyHash<T> = Arc::new(move |t: &T| key_hash(&k(t)));
        let mut stream = self.partitioned(Partitioning::KeyBy);
        stream.key_hash = Some(Arc::new(hash));
        KeyedStream { stream, key }
    }

    /// Ends the stream in `f`, called for every tuple; made per instance by `make(instance)`.
    /// ```
    /// # use moirai_engine::{Engine, EngineConfig, Query, Source};
    /// let q = Query::new("q");
    /// q.source("s", Source::new(|_, _| 0..10u64)).sink_with("print", |instance| move |t: moirai_engine::Tuple<u64>| println!("{instance}: {}", t.data));
    /// ```
    pub fn sink_with<F: FnMut(Tuple<T>) + Send + 'static>(
        self,
        name: &str,
        make: impl Fn(usize) -> F + Send + 'static,
    ) {
        let make = move |i: usize| -> SinkFn<T> { Box::new(make(i)) };
        let _: Stream<()> =
            self.then(name, NodeKind::Sink, Role::Sink, Box::new(SinkCode { make, _types: PhantomData }));
    }

    /// Ends the stream in `f`, shared by all instances.
    /// ```
    /// # use moirai_engine::{Engine, EngineConfig, Query, Source};
    /// let q = Query::new("q");
    /// q.source("s", Source::new(|_, _| 0..10u64)).sink("print", |t| println!("{}", t.data));
    /// ```
    pub fn sink(self, name: &str, f: impl Fn(Tuple<T>) + Send + Sync + 'static) {
        let f = Arc::new(f);
        self.sink_with(name, move |_| {
            let f = f.clone();
            move |t| f(t)
        })
    }

    /// Ends the stream, dropping the tuples (latency is still recorded).
    /// ```
    /// # use moirai_engine::{Engine, EngineConfig, Query, Source};
    /// let q = Query::new("q");
    /// q.source("s", Source::new(|_, _| 0..10u64)).discard("out");
    /// ```
    pub fn discard(self, name: &str) {
        self.sink_with(name, |_| |_t: Tuple<T>| {})
    }

    /// Ends the stream in a vector the caller can read after the run.
    /// ```
    /// # use moirai_engine::{Engine, EngineConfig, Query, Source};
    /// let q = Query::new("q");
    /// let out = q.source("s", Source::new(|_, _| 0..3u64)).collect("out");
    /// # Engine::start(EngineConfig::default(), vec![q.build().unwrap()]).unwrap().wait().unwrap();
    /// # assert_eq!(out.take().len(), 3);
    /// ```
    pub fn collect(self, name: &str) -> Collected<T> {
        let collected = Collected(Arc::new(Mutex::new(Vec::new())));
        let c = collected.clone();
        self.sink_with(name, move |_| {
            let c = c.clone();
            move |t| lock(&c.0).push(t)
        });
        collected
    }
}

/// Tuples gathered by [`Stream::collect`].
pub struct Collected<T>(Arc<Mutex<Vec<Tuple<T>>>>);

impl<T> Clone for Collected<T> {
    fn clone(&self) -> Self {
        Collected(self.0.clone())
    }
}

impl<T> Collected<T> {
    /// Takes what was collected so far.
    /// ```
    /// # use moirai_engine::{Engine, EngineConfig, Query, Source};
    /// let q = Query::new("q"); let out = q.source("s", Source::new(|_, _| 0..3u64)).collect("out");
    /// Engine::start(EngineConfig::default(), vec![q.build().unwrap()]).unwrap().wait().unwrap();
    /// assert_eq!(out.take().iter().map(|t| t.data).collect::<Vec<_>>(), [0, 1, 2]);
    /// ```
    pub fn take(&self) -> Vec<Tuple<T>> {
        std::mem::take(&mut *lock(&self.0))
    }
}

/// A stream partitioned by key; keyed operators follow it.
pub struct KeyedStream<K, T> {
    stream: Stream<T>,
    key: Arc<dyn Fn(&T) -> K + Send + Sync>,
}

impl<K: Data + Hash + Eq, T: Data> KeyedStream<K, T> {
    /// Sends the keyed stream through a Hone exchange (see [`Stream::exchange`]).
    /// ```
    /// # use moirai_engine::{Hone, Output, Query, Source};
    /// # use std::time::Duration;
    /// let q = Query::new("q");
    /// q.source("s", Source::new(|_, _| 0..10u64)).parallelism(2).key_by(|x: &u64| *x).exchange(Hone::lbf(Duration::from_millis(10)).capacity(20_000)).process("p", |_| (), |_, _, t, out: &mut Output<'_, u64>| out.emit(t)).discard("out");
    /// ```
    pub fn exchange(mut self, hone: Hone) -> Self {
        self.stream = self.stream.exchange(hone);
        self
    }

    /// Stateful processing per key: `f(key, state, tuple, out)`; a key's state starts as
    /// `init(key)`.
    /// ```
    /// # use moirai_engine::{Engine, EngineConfig, Output, Query, Source};
    /// let q = Query::new("q");
    /// let sums = q.source("s", Source::new(|_, _| 0..6u64)).key_by(|x: &u64| x % 2).process("running sum", |_| 0u64, |_, sum, t, out: &mut Output<'_, u64>| { *sum += t.data; out.emit(t.with(*sum)) }).collect("out");
    /// # Engine::start(EngineConfig::default(), vec![q.build().unwrap()]).unwrap().wait().unwrap();
    /// # assert_eq!(sums.take().iter().map(|t| t.data).max(), Some(9));
    /// ```
    pub fn process<U: Data, S: Send + 'static>(
        self,
        name: &str,
        init: impl Fn(&K) -> S + Send + Sync + 'static,
        f: impl FnMut(&K, &mut S, Tuple<T>, &mut Output<'_, U>) + Clone + Send + 'static,
    ) -> Stream<U> {
        let (key, init) = (self.key, Arc::new(init));
        self.stream.process_as(name, Role::Keyed("keyed process"), move |_| KeyedProcess {
            key: key.clone(),
            init: init.clone(),
            f: f.clone(),
            state: FxHashMap::default(),
        })
    }

    /// Runs a custom [`Operator`] on the keyed stream: every tuple of a key reaches the same
    /// instance, and the operator sees watermarks, timers and the end of input (keep per-key
    /// state in the operator, e.g. in a map).
    /// ```
    /// # use moirai_engine::{Operator, Output, Query, Source, Tuple};
    /// struct Count(u64); impl Operator<u64, u64> for Count { fn process(&mut self, t: Tuple<u64>, _: &mut Output<'_, u64>) { self.0 += 1 } fn on_end(&mut self, out: &mut Output<'_, u64>) { out.emit(Tuple::at(0, self.0)) } }
    /// let q = Query::new("q");
    /// q.source("s", Source::new(|_, _| 0..10u64)).key_by(|x: &u64| x % 3).operator("count", |_instance| Count(0)).discard("out");
    /// ```
    pub fn operator<U: Data, Op: Operator<T, U>>(
        self,
        name: &str,
        make: impl Fn(usize) -> Op + Send + 'static,
    ) -> Stream<U> {
        self.stream.process_as(name, Role::Keyed("keyed operator"), make)
    }

    /// Declares that the keyed stream's data can cross processes (see [`Stream::serde`]).
    /// ```
    /// # use moirai_engine::{Output, Query, Source};
    /// let q = Query::new("q");
    /// q.source("s", Source::new(|_, _| 0..10u64)).key_by(|x: &u64| x % 3).serde().process("p", |_| (), |_, _, t, out: &mut Output<'_, u64>| out.emit(t)).discard("out");
    /// ```
    pub fn serde(mut self) -> Self
    where
        T: serde::Serialize + serde::de::DeserializeOwned,
    {
        self.stream = self.stream.serde();
        self
    }

    /// Aggregates each key's tuples per window.
    /// ```
    /// # use moirai_engine::{Agg, Engine, EngineConfig, Query, Source, Window};
    /// # use std::time::Duration;
    /// let q = Query::new("q");
    /// let counts = q.source("s", Source::new(|_, _| 0..100u64)).key_by(|x: &u64| x % 2).window("count", Window::tumbling(Duration::from_secs(1)), Agg::count()).collect("out");
    /// # Engine::start(EngineConfig::default(), vec![q.build().unwrap()]).unwrap().wait().unwrap();
    /// # assert_eq!(counts.take().iter().map(|t| t.data.value).sum::<f64>(), 100.0);
    /// ```
    pub fn window<A: Aggregate<T>>(self, name: &str, window: Window, agg: A) -> Stream<WindowResult<K, A::Out>> {
        if let Err(e) = window.validate() {
            let mut g = lock(&self.stream.graph);
            let query = g.name.clone();
            g.errors.push(BuildError::Config(format!("query '{query}', window '{name}': {e}")));
        }
        let key = self.key;
        self.stream
            .process_as(name, Role::Window(window), move |_| WindowAggregate::new(window, key.clone(), agg.clone()))
    }

    /// Joins with `right` on the key: emits `f(key, l, r)` for each pair whose event times satisfy
    /// `l + lower_ns <= r <= l + upper_ns`.
    /// ```
    /// # use moirai_engine::{Engine, EngineConfig, Query, Source};
    /// let q = Query::new("q"); let (l, r) = (q.source("l", Source::new(|_, _| 0..3u64)), q.source("r", Source::new(|_, _| 0..3u64)));
    /// l.key_by(|x: &u64| *x).interval_join("pairs", r.key_by(|x: &u64| *x), -1_000_000_000, 1_000_000_000, |k, _, _| *k).discard("out");
    /// ```
    pub fn interval_join<R: Data, U: Data>(
        self,
        name: &str,
        right: KeyedStream<K, R>,
        lower_ns: i64,
        upper_ns: i64,
        f: impl Fn(&K, &T, &R) -> U + Send + Sync + 'static,
    ) -> Stream<U> {
        let query = self.stream.query();
        {
            let mut g = lock(&self.stream.graph);
            let q = g.name.clone();
            if !Arc::ptr_eq(&self.stream.graph, &right.stream.graph) {
                g.errors.push(BuildError::InvalidEdge {
                    query: q.clone(),
                    detail: format!("join '{name}' takes a stream of another query"),
                });
            }
            if lower_ns > upper_ns {
                g.errors.push(BuildError::Config(format!(
                    "query '{q}', join '{name}': lower bound {lower_ns} ns > upper bound {upper_ns} ns; swap the bounds"
                )));
            }
        }
        let (lk, rk, f) = (self.key, right.key, Arc::new(f));
        let make = move |_| IntervalJoin {
            lower_ns,
            upper_ns,
            left_key: lk.clone(),
            right_key: rk.clone(),
            f: f.clone(),
            left: FxHashMap::default(),
            right: FxHashMap::default(),
        };
        let code = TwoInputCode::<T, R, U, _, _> { make, _types: PhantomData };
        let id =
            query.add(name, NodeKind::Operator, Role::Join, Box::new(code), Some(Box::new(Typed::<U>(PhantomData))));
        self.stream.connect(id, 0);
        if Arc::ptr_eq(&self.stream.graph, &right.stream.graph) {
            right.stream.connect(id, 1);
        }
        Stream::new(self.stream.graph, id)
    }
}

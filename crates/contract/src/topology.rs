//! The `/topology` document of a running engine (`docs/metrics-endpoint.md`).
//!
//! The engine writes it from its plan; readers parse it with serde. Fields that older engines did
//! not write have defaults, so a reader accepts their documents too.
//!
//! ```
//! use moirai_contract::topology::{NodeKind, Topology};
//!
//! let json = r#"{"pid": 42, "queries": ["q"],
//!     "logical": {"nodes": [{"query": "q", "name": "src", "kind": "source"},
//!                           {"query": "q", "name": "out", "kind": "sink", "ports": 1}],
//!                 "edges": [{"from": 0, "to": 1, "partitioning": "forward"}]},
//!     "physical": [{"id": 0, "query": "q", "name": "src (1/1)", "logical": [0], "instance": 0, "tid": 7},
//!                  {"id": 1, "query": "q", "name": "out (1/1)", "logical": [1], "instance": 0, "tid": 8}],
//!     "channels": [{"from": 0, "to": 1}]}"#;
//! let t: Topology = serde_json::from_str(json).unwrap();
//! assert_eq!(t.head_kind(0), Some(NodeKind::Source));
//! assert!(!t.is_pool());
//! ```

use std::fmt;

use serde::{Deserialize, Serialize};

/// What a logical operator does with streams.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum NodeKind {
    /// Produces a stream; has no input.
    Source,
    /// Consumes streams on its input ports and produces one stream.
    #[default]
    Operator,
    /// Consumes one stream; produces none.
    Sink,
}

impl fmt::Display for NodeKind {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            NodeKind::Source => "source",
            NodeKind::Operator => "operator",
            NodeKind::Sink => "sink",
        })
    }
}

/// How the tuples of a stream are spread over the instances of the consuming operator.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Partitioning {
    /// Instance *i* sends to instance *i* only; needs equal parallelism. Chaining needs it.
    #[default]
    Forward,
    /// Round-robin over the consumer's instances.
    Rebalance,
    /// A uniformly random consumer instance per tuple.
    Shuffle,
    /// By a hash of the tuple's key: all tuples of a key reach one instance.
    KeyBy,
    /// Every tuple to every consumer instance.
    Broadcast,
}

impl fmt::Display for Partitioning {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            Partitioning::Forward => "forward",
            Partitioning::Rebalance => "rebalance",
            Partitioning::Shuffle => "shuffle",
            Partitioning::KeyBy => "key_by",
            Partitioning::Broadcast => "broadcast",
        })
    }
}

fn one() -> usize {
    1
}

/// A logical operator, as the user wrote it.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct LogicalNode {
    /// The query it belongs to.
    pub query: String,
    /// Its name, unique within the query.
    pub name: String,
    /// Source, operator or sink.
    pub kind: NodeKind,
    /// How many input ports it has (0 for a source, 2 for a join).
    #[serde(default)]
    pub ports: usize,
    /// How many instances run it (fission).
    #[serde(default = "one")]
    pub parallelism: usize,
    /// The named thread it is placed on under the `fused` threading model (none: the first).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub thread: Option<String>,
}

/// A Hone exchange on a stream, as the document describes it.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct Exchange {
    /// The link's queueing discipline: `lbf`, `rr` or `fifo`.
    pub policy: String,
    /// The scheduling interval τ, ms.
    pub tau_ms: f64,
    /// Tuples per second the link carries.
    pub capacity: u64,
    /// Tuples each producer instance may queue before it blocks (none: the channel capacity).
    #[serde(default)]
    pub queue: Option<usize>,
}

/// A stream from one logical operator into an input port of another.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct LogicalEdge {
    /// The producing operator (an index into [`LogicalGraph::nodes`]).
    pub from: usize,
    /// The consuming operator.
    pub to: usize,
    /// The consumer's input port (0, or 1 for a join's right input).
    #[serde(default)]
    pub port: usize,
    /// How tuples are spread over the consumer's instances.
    #[serde(default)]
    pub partitioning: Partitioning,
    /// A Hone exchange on this stream, if any.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub exchange: Option<Exchange>,
}

/// Logical operators and streams of every query the engine runs.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct LogicalGraph {
    /// Operators.
    pub nodes: Vec<LogicalNode>,
    /// Streams.
    pub edges: Vec<LogicalEdge>,
}

/// A physical operator: one instance of a chain of fused logical operators, with its thread.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct PhysicalOperator {
    /// Physical id: its index in [`Topology::physical`] (the `id` label in `/metrics`).
    pub id: usize,
    /// Query.
    pub query: String,
    /// Physical name, `"a -> b (i/n)"`.
    pub name: String,
    /// The fused logical operators (indices into [`LogicalGraph::nodes`]), upstream first.
    pub logical: Vec<usize>,
    /// Their names.
    #[serde(default)]
    pub logical_names: Vec<String>,
    /// Instance index, from 0.
    pub instance: usize,
    /// Instances of this chain.
    #[serde(default = "one")]
    pub parallelism: usize,
    /// Kind of the chain head.
    #[serde(default)]
    pub kind: NodeKind,
    /// Linux thread id of the thread it runs on: its own under the dedicated model; under a
    /// pool model, the worker that ran it last (0 before it ran).
    pub tid: i32,
}

/// A channel between two physical operators, realising part of a logical edge.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct PhysicalChannel {
    /// Producer (a physical id).
    pub from: usize,
    /// Consumer.
    pub to: usize,
    /// The logical edge it carries.
    #[serde(default)]
    pub edge: usize,
    /// The consumer's input port.
    #[serde(default)]
    pub port: usize,
    /// The logical edge's partitioning.
    #[serde(default)]
    pub partitioning: Partitioning,
}

/// A worker thread of a pool threading model.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct PoolThread {
    /// Thread name.
    pub name: String,
    /// Linux thread id (0 before it started).
    pub tid: i32,
}

/// What `/topology` serves.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct Topology {
    /// The engine's process id.
    pub pid: u32,
    /// The threading model: `dedicated`, `dynamic:2`, `elastic:1-2:start=1:period=1s`, `fused`,
    /// `policy:qs:2` (empty from engines that did not say).
    #[serde(default)]
    pub threading: String,
    /// The worker threads of a pool model (empty under the dedicated model).
    #[serde(default)]
    pub threads: Vec<PoolThread>,
    /// Worker threads running operators now (pool models; 0 under the dedicated model).
    #[serde(default)]
    pub thread_level: usize,
    /// Whether chaining is on.
    #[serde(default)]
    pub chaining: bool,
    /// Query names.
    pub queries: Vec<String>,
    /// Logical operators and streams of all queries (node ids index `logical.nodes`).
    pub logical: LogicalGraph,
    /// Physical operators, by id.
    pub physical: Vec<PhysicalOperator>,
    /// Channels between physical operators.
    pub channels: Vec<PhysicalChannel>,
}

impl Topology {
    /// True when the engine runs a pool threading model: a worker thread runs whichever operator
    /// is queued next, so no thread belongs to one operator.
    pub fn is_pool(&self) -> bool {
        !self.threading.is_empty() && self.threading != "dedicated"
    }

    /// The kind of the logical operator at the head of physical operator `id` (read from the
    /// logical graph, so that documents without a physical `kind` answer too).
    pub fn head_kind(&self, id: usize) -> Option<NodeKind> {
        let head = *self.physical.get(id)?.logical.first()?;
        self.logical.nodes.get(head).map(|n| n.kind)
    }

    /// Checks that physical ids are `0..n` in order, as every reader indexes by them; the error
    /// says what is wrong.
    pub fn check_ids(&self) -> Result<(), TopologyError> {
        match self.physical.iter().enumerate().find(|(i, p)| p.id != *i) {
            Some((at, p)) => Err(TopologyError::Ids { at, id: p.id }),
            None => Ok(()),
        }
    }
}

/// Why a `/topology` document cannot be used.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum TopologyError {
    /// Physical ids are not `0..n` in order.
    Ids {
        /// The position.
        at: usize,
        /// The id found there.
        id: usize,
    },
}

impl fmt::Display for TopologyError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            TopologyError::Ids { at, id } => {
                write!(f, "physical ids are not 0..n in order (position {at} has id {id})")
            }
        }
    }
}

impl std::error::Error for TopologyError {}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn kinds_and_partitionings_print_as_they_serialise() {
        for k in [NodeKind::Source, NodeKind::Operator, NodeKind::Sink] {
            assert_eq!(serde_json::to_value(k).unwrap(), k.to_string());
        }
        for p in [
            Partitioning::Forward,
            Partitioning::Rebalance,
            Partitioning::Shuffle,
            Partitioning::KeyBy,
            Partitioning::Broadcast,
        ] {
            assert_eq!(serde_json::to_value(p).unwrap(), p.to_string());
        }
    }

    #[test]
    fn a_document_round_trips_and_misnumbered_ids_are_named() {
        let t = Topology {
            pid: 1,
            threading: "dynamic:2".into(),
            queries: vec!["q".into()],
            physical: vec![PhysicalOperator {
                id: 3,
                query: "q".into(),
                name: "a (1/1)".into(),
                logical: vec![0],
                logical_names: vec!["a".into()],
                instance: 0,
                parallelism: 1,
                kind: NodeKind::Source,
                tid: 0,
            }],
            ..Topology::default()
        };
        let again: Topology = serde_json::from_str(&serde_json::to_string(&t).unwrap()).unwrap();
        assert_eq!(again, t);
        assert!(t.is_pool());
        assert_eq!(t.check_ids().unwrap_err().to_string(), "physical ids are not 0..n in order (position 0 has id 3)");
    }
}

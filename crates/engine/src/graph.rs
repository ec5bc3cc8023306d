//! The logical graph: operators as the user wrote them, and the streams between them.
//!
//! This is structure only (names, parallelism, partitioning), so that validation and planning
//! are pure functions, testable without running anything. The code each operator runs is kept
//! beside it by the query builder ([`crate::query`]).

use std::collections::{HashMap, HashSet};

use serde::Serialize;

/// Index of a logical operator in its [`LogicalGraph`].
pub type NodeId = usize;

pub use moirai_contract::topology::{LogicalNode, NodeKind, Partitioning};

/// A stream from one logical operator into an input port of another.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
pub struct LogicalEdge {
    /// The producing operator.
    pub from: NodeId,
    /// The consuming operator.
    pub to: NodeId,
    /// The consumer's input port (0, or 1 for a join's right input).
    pub port: usize,
    /// How tuples are spread over the consumer's instances.
    pub partitioning: Partitioning,
    /// A Hone exchange: the producer's instances share a link whose scheduler decides whose
    /// tuples cross ([`crate::exchange`]); such an edge is never chained.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub exchange: Option<crate::exchange::Hone>,
}

/// Operators and streams of one or more queries.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize)]
pub struct LogicalGraph {
    /// Operators, indexed by [`NodeId`].
    pub nodes: Vec<LogicalNode>,
    /// Streams.
    pub edges: Vec<LogicalEdge>,
}

impl LogicalGraph {
    /// The graph as the `/topology` document describes it.
    pub fn document(&self) -> moirai_contract::topology::LogicalGraph {
        moirai_contract::topology::LogicalGraph {
            nodes: self.nodes.clone(),
            edges: (self.edges.iter())
                .map(|e| moirai_contract::topology::LogicalEdge {
                    from: e.from,
                    to: e.to,
                    port: e.port,
                    partitioning: e.partitioning,
                    exchange: e.exchange.as_ref().map(crate::exchange::Hone::document),
                })
                .collect(),
        }
    }
}

/// Why a query cannot be built. Each message names the operator and says how to fix it.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
pub enum BuildError {
    /// A query has no operators at all.
    #[error("query '{query}' is empty: add a source, operators and a sink")]
    EmptyQuery {
        /// The query.
        query: String,
    },
    /// Two queries share a name.
    #[error("two queries are named '{query}': give each query its own name")]
    DuplicateQuery {
        /// The query.
        query: String,
    },
    /// An operator has an empty name.
    #[error("query '{query}': an operator has an empty name; every operator needs a name")]
    EmptyName {
        /// The query.
        query: String,
    },
    /// Two operators of one query share a name.
    #[error("query '{query}': two operators are named '{name}'; names must be unique within a query")]
    DuplicateName {
        /// The query.
        query: String,
        /// The name.
        name: String,
    },
    /// Parallelism 0.
    #[error("query '{query}': operator '{name}' has parallelism 0; it must be at least 1")]
    ZeroParallelism {
        /// The query.
        query: String,
        /// The operator.
        name: String,
    },
    /// An operator's output goes nowhere.
    #[error("query '{query}': the stream of '{name}' is never consumed; end it with a sink or remove the operator")]
    DanglingStream {
        /// The query.
        query: String,
        /// The operator.
        name: String,
    },
    /// An input port has no stream.
    #[error("query '{query}': input {port} of '{name}' has no stream connected")]
    MissingInput {
        /// The query.
        query: String,
        /// The operator.
        name: String,
        /// The port.
        port: usize,
    },
    /// An edge names a node or port that does not exist, or a sink/source in the wrong place.
    #[error("query '{query}': invalid stream {detail}")]
    InvalidEdge {
        /// The query.
        query: String,
        /// What is wrong.
        detail: String,
    },
    /// The graph has a cycle.
    #[error("query '{query}' is not a DAG: the streams form a cycle through {cycle}; remove one of these streams")]
    NotADag {
        /// The query.
        query: String,
        /// Operator names along the cycle, `a -> b -> a`.
        cycle: String,
    },
    /// Forward partitioning between operators of different parallelism.
    #[error("query '{query}': forward stream '{from}' (parallelism {from_par}) -> '{to}' (parallelism {to_par}) needs equal parallelism; use rebalance() or set equal parallelism")]
    ForwardParallelism {
        /// The query.
        query: String,
        /// Producer.
        from: String,
        /// Its parallelism.
        from_par: usize,
        /// Consumer.
        to: String,
        /// Its parallelism.
        to_par: usize,
    },
    /// A setting is out of range.
    #[error("invalid setting: {0}")]
    Config(String),
}

impl LogicalGraph {
    /// Operators feeding `node`, with the edge index.
    pub fn inputs(&self, node: NodeId) -> impl Iterator<Item = (usize, &LogicalEdge)> {
        self.edges.iter().enumerate().filter(move |(_, e)| e.to == node)
    }

    /// Streams leaving `node`, with the edge index, in the order they were added.
    pub fn outputs(&self, node: NodeId) -> impl Iterator<Item = (usize, &LogicalEdge)> {
        self.edges.iter().enumerate().filter(move |(_, e)| e.from == node)
    }

    /// Checks every rule a runnable graph obeys; the first broken one is the error.
    pub fn validate(&self) -> Result<(), BuildError> {
        let mut names = HashSet::new();
        for n in &self.nodes {
            if n.name.trim().is_empty() {
                return Err(BuildError::EmptyName { query: n.query.clone() });
            }
            if !names.insert((&n.query, &n.name)) {
                return Err(BuildError::DuplicateName { query: n.query.clone(), name: n.name.clone() });
            }
            if n.parallelism == 0 {
                return Err(BuildError::ZeroParallelism { query: n.query.clone(), name: n.name.clone() });
            }
        }
        for e in &self.edges {
            let (Some(from), Some(to)) = (self.nodes.get(e.from), self.nodes.get(e.to)) else {
                let query = self.nodes.first().map(|n| n.query.clone()).unwrap_or_default();
                return Err(BuildError::InvalidEdge {
                    query,
                    detail: format!("{} -> {}: no such operator", e.from, e.to),
                });
            };
            let invalid = |detail: String| Err(BuildError::InvalidEdge { query: to.query.clone(), detail });
            if from.query != to.query {
                return invalid(format!(
                    "'{}' -> '{}' crosses queries '{}' and '{}'",
                    from.name, to.name, from.query, to.query
                ));
            }
            if from.kind == NodeKind::Sink {
                return invalid(format!("'{}' -> '{}': a sink has no output", from.name, to.name));
            }
            if e.port >= to.ports {
                return invalid(format!("'{}' -> '{}': '{}' has no input {}", from.name, to.name, to.name, e.port));
            }
            if e.partitioning == Partitioning::Forward && from.parallelism != to.parallelism {
                return Err(BuildError::ForwardParallelism {
                    query: to.query.clone(),
                    from: from.name.clone(),
                    from_par: from.parallelism,
                    to: to.name.clone(),
                    to_par: to.parallelism,
                });
            }
        }
        // Missing inputs first: a stream that was never connected leaves its consumer without
        // input and its producer dangling, and the consumer is the one to report.
        let connected: HashSet<(NodeId, usize)> = self.edges.iter().map(|e| (e.to, e.port)).collect();
        for (id, n) in self.nodes.iter().enumerate() {
            for port in 0..n.ports {
                if !connected.contains(&(id, port)) {
                    return Err(BuildError::MissingInput { query: n.query.clone(), name: n.name.clone(), port });
                }
            }
        }
        let producers: HashSet<NodeId> = self.edges.iter().map(|e| e.from).collect();
        for (id, n) in self.nodes.iter().enumerate() {
            if n.kind != NodeKind::Sink && !producers.contains(&id) {
                return Err(BuildError::DanglingStream { query: n.query.clone(), name: n.name.clone() });
            }
        }
        self.topological_order().map(|_| ())
    }

    /// The operators in an order where every stream goes forward (Kahn's algorithm), or the
    /// cycle that prevents one.
    pub fn topological_order(&self) -> Result<Vec<NodeId>, BuildError> {
        let mut indegree = vec![0usize; self.nodes.len()];
        let mut outputs: Vec<Vec<NodeId>> = vec![Vec::new(); self.nodes.len()];
        for e in &self.edges {
            indegree[e.to] += 1;
            outputs[e.from].push(e.to);
        }
        let mut ready: Vec<NodeId> = (0..self.nodes.len()).filter(|&n| indegree[n] == 0).rev().collect();
        let mut order = Vec::with_capacity(self.nodes.len());
        while let Some(n) = ready.pop() {
            order.push(n);
            for &to in &outputs[n] {
                indegree[to] -= 1;
                if indegree[to] == 0 {
                    ready.push(to);
                }
            }
        }
        if order.len() == self.nodes.len() {
            return Ok(order);
        }
        // Every node left has an input from another node left: walk backwards until a repeat.
        let left: HashSet<NodeId> = (0..self.nodes.len()).filter(|&n| indegree[n] > 0).collect();
        let mut seen = HashMap::new();
        let mut path = Vec::new();
        let mut at = *left.iter().min().expect("a cycle leaves nodes");
        while !seen.contains_key(&at) {
            seen.insert(at, path.len());
            path.push(at);
            at = self
                .inputs(at)
                .map(|(_, e)| e.from)
                .find(|f| left.contains(f))
                .expect("node in a cycle has an input in it");
        }
        let mut cycle: Vec<&str> = path[seen[&at]..].iter().rev().map(|&n| self.nodes[n].name.as_str()).collect();
        cycle.push(cycle[0]);
        Err(BuildError::NotADag { query: self.nodes[at].query.clone(), cycle: cycle.join(" -> ") })
    }
}

#[cfg(test)]
pub(crate) mod tests {
    use super::*;

    pub(crate) fn node(name: &str, kind: NodeKind, par: usize) -> LogicalNode {
        let ports = match kind {
            NodeKind::Source => 0,
            _ => 1,
        };
        LogicalNode { query: "q".into(), name: name.into(), kind, parallelism: par, ports, thread: None }
    }

    pub(crate) fn edge(from: NodeId, to: NodeId, partitioning: Partitioning) -> LogicalEdge {
        LogicalEdge { from, to, port: 0, partitioning, exchange: None }
    }

    fn pipeline() -> LogicalGraph {
        LogicalGraph {
            nodes: vec![
                node("src", NodeKind::Source, 1),
                node("map", NodeKind::Operator, 1),
                node("out", NodeKind::Sink, 1),
            ],
            edges: vec![edge(0, 1, Partitioning::Forward), edge(1, 2, Partitioning::Forward)],
        }
    }

    #[test]
    fn a_pipeline_is_valid() {
        assert_eq!(pipeline().validate(), Ok(()));
        assert_eq!(pipeline().topological_order(), Ok(vec![0, 1, 2]));
    }

    #[test]
    fn a_cycle_is_named() {
        let mut g = pipeline();
        g.nodes.push(node("loop", NodeKind::Operator, 1));
        g.nodes[1].ports = 1;
        g.edges = vec![
            edge(0, 1, Partitioning::Forward),
            edge(1, 3, Partitioning::Forward),
            edge(3, 1, Partitioning::Forward),
            edge(3, 2, Partitioning::Forward),
        ];
        // Two inputs into port 0 of `map` are a union, allowed; the cycle is not.
        match g.validate() {
            Err(BuildError::NotADag { cycle, .. }) => {
                assert!(cycle == "map -> loop -> map" || cycle == "loop -> map -> loop", "{cycle}")
            }
            other => panic!("{other:?}"),
        }
    }

    #[test]
    fn each_rule_has_its_error() {
        let mut g = pipeline();
        g.nodes[1].parallelism = 0;
        assert!(matches!(g.validate(), Err(BuildError::ZeroParallelism { name, .. }) if name == "map"));

        let mut g = pipeline();
        g.nodes[2].name = "map".into();
        assert!(matches!(g.validate(), Err(BuildError::DuplicateName { name, .. }) if name == "map"));

        let mut g = pipeline();
        g.edges.pop();
        let err = g.validate().unwrap_err();
        assert!(matches!(&err, BuildError::MissingInput { name, .. } if name == "out"), "{err}");

        let mut g = pipeline();
        g.nodes.push(node("extra", NodeKind::Operator, 1));
        g.edges.push(edge(0, 3, Partitioning::Forward));
        assert!(matches!(g.validate(), Err(BuildError::DanglingStream { name, .. }) if name == "extra"));

        let mut g = pipeline();
        g.nodes[1].parallelism = 2;
        let err = g.validate().unwrap_err();
        assert!(matches!(err, BuildError::ForwardParallelism { from_par: 1, to_par: 2, .. }));
        assert!(err.to_string().contains("rebalance()"), "{err}");

        let mut g = pipeline();
        g.nodes[0].name = " ".into();
        assert!(matches!(g.validate(), Err(BuildError::EmptyName { .. })));

        let mut g = pipeline();
        g.edges.push(edge(2, 1, Partitioning::Forward));
        assert!(matches!(g.validate(), Err(BuildError::InvalidEdge { .. })));
    }
}

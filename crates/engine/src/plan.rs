//! Logical → physical planning: fusion (chaining) and fission (parallelism).
//!
//! Both are pure functions of the [`LogicalGraph`]: the plan says which logical operators share
//! a thread ([`can_chain`]), how many instances each chain runs, and which channels join them.
//! The logical ↔ physical mapping is kept in the plan and exported on `/topology`.

use serde::Serialize;

use crate::graph::{LogicalGraph, NodeId, NodeKind, Partitioning};

/// Index of a physical operator in its [`PhysicalPlan`].
pub type PhysicalId = usize;

/// One instance of a chain of fused logical operators: what one thread runs under the dedicated
/// threading model.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
pub struct PhysicalOperator {
    /// Its index in the plan.
    pub id: PhysicalId,
    /// The query.
    pub query: String,
    /// `"a -> b (i/n)"`, as Flink names subtasks.
    pub name: String,
    /// The fused logical operators, upstream first.
    pub logical: Vec<NodeId>,
    /// Which instance this is, from 0.
    pub instance: usize,
    /// How many instances the chain has.
    pub parallelism: usize,
}

/// A channel between two physical operators, realising part of a logical edge (as `/topology`
/// lists it).
pub use moirai_contract::topology::PhysicalChannel;

/// The physical plan.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize)]
pub struct PhysicalPlan {
    /// Chains of fused logical operators, upstream first (one entry per chain, not per instance).
    pub chains: Vec<Vec<NodeId>>,
    /// Physical operators, chain by chain, instance by instance.
    pub operators: Vec<PhysicalOperator>,
    /// Channels between physical operators.
    pub channels: Vec<PhysicalChannel>,
}

/// The fusion rule: the logical edge `edge` may be replaced by a direct call on one thread iff
/// chaining is on, it is a forward edge between equal parallelisms without an exchange, it is the producer's only
/// output and the consumer's only input.
pub fn can_chain(graph: &LogicalGraph, edge: usize, chaining: bool) -> bool {
    let e = &graph.edges[edge];
    chainable(graph, edge, chaining, graph.outputs(e.from).count(), graph.inputs(e.to).count())
}

/// [`can_chain`] with the producer's output count and the consumer's input count given.
fn chainable(graph: &LogicalGraph, edge: usize, chaining: bool, outputs: usize, inputs: usize) -> bool {
    let e = &graph.edges[edge];
    let (from, to) = (&graph.nodes[e.from], &graph.nodes[e.to]);
    chaining
        && e.partitioning == Partitioning::Forward
        && e.exchange.is_none()
        && from.parallelism == to.parallelism
        && from.kind != NodeKind::Sink
        && outputs == 1
        && inputs == 1
}

impl PhysicalPlan {
    /// Plans a valid graph (see [`LogicalGraph::validate`]), in time linear in its size.
    pub fn new(graph: &LogicalGraph, chaining: bool) -> PhysicalPlan {
        let order = graph.topological_order().expect("plan a validated graph");
        let mut inputs: Vec<Vec<usize>> = vec![Vec::new(); graph.nodes.len()];
        let mut outputs = vec![0usize; graph.nodes.len()];
        for (i, e) in graph.edges.iter().enumerate() {
            inputs[e.to].push(i);
            outputs[e.from] += 1;
        }
        // chain_of[node] = index into `chains`.
        let mut chain_of = vec![usize::MAX; graph.nodes.len()];
        let mut chains: Vec<Vec<NodeId>> = Vec::new();
        for &n in &order {
            let chained_to = inputs[n]
                .iter()
                .find(|&&i| chainable(graph, i, chaining, outputs[graph.edges[i].from], inputs[n].len()))
                .map(|&i| chain_of[graph.edges[i].from]);
            match chained_to {
                Some(c) => {
                    chains[c].push(n);
                    chain_of[n] = c;
                }
                None => {
                    chain_of[n] = chains.len();
                    chains.push(vec![n]);
                }
            }
        }

        let mut operators = Vec::new();
        // first[c] = id of instance 0 of chain c; instances are consecutive.
        let mut first = Vec::with_capacity(chains.len());
        for chain in &chains {
            first.push(operators.len());
            let head = &graph.nodes[chain[0]];
            let names: Vec<&str> = chain.iter().map(|&n| graph.nodes[n].name.as_str()).collect();
            for instance in 0..head.parallelism {
                operators.push(PhysicalOperator {
                    id: operators.len(),
                    query: head.query.clone(),
                    name: format!("{} ({}/{})", names.join(" -> "), instance + 1, head.parallelism),
                    logical: chain.clone(),
                    instance,
                    parallelism: head.parallelism,
                });
            }
        }

        let mut channels = Vec::new();
        for (i, e) in graph.edges.iter().enumerate() {
            if chain_of[e.from] == chain_of[e.to] {
                continue;
            }
            let (from, to) = (first[chain_of[e.from]], first[chain_of[e.to]]);
            let (pf, pt) = (graph.nodes[e.from].parallelism, graph.nodes[e.to].parallelism);
            let mut add = |a: usize, b: usize| {
                channels.push(PhysicalChannel {
                    from: from + a,
                    to: to + b,
                    edge: i,
                    port: e.port,
                    partitioning: e.partitioning,
                })
            };
            if e.partitioning == Partitioning::Forward {
                (0..pf).for_each(|k| add(k, k));
            } else {
                for a in 0..pf {
                    (0..pt).for_each(|b| add(a, b));
                }
            }
        }
        PhysicalPlan { chains, operators, channels }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::graph::tests::{edge, node};
    use crate::graph::LogicalNode;
    use Partitioning::*;

    fn graph(nodes: Vec<LogicalNode>, edges: Vec<(NodeId, NodeId, Partitioning)>) -> LogicalGraph {
        let g = LogicalGraph { nodes, edges: edges.into_iter().map(|(a, b, p)| edge(a, b, p)).collect() };
        g.validate().unwrap();
        g
    }

    fn pipeline(p: [usize; 3], parts: [Partitioning; 2]) -> LogicalGraph {
        graph(
            vec![
                node("src", NodeKind::Source, p[0]),
                node("map", NodeKind::Operator, p[1]),
                node("out", NodeKind::Sink, p[2]),
            ],
            vec![(0, 1, parts[0]), (1, 2, parts[1])],
        )
    }

    #[test]
    fn forward_equal_parallelism_chains() {
        let g = pipeline([2, 2, 2], [Forward, Forward]);
        assert!(can_chain(&g, 0, true) && can_chain(&g, 1, true));
        let plan = PhysicalPlan::new(&g, true);
        assert_eq!(plan.chains, vec![vec![0, 1, 2]]);
        assert_eq!(plan.operators.len(), 2);
        assert_eq!(plan.operators[1].name, "src -> map -> out (2/2)");
        assert!(plan.channels.is_empty());
    }

    #[test]
    fn chaining_off_keeps_every_operator_apart() {
        let g = pipeline([1, 1, 1], [Forward, Forward]);
        assert!(!can_chain(&g, 0, false));
        let plan = PhysicalPlan::new(&g, false);
        assert_eq!(plan.chains, vec![vec![0], vec![1], vec![2]]);
        assert_eq!(plan.channels.len(), 2);
        assert_eq!(plan.operators[1].name, "map (1/1)");
    }

    #[test]
    fn non_forward_edges_break_chains_and_fan_out() {
        let g = pipeline([2, 3, 3], [Rebalance, Forward]);
        assert!(!can_chain(&g, 0, true));
        assert!(can_chain(&g, 1, true));
        let plan = PhysicalPlan::new(&g, true);
        assert_eq!(plan.chains, vec![vec![0], vec![1, 2]]);
        assert_eq!(plan.operators.len(), 5);
        assert_eq!(plan.channels.len(), 6, "all-to-all 2x3");
        assert!(plan.channels.iter().all(|c| c.from < 2 && (2..5).contains(&c.to)));
        let g = pipeline([2, 2, 2], [KeyBy, Forward]);
        assert!(!can_chain(&g, 0, true), "a keyed edge is never chained");
    }

    #[test]
    fn fan_out_and_fan_in_stop_chains() {
        // src -> a, src -> b; a, b -> u (union) -> out
        let mut nodes = vec![
            node("src", NodeKind::Source, 1),
            node("a", NodeKind::Operator, 1),
            node("b", NodeKind::Operator, 1),
            node("u", NodeKind::Operator, 1),
            node("out", NodeKind::Sink, 1),
        ];
        nodes[3].ports = 1;
        let g = graph(nodes, vec![(0, 1, Forward), (0, 2, Forward), (1, 3, Forward), (2, 3, Forward), (3, 4, Forward)]);
        for e in 0..4 {
            assert!(!can_chain(&g, e, true), "edge {e}");
        }
        assert!(can_chain(&g, 4, true));
        let plan = PhysicalPlan::new(&g, true);
        assert_eq!(plan.chains.len(), 4);
        assert!(plan.chains.contains(&vec![3, 4]));
    }

    #[test]
    fn mapping_covers_every_logical_operator_once_per_instance() {
        let g = pipeline([1, 4, 2], [Rebalance, Rebalance]);
        let plan = PhysicalPlan::new(&g, true);
        for (n, node) in g.nodes.iter().enumerate() {
            let count = plan.operators.iter().filter(|o| o.logical.contains(&n)).count();
            assert_eq!(count, node.parallelism, "{}", node.name);
        }
    }
}

//! A validated, indexed set of SPE topologies: everything a policy may ask about the graphs in
//! one round (upstream, downstream, sources, sinks, topological order, fission and fusion).

use std::collections::{BTreeMap, BTreeSet};

use crate::entity::{
    LogicalOperator, LogicalRef, OpKind, OpRef, PhysicalOperator, SpeTopology, ThreadRef, TopologyError,
};

/// One SPE of a [`Cluster`]: its reported topology plus adjacency lists computed once.
#[derive(Clone, Debug)]
pub struct Spe {
    topology: SpeTopology,
    physical: Graph,
    logical: Graph,
    /// For each logical operator, the physical operators running it (its replicas, or the fused
    /// chains containing it), in index order.
    deployed_on: Vec<Vec<usize>>,
}

/// Adjacency of one DAG.
#[derive(Clone, Debug, Default)]
struct Graph {
    upstream: Vec<Vec<usize>>,
    downstream: Vec<Vec<usize>>,
    /// Every node after all its upstream nodes; ties broken by index, so it is deterministic.
    topological: Vec<usize>,
}

impl Graph {
    /// Builds adjacency from edges (already bounds-checked), merging duplicates, or names a node
    /// on a cycle.
    fn new(n: usize, edges: &[(usize, usize)]) -> Result<Graph, usize> {
        let mut down: Vec<BTreeSet<usize>> = vec![BTreeSet::new(); n];
        let mut up: Vec<BTreeSet<usize>> = vec![BTreeSet::new(); n];
        for &(a, b) in edges {
            if a == b {
                return Err(a);
            }
            down[a].insert(b);
            up[b].insert(a);
        }
        // Kahn's algorithm with a sorted ready set keeps the order deterministic.
        let mut missing: Vec<usize> = up.iter().map(BTreeSet::len).collect();
        let mut ready: BTreeSet<usize> = (0..n).filter(|&i| missing[i] == 0).collect();
        let mut topological = Vec::with_capacity(n);
        while let Some(i) = ready.pop_first() {
            topological.push(i);
            for &d in &down[i] {
                missing[d] -= 1;
                if missing[d] == 0 {
                    ready.insert(d);
                }
            }
        }
        if topological.len() < n {
            let on_cycle = (0..n).find(|&i| missing[i] > 0).unwrap_or(0);
            return Err(on_cycle);
        }
        Ok(Graph {
            upstream: up.into_iter().map(|s| s.into_iter().collect()).collect(),
            downstream: down.into_iter().map(|s| s.into_iter().collect()).collect(),
            topological,
        })
    }
}

impl Spe {
    fn new(topology: SpeTopology) -> Result<Spe, TopologyError> {
        let spe = topology.name.clone();
        let (nl, np) = (topology.logical.len(), topology.physical.len());
        let queries: BTreeSet<&str> = topology.queries.iter().map(String::as_str).collect();
        let unknown_query = |op: &str, query: &str| TopologyError::UnknownQuery {
            spe: spe.clone(),
            op: op.to_string(),
            query: query.to_string(),
            queries: topology.queries.clone(),
        };
        let bad_index =
            |what: String, kind, index, len| TopologyError::BadIndex { spe: spe.clone(), what, kind, index, len };

        let mut logical_names = BTreeSet::new();
        for l in &topology.logical {
            if !queries.contains(l.query.as_str()) {
                return Err(unknown_query(&l.name, &l.query));
            }
            if !logical_names.insert((l.query.as_str(), l.name.as_str())) {
                return Err(TopologyError::DuplicateName {
                    spe,
                    kind: "logical",
                    name: l.name.clone(),
                    scope: "within a query",
                });
            }
        }
        let mut physical_names = BTreeSet::new();
        let mut deployed_on = vec![Vec::new(); nl];
        for (i, p) in topology.physical.iter().enumerate() {
            if !queries.contains(p.query.as_str()) {
                return Err(unknown_query(&p.name, &p.query));
            }
            if !physical_names.insert((p.query.as_str(), p.name.as_str())) {
                return Err(TopologyError::DuplicateName {
                    spe,
                    kind: "physical",
                    name: p.name.clone(),
                    scope: "within a query",
                });
            }
            let bad = |problem: String| TopologyError::BadPhysical { spe: spe.clone(), op: p.name.clone(), problem };
            if p.logical.is_empty() {
                return Err(bad("runs no logical operator (its `logical` list is empty)".into()));
            }
            for &l in &p.logical {
                if l >= nl {
                    return Err(bad_index(format!("physical operator '{}'", p.name), "logical", l, nl));
                }
                if topology.logical[l].query != p.query {
                    return Err(bad(format!(
                        "of query '{}' runs logical operator '{}' of query '{}'",
                        p.query, topology.logical[l].name, topology.logical[l].query
                    )));
                }
                if deployed_on[l].last() != Some(&i) {
                    deployed_on[l].push(i);
                }
            }
        }
        if let Some(l) = deployed_on.iter().position(Vec::is_empty) {
            let op = &topology.logical[l];
            return Err(TopologyError::NotDeployed { spe, op: op.name.clone(), query: op.query.clone() });
        }
        for (edges, kind, len) in [(&topology.logical_edges, "logical", nl), (&topology.physical_edges, "physical", np)]
        {
            for &(a, b) in edges.iter() {
                for x in [a, b] {
                    if x >= len {
                        return Err(bad_index(format!("{kind} edge ({a}, {b})"), kind, x, len));
                    }
                }
            }
        }
        let logical = Graph::new(nl, &topology.logical_edges).map_err(|i| TopologyError::Cycle {
            spe: spe.clone(),
            kind: "logical",
            op: topology.logical[i].name.clone(),
        })?;
        let physical = Graph::new(np, &topology.physical_edges).map_err(|i| TopologyError::Cycle {
            spe: spe.clone(),
            kind: "physical",
            op: topology.physical[i].name.clone(),
        })?;
        Ok(Spe { topology, physical, logical, deployed_on })
    }

    /// The topology as the driver reported it.
    pub fn topology(&self) -> &SpeTopology {
        &self.topology
    }

    /// The SPE's name.
    pub fn name(&self) -> &str {
        &self.topology.name
    }

    /// Physical operator `op`.
    pub fn physical(&self, op: usize) -> &PhysicalOperator {
        &self.topology.physical[op]
    }

    /// Logical operator `op`.
    pub fn logical(&self, op: usize) -> &LogicalOperator {
        &self.topology.logical[op]
    }

    /// Number of physical operators.
    pub fn physical_len(&self) -> usize {
        self.topology.physical.len()
    }

    /// Number of logical operators.
    pub fn logical_len(&self) -> usize {
        self.topology.logical.len()
    }

    /// Physical operators feeding `op` (each once, in index order).
    pub fn upstream(&self, op: usize) -> &[usize] {
        &self.physical.upstream[op]
    }

    /// Physical operators `op` feeds (each once, in index order).
    pub fn downstream(&self, op: usize) -> &[usize] {
        &self.physical.downstream[op]
    }

    /// Physical operators, each after all its upstream operators.
    pub fn topological_order(&self) -> &[usize] {
        &self.physical.topological
    }

    /// Logical operators feeding logical operator `op`.
    pub fn logical_upstream(&self, op: usize) -> &[usize] {
        &self.logical.upstream[op]
    }

    /// Logical operators fed by logical operator `op`.
    pub fn logical_downstream(&self, op: usize) -> &[usize] {
        &self.logical.downstream[op]
    }

    /// Logical operators, each after all its upstream operators.
    pub fn logical_topological_order(&self) -> &[usize] {
        &self.logical.topological
    }

    /// Physical operators without upstream operators.
    pub fn sources(&self) -> impl Iterator<Item = usize> + '_ {
        (0..self.physical_len()).filter(|&i| self.physical.upstream[i].is_empty())
    }

    /// Physical operators without downstream operators.
    pub fn sinks(&self) -> impl Iterator<Item = usize> + '_ {
        (0..self.physical_len()).filter(|&i| self.physical.downstream[i].is_empty())
    }

    /// The physical operators running logical operator `op`: its replicas, or the fused chains
    /// that contain it (never empty).
    pub fn deployed_on(&self, op: usize) -> &[usize] {
        &self.deployed_on[op]
    }

    /// The kind of a physical operator: `Source` if its chain starts with a source, else `Sink` if
    /// it ends with a sink, else `Operator`.
    pub fn physical_kind(&self, op: usize) -> OpKind {
        let chain = &self.topology.physical[op].logical;
        let first = self.topology.logical[chain[0]].kind;
        let last = self.topology.logical[chain[chain.len() - 1]].kind;
        match (first, last) {
            (OpKind::Source, _) => OpKind::Source,
            (_, OpKind::Sink) => OpKind::Sink,
            _ => OpKind::Operator,
        }
    }
}

/// The SPEs one middleware schedules, as reported in one round: validated topologies with their
/// graphs indexed. Cheap to query; rebuild it when a driver reports a changed topology.
#[derive(Clone, Debug, Default)]
pub struct Cluster {
    spes: Vec<Spe>,
}

impl Cluster {
    /// Validates the topologies: unique SPE names; indices in range; every operator in a listed
    /// query; logical names unique per query and physical names unique per SPE; every logical
    /// operator deployed on at least one physical operator, and every physical operator running
    /// logical operators of its own query; no cycles. Duplicate edges are merged. Operator names
    /// must be unique within their query (two queries may both have a `"source (1/1)"`).
    pub fn new(topologies: Vec<SpeTopology>) -> Result<Cluster, TopologyError> {
        let mut names = BTreeSet::new();
        let mut spes = Vec::with_capacity(topologies.len());
        for t in topologies {
            if t.name.is_empty() || !names.insert(t.name.clone()) {
                return Err(TopologyError::SpeName(t.name));
            }
            spes.push(Spe::new(t)?);
        }
        Ok(Cluster { spes })
    }

    /// The SPEs, in the order given to [`Cluster::new`]; `OpRef::spe` indexes this slice.
    pub fn spes(&self) -> &[Spe] {
        &self.spes
    }

    /// SPE number `spe`.
    pub fn spe(&self, spe: usize) -> &Spe {
        &self.spes[spe]
    }

    /// The index of the SPE called `name`.
    pub fn spe_index(&self, name: &str) -> Option<usize> {
        self.spes.iter().position(|s| s.name() == name)
    }

    /// A physical operator.
    pub fn physical(&self, op: OpRef) -> &PhysicalOperator {
        self.spes[op.spe].physical(op.op)
    }

    /// A logical operator.
    pub fn logical(&self, op: LogicalRef) -> &LogicalOperator {
        self.spes[op.spe].logical(op.op)
    }

    /// The threads of a physical operator.
    pub fn threads(&self, op: OpRef) -> &[ThreadRef] {
        &self.physical(op).threads
    }

    /// Every physical operator, SPE by SPE, in index order.
    pub fn ops(&self) -> impl Iterator<Item = OpRef> + '_ {
        self.spes.iter().enumerate().flat_map(|(spe, s)| (0..s.physical_len()).map(move |op| OpRef { spe, op }))
    }

    /// Every logical operator, SPE by SPE, in index order.
    pub fn logical_ops(&self) -> impl Iterator<Item = LogicalRef> + '_ {
        self.spes.iter().enumerate().flat_map(|(spe, s)| (0..s.logical_len()).map(move |op| LogicalRef { spe, op }))
    }

    /// Physical operators feeding `op`.
    pub fn upstream(&self, op: OpRef) -> impl Iterator<Item = OpRef> + '_ {
        self.spes[op.spe].upstream(op.op).iter().map(move |&u| OpRef { spe: op.spe, op: u })
    }

    /// Physical operators fed by `op`.
    pub fn downstream(&self, op: OpRef) -> impl Iterator<Item = OpRef> + '_ {
        self.spes[op.spe].downstream(op.op).iter().map(move |&d| OpRef { spe: op.spe, op: d })
    }

    /// The physical operators running logical operator `op`.
    pub fn deployed_on(&self, op: LogicalRef) -> impl Iterator<Item = OpRef> + '_ {
        self.spes[op.spe].deployed_on(op.op).iter().map(move |&p| OpRef { spe: op.spe, op: p })
    }

    /// The logical operators a physical operator runs, upstream first.
    pub fn logical_parts(&self, op: OpRef) -> impl Iterator<Item = LogicalRef> + '_ {
        self.physical(op).logical.iter().map(move |&l| LogicalRef { spe: op.spe, op: l })
    }

    /// Every query name in the cluster, sorted, each once (queries are identified by name across
    /// SPEs: the papers run each query in one SPE).
    pub fn queries(&self) -> BTreeSet<&str> {
        self.spes.iter().flat_map(|s| s.topology.queries.iter().map(String::as_str)).collect()
    }

    /// The physical operators of each query, by query name.
    pub fn ops_by_query(&self) -> BTreeMap<&str, Vec<OpRef>> {
        let mut out: BTreeMap<&str, Vec<OpRef>> = BTreeMap::new();
        for op in self.ops() {
            out.entry(self.physical(op).query.as_str()).or_default().push(op);
        }
        out
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::fixtures::*;

    #[test]
    fn pipeline_adjacency_and_order() {
        let c = Cluster::new(vec![pipeline("spe", "q1")]).unwrap();
        let s = c.spe(0);
        assert_eq!(s.upstream(1), &[0]);
        assert_eq!(s.downstream(1), &[2]);
        assert_eq!(s.topological_order(), &[0, 1, 2]);
        assert_eq!(s.sources().collect::<Vec<_>>(), vec![0]);
        assert_eq!(s.sinks().collect::<Vec<_>>(), vec![2]);
        assert_eq!(s.physical_kind(0), OpKind::Source);
        assert_eq!(s.physical_kind(2), OpKind::Sink);
    }

    #[test]
    fn diamond_topological_order_respects_edges() {
        let c = Cluster::new(vec![diamond("spe", "q")]).unwrap();
        let s = c.spe(0);
        let order = s.topological_order();
        let pos = |i| order.iter().position(|&x| x == i).unwrap();
        for &(a, b) in &s.topology().physical_edges {
            assert!(pos(a) < pos(b), "edge {a}->{b} out of order in {order:?}");
        }
        assert_eq!(s.downstream(0), &[1, 2]);
        assert_eq!(s.upstream(3), &[1, 2]);
    }

    #[test]
    fn duplicate_edges_are_merged() {
        let mut t = pipeline("spe", "q");
        t.physical_edges.push((0, 1));
        let c = Cluster::new(vec![t]).unwrap();
        assert_eq!(c.spe(0).downstream(0), &[1]);
    }

    #[test]
    fn fission_and_fusion_are_indexed() {
        let c = Cluster::new(vec![fused_and_replicated("spe", "q")]).unwrap();
        let s = c.spe(0);
        // logical map (1) runs on the two replicas "map -> filter (1/2)" and "(2/2)".
        assert_eq!(s.deployed_on(1), &[1, 2]);
        assert_eq!(s.deployed_on(2), &[1, 2]);
        assert_eq!(s.deployed_on(0), &[0]);
        assert_eq!(c.logical_parts(OpRef { spe: 0, op: 1 }).count(), 2);
    }

    #[test]
    fn rejects_cycles_with_the_operator_named() {
        let mut t = pipeline("spe", "q");
        t.physical_edges.push((2, 0));
        let err = Cluster::new(vec![t]).unwrap_err();
        assert!(matches!(err, TopologyError::Cycle { kind: "physical", .. }), "{err}");
        assert!(err.to_string().contains("must be DAGs"));
    }

    #[test]
    fn rejects_self_loops_bad_indices_and_unknown_queries() {
        let mut t = pipeline("spe", "q");
        t.logical_edges.push((1, 1));
        assert!(matches!(Cluster::new(vec![t]), Err(TopologyError::Cycle { kind: "logical", .. })));

        let mut t = pipeline("spe", "q");
        t.physical_edges.push((0, 7));
        let err = Cluster::new(vec![t]).unwrap_err();
        assert!(err.to_string().contains("refers to physical operator 7, but there are only 3"), "{err}");

        let mut t = pipeline("spe", "q");
        t.physical[1].query = "other".into();
        assert!(matches!(Cluster::new(vec![t]), Err(TopologyError::UnknownQuery { .. })));
    }

    #[test]
    fn rejects_undeployed_logical_operators_and_duplicate_names() {
        let mut t = pipeline("spe", "q");
        t.physical[1].logical = vec![0];
        let err = Cluster::new(vec![t]).unwrap_err();
        assert!(matches!(err, TopologyError::NotDeployed { ref op, .. } if op == "map"), "{err}");

        let mut t = pipeline("spe", "q");
        t.physical[2].name = t.physical[1].name.clone();
        assert!(matches!(Cluster::new(vec![t]), Err(TopologyError::DuplicateName { kind: "physical", .. })));

        let err = Cluster::new(vec![pipeline("a", "q"), pipeline("a", "r")]).unwrap_err();
        assert_eq!(err, TopologyError::SpeName("a".into()));
    }

    #[test]
    fn two_spes_are_addressed_by_index() {
        let c = two_spes();
        assert_eq!(c.spes().len(), 2);
        assert_eq!(c.spe_index("storm"), Some(1));
        assert_eq!(c.ops().count(), 3 + 4);
        let ops: Vec<_> = c.downstream(OpRef { spe: 1, op: 0 }).collect();
        assert_eq!(ops, vec![OpRef { spe: 1, op: 1 }, OpRef { spe: 1, op: 2 }]);
        assert_eq!(c.queries().into_iter().collect::<Vec<_>>(), vec!["lr", "vs"]);
    }
}

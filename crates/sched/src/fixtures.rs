//! Hand-made topologies shared by the unit tests: a 3-operator pipeline, a diamond, a query with
//! fusion and fission, two queries in one SPE, two SPEs.

use crate::cluster::Cluster;
use crate::entity::{LogicalOperator, OpKind, PhysicalOperator, SpeTopology, ThreadRef};

fn logical(name: &str, query: &str, kind: OpKind) -> LogicalOperator {
    LogicalOperator { name: name.into(), query: query.into(), kind }
}

fn physical(name: &str, query: &str, logical: Vec<usize>, instance: usize, tid: i32) -> PhysicalOperator {
    PhysicalOperator {
        name: name.into(),
        query: query.into(),
        logical,
        instance,
        threads: vec![ThreadRef { tid, start_ticks: 100 + tid as u64 }],
    }
}

/// `source -> map -> sink`, one physical operator per logical one (tids 10, 11, 12).
pub fn pipeline(spe: &str, query: &str) -> SpeTopology {
    SpeTopology {
        name: spe.into(),
        pid: 1,
        queries: vec![query.into()],
        logical: vec![
            logical("source", query, OpKind::Source),
            logical("map", query, OpKind::Operator),
            logical("sink", query, OpKind::Sink),
        ],
        logical_edges: vec![(0, 1), (1, 2)],
        physical: vec![
            physical("source (1/1)", query, vec![0], 0, 10),
            physical("map (1/1)", query, vec![1], 0, 11),
            physical("sink (1/1)", query, vec![2], 0, 12),
        ],
        physical_edges: vec![(0, 1), (1, 2)],
    }
}

/// `source -> {left, right} -> sink` (tids 20..=23).
pub fn diamond(spe: &str, query: &str) -> SpeTopology {
    SpeTopology {
        name: spe.into(),
        pid: 2,
        queries: vec![query.into()],
        logical: vec![
            logical("source", query, OpKind::Source),
            logical("left", query, OpKind::Operator),
            logical("right", query, OpKind::Operator),
            logical("sink", query, OpKind::Sink),
        ],
        logical_edges: vec![(0, 1), (0, 2), (1, 3), (2, 3)],
        physical: vec![
            physical("source (1/1)", query, vec![0], 0, 20),
            physical("left (1/1)", query, vec![1], 0, 21),
            physical("right (1/1)", query, vec![2], 0, 22),
            physical("sink (1/1)", query, vec![3], 0, 23),
        ],
        physical_edges: vec![(0, 1), (0, 2), (1, 3), (2, 3)],
    }
}

/// `source -> map -> filter -> sink` where map and filter are fused and the chain has two
/// replicas: physical `source (1/1)`, `map -> filter (1/2)`, `map -> filter (2/2)`, `sink (1/1)`.
pub fn fused_and_replicated(spe: &str, query: &str) -> SpeTopology {
    SpeTopology {
        name: spe.into(),
        pid: 3,
        queries: vec![query.into()],
        logical: vec![
            logical("source", query, OpKind::Source),
            logical("map", query, OpKind::Operator),
            logical("filter", query, OpKind::Operator),
            logical("sink", query, OpKind::Sink),
        ],
        logical_edges: vec![(0, 1), (1, 2), (2, 3)],
        physical: vec![
            physical("source (1/1)", query, vec![0], 0, 30),
            physical("map -> filter (1/2)", query, vec![1, 2], 0, 31),
            physical("map -> filter (2/2)", query, vec![1, 2], 1, 32),
            physical("sink (1/1)", query, vec![3], 0, 33),
        ],
        physical_edges: vec![(0, 1), (0, 2), (1, 3), (2, 3)],
    }
}

/// Two 3-operator pipelines `q1` and `q2` in one SPE (physical 0..3 are q1, 3..6 are q2), with the
/// same operator names in both queries, as an engine names them.
pub fn two_queries(spe: &str) -> SpeTopology {
    let mut t = pipeline(spe, "q1");
    let q2 = pipeline(spe, "q2");
    t.queries.push("q2".into());
    let off = t.logical.len();
    t.logical.extend(q2.logical);
    t.logical_edges.extend(q2.logical_edges.iter().map(|&(a, b)| (a + off, b + off)));
    for (i, mut p) in q2.physical.into_iter().enumerate() {
        p.logical = p.logical.iter().map(|l| l + off).collect();
        p.threads = vec![ThreadRef { tid: 40 + i as i32, start_ticks: 7 }];
        t.physical.push(p);
    }
    t.physical_edges.extend(q2.physical_edges.iter().map(|&(a, b)| (a + off, b + off)));
    t
}

/// A pipeline `lr` in SPE `flink` and a diamond `vs` in SPE `storm`.
pub fn two_spes() -> Cluster {
    Cluster::new(vec![pipeline("flink", "lr"), diamond("storm", "vs")]).expect("valid fixtures")
}

//! Entities as a driver reports them: the topology of one SPE (queries, logical operators,
//! physical operators and their threads), and references to operators across SPEs.
//!
//! These are plain, serialisable records. A driver fills an [`SpeTopology`] from the SPE's public
//! API; [`Cluster::new`](crate::Cluster::new) validates a set of them and indexes the graphs.

use serde::{Deserialize, Serialize};

/// A physical operator: operator number `op` of `SpeTopology::physical` of SPE number `spe`
/// (indices into [`Cluster::spes`](crate::Cluster::spes)).
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
pub struct OpRef {
    /// Index of the SPE in the cluster.
    pub spe: usize,
    /// Index of the physical operator in that SPE's `physical` list.
    pub op: usize,
}

/// A logical operator: operator number `op` of `SpeTopology::logical` of SPE number `spe`.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
pub struct LogicalRef {
    /// Index of the SPE in the cluster.
    pub spe: usize,
    /// Index of the logical operator in that SPE's `logical` list.
    pub op: usize,
}

/// The role of a logical operator in its query.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum OpKind {
    /// Ingests tuples from outside the SPE (it has no upstream operator).
    Source,
    /// Transforms tuples.
    Operator,
    /// Emits tuples out of the SPE (it has no downstream operator).
    Sink,
}

impl OpKind {
    /// `"source"`, `"operator"` or `"sink"` (the serialised name, also bound in scripts as `kind`).
    pub fn as_str(self) -> &'static str {
        match self {
            OpKind::Source => "source",
            OpKind::Operator => "operator",
            OpKind::Sink => "sink",
        }
    }
}

/// An operator of a query as the user wrote it, before fission and fusion.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct LogicalOperator {
    /// Its name, unique within its query.
    pub name: String,
    /// The query it belongs to (one of `SpeTopology::queries`).
    pub query: String,
    /// Source, operator or sink.
    pub kind: OpKind,
}

/// One Linux thread. The kernel reuses thread ids, so a thread is identified by its id *and* its
/// start time (`/proc/<pid>/task/<tid>/stat` field 22, in clock ticks since boot).
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
pub struct ThreadRef {
    /// Linux thread id.
    pub tid: i32,
    /// Start time of the thread in clock ticks since boot; 0 when the driver does not know it.
    pub start_ticks: u64,
}

/// An operator as deployed: an instance (replica, after fission) of a chain of one or more fused
/// logical operators, run by one or more threads.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct PhysicalOperator {
    /// Its name as the SPE shows it (e.g. `"map -> filter (2/4)"`), unique within its query.
    pub name: String,
    /// The query it belongs to.
    pub query: String,
    /// The fused logical operators it runs, indices into `SpeTopology::logical`, upstream first.
    /// One element when nothing was fused.
    pub logical: Vec<usize>,
    /// Which replica of its logical operators this is, counting from 0.
    #[serde(default)]
    pub instance: usize,
    /// The threads running it: usually one; helper threads (e.g. output flushers) may be added.
    /// May be empty while the SPE is starting.
    #[serde(default)]
    pub threads: Vec<ThreadRef>,
}

/// The topology of one SPE (one process) as its driver reports it.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct SpeTopology {
    /// A name for the SPE, unique in the cluster (e.g. `"flink"`, `"moirai-5400"`).
    pub name: String,
    /// The process id.
    pub pid: u32,
    /// Names of the queries it runs.
    pub queries: Vec<String>,
    /// Logical operators of all its queries.
    pub logical: Vec<LogicalOperator>,
    /// Logical streams, `(upstream, downstream)` indices into `logical`.
    pub logical_edges: Vec<(usize, usize)>,
    /// Physical operators.
    pub physical: Vec<PhysicalOperator>,
    /// Physical streams, `(upstream, downstream)` indices into `physical`. Duplicates (several
    /// channels between the same pair) are merged by [`Cluster::new`](crate::Cluster::new).
    pub physical_edges: Vec<(usize, usize)>,
}

/// Why a reported topology cannot be scheduled.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
pub enum TopologyError {
    /// Two SPEs share a name, or a name is empty.
    #[error("SPE names must be non-empty and unique in a cluster; '{0}' is not")]
    SpeName(String),
    /// An index in the topology points nowhere.
    #[error("SPE '{spe}': {what} refers to {kind} operator {index}, but there are only {len}")]
    BadIndex {
        /// The SPE.
        spe: String,
        /// Which field held the index.
        what: String,
        /// `"logical"` or `"physical"`.
        kind: &'static str,
        /// The index.
        index: usize,
        /// The number of operators of that kind.
        len: usize,
    },
    /// An operator names a query the SPE does not list.
    #[error("SPE '{spe}': operator '{op}' belongs to query '{query}', which is not in its queries {queries:?}")]
    UnknownQuery {
        /// The SPE.
        spe: String,
        /// The operator.
        op: String,
        /// The query it names.
        query: String,
        /// The queries the SPE lists.
        queries: Vec<String>,
    },
    /// Two operators share a name where names must be unique.
    #[error("SPE '{spe}': two {kind} operators are named '{name}'; names must be unique ({scope})")]
    DuplicateName {
        /// The SPE.
        spe: String,
        /// `"logical"` or `"physical"`.
        kind: &'static str,
        /// The name.
        name: String,
        /// Where it must be unique.
        scope: &'static str,
    },
    /// A physical operator runs no logical operator, or logical operators of another query.
    #[error("SPE '{spe}': physical operator '{op}' {problem}")]
    BadPhysical {
        /// The SPE.
        spe: String,
        /// The physical operator.
        op: String,
        /// What is wrong with it.
        problem: String,
    },
    /// A logical operator is not run by any physical operator.
    #[error("SPE '{spe}': logical operator '{op}' of query '{query}' is not deployed on any physical operator")]
    NotDeployed {
        /// The SPE.
        spe: String,
        /// The logical operator.
        op: String,
        /// Its query.
        query: String,
    },
    /// The edges form a cycle (queries are DAGs) or a self-loop.
    #[error("SPE '{spe}': the {kind} graph has a cycle through operator '{op}'; queries must be DAGs")]
    Cycle {
        /// The SPE.
        spe: String,
        /// `"logical"` or `"physical"`.
        kind: &'static str,
        /// An operator on the cycle.
        op: String,
    },
}

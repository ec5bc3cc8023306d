//! Validating the configuration and the queries, merging them into one logical graph, and
//! planning it: the first of [`super::Engine::start`]'s three steps (validate, wire, launch).
//! Nothing runs yet and nothing is allocated for running.

use crate::code::{EdgeEntry, NodeEntry};
use crate::config::{EngineConfig, MAX_BATCH_SIZE, MAX_CHANNEL_CAPACITY, MAX_PHYSICAL_OPERATORS};
use crate::control;
use crate::graph::{BuildError, LogicalGraph};
use crate::offered::Offered;
use crate::plan::PhysicalPlan;
use crate::query::BuiltQuery;
use crate::threading::Threading;
use crate::user_level::Prioritizer;

use super::EngineError;

/// Queries that passed every check, merged and planned.
pub(super) struct Validated {
    /// The queries' logical graphs, merged (node ids shifted).
    pub(super) graph: LogicalGraph,
    /// The queries' names, in order.
    pub(super) names: Vec<String>,
    /// Each logical operator's code, by node id.
    pub(super) entries: Vec<NodeEntry>,
    /// Each logical edge's partitioning details, by edge id.
    pub(super) edges: Vec<EdgeEntry>,
    pub(super) plan: PhysicalPlan,
    /// The policy of the `policy` threading model, built.
    pub(super) prioritizer: Option<Box<dyn Prioritizer>>,
}

/// Checks `config` and `queries`, merges and plans them.
pub(super) fn validate(config: &EngineConfig, queries: Vec<BuiltQuery>) -> Result<Validated, EngineError> {
    if config.channel_capacity == 0 || config.batch_size == 0 {
        return Err(BuildError::Config("channel capacity and batch size must be at least 1".into()).into());
    }
    if config.channel_capacity > MAX_CHANNEL_CAPACITY || config.batch_size > MAX_BATCH_SIZE {
        return Err(BuildError::Config(format!(
            "channel capacity {} and batch size {} must be at most {MAX_CHANNEL_CAPACITY} and \
             {MAX_BATCH_SIZE} tuples",
            config.channel_capacity, config.batch_size
        ))
        .into());
    }
    if config.source_slack > crate::slack::MAX_SOURCE_SLACK {
        return Err(BuildError::Config(format!(
            "source slack {:?} must be at most {:?} (a timer's slack, not a schedule)",
            config.source_slack,
            crate::slack::MAX_SOURCE_SLACK
        ))
        .into());
    }
    if queries.is_empty() {
        return Err(BuildError::Config("no query to run".into()).into());
    }
    if let Some((factor, over)) = config.ramp {
        if !(factor.is_finite() && factor > 0.0) || over.is_zero() {
            return Err(BuildError::Config(format!(
                "ramp to {factor} x the rate over {over:?}: the factor must be positive and the time too"
            ))
            .into());
        }
    }
    // Merge the queries into one graph, shifting node ids.
    let mut graph = LogicalGraph::default();
    let mut entries: Vec<NodeEntry> = Vec::new();
    let mut edges = Vec::new();
    let mut names: Vec<String> = Vec::new();
    for q in queries {
        if names.contains(&q.name) {
            return Err(BuildError::DuplicateQuery { query: q.name }.into());
        }
        names.push(q.name.clone());
        let offset = graph.nodes.len();
        graph.nodes.extend(q.graph.nodes);
        for mut e in q.edges {
            e.edge.from += offset;
            e.edge.to += offset;
            graph.edges.push(e.edge.clone());
            edges.push(e);
        }
        entries.extend(q.nodes);
    }
    // A ramp multiplies every rate-limited source's rate: the target must be schedulable too.
    if let Some((factor, over)) = config.ramp {
        for (n, e) in graph.nodes.iter().zip(&entries) {
            if let Some(Offered::Constant(r)) = e.code.offered() {
                let ramp = Offered::Ramp { from: r, to: r * factor, over };
                if let Err(e) = ramp.validate() {
                    return Err(BuildError::Config(format!("query '{}', source '{}': {e}", n.query, n.name)).into());
                }
            }
        }
    }
    graph.validate()?;
    let physical: usize = graph.nodes.iter().map(|n| n.parallelism).sum();
    if physical > MAX_PHYSICAL_OPERATORS {
        return Err(BuildError::Config(format!(
            "{physical} operator instances (sum of parallelisms) exceed the engine's bound of \
             {MAX_PHYSICAL_OPERATORS}; use fewer operators or lower parallelism"
        ))
        .into());
    }
    if let Threading::Fused { threads } = &config.threading {
        if let Some(n) = graph.nodes.iter().find(|n| n.thread.as_ref().is_some_and(|t| !threads.contains(t))) {
            return Err(BuildError::Config(format!(
                "query '{}': operator '{}' is placed on thread '{}', which --threading {} does not declare; \
                 declare it (fused:{}+{}) or remove the thread hint",
                n.query,
                n.name,
                n.thread.as_deref().unwrap_or_default(),
                config.threading,
                threads.join("+"),
                n.thread.as_deref().unwrap_or_default()
            ))
            .into());
        }
    }
    let plan = PhysicalPlan::new(&graph, config.chaining);
    let prioritizer = match &config.threading {
        Threading::Policy(c) => Some(control::prioritizer(&c.policy).map_err(|e| BuildError::Config(e.to_string()))?),
        _ => None,
    };
    Ok(Validated { graph, names, entries, edges, plan, prioritizer })
}

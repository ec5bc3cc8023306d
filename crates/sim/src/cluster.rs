//! Clusters (`moirai sim … --nodes N`): N nodes of `--cores` cores each, every node with its own
//! kernel (run queue) and its own middleware ([`moirai_sched::Controller`]), as the middleware is
//! deployed — one instance per node, scheduling the threads of that node, with no knowledge of
//! the others (as in Lachesis' scale-out experiment, §6.5).
//!
//! **Placement**: whole queries, round-robin ([`placement`]): query `q` runs on node `q mod N`.
//! Lachesis' SYN queries are independent pipelines, so no tuple crosses a node and there is no
//! network hop to model; a query never spans nodes. More nodes than queries would leave a node
//! empty and is refused.
//!
//! **Runs**: the nodes share nothing, so they are simulated one after another, node `k` with the
//! seed [`node_seed`]`(seed, k)` (node 0 keeps the run's seed, so one node is exactly the run
//! without `--nodes`), and merged into one summary: tuple counts and CPU add up, latency and
//! queue histograms are merged before any percentile is read (never averaged), the run ends
//! when the last node's does.

use moirai_contract::RunSummary;

use crate::event::Nanos;
use crate::model::Model;
use crate::sim::{MwActivity, SimConfig, Simulation};
use crate::SimError;

/// The seed of node `node` of a cluster run with `seed`: the seed itself for node 0, a
/// splitmix64 mix of both for the others (distinct and deterministic).
pub fn node_seed(seed: u64, node: usize) -> u64 {
    if node == 0 {
        return seed;
    }
    let mut z = seed ^ (node as u64).wrapping_mul(0x9E37_79B9_7F4A_7C15);
    z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
    z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
    z ^ (z >> 31)
}

/// Which queries each of `nodes` nodes runs: query `q` (of `queries`) on node `q mod nodes`.
/// Refused when a node would be empty.
pub fn placement(queries: usize, nodes: usize) -> Result<Vec<Vec<usize>>, SimError> {
    if nodes == 0 || nodes > queries {
        return Err(SimError::Config(format!(
            "--nodes {nodes} must be from 1 to the number of queries ({queries}): whole queries are placed \
             round-robin, and a node without a query would simulate nothing (add queries, e.g. -- --queries {nodes})"
        )));
    }
    let mut out = vec![Vec::new(); nodes];
    for q in 0..queries {
        out[q % nodes].push(q);
    }
    Ok(out)
}

/// What a cluster run gives: the merged summary and the simulated time the run took (the last
/// node's).
pub struct ClusterRun {
    /// The nodes' runs merged.
    pub summary: RunSummary,
    /// When the last node's run ended.
    pub end: Nanos,
    /// With a middleware: the share of the run it acted, averaged over the nodes (each node has
    /// its own), the earliest time one of them first acted, in seconds (`None`: never), and the
    /// nodes' activations and releases summed.
    pub middleware_activity: Option<MwActivity>,
}

/// Runs `models` (one per node) under `config` one node after another, each with its
/// [`node_seed`], and merges them.
pub fn run(
    models: &[Model],
    config: &SimConfig,
    workload: &str,
    params: serde_json::Value,
) -> Result<ClusterRun, SimError> {
    let mut tally = None;
    let mut activity: Option<MwActivity> = None;
    for (k, model) in models.iter().enumerate() {
        let mut sim = Simulation::new(model, SimConfig { seed: node_seed(config.seed, k), ..config.clone() })?;
        let events = sim.run();
        if let Some(node) = sim.middleware_activity() {
            let all = activity.get_or_insert_with(MwActivity::default);
            all.share += node.share / models.len() as f64;
            all.first_s = match (all.first_s, node.first_s) {
                (Some(a), Some(b)) => Some(a.min(b)),
                (a, b) => a.or(b),
            };
            all.activations += node.activations;
            for (reason, n) in node.releases {
                *all.releases.entry(reason).or_default() += n;
            }
        }
        let node = sim.tally(events);
        match &mut tally {
            None => tally = Some(node),
            Some(t) => t.merge(&node)?,
        }
    }
    let tally = tally.ok_or_else(|| SimError::Config("a cluster needs at least one node".into()))?;
    Ok(ClusterRun { summary: tally.summary(workload, params, config), end: tally.end, middleware_activity: activity })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn queries_go_round_robin_and_no_node_is_empty() {
        assert_eq!(placement(5, 2).unwrap(), vec![vec![0, 2, 4], vec![1, 3]]);
        assert_eq!(placement(3, 3).unwrap(), vec![vec![0], vec![1], vec![2]]);
        assert!(placement(3, 4)
            .unwrap_err()
            .to_string()
            .contains("--nodes 4 must be from 1 to the number of queries (3)"));
        assert!(placement(3, 0).is_err());
    }

    #[test]
    fn node_seeds_are_distinct_and_node_0_keeps_the_run_s() {
        assert_eq!(node_seed(7, 0), 7);
        let seeds: std::collections::BTreeSet<u64> = (0..128).map(|k| node_seed(7, k)).collect();
        assert_eq!(seeds.len(), 128);
        assert_ne!(node_seed(7, 1), node_seed(8, 1));
    }
}

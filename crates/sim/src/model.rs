//! What is simulated: the physical operators of a set of queries with what each costs, and the
//! channels between them.
//!
//! A [`Model`] is built from the workload's own queries ([`moirai_engine::BuiltQuery`]): their
//! logical graphs are merged and planned by the engine's planner ([`PhysicalPlan`]), so the
//! simulated operators, their names, ids and channels are the ones the engine would run, and
//! the scheduling core sees the same topology ([`Model::topology`]). What the operator code would
//! do is given per logical operator ([`NodeCost`]): CPU time per tuple, selectivity, blocking,
//! and for a source its offered rate. A fused chain costs the sum of its operators and passes
//! on the product of their selectivities.
//!
//! [`Model::syn`] builds SYN (incl. `--lachesis` and `--blocking`) from `moirai_workloads::syn`:
//! the same queries and the same drawn costs as `moirai run syn`.

use moirai_engine::graph::{LogicalGraph, NodeKind, Partitioning};
use moirai_engine::plan::PhysicalPlan;
use moirai_engine::topology::{PhysicalOperator, Topology};
use moirai_engine::{BuiltQuery, Threading};
use moirai_workloads::syn::{self, SynConfig};

use crate::event::Nanos;
use crate::SimError;

/// How a source offers tuples: its intended send times.
#[derive(Clone, Copy, Debug, PartialEq, serde::Serialize)]
pub enum Rate {
    /// As fast as it can take them in (no intended time: it is the time taken in).
    Unlimited,
    /// A constant rate, tuples/s.
    Constant(f64),
    /// A Poisson process of this many tuples/s (exponential gaps drawn from the run's seed).
    Poisson(f64),
    /// Linearly from `from` to `to` tuples/s over `over_ns`, then `to`.
    Ramp {
        /// Rate at the start.
        from: f64,
        /// Rate at the end of the ramp and after.
        to: f64,
        /// Length of the ramp.
        over_ns: Nanos,
    },
}

impl Rate {
    /// Tuples due by `t` ns after the source started (those whose intended time is ≤ t).
    pub fn due(&self, t: Nanos) -> u64 {
        let s = t as f64 / 1e9;
        let n = match *self {
            Rate::Unlimited => return u64::MAX / 2,
            // Drawn as the run goes (see the simulator); this is the expected count.
            Rate::Constant(r) | Rate::Poisson(r) => s * r,
            Rate::Ramp { from, to, over_ns } => {
                let over = over_ns as f64 / 1e9;
                if s <= over {
                    from * s + (to - from) * s * s / (2.0 * over)
                } else {
                    (from + to) / 2.0 * over + to * (s - over)
                }
            }
        };
        // Tuple i is due at the time n reaches i: tuple 0 at the start.
        n.floor() as u64 + 1
    }

    /// The intended time of tuple `i` (ns after the start): the first time it is due.
    pub fn time_of(&self, i: u64) -> Nanos {
        match *self {
            Rate::Unlimited => 0,
            Rate::Constant(r) | Rate::Poisson(r) => {
                // The closed form, then nudged so that it agrees with `due` despite rounding.
                let mut t = (i as f64 * 1e9 / r).ceil() as Nanos;
                while t > 0 && self.due(t - 1) > i {
                    t -= 1;
                }
                while self.due(t) <= i {
                    t += 1;
                }
                t
            }
            Rate::Ramp { .. } => {
                // Smallest t with due(t) > i, by bisection over nanoseconds.
                let (mut lo, mut hi) = (0u64, 1u64);
                while self.due(hi) <= i {
                    hi = hi.saturating_mul(2);
                    if hi == u64::MAX {
                        return u64::MAX;
                    }
                }
                while lo < hi {
                    let mid = lo + (hi - lo) / 2;
                    if self.due(mid) > i {
                        hi = mid;
                    } else {
                        lo = mid + 1;
                    }
                }
                lo
            }
        }
    }

    /// The mean rate over the first `over_ns`, tuples/s (`0` when unlimited).
    pub fn mean(&self, over_ns: Nanos) -> f64 {
        match *self {
            Rate::Unlimited => 0.0,
            Rate::Constant(r) | Rate::Poisson(r) => r,
            Rate::Ramp { .. } => (self.due(over_ns) - 1) as f64 / (over_ns as f64 / 1e9),
        }
    }
}

/// What a logical operator's code does per tuple.
#[derive(Clone, Copy, Debug, PartialEq, serde::Serialize)]
pub struct NodeCost {
    /// CPU time per tuple, ns (for a source: per tuple taken in).
    pub cost_ns: Nanos,
    /// Output tuples per input tuple: `⌊s⌋` copies, one more with probability `s − ⌊s⌋`.
    pub selectivity: f64,
    /// `(probability per tuple, longest sleep ns)`: after a tuple the thread sleeps `U[0, max)`.
    pub block: Option<(f64, Nanos)>,
    /// A source's offered rate (ignored for other operators).
    pub rate: Rate,
}

impl NodeCost {
    /// An operator that costs `cost_ns` and passes every tuple on.
    pub fn cost(cost_ns: Nanos) -> NodeCost {
        NodeCost { cost_ns, selectivity: 1.0, block: None, rate: Rate::Unlimited }
    }
}

/// One physical operator as simulated.
#[derive(Clone, Debug, PartialEq, serde::Serialize)]
pub struct OperatorModel {
    /// Source, operator or sink (of the chain's head).
    pub kind: NodeKind,
    /// CPU time per tuple, ns: the sum over the chain.
    pub cost_ns: Nanos,
    /// Output tuples per input tuple: the product over the chain.
    pub selectivity: f64,
    /// Blocking, from the first blocking operator of the chain.
    pub block: Option<(f64, Nanos)>,
    /// For a source, its rate.
    pub rate: Rate,
}

/// The output channels of one operator on one logical stream: a tuple goes to one of them by
/// the stream's partitioning (to all of them when broadcast).
#[derive(Clone, Debug, PartialEq, serde::Serialize)]
pub struct OutputGroup {
    /// Channel indices (into the topology's channels).
    pub channels: Vec<usize>,
    /// How tuples are spread over them.
    pub partitioning: Partitioning,
}

/// Queries as the simulator runs them; see the module docs.
#[derive(Clone, Debug)]
pub struct Model {
    /// The engine's view: logical graph, physical operators, channels (threading and thread ids
    /// are set per run).
    pub topology: Topology,
    /// Per physical operator, what it costs.
    pub operators: Vec<OperatorModel>,
    /// Per physical operator, its input channels.
    pub inputs: Vec<Vec<usize>>,
    /// Per physical operator, its output groups.
    pub outputs: Vec<Vec<OutputGroup>>,
}

impl Model {
    /// Plans `queries` as the engine does (fusing forward edges when `chaining`) and gives every
    /// logical operator the cost `cost(query, operator name, kind)` says.
    pub fn new(
        queries: &[BuiltQuery],
        chaining: bool,
        cost: impl Fn(&str, &str, NodeKind) -> Result<NodeCost, SimError>,
    ) -> Result<Model, SimError> {
        let mut graph = LogicalGraph::default();
        let mut names = Vec::with_capacity(queries.len());
        for q in queries {
            let offset = graph.nodes.len();
            graph.nodes.extend(q.graph().nodes.iter().cloned());
            graph.edges.extend(q.graph().edges.iter().cloned().map(|mut e| {
                e.from += offset;
                e.to += offset;
                e
            }));
            names.push(q.name().to_string());
        }
        Model::from_graph(names, graph, chaining, cost)
    }

    /// Plans a merged logical `graph` of the queries `names` (see [`Model::new`]).
    pub fn from_graph(
        names: Vec<String>,
        graph: LogicalGraph,
        chaining: bool,
        cost: impl Fn(&str, &str, NodeKind) -> Result<NodeCost, SimError>,
    ) -> Result<Model, SimError> {
        graph.validate().map_err(|e| SimError::Model(e.to_string()))?;
        if graph.edges.iter().any(|e| e.exchange.is_some()) {
            return Err(SimError::Model(
                "a stream with a Hone exchange is not simulated inside a query yet; see `moirai_sim::hone` for the \
                 link alone"
                    .into(),
            ));
        }
        let nodes: Vec<NodeCost> =
            graph.nodes.iter().map(|n| cost(&n.query, &n.name, n.kind)).collect::<Result<_, _>>()?;
        let plan = PhysicalPlan::new(&graph, chaining);
        let mut operators = Vec::with_capacity(plan.operators.len());
        let mut physical = Vec::with_capacity(plan.operators.len());
        for p in &plan.operators {
            let chain = &p.logical;
            let kind = graph.nodes[chain[0]].kind;
            // Each instance of a source offers the source's rate, as the engine's instances do.
            let rate = nodes[chain[0]].rate;
            operators.push(OperatorModel {
                kind,
                cost_ns: chain.iter().map(|&n| nodes[n].cost_ns).sum(),
                selectivity: (chain.iter().skip(usize::from(kind == NodeKind::Source)))
                    .map(|&n| nodes[n].selectivity)
                    .product(),
                block: chain.iter().find_map(|&n| nodes[n].block),
                rate,
            });
            physical.push(PhysicalOperator {
                id: p.id,
                query: p.query.clone(),
                name: p.name.clone(),
                logical: p.logical.clone(),
                logical_names: p.logical.iter().map(|&n| graph.nodes[n].name.clone()).collect(),
                instance: p.instance,
                parallelism: p.parallelism,
                kind,
                tid: 0,
            });
        }
        let mut inputs = vec![Vec::new(); operators.len()];
        let mut outputs: Vec<Vec<OutputGroup>> = vec![Vec::new(); operators.len()];
        let mut group_of: std::collections::BTreeMap<(usize, usize), usize> = Default::default();
        for (i, c) in plan.channels.iter().enumerate() {
            inputs[c.to].push(i);
            let g = *group_of.entry((c.from, c.edge)).or_insert_with(|| {
                outputs[c.from].push(OutputGroup { channels: Vec::new(), partitioning: c.partitioning });
                outputs[c.from].len() - 1
            });
            outputs[c.from][g].channels.push(i);
        }
        let topology = Topology {
            pid: 0,
            threading: Threading::Dedicated.to_string(),
            threads: Vec::new(),
            thread_level: 0,
            chaining,
            queries: names,
            logical: graph.document(),
            physical,
            channels: plan.channels,
        };
        Ok(Model { topology, operators, inputs, outputs })
    }

    /// SYN as `moirai run syn` runs it with `config` (chaining off, as the CLI runs it): the
    /// queries of [`syn::queries`], with the costs and selectivities [`syn::draw`] gives and each
    /// source offering `config.rate`. Sources cost `source_cost_ns` per tuple.
    pub fn syn(config: &SynConfig, source_cost_ns: Nanos) -> Result<Model, SimError> {
        Model::syn_part(config, source_cost_ns, &(0..config.queries).collect::<Vec<_>>())
    }

    /// As [`Model::syn`], with only the queries numbered in `part` (a node's share of a cluster,
    /// [`crate::cluster::placement`]); each keeps its name and its drawn costs.
    pub fn syn_part(config: &SynConfig, source_cost_ns: Nanos, part: &[usize]) -> Result<Model, SimError> {
        let mut queries = syn::queries(config).map_err(|e| SimError::Model(e.to_string()))?;
        if let Some(&q) = part.iter().find(|&&q| q >= queries.len()) {
            return Err(SimError::Model(format!("SYN has {} queries, not a query {q}", queries.len())));
        }
        let mut i = 0;
        queries.retain(|_| {
            i += 1;
            part.contains(&(i - 1))
        });
        let params = syn::draw(config).map_err(|e| SimError::Model(e.to_string()))?;
        let rate = if config.rate > 0.0 { Rate::Constant(config.rate) } else { Rate::Unlimited };
        let block_max = config.block_max_ms * 1_000_000;
        Model::new(&queries, false, |query, name, kind| {
            let q: usize = query
                .strip_prefix("syn")
                .and_then(|n| n.parse().ok())
                .ok_or_else(|| SimError::Model(format!("SYN query '{query}' is not named syn<N>")))?;
            let p = &params[q];
            Ok(match kind {
                NodeKind::Source => NodeCost { rate, ..NodeCost::cost(source_cost_ns) },
                NodeKind::Sink => NodeCost::cost(p.sink_cost_ns),
                NodeKind::Operator => {
                    let i: usize = name
                        .strip_prefix("op")
                        .and_then(|n| n.parse().ok())
                        .ok_or_else(|| SimError::Model(format!("SYN operator '{name}' is not named op<N>")))?;
                    let op = &p.operators[i - 1];
                    NodeCost {
                        cost_ns: op.cost_ns,
                        selectivity: op.selectivity,
                        block: op.blocking.then_some((config.block_probability, block_max)),
                        rate: Rate::Unlimited,
                    }
                }
            })
        })
    }

    /// Physical operators.
    pub fn len(&self) -> usize {
        self.operators.len()
    }

    /// Whether there is no operator.
    pub fn is_empty(&self) -> bool {
        self.operators.is_empty()
    }

    /// The total offered rate of the sources, tuples/s, averaged over `over_ns` (0 if any is
    /// unlimited).
    pub fn offered_rate(&self, over_ns: Nanos) -> f64 {
        self.operators.iter().filter(|o| o.kind == NodeKind::Source).map(|o| o.rate.mean(over_ns)).sum()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn constant_rates_space_tuples_evenly() {
        let r = Rate::Constant(1000.0);
        assert_eq!(r.due(0), 1, "tuple 0 is due at the start");
        assert_eq!(r.due(999_999), 1);
        assert_eq!(r.due(1_000_000), 2);
        assert_eq!(r.due(1_000_000_000), 1001);
        assert_eq!(r.time_of(0), 0);
        assert_eq!(r.time_of(1), 1_000_000);
        assert_eq!(r.time_of(1000), 1_000_000_000);
    }

    #[test]
    fn ramps_integrate_their_rate_and_invert_exactly() {
        let r = Rate::Ramp { from: 1000.0, to: 3000.0, over_ns: 1_000_000_000 };
        // 2000 tuples over the ramp (mean 2000/s), then 3000/s.
        assert_eq!(r.due(1_000_000_000), 2001);
        assert_eq!(r.due(2_000_000_000), 5001);
        for i in [0, 1, 17, 1999, 2000, 4000] {
            let t = r.time_of(i);
            assert!(r.due(t) > i && (t == 0 || r.due(t - 1) <= i), "tuple {i} at {t}");
        }
        assert!((r.mean(1_000_000_000) - 2000.0).abs() < 1e-9);
    }

    #[test]
    fn syn_lachesis_has_the_engines_operators_and_the_drawn_costs() {
        let config = SynConfig { rate: 75.0, ..SynConfig::lachesis() };
        let m = Model::syn(&config, 0).unwrap();
        assert_eq!(m.len(), 20 * 5);
        assert_eq!(m.topology.physical[1].name, "op1 (1/1)");
        assert_eq!(m.topology.channels.len(), 20 * 4);
        let drawn = syn::draw(&config).unwrap();
        assert_eq!(m.operators[1].cost_ns, drawn[0].operators[0].cost_ns);
        assert_eq!(m.operators[4].cost_ns, drawn[0].sink_cost_ns);
        assert_eq!(m.operators[5 + 2].selectivity, drawn[1].operators[1].selectivity);
        assert_eq!(m.operators[0].rate, Rate::Constant(75.0));
        assert!((m.offered_rate(1_000_000_000) - 1500.0).abs() < 1e-9);
        assert_eq!(m.outputs[0][0].channels, vec![0]);
        assert_eq!(m.inputs[1], vec![0]);
    }
}

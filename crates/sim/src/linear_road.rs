//! Linear Road's Lachesis shape ([`moirai_workloads::linear_road::lachesis`]) as a model: the
//! workload's own query (ten threads: source, dispatcher, six operators, the union, the sink),
//! planned by the engine's planner with chaining off as `moirai run linear-road --shape lachesis`
//! runs it, and what each operator costs per tuple on the lab's machine.
//!
//! The workload's description gives the shape and the selectivities (1 everywhere: every operator
//! emits one tuple per input, so the sink gets three per record) but no costs: its operators parse
//! text and update hash maps. The costs here were measured with the
//! engine (`docs/sim.md`, "Calibrating against this machine"): each thread's CPU time over the
//! tuples it handled, at an unlimited rate, where batches are full and wake-ups are negligible.

use moirai_engine::graph::NodeKind;
use moirai_workloads::linear_road::{self, LinearRoadConfig, Shape};

use crate::event::Nanos;
use crate::model::{Model, NodeCost, Rate};
use crate::SimError;

/// Per logical operator of the Lachesis shape: CPU per tuple (ns) and selectivity, measured on
/// the lab's 2-core VM: each thread's CPU over the tuples it handled at an unlimited rate (1.2M
/// tuples/s), less the per-tuple overhead the model adds (12 ns). The source's cost is that of
/// generating and formatting a record; the union before the sink is a thread of its own (chaining
/// is off) and, like the sink, sees three tuples per record.
pub const LACHESIS_COSTS: [(&str, Nanos, f64); 10] = [
    ("source", 415, 1.0),
    ("dispatcher", 441, 1.0),
    ("average_speed", 36, 1.0),
    ("last_average_speed", 100, 1.0),
    ("toll_notification_las", 23, 1.0),
    ("count_vehicles", 34, 1.0),
    ("toll_notification_cv", 12, 1.0),
    ("toll_notification_pos", 119, 1.0),
    ("sink_merge", 6, 1.0),
    ("sink", 49, 1.0),
];

impl Model {
    /// Linear Road's Lachesis shape at `rate` tuples/s in all (0: as fast as it goes), with the
    /// measured [`LACHESIS_COSTS`].
    pub fn linear_road_lachesis(rate: f64) -> Result<Model, SimError> {
        let config = LinearRoadConfig { rate, shape: Shape::Lachesis, ..LinearRoadConfig::default() };
        let (queries, _stats) = linear_road::queries(&config).map_err(|e| SimError::Model(e.to_string()))?;
        let offered = if rate > 0.0 { Rate::Constant(rate) } else { Rate::Unlimited };
        Model::new(&queries, false, |_, name, kind| {
            let &(_, cost_ns, selectivity) = LACHESIS_COSTS.iter().find(|(n, ..)| *n == name).ok_or_else(|| {
                SimError::Model(format!("Linear Road's Lachesis shape has an operator '{name}' with no measured cost"))
            })?;
            let rate = if kind == NodeKind::Source { offered } else { Rate::Unlimited };
            Ok(NodeCost { cost_ns, selectivity, block: None, rate })
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_lachesis_shape_has_ten_threads_and_three_branches_into_the_union() {
        let model = Model::linear_road_lachesis(1000.0).unwrap();
        assert_eq!(model.len(), 10, "{:?}", model.topology.physical.iter().map(|p| &p.name).collect::<Vec<_>>());
        let merge = (model.topology.physical.iter()).position(|p| p.name.starts_with("sink_merge")).unwrap();
        assert_eq!(model.inputs[merge].len(), 3);
        let dispatcher = (model.topology.physical.iter()).position(|p| p.name.starts_with("dispatcher")).unwrap();
        assert_eq!(model.outputs[dispatcher].len(), 3, "one output group per branch");
        assert!((model.offered_rate(1_000_000_000) - 1000.0).abs() < 1e-9);
    }
}

//! Transformation rules between logical and physical operators (Lachesis §5.1, Algorithm 2).
//!
//! A policy written for logical operators produces a logical schedule;
//! [`logical_to_physical`] turns it into priorities of physical operators: a fused physical
//! operator takes the highest priority of the logical operators it runs, and every replica of a
//! logical operator inherits its priority. [`to_logical`] goes the other way for metric values.

use std::collections::BTreeMap;

use crate::cluster::{Cluster, Spe};
use crate::entity::{LogicalRef, OpRef};
use crate::metric::Aggregation;

/// Algorithm 2: the priority of each physical operator that runs at least one logical operator
/// of `logical`, as the maximum over the logical operators it runs (fusion); replicas (fission)
/// all get their logical operator's priority. Physical operators none of whose logical operators
/// has a priority are left out.
pub fn logical_to_physical(cluster: &Cluster, logical: &BTreeMap<LogicalRef, f64>) -> BTreeMap<OpRef, f64> {
    let mut out: BTreeMap<OpRef, f64> = BTreeMap::new();
    for (&l, &priority) in logical {
        if l.spe >= cluster.spes().len() || l.op >= cluster.spe(l.spe).logical_len() {
            continue; // not in this cluster (a schedule of an older topology)
        }
        for p in cluster.deployed_on(l) {
            out.entry(p).and_modify(|v| *v = v.max(priority)).or_insert(priority);
        }
    }
    out
}

/// Combines per-physical-operator `values` of one SPE into one value per logical operator, over
/// the physical operators running it ([`Spe::deployed_on`]), as `aggregation` says.
pub fn to_logical(spe: &Spe, values: &[f64], aggregation: Aggregation) -> Vec<f64> {
    (0..spe.logical_len())
        .map(|l| {
            let parts = spe.deployed_on(l).iter().map(|&p| values[p]);
            match aggregation {
                Aggregation::Sum => parts.sum(),
                Aggregation::Max => parts.fold(f64::MIN, f64::max),
                Aggregation::Mean => parts.sum::<f64>() / spe.deployed_on(l).len() as f64,
            }
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::fixtures::*;

    fn l(op: usize) -> LogicalRef {
        LogicalRef { spe: 0, op }
    }

    fn p(op: usize) -> OpRef {
        OpRef { spe: 0, op }
    }

    #[test]
    fn fused_operator_takes_the_max_and_replicas_inherit() {
        let c = Cluster::new(vec![fused_and_replicated("s", "q")]).unwrap();
        let logical = BTreeMap::from([(l(0), 1.0), (l(1), 5.0), (l(2), 9.0), (l(3), 2.0)]);
        let physical = logical_to_physical(&c, &logical);
        assert_eq!(physical, BTreeMap::from([(p(0), 1.0), (p(1), 9.0), (p(2), 9.0), (p(3), 2.0)]));
        // The max does not depend on which part of the chain comes first.
        let logical = BTreeMap::from([(l(1), 9.0), (l(2), 5.0)]);
        let physical = logical_to_physical(&c, &logical);
        assert_eq!(physical, BTreeMap::from([(p(1), 9.0), (p(2), 9.0)]));
    }

    #[test]
    fn one_to_one_deployment_is_the_identity() {
        let c = Cluster::new(vec![diamond("s", "q")]).unwrap();
        let logical: BTreeMap<_, _> = (0..4).map(|i| (l(i), i as f64 * 1.5 - 2.0)).collect();
        let physical = logical_to_physical(&c, &logical);
        let expected: BTreeMap<_, _> = (0..4).map(|i| (p(i), i as f64 * 1.5 - 2.0)).collect();
        assert_eq!(physical, expected);
    }

    #[test]
    fn unknown_and_missing_logical_operators() {
        let c = Cluster::new(vec![pipeline("s", "q")]).unwrap();
        let logical = BTreeMap::from([(l(1), 3.0), (l(9), 1.0), (LogicalRef { spe: 4, op: 0 }, 1.0)]);
        assert_eq!(logical_to_physical(&c, &logical), BTreeMap::from([(p(1), 3.0)]));
        // Negative priorities survive the max (no 0 default sneaks in).
        let c = Cluster::new(vec![fused_and_replicated("s", "q")]).unwrap();
        let physical = logical_to_physical(&c, &BTreeMap::from([(l(1), -5.0), (l(2), -7.0)]));
        assert_eq!(physical[&p(1)], -5.0);
    }

    #[test]
    fn to_logical_aggregates_over_deployment() {
        let c = Cluster::new(vec![fused_and_replicated("s", "q")]).unwrap();
        let values = [1.0, 4.0, 6.0, 2.0];
        assert_eq!(to_logical(c.spe(0), &values, Aggregation::Sum), vec![1.0, 10.0, 10.0, 2.0]);
        assert_eq!(to_logical(c.spe(0), &values, Aggregation::Max), vec![1.0, 6.0, 6.0, 2.0]);
        assert_eq!(to_logical(c.spe(0), &values, Aggregation::Mean), vec![1.0, 5.0, 5.0, 2.0]);
    }
}

//! The user-level policy executor (`--threading policy:<name>[:N]`): a pool of N workers that
//! always run the runnable operator of highest priority, with priorities recomputed every period
//! by a scheduling policy — the design of Haren (and EdgeWise), and STAFiLOS' schedulers.
//!
//! The pool is the one of [`crate::executor`] with a ready queue of [`PRIORITY_LEVELS`] FIFO
//! levels ([`crate::ready`]). A run-time controller ([`crate::control::PolicyController`], thread
//! `moirai-policy`) asks a [`Prioritizer`] for one priority per physical operator every period,
//! ranks them into levels ([`levels`]) and publishes each operator's level in its metrics (an
//! atomic byte): workers read it when they queue an operator, so the hot path takes no lock. A
//! worker keeps an operator for a turn — a batch of steps, and at most a quantum of time when one
//! is set — then queues it again at its level and takes the highest queued one.
//!
//! The policies themselves are the middleware's, run in-process (see `adapter`, feature
//! `policies`): the same policy objects decide at the OS level (nice values through the
//! middleware) and here. Their short names are the table of [`moirai_contract::policies`].

use std::sync::atomic::Ordering;
use std::sync::Arc;
use std::time::Duration;

use moirai_contract::topology::Topology;

use crate::metrics::{OperatorMetrics, OperatorSnapshot};
pub use crate::ready::PRIORITY_LEVELS;
pub use crate::threading::{PolicyThreading, DEFAULT_BATCH, DEFAULT_PERIOD, QBS_SOURCE_EVERY};

/// Why a policy gave no priorities.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
pub enum PolicyError {
    /// The policy is unknown or does not build (a script that does not compile, an unknown
    /// metric).
    #[error("policy '{policy}': {reason}")]
    Build {
        /// The policy's name.
        policy: String,
        /// Why.
        reason: String,
    },
    /// This build of the engine has no policies (feature `policies` off).
    #[error("policy '{0}': this build of moirai-engine has no policies; enable its `policies` feature")]
    NotBuilt(String),
    /// A round of the scheduling core failed (its reason).
    #[error("{0}")]
    Round(String),
    /// Called again before the policy was due.
    #[error("called again within a millisecond: not due")]
    NotDue,
    /// A prioritizer gave a priority per operator of another topology.
    #[error("{got} priorities for {expected} operators")]
    Count {
        /// Priorities given.
        got: usize,
        /// Physical operators.
        expected: usize,
    },
}

/// Decides the priority of every physical operator, higher first. Called by the policy
/// controller every period with the engine's topology and a snapshot of its counters.
pub trait Prioritizer: Send {
    /// One priority per physical operator (indexed like `topology.physical`), or an error that
    /// leaves the previous priorities in place this period.
    fn priorities(
        &mut self,
        topology: &Topology,
        ops: &[OperatorSnapshot],
        at: Duration,
    ) -> Result<Vec<f64>, PolicyError>;
}

/// Ranks priorities into levels `0..PRIORITY_LEVELS`, the highest priority at the top level:
/// distinct values are ranked (equal values share a level) and the ranks spread evenly over the
/// levels. NaN counts as the lowest priority.
pub fn levels(priorities: &[f64]) -> Vec<u8> {
    let clean = |p: f64| if p.is_nan() { f64::NEG_INFINITY } else { p };
    let mut distinct: Vec<f64> = priorities.iter().map(|&p| clean(p)).collect();
    distinct.sort_by(|a, b| a.total_cmp(b));
    distinct.dedup();
    let top = PRIORITY_LEVELS - 1;
    let steps = distinct.len().saturating_sub(1).max(1);
    priorities
        .iter()
        .map(|&p| {
            let rank = distinct.partition_point(|&d| d < clean(p));
            if distinct.len() <= 1 {
                return 0;
            }
            u8::try_from(rank * top / steps).unwrap_or(u8::MAX)
        })
        .collect()
}

/// Publishes levels (and priorities, for the metrics endpoint) to the operators' metrics; unless
/// `active` (the activation rule is idle), every operator at level 0 whatever its priority.
pub(crate) fn publish(metrics: &[Arc<OperatorMetrics>], priorities: &[f64], active: bool) {
    let levels = if active { levels(priorities) } else { vec![0; priorities.len()] };
    for ((m, &p), l) in metrics.iter().zip(priorities).zip(levels) {
        m.priority_level.store(l, Ordering::Relaxed);
        m.priority.store(p.to_bits(), Ordering::Relaxed);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn levels_rank_priorities_and_share_equal_ones() {
        assert_eq!(levels(&[5.0, 5.0, 5.0]), vec![0, 0, 0]);
        assert_eq!(levels(&[1.0, 3.0, 2.0]), vec![0, 15, 7]);
        assert_eq!(levels(&[0.0, 100.0, 0.0, f64::NAN]), vec![7, 15, 7, 0]);
        let many: Vec<f64> = (0..100).map(f64::from).collect();
        let l = levels(&many);
        assert_eq!((l[0], l[99]), (0, 15));
        assert!(l.windows(2).all(|w| w[0] <= w[1]), "monotone: {l:?}");
        assert!(levels(&[]).is_empty());
    }
}

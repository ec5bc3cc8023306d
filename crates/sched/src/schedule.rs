//! Schedules: what a policy decides (Lachesis §5.3). Priorities are real numbers, higher means
//! more important; a translator normalises them ([`crate::normalize`]) into OS parameters.

use std::collections::BTreeMap;

use serde::Serialize;

use crate::cluster::Cluster;
use crate::entity::{OpRef, ThreadRef};

/// A policy's decision for the physical operators it governs.
#[derive(Clone, Debug, PartialEq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum Schedule {
    /// Single-priority: one priority per physical operator (and so per thread), e.g. for nice.
    Single(BTreeMap<OpRef, f64>),
    /// Grouping: operators placed in groups, one priority per group, e.g. a cgroup each with
    /// `cpu.shares`/`cpu.weight` from the priority.
    Grouping(Vec<Group>),
}

/// A group of a grouping schedule.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct Group {
    /// A label unique in the schedule: a query name, an SPE name, or `"<spe>/<query>/<operator>"`. A
    /// translator must make it safe for its mechanism (e.g. a cgroup directory name).
    pub name: String,
    /// The group's priority.
    pub priority: f64,
    /// The physical operators in it, sorted.
    pub members: Vec<OpRef>,
}

impl Group {
    /// The threads of all its members.
    pub fn threads(&self, cluster: &Cluster) -> Vec<ThreadRef> {
        self.members.iter().flat_map(|&op| cluster.threads(op).iter().copied()).collect()
    }
}

impl Schedule {
    /// The operators it covers, sorted, each once.
    pub fn ops(&self) -> Vec<OpRef> {
        match self {
            Schedule::Single(m) => m.keys().copied().collect(),
            Schedule::Grouping(groups) => {
                let mut ops: Vec<_> = groups.iter().flat_map(|g| g.members.iter().copied()).collect();
                ops.sort();
                ops.dedup();
                ops
            }
        }
    }

    /// The priority of every thread: an operator's priority (single) or its group's (grouping)
    /// for each of its threads.
    pub fn thread_priorities(&self, cluster: &Cluster) -> Vec<(ThreadRef, f64)> {
        let per_op: Vec<(OpRef, f64)> = match self {
            Schedule::Single(m) => m.iter().map(|(&op, &p)| (op, p)).collect(),
            Schedule::Grouping(groups) => {
                groups.iter().flat_map(|g| g.members.iter().map(move |&op| (op, g.priority))).collect()
            }
        };
        per_op.into_iter().flat_map(|(op, p)| cluster.threads(op).iter().map(move |&t| (t, p))).collect()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::fixtures::*;

    #[test]
    fn single_schedule_maps_to_threads() {
        let c = Cluster::new(vec![pipeline("s", "q")]).unwrap();
        let s = Schedule::Single(BTreeMap::from([(OpRef { spe: 0, op: 1 }, 2.5), (OpRef { spe: 0, op: 2 }, 1.0)]));
        let threads: Vec<_> = s.thread_priorities(&c).into_iter().map(|(t, p)| (t.tid, p)).collect();
        assert_eq!(threads, vec![(11, 2.5), (12, 1.0)]);
        assert_eq!(s.ops().len(), 2);
    }

    #[test]
    fn grouping_schedule_maps_members_to_threads() {
        let c = Cluster::new(vec![two_queries("s")]).unwrap();
        let g = Group { name: "q2".into(), priority: 3.0, members: (3..6).map(|op| OpRef { spe: 0, op }).collect() };
        assert_eq!(g.threads(&c).iter().map(|t| t.tid).collect::<Vec<_>>(), vec![40, 41, 42]);
        let s = Schedule::Grouping(vec![g]);
        assert!(s.thread_priorities(&c).iter().all(|&(_, p)| p == 3.0));
        assert_eq!(s.ops(), (3..6).map(|op| OpRef { spe: 0, op }).collect::<Vec<_>>());
    }
}

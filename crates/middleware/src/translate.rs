//! Translators: a policy's schedule → OS parameters (Lachesis §5.3).
//!
//! - [`NiceTranslator`]: normalises priorities into nice values and sets them per thread with
//!   `setpriority(2)`, only where the value changed since the last round.
//! - [`CgroupTranslator`]: one cpu cgroup per group of a grouping schedule (or per operator of a
//!   single-priority one), weights `cpu.shares` (v1) or `cpu.weight` (v2) from the priorities,
//!   threads moved in when their group changes.
//!
//! Linux starts a thread at its creator's nice value and in its creator's cgroup, so both
//! translators also look, each round, at the threads born since the last one in the processes
//! they steer: one the schedule does not name is handed back what its process had (its heirs;
//! see `docs/schedule.md`, "Threads born of a reniced thread").
//!
//! Every change goes through the [`RestoreLog`], which records the original first.

use std::collections::{BTreeMap, HashMap, HashSet};

use moirai_os::cgroup::{sanitize_group_name, CgroupTree, CgroupVersion, Hierarchy};
use moirai_os::{OsError, RestoreLog, Tid};
use moirai_sched::normalize::{to_nice, to_weights, NiceRange, Normalization, WeightRange};
use moirai_sched::{Cluster, OpRef, Schedule};

use crate::driver::threads::ThreadCensus;

/// One thread a schedule reaches.
#[derive(Clone, Debug, PartialEq)]
pub struct Target {
    /// Process.
    pub pid: u32,
    /// Thread.
    pub tid: Tid,
    /// Its start time, guarding against tid reuse.
    pub start_ticks: u64,
    /// SPE name.
    pub spe: String,
    /// Query.
    pub query: String,
    /// Physical operator name.
    pub operator: String,
    /// The group (grouping schedules), or the operator's own group name.
    pub group: String,
    /// The priority the policy gave.
    pub priority: f64,
}

/// The threads of a schedule with their priorities, in a stable order, each thread once. A
/// thread that runs several operators (a Flink chain split into its operators, whose task
/// thread runs them all) takes the highest priority among them, with that operator's name and
/// group: one thread has one nice value and one cgroup, and a thread that carries an urgent
/// operator must run.
pub fn targets(schedule: &Schedule, cluster: &Cluster) -> Vec<Target> {
    let mut out: Vec<Target> = Vec::new();
    let mut seen: HashMap<(u32, Tid), usize> = HashMap::new();
    let mut add = |op: OpRef, group: String, priority: f64| {
        let spe = cluster.spe(op.spe);
        let p = cluster.physical(op);
        for t in cluster.threads(op) {
            let key = (spe.topology().pid, t.tid);
            if let Some(&i) = seen.get(&key) {
                if priority > out[i].priority {
                    out[i].priority = priority;
                    out[i].operator = p.name.clone();
                    out[i].group = group.clone();
                }
                continue;
            }
            seen.insert(key, out.len());
            out.push(Target {
                pid: spe.topology().pid,
                tid: t.tid,
                start_ticks: t.start_ticks,
                spe: spe.name().to_string(),
                query: p.query.clone(),
                operator: p.name.clone(),
                group: group.clone(),
                priority,
            });
        }
    };
    match schedule {
        Schedule::Single(map) => {
            for (&op, &priority) in map {
                let p = cluster.physical(op);
                let group = format!("{}.{}.{}", cluster.spe(op.spe).name(), p.query, p.name);
                add(op, group, priority);
            }
        }
        Schedule::Grouping(groups) => {
            for g in groups {
                for &op in &g.members {
                    add(op, g.name.clone(), g.priority);
                }
            }
        }
    }
    out
}

/// The nice value of every thread `schedule` reaches, normalised as a [`NiceTranslator`] does:
/// the pure part of [`NiceTranslator::apply`], for callers that set nothing (the simulator).
pub fn nice_values(
    schedule: &Schedule,
    cluster: &Cluster,
    normalization: Normalization,
    range: NiceRange,
) -> Vec<(Target, i32)> {
    let targets = targets(schedule, cluster);
    let priorities: Vec<f64> = targets.iter().map(|t| t.priority).collect();
    let nices = to_nice(&priorities, normalization, range);
    targets.into_iter().zip(nices).collect()
}

/// The cpu cgroup weight of every group `schedule` makes, and every thread with its group, as a
/// [`CgroupTranslator`] computes them: one group per group of a grouping schedule (per operator
/// of a single-priority one), the groups' priorities normalised into `range` — the pure part of
/// [`CgroupTranslator::apply`], for callers that write nothing (the simulator).
pub fn cgroup_weights(
    schedule: &Schedule,
    cluster: &Cluster,
    normalization: Normalization,
    range: WeightRange,
) -> (BTreeMap<String, u64>, Vec<Target>) {
    let targets = targets(schedule, cluster);
    let mut groups: BTreeMap<String, f64> = BTreeMap::new();
    for t in &targets {
        groups.insert(t.group.clone(), t.priority);
    }
    let priorities: Vec<f64> = groups.values().copied().collect();
    let weights = to_weights(&priorities, normalization, range);
    (groups.into_keys().zip(weights).collect(), targets)
}

/// What a translator did in one round.
#[derive(Clone, Debug, Default)]
pub struct Applied {
    /// Every thread with the value it now has (nice, or its group's weight).
    pub values: Vec<(Target, i64)>,
    /// How many OS calls changed something.
    pub changed: usize,
    /// Threads that ended before their turn (normal: threads come and go).
    pub gone: usize,
    /// Other failures, one line each.
    pub errors: Vec<String>,
}

/// Nice values per thread.
pub struct NiceTranslator {
    normalization: Normalization,
    range: NiceRange,
    /// The weight of the newest priority in each thread's smoothed priority (1: no smoothing).
    smoothing: f64,
    /// Smoothed priorities: (pid, tid) → (start ticks, priority).
    smoothed: HashMap<(u32, Tid), (u64, f64)>,
    /// What was last set: (pid, tid) → (start ticks, nice).
    applied: HashMap<(u32, Tid), (u64, i32)>,
    /// The threads of each process it sets values in, to see new ones (heirs).
    censuses: HashMap<u32, ThreadCensus>,
}

impl NiceTranslator {
    /// A translator normalising with `normalization` into `range`.
    pub fn new(normalization: Normalization, range: NiceRange) -> Self {
        NiceTranslator {
            normalization,
            range,
            smoothing: 1.0,
            smoothed: HashMap::new(),
            applied: HashMap::new(),
            censuses: HashMap::new(),
        }
    }

    /// Smooths each thread's priority over rounds before normalising: `s × newest + (1 − s) ×
    /// previous` (an exponentially weighted moving average; `s` = 1 keeps the newest alone), so
    /// that one round's burst or drained queue does not swing a thread across the range.
    pub fn smoothing(self, s: f64) -> Self {
        NiceTranslator { smoothing: s.clamp(f64::MIN_POSITIVE, 1.0), ..self }
    }

    /// The schedule's targets with their priorities smoothed (see [`NiceTranslator::smoothing`]).
    fn smooth(&mut self, mut targets: Vec<Target>) -> Vec<Target> {
        if self.smoothing >= 1.0 {
            return targets;
        }
        let s = self.smoothing;
        for t in &mut targets {
            let key = (t.pid, t.tid);
            let p = match self.smoothed.get(&key) {
                Some(&(ticks, prev)) if ticks == t.start_ticks && prev.is_finite() && t.priority.is_finite() => {
                    s * t.priority + (1.0 - s) * prev
                }
                _ => t.priority,
            };
            self.smoothed.insert(key, (t.start_ticks, p));
            t.priority = p;
        }
        let live: HashSet<(u32, Tid)> = targets.iter().map(|t| (t.pid, t.tid)).collect();
        self.smoothed.retain(|k, _| live.contains(k));
        targets
    }

    /// Forgets what it set on the threads of process `pid` (they were handed back their
    /// original values): the next schedule sets them again.
    pub fn forget(&mut self, pid: u32) {
        self.applied.retain(|(p, _), _| *p != pid);
        self.smoothed.retain(|(p, _), _| *p != pid);
        self.censuses.remove(&pid);
    }

    /// Sets the nice values `schedule` asks for. A thread that appeared in one of the processes
    /// since the last round, which the schedule does not name and which started at a value set
    /// here (born of a reniced thread: an SPE's pool or network thread), gets its process's value
    /// back at once ([`RestoreLog::reset_heirs`]) instead of keeping an operator's.
    pub fn apply(&mut self, schedule: &Schedule, cluster: &Cluster, log: &mut RestoreLog) -> Applied {
        let targets = self.smooth(targets(schedule, cluster));
        let priorities: Vec<f64> = targets.iter().map(|t| t.priority).collect();
        let nices = to_nice(&priorities, self.normalization, self.range);
        let values: Vec<(Target, i32)> = targets.into_iter().zip(nices).collect();
        let mut applied = Applied::default();
        let mut changes = Vec::new();
        let mut changed_targets = Vec::new();
        for (t, nice) in values.iter().map(|(t, n)| (t, *n)) {
            if self.applied.get(&(t.pid, t.tid)) != Some(&(t.start_ticks, nice)) {
                changes.push((t.pid, t.tid, nice));
                changed_targets.push((t.clone(), nice));
            } else {
                applied.values.push((t.clone(), nice as i64));
            }
        }
        for ((t, nice), result) in changed_targets.into_iter().zip(log.set_nices(&changes)) {
            match result {
                Ok(()) => {
                    applied.changed += 1;
                    self.applied.insert((t.pid, t.tid), (t.start_ticks, nice));
                    applied.values.push((t, nice as i64));
                }
                Err(OsError::ThreadGone { .. }) => {
                    applied.gone += 1;
                    self.applied.remove(&(t.pid, t.tid));
                }
                Err(e) => applied.errors.push(format!("nice {nice} for thread {} ({}): {e}", t.tid, t.operator)),
            }
        }
        // Forget threads that are no longer scheduled by this policy (they keep their value
        // until restore; a thread that ended must not match a reused tid later).
        let live: HashSet<(u32, Tid)> = values.iter().map(|(t, _)| (t.pid, t.tid)).collect();
        self.applied.retain(|k, _| live.contains(k));
        self.reset_heirs(&live, log, &mut applied);
        applied
    }

    /// The heirs among the threads born since the last round that `scheduled` does not name,
    /// back to their process's value (see [`NiceTranslator::apply`]).
    fn reset_heirs(&mut self, scheduled: &HashSet<(u32, Tid)>, log: &mut RestoreLog, applied: &mut Applied) {
        let pids: HashSet<u32> = scheduled.iter().map(|&(pid, _)| pid).filter(|&pid| log.follows_heirs(pid)).collect();
        self.censuses.retain(|pid, _| pids.contains(pid));
        for pid in pids {
            let census = self.censuses.entry(pid).or_default();
            if !census.refresh(pid) {
                continue;
            }
            let born: Vec<Tid> =
                census.born().iter().copied().filter(|&tid| !scheduled.contains(&(pid, tid))).collect();
            let (reset, failures) = log.reset_heirs(pid, &born);
            applied.changed += reset;
            applied.errors.extend(failures);
        }
    }
}

/// cpu cgroups with weights.
pub struct CgroupTranslator {
    version: CgroupVersion,
    normalization: Normalization,
    range: WeightRange,
    tree: CgroupTree,
    /// Group directory names by schedule group name.
    dirs: BTreeMap<String, String>,
    weights: HashMap<String, u64>,
    /// (pid, tid) → (start ticks, group dir) where the thread was put.
    placed: HashMap<(u32, Tid), (u64, String)>,
    /// Whether its groups get a real-time budget (a realtime policy runs beside it).
    realtime: bool,
    /// The threads of each process it places threads of, to see new ones (heirs).
    censuses: HashMap<u32, ThreadCensus>,
}

impl CgroupTranslator {
    /// Creates this middleware's groups under `hierarchy` (named `instance`), normalising with
    /// `normalization` into `weights` (default: the version's whole range).
    pub fn new(
        log: &mut RestoreLog,
        hierarchy: &Hierarchy,
        instance: &str,
        normalization: Normalization,
        weights: Option<(u64, u64)>,
    ) -> Result<Self, String> {
        let limits = match hierarchy.version {
            CgroupVersion::V1 => WeightRange::CPU_SHARES,
            CgroupVersion::V2 => WeightRange::CPU_WEIGHT,
        };
        let range = weights.map(|(min, max)| WeightRange { min, max }).unwrap_or(limits);
        range.validate(limits)?;
        let tree = CgroupTree::create(log, hierarchy, instance).map_err(|e| e.to_string())?;
        Ok(CgroupTranslator {
            version: hierarchy.version,
            normalization,
            range,
            tree,
            dirs: BTreeMap::new(),
            weights: HashMap::new(),
            placed: HashMap::new(),
            realtime: false,
            censuses: HashMap::new(),
        })
    }

    /// Gives every group it makes a share of the real-time budget (v1 `cpu.rt_runtime_us` under
    /// `CONFIG_RT_GROUP_SCHED`), so that threads a realtime policy raises may run in them
    /// (`moirai_os::cgroup::rt_budget`).
    pub fn grant_realtime(&mut self) {
        self.realtime = true;
    }

    /// The file its values are written to: `cpu.shares` (v1) or `cpu.weight` (v2).
    pub fn knob(&self) -> &'static str {
        match self.version {
            CgroupVersion::V1 => "cpu.shares",
            CgroupVersion::V2 => "cpu.weight",
        }
    }

    fn dir_name(&mut self, group: &str) -> String {
        if let Some(d) = self.dirs.get(group) {
            return d.clone();
        }
        let mut name = sanitize_group_name(group);
        // Two groups may sanitise to the same name: number the later ones.
        let base = name.clone();
        let mut n = 2;
        while self.dirs.values().any(|d| *d == name) {
            name = format!("{}-{n}", &base[..base.len().min(58)]);
            n += 1;
        }
        self.dirs.insert(group.to_string(), name.clone());
        name
    }

    /// Forgets where it put the threads of process `pid` (they were moved back to their
    /// original cgroups): the next schedule places them again.
    pub fn forget(&mut self, pid: u32) {
        self.placed.retain(|(p, _), _| *p != pid);
        self.censuses.remove(&pid);
    }

    /// Places threads and sets weights as `schedule` asks.
    pub fn apply(&mut self, schedule: &Schedule, cluster: &Cluster, log: &mut RestoreLog) -> Applied {
        let (weight_of, targets) = cgroup_weights(schedule, cluster, self.normalization, self.range);
        let mut applied = Applied::default();
        let groups_before = self.tree.groups().count();
        for (group, &weight) in &weight_of {
            let dir = self.dir_name(group);
            if let Err(e) = self.tree.ensure_group(log, &dir) {
                applied.errors.push(format!("group {dir}: {e}"));
                continue;
            }
            if self.weights.get(&dir) != Some(&weight) {
                match self.tree.set_weight(&dir, weight) {
                    Ok(()) => {
                        applied.changed += 1;
                        self.weights.insert(dir, weight);
                    }
                    Err(e) => applied.errors.push(format!("weight {weight} for group {dir}: {e}")),
                }
            }
        }
        if self.realtime && self.tree.groups().count() != groups_before {
            if let Err(e) = moirai_os::cgroup::rt_budget::share_rt_runtime(&self.tree, log) {
                applied.errors.push(format!("real-time budget of the groups: {e}"));
            }
        }
        let scheduled: HashSet<(u32, Tid)> = targets.iter().map(|t| (t.pid, t.tid)).collect();
        for t in targets {
            let dir = self.dir_name(&t.group);
            let weight = weight_of.get(&t.group).copied().unwrap_or(0);
            if self.placed.get(&(t.pid, t.tid)) == Some(&(t.start_ticks, dir.clone())) {
                applied.values.push((t, weight as i64));
                continue;
            }
            match self.tree.move_thread(log, t.pid, t.tid, &dir) {
                Ok(()) => {
                    applied.changed += 1;
                    self.placed.insert((t.pid, t.tid), (t.start_ticks, dir));
                    applied.values.push((t, weight as i64));
                }
                Err(OsError::ThreadGone { .. }) => {
                    applied.gone += 1;
                }
                Err(e) => applied.errors.push(format!("moving thread {} ({}) to {dir}: {e}", t.tid, t.operator)),
            }
        }
        self.release_heirs(&scheduled, log, &mut applied);
        applied
    }

    /// The threads born since the last round in one of its groups that `scheduled` does not
    /// name, out of the group ([`CgroupTree::release_thread`]: to their process's original
    /// cgroup on v1; to the instance directory on v2, where a thread cannot leave its process's
    /// threaded domain alone): a pool thread that an operator thread in a heavy group starts
    /// would otherwise share that group's weight until the middleware exits.
    fn release_heirs(&mut self, scheduled: &HashSet<(u32, Tid)>, log: &mut RestoreLog, applied: &mut Applied) {
        let pids: HashSet<u32> = scheduled.iter().map(|&(pid, _)| pid).collect();
        self.censuses.retain(|pid, _| pids.contains(pid));
        for pid in pids {
            let census = self.censuses.entry(pid).or_default();
            if !census.refresh(pid) {
                continue;
            }
            for &tid in census.born().iter().filter(|&&tid| !scheduled.contains(&(pid, tid))) {
                // Not in one of its groups (or gone): nothing of the middleware's to undo.
                let Ok(Some(group)) = self.tree.group_of(pid, tid) else { continue };
                match self.tree.release_thread(log, pid, tid) {
                    Ok(()) => applied.changed += 1,
                    Err(OsError::ThreadGone { .. }) => {}
                    Err(e) => applied.errors.push(format!("releasing thread {tid}, born in group {group}: {e}")),
                }
            }
        }
    }
}

#[cfg(test)]
pub(crate) mod tests {
    use super::*;

    /// A thread `tid` of SPE `e`, query `q`, operator `op<tid>`, at `priority`.
    pub(crate) fn target(tid: Tid, priority: f64) -> Target {
        Target {
            pid: 1,
            tid,
            start_ticks: 7,
            spe: "e".into(),
            query: "q".into(),
            operator: format!("op{tid}"),
            group: String::new(),
            priority,
        }
    }

    /// A Flink source chain split into its two operators (`source`, `probe`), both run by task
    /// thread 10, which also runs nothing else; thread 11 is the probe's alone.
    fn split_chain() -> Cluster {
        use moirai_sched::{LogicalOperator, OpKind, PhysicalOperator, SpeTopology, ThreadRef};
        let logical = |name: &str, kind| LogicalOperator { name: name.into(), query: "q".into(), kind };
        let physical = |name: &str, l: usize, tids: &[Tid]| PhysicalOperator {
            name: name.into(),
            query: "q".into(),
            logical: vec![l],
            instance: 0,
            threads: tids.iter().map(|&tid| ThreadRef { tid, start_ticks: 7 }).collect(),
        };
        Cluster::new(vec![SpeTopology {
            name: "flink".into(),
            pid: 1,
            queries: vec!["q".into()],
            logical: vec![logical("source", OpKind::Source), logical("probe", OpKind::Sink)],
            logical_edges: vec![(0, 1)],
            physical: vec![physical("source (1/1)", 0, &[10]), physical("probe (1/1)", 1, &[10, 11])],
            physical_edges: vec![(0, 1)],
        }])
        .unwrap()
    }

    #[test]
    fn a_thread_of_several_operators_is_one_target_with_their_highest_priority() {
        let cluster = split_chain();
        let (source, probe) = (OpRef { spe: 0, op: 0 }, OpRef { spe: 0, op: 1 });
        for (ps, pp) in [(1.0, 5.0), (5.0, 1.0)] {
            let schedule = Schedule::Single([(source, ps), (probe, pp)].into_iter().collect());
            let t = targets(&schedule, &cluster);
            let by_tid: Vec<(Tid, &str, f64)> = t.iter().map(|t| (t.tid, t.operator.as_str(), t.priority)).collect();
            let top = if ps > pp { "source (1/1)" } else { "probe (1/1)" };
            assert_eq!(by_tid, [(10, top, ps.max(pp)), (11, "probe (1/1)", pp)], "priorities {ps}, {pp}");
            // So each thread gets one nice value, whatever the order of the operators.
            let nices = nice_values(&schedule, &cluster, Normalization::Linear, NiceRange::default());
            assert_eq!(nices.len(), 2);
        }
    }

    /// A thread of this process that starts a sleeping thread on request (Linux starts it at
    /// the creator's nice value) and sleeps until dropped.
    struct Spawner {
        tid: Tid,
        ask: Option<std::sync::mpsc::Sender<std::sync::mpsc::Sender<Tid>>>,
        handle: Option<std::thread::JoinHandle<()>>,
    }

    impl Spawner {
        fn spawn() -> Spawner {
            let (tid_tx, tid_rx) = std::sync::mpsc::channel();
            let (ask, asked) = std::sync::mpsc::channel::<std::sync::mpsc::Sender<Tid>>();
            let handle = std::thread::spawn(move || {
                tid_tx.send(moirai_os::proc::current_tid()).unwrap();
                let mut children = Vec::new();
                for reply in asked {
                    let (stop_tx, stop_rx) = std::sync::mpsc::channel::<()>();
                    let reply2 = reply.clone();
                    children.push((
                        stop_tx,
                        std::thread::spawn(move || {
                            reply2.send(moirai_os::proc::current_tid()).unwrap();
                            let _ = stop_rx.recv();
                        }),
                    ));
                }
                for (stop, child) in children {
                    drop(stop);
                    let _ = child.join();
                }
            });
            Spawner { tid: tid_rx.recv().unwrap(), ask: Some(ask), handle: Some(handle) }
        }

        fn child(&self) -> Tid {
            let (tx, rx) = std::sync::mpsc::channel();
            self.ask.as_ref().unwrap().send(tx).unwrap();
            rx.recv().unwrap()
        }
    }

    impl Drop for Spawner {
        fn drop(&mut self) {
            drop(self.ask.take());
            if let Some(h) = self.handle.take() {
                let _ = h.join();
            }
        }
    }

    /// A restore log in a fresh directory of its own, `name` and this process's pid.
    fn fresh_log(name: &str) -> (std::path::PathBuf, RestoreLog) {
        let dir = std::env::temp_dir().join(format!("{name}-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&dir);
        std::fs::create_dir_all(&dir).unwrap();
        let log = RestoreLog::create(dir.join("state.json")).unwrap();
        (dir, log)
    }

    /// A source and a sink of one query, each on a [`Spawner`]'s thread of this process, and a
    /// schedule that ranks the source above the sink.
    fn two_operators(pid: u32, source: &Spawner, sink: &Spawner) -> (Cluster, Schedule) {
        use moirai_sched::{LogicalOperator, OpKind, PhysicalOperator, SpeTopology, ThreadRef};
        let thread =
            |tid: Tid| ThreadRef { tid, start_ticks: moirai_os::proc::thread_stat(pid, tid).unwrap().start_ticks };
        let cluster = Cluster::new(vec![SpeTopology {
            name: "e".into(),
            pid,
            queries: vec!["q".into()],
            logical: vec![
                LogicalOperator { name: "source".into(), query: "q".into(), kind: OpKind::Source },
                LogicalOperator { name: "sink".into(), query: "q".into(), kind: OpKind::Sink },
            ],
            logical_edges: vec![(0, 1)],
            physical: [("source", source), ("sink", sink)]
                .iter()
                .enumerate()
                .map(|(l, (name, s))| PhysicalOperator {
                    name: name.to_string(),
                    query: "q".into(),
                    logical: vec![l],
                    instance: 0,
                    threads: vec![thread(s.tid)],
                })
                .collect(),
            physical_edges: vec![(0, 1)],
        }])
        .unwrap();
        let schedule =
            Schedule::Single([(OpRef { spe: 0, op: 0 }, 9.0), (OpRef { spe: 0, op: 1 }, 1.0)].into_iter().collect());
        (cluster, schedule)
    }

    /// An operator thread set to a raised value starts a pool thread, which the schedule does not
    /// name: the next round hands it its process's value.
    #[test]
    fn a_thread_born_of_a_reniced_operator_thread_gets_its_process_value_at_the_next_round() {
        if !moirai_os::is_root() {
            eprintln!("skipped: raising a nice value needs root (CAP_SYS_NICE)");
            return;
        }
        let pid = std::process::id();
        let baseline = moirai_os::proc::thread_stat(pid, pid as Tid).unwrap().nice;
        let (source, sink) = (Spawner::spawn(), Spawner::spawn());
        let (cluster, schedule) = two_operators(pid, &source, &sink);
        let (dir, mut log) = fresh_log("moirai-translate-heirs");
        // A range of raised values only, so that both threads differ from the baseline.
        let range = if baseline < -2 { NiceRange { best: 3, worst: 9 } } else { NiceRange { best: -9, worst: -3 } };
        let mut translator = NiceTranslator::new(Normalization::Linear, range);
        let first = translator.apply(&schedule, &cluster, &mut log);
        assert!(first.errors.is_empty(), "{:?}", first.errors);
        let sink_nice = moirai_os::nice::get_nice(sink.tid).unwrap();
        assert_ne!(sink_nice, baseline);
        let pool = sink.child();
        assert_eq!(moirai_os::nice::get_nice(pool).unwrap(), sink_nice, "born at its creator's value");
        let second = translator.apply(&schedule, &cluster, &mut log);
        assert!(second.errors.is_empty(), "{:?}", second.errors);
        assert_eq!(second.changed, 1, "only the heir changed");
        assert_eq!(moirai_os::nice::get_nice(pool).unwrap(), baseline, "the heir has its process's value");
        assert_eq!(moirai_os::nice::get_nice(sink.tid).unwrap(), sink_nice, "the operator keeps its own");
        let report = log.restore();
        assert!(report.is_clean(), "{report}");
        for tid in [source.tid, sink.tid, pool] {
            assert_eq!(moirai_os::nice::get_nice(tid).unwrap(), baseline);
        }
        let _ = std::fs::remove_dir_all(&dir);
    }

    /// An operator thread placed in a group starts a pool thread, which the schedule does not
    /// name: Linux starts it in its creator's group, and the next round takes it out.
    #[test]
    fn a_thread_born_in_an_operator_s_group_leaves_it_at_the_next_round() {
        if !moirai_os::is_root() {
            eprintln!("skipped: moving threads between cgroups needs root");
            return;
        }
        let Ok(layout) = moirai_os::cgroup::CgroupLayout::detect() else {
            eprintln!("skipped: no cpu cgroup controller on this host");
            return;
        };
        let h = layout.cpu();
        let pid = std::process::id();
        let home = moirai_os::cgroup::process_cgroup(pid, h).unwrap();
        let (source, sink) = (Spawner::spawn(), Spawner::spawn());
        let (cluster, schedule) = two_operators(pid, &source, &sink);
        let (dir, mut log) = fresh_log("moirai-translate-cgroup-heirs");
        let instance = format!("translate-heirs-{pid}");
        let mut translator = CgroupTranslator::new(&mut log, h, &instance, Normalization::Linear, None).unwrap();
        let group_of = |tid: Tid| moirai_os::cgroup::thread_cgroup(pid, tid, h).unwrap();
        let first = translator.apply(&schedule, &cluster, &mut log);
        let sink_group = group_of(sink.tid);
        let outcome = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
            assert!(first.errors.is_empty(), "{:?}", first.errors);
            assert_ne!(sink_group, home, "the sink is in a group of its own");
            let pool = sink.child();
            assert_eq!(group_of(pool), sink_group, "born in its creator's group");
            let second = translator.apply(&schedule, &cluster, &mut log);
            assert!(second.errors.is_empty(), "{:?}", second.errors);
            assert_eq!(second.changed, 1, "only the heir moved");
            let out_of_the_groups = match h.version {
                CgroupVersion::V1 => home.clone(),
                CgroupVersion::V2 => translator.tree.instance_dir().to_path_buf(),
            };
            assert_eq!(group_of(pool), out_of_the_groups, "the heir is out of the operator's group");
            assert_eq!(group_of(sink.tid), sink_group, "the operator stays in its group");
            pool
        }));
        let report = log.restore();
        let _ = std::fs::remove_dir_all(&dir);
        let pool = outcome.unwrap_or_else(|e| std::panic::resume_unwind(e));
        assert!(report.is_clean(), "{report}");
        for tid in [source.tid, sink.tid, pool] {
            assert_eq!(group_of(tid), home, "thread {tid} back home");
        }
    }

    #[test]
    fn smoothing_averages_a_threads_priority_over_rounds() {
        let mut t = NiceTranslator::new(Normalization::Ratio, NiceRange::default()).smoothing(0.5);
        let p = |ts: Vec<Target>| ts.iter().map(|t| t.priority).collect::<Vec<_>>();
        assert_eq!(p(t.smooth(vec![target(1, 800.0), target(2, 0.0)])), [800.0, 0.0], "the first round as it is");
        // The queue of thread 1 drained, thread 2's grew: each moves halfway.
        assert_eq!(p(t.smooth(vec![target(1, 0.0), target(2, 400.0)])), [400.0, 200.0]);
        assert_eq!(p(t.smooth(vec![target(1, 0.0), target(2, 400.0)])), [200.0, 300.0]);
        // A thread with another start time (a reused tid) starts afresh; one that is gone is
        // forgotten.
        let mut reused = target(1, 10.0);
        reused.start_ticks = 8;
        assert_eq!(p(t.smooth(vec![reused])), [10.0]);
        assert_eq!(t.smoothed.len(), 1);
        t.forget(1);
        assert!(t.smoothed.is_empty());
        // 1 keeps the newest alone.
        let mut none = NiceTranslator::new(Normalization::Ratio, NiceRange::default());
        none.smooth(vec![target(1, 800.0)]);
        assert_eq!(p(none.smooth(vec![target(1, 0.0)])), [0.0]);
    }
}

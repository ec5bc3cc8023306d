//! A model of Linux's Completely Fair Scheduler (CFS) at the level that decides how CPU is shared
//! between the threads of an SPE: weights from nice values, virtual runtime, a targeted
//! scheduling latency cut into slices, sleeper credit on wake-up, wake-up preemption.
//!
//! - **Weights**: the kernel's own table `sched_prio_to_weight` ([`NICE_TO_WEIGHT`]), which is
//!   `1024 / 1.25^nice` rounded (nice 0 → 1024, nice 10 → 110: ratio 9.31 against 1.25¹⁰ = 9.31).
//! - **Virtual runtime**: a running thread's `vruntime` grows by `delta_exec · 1024 / weight`; the
//!   runnable thread with the smallest `vruntime` runs next.
//! - **Slice**: a runnable thread may run `period · weight / load` before it is preempted (at
//!   least `min_granularity`), where `period` is the scheduling latency, stretched to
//!   `nr · min_granularity` when more than `latency / min_granularity` threads share a core.
//! - **Wake-up**: a thread that slept is placed at `max(vruntime, min_vruntime − latency/2)` (the
//!   kernel's GENTLE_FAIR_SLEEPERS), and preempts the thread running on the waker's core if its
//!   `vruntime` is smaller by more than the wake-up granularity (scaled by its weight).
//!
//! **EEVDF** (Linux ≥ 6.6, [`FairScheduler::Eevdf`]) keeps the weights and the virtual runtime
//! but decides differently:
//!
//! - **Pick**: among the *eligible* entities — virtual runtime at most the load-weighted average
//!   `V` of the runnable ones (lag ≥ 0) — the one with the earliest virtual deadline
//!   `vruntime + base_slice · 1024 / weight`; a new deadline is set when a slice is used up.
//! - **Slice**: a fixed `base_slice` (0.75 ms × `1 + log₂ min(C, 8)`), not the latency cut by
//!   the number of threads.
//! - **Wake-up**: a thread keeps the lag it had when it went to sleep (clamped to two slices, and
//!   scaled by `(W + w) / W` as the kernel's `place_entity` does): `vruntime = V − lag`. No sleeper
//!   credit.
//! - **No wake-up preemption mid-slice**: with the kernel's defaults (RUN_TO_PARITY, equal slices)
//!   the running thread finishes its slice before a woken one with an earlier deadline runs.
//! - **Renice** keeps the lag and the remaining slice in real time (`reweight_entity`).
//!
//! **cpu cgroups** ([`RunQueue::add_group`], [`CpuGroup`]): a thread may be placed in a group
//! with a weight — cgroup v2 `cpu.weight` (1..=10000, 100 as nice 0) or v1 `cpu.shares`
//! (2..=262144, 1024 as nice 0), turned into the kernel's group weight as the kernel does
//! ([`group_weight`]). The group is one entity of the root with that weight; its threads share
//! the group's time by their nice weights. In the kernel each core has its own per-group entity
//! whose weight is the group's weight times the share of the group's load on that core
//! (`calc_group_shares`); with one run queue for all cores this is one *hierarchical weight* per
//! thread: `group weight · w / Σ w` over the group's runnable threads, recomputed whenever one of
//! them wakes, sleeps or is reniced ([`RunQueue::regroup`]). A group with no runnable thread
//! weighs nothing. One level of groups under the root (the middleware's translator makes no
//! deeper one); weights are kept in the kernel's fixed point (`scale_load`, 10 more bits) so a
//! group's weight split over its threads does not round away.
//!
//! Limits, on purpose: there is **one run queue for all cores** (ideal load balancing: a runnable
//! thread runs on any core that frees up, with no migration cost and no affinity). EEVDF's pick
//! scans the eligible entities in order of virtual runtime (the kernel keeps an augmented tree).
//! Times are integer nanoseconds.

use std::collections::BTreeSet;

use crate::event::Nanos;

/// The kernel's `sched_prio_to_weight` (kernel/sched/core.c), nice −20 to 19.
pub const NICE_TO_WEIGHT: [u64; 40] = [
    88761, 71755, 56483, 46273, 36291, // −20
    29154, 23254, 18705, 14949, 11916, // −15
    9548, 7620, 6100, 4904, 3906, // −10
    3121, 2501, 1991, 1586, 1277, // −5
    1024, 820, 655, 526, 423, // 0
    335, 272, 215, 172, 137, // 5
    110, 87, 70, 56, 45, // 10
    36, 29, 23, 18, 15, // 15
];

/// The weight of nice 0.
pub const NICE_0_WEIGHT: u64 = 1024;

/// The CFS weight of a nice value (clamped to −20..=19).
pub fn weight(nice: i32) -> u64 {
    NICE_TO_WEIGHT[(nice.clamp(-20, 19) + 20) as usize]
}

/// Extra bits of the load weights the run queue computes with (the kernel's `scale_load` on
/// 64-bit machines): a group's weight split among its threads keeps its precision.
pub const LOAD_SHIFT: u32 = 10;

/// The load weight of nice 0 (`NICE_0_LOAD`).
const NICE_0_LOAD: u64 = NICE_0_WEIGHT << LOAD_SHIFT;

/// How a cpu cgroup's weight is written.
#[derive(Clone, Copy, Debug, PartialEq, Eq, serde::Serialize)]
#[serde(rename_all = "lowercase")]
pub enum CgroupVersion {
    /// cgroup v1: `cpu.shares`, 2..=262144, 1024 as nice 0.
    V1,
    /// cgroup v2: `cpu.weight`, 1..=10000, 100 as nice 0.
    V2,
}

/// The kernel's group weight (`tg->shares`, unscaled) of a cgroup's `cpu.shares` (v1) or
/// `cpu.weight` (v2): v2 weights become `round(weight · 1024 / 100)`
/// (`sched_weight_from_cgroup`), and both are clamped to the kernel's `[MIN_SHARES, MAX_SHARES]`
/// = [2, 262144].
pub fn group_weight(version: CgroupVersion, value: u64) -> u64 {
    let shares = match version {
        CgroupVersion::V1 => value,
        CgroupVersion::V2 => (value.clamp(1, 10_000) * 1024 + 50) / 100,
    };
    shares.clamp(2, 1 << 18)
}

/// A cpu cgroup under the root: one entity of the root with `weight`, shared by its threads.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct CpuGroup {
    /// The kernel's group weight ([`group_weight`]).
    pub weight: u64,
    /// The entities placed in it.
    pub members: Vec<usize>,
    /// Sum of the nice weights of its runnable and running members.
    runnable: u64,
}

/// Which of Linux's fair schedulers the run queue follows.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, serde::Serialize)]
#[serde(rename_all = "lowercase")]
pub enum FairScheduler {
    /// CFS (Linux < 6.6): smallest virtual runtime first, sleeper credit, wake-up preemption.
    #[default]
    Cfs,
    /// EEVDF (Linux ≥ 6.6): earliest eligible virtual deadline first, lag kept across sleeps.
    Eevdf,
}

impl std::str::FromStr for FairScheduler {
    type Err = String;
    fn from_str(s: &str) -> Result<Self, String> {
        match s {
            "cfs" => Ok(FairScheduler::Cfs),
            "eevdf" => Ok(FairScheduler::Eevdf),
            other => Err(format!("unknown scheduler '{other}': use cfs (Linux before 6.6) or eevdf (6.6 and later)")),
        }
    }
}

/// The scheduler's tunables and the costs of switching, in nanoseconds.
#[derive(Clone, Copy, Debug, PartialEq, Eq, serde::Serialize)]
pub struct CfsParams {
    /// CFS or EEVDF.
    pub scheduler: FairScheduler,
    /// EEVDF's slice (`sched_base_slice`).
    pub base_slice_ns: Nanos,
    /// Targeted scheduling latency: every runnable thread runs once within it (`sched_latency`).
    pub latency_ns: Nanos,
    /// Shortest slice (`sched_min_granularity`).
    pub min_granularity_ns: Nanos,
    /// How much smaller a waking thread's vruntime must be to preempt (`sched_wakeup_granularity`).
    pub wakeup_granularity_ns: Nanos,
    /// CPU time a core loses when it switches from one thread to another.
    pub context_switch_ns: Nanos,
    /// Time from a wake-up (a tuple pushed to a sleeping consumer, a timer) until the thread is
    /// runnable.
    pub wakeup_ns: Nanos,
}

impl CfsParams {
    /// The kernel's defaults for `cores` CPUs: 6 ms, 0.75 ms and 1 ms, each times
    /// `1 + log₂(min(cores, 8))` (SCHED_TUNABLESCALING_LOG), with a 2 µs context switch and a
    /// 5 µs wake-up — the two costs to calibrate on a given machine (see `docs/sim.md`).
    pub fn for_cores(cores: usize) -> CfsParams {
        let factor = 1 + (cores.clamp(1, 8) as u64).ilog2() as u64;
        CfsParams {
            scheduler: FairScheduler::Cfs,
            base_slice_ns: 750_000 * factor,
            latency_ns: 6_000_000 * factor,
            min_granularity_ns: 750_000 * factor,
            wakeup_granularity_ns: 1_000_000 * factor,
            context_switch_ns: 2_000,
            wakeup_ns: 5_000,
        }
    }
}

/// One schedulable entity (a thread) as the scheduler sees it.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Entity {
    /// Its nice value.
    pub nice: i32,
    /// Its weight, from the nice value.
    pub weight: u64,
    /// The weight it weighs with in the run queue, in fixed point ([`LOAD_SHIFT`]): its nice
    /// weight, or its share of its group's weight.
    pub load: u64,
    /// The cpu cgroup it is in, if any.
    pub group: Option<usize>,
    /// Its virtual runtime.
    pub vruntime: u64,
    /// Whether it counts in the load: runnable or running.
    pub on_rq: bool,
    /// Whether it waits in the run queue's tree (runnable, not running).
    pub queued: bool,
    /// EEVDF: its virtual deadline.
    pub deadline: u64,
    /// EEVDF: its lag (`V − vruntime`) when it last went to sleep.
    pub vlag: i64,
}

impl Entity {
    /// A new entity at `nice`, not yet runnable.
    pub fn new(nice: i32) -> Entity {
        let weight = weight(nice);
        Entity {
            nice,
            weight,
            load: weight << LOAD_SHIFT,
            group: None,
            vruntime: 0,
            on_rq: false,
            queued: false,
            deadline: 0,
            vlag: 0,
        }
    }
}

/// The run queue shared by all cores (see the module docs for why one).
pub struct RunQueue {
    /// Runnable entities waiting for a core, by (vruntime, id).
    tree: BTreeSet<(u64, usize)>,
    /// A floor under every runnable vruntime, never decreasing.
    min_vruntime: u64,
    /// Sum of the load weights of runnable and running entities.
    load: u64,
    /// Sum of weight × vruntime over the runnable and running entities (EEVDF's average).
    weighted_vruntime: u128,
    /// The average when the run queue last had entities (EEVDF places newcomers there).
    last_avg: u64,
    /// Runnable and running entities.
    nr: usize,
    cores: usize,
    params: CfsParams,
    /// cpu cgroups under the root.
    groups: Vec<CpuGroup>,
}

impl RunQueue {
    /// An empty run queue for `cores` cores.
    pub fn new(cores: usize, params: CfsParams) -> RunQueue {
        RunQueue {
            tree: BTreeSet::new(),
            min_vruntime: 0,
            load: 0,
            weighted_vruntime: 0,
            last_avg: 0,
            nr: 0,
            cores: cores.max(1),
            params,
            groups: Vec::new(),
        }
    }

    /// The tunables.
    pub fn params(&self) -> &CfsParams {
        &self.params
    }

    /// Runnable and running entities.
    pub fn nr_running(&self) -> usize {
        self.nr
    }

    /// Whether an entity waits for a core.
    pub fn has_waiting(&self) -> bool {
        !self.tree.is_empty()
    }

    fn eevdf(&self) -> bool {
        self.params.scheduler == FairScheduler::Eevdf
    }

    /// EEVDF's `V`: the load-weighted average vruntime of the runnable and running entities.
    pub fn avg_vruntime(&self) -> u64 {
        match self.load {
            0 => self.last_avg,
            load => (self.weighted_vruntime / load as u128) as u64,
        }
    }

    /// A slice in `e`'s virtual time.
    fn virtual_slice(&self, e: &Entity) -> u64 {
        self.params.base_slice_ns * NICE_0_LOAD / e.load
    }

    /// A new entity starts at `min_vruntime` (CFS) or with no lag at the average (EEVDF).
    pub fn place_new(&self, e: &mut Entity) {
        e.vruntime = if self.eevdf() { self.avg_vruntime() } else { self.min_vruntime };
        e.vlag = 0;
    }

    /// Makes a sleeping entity `id` runnable: with sleeper credit (CFS) or at the lag it left
    /// with (EEVDF).
    pub fn wake(&mut self, id: usize, e: &mut Entity) {
        debug_assert!(!e.on_rq);
        if let Some(g) = e.group {
            self.groups[g].runnable += e.weight;
            e.load = self.share(g, e.weight);
        }
        if self.eevdf() {
            let avg = self.avg_vruntime() as i128;
            // Joining shifts the average towards the newcomer; the kernel inflates the lag so that
            // the lag it keeps afterwards is the one it left with.
            let lag = match self.load {
                0 => e.vlag as i128,
                load => e.vlag as i128 * (load + e.load) as i128 / load as i128,
            };
            e.vruntime = (avg - lag).max(0) as u64;
            e.deadline = e.vruntime + self.virtual_slice(e);
        } else {
            let floor = self.min_vruntime.saturating_sub(self.params.latency_ns / 2);
            e.vruntime = e.vruntime.max(floor);
        }
        e.on_rq = true;
        self.load += e.load;
        self.weighted_vruntime += e.load as u128 * e.vruntime as u128;
        self.nr += 1;
        self.insert(id, e);
    }

    /// Takes the next entity to run: the smallest vruntime (CFS), or the earliest deadline among
    /// the eligible ones (EEVDF; the smallest vruntime if none is eligible).
    pub fn pick(&mut self, entities: &mut [Entity]) -> Option<usize> {
        let (v, id) = if self.eevdf() {
            let avg = self.avg_vruntime();
            let first = *self.tree.first()?;
            let best = self
                .tree
                .iter()
                .take_while(|&&(v, _)| v <= avg)
                .min_by_key(|&&(_, id)| (entities[id].deadline, id))
                .copied()
                .unwrap_or(first);
            self.tree.remove(&best);
            best
        } else {
            self.tree.pop_first()?
        };
        entities[id].queued = false;
        self.min_vruntime = self.min_vruntime.max(v);
        Some(id)
    }

    /// Puts a running entity back among the runnable ones (it was preempted).
    pub fn put_prev(&mut self, id: usize, e: &mut Entity) {
        self.insert(id, e);
    }

    /// A running entity goes to sleep: it leaves the load (EEVDF: keeping its lag, at most two
    /// slices either way, as the kernel clamps it).
    pub fn sleep(&mut self, e: &mut Entity) {
        debug_assert!(e.on_rq && !e.queued);
        if self.eevdf() {
            let limit = (2 * self.virtual_slice(e)) as i64;
            e.vlag = (self.avg_vruntime() as i64 - e.vruntime as i64).clamp(-limit, limit);
        }
        e.on_rq = false;
        self.load -= e.load;
        self.weighted_vruntime -= e.load as u128 * e.vruntime as u128;
        self.nr -= 1;
        if let Some(g) = e.group {
            self.groups[g].runnable -= e.weight;
        }
        if self.load == 0 {
            self.last_avg = e.vruntime;
        }
    }

    /// Charges `delta` ns of CPU to a running entity (EEVDF: a used-up slice gets a new deadline).
    pub fn charge(&mut self, e: &mut Entity, delta: Nanos) {
        let dv = (delta as u128 * NICE_0_LOAD as u128 / e.load as u128) as u64;
        e.vruntime += dv;
        if e.on_rq {
            self.weighted_vruntime += e.load as u128 * dv as u128;
        }
        if self.eevdf() && e.vruntime >= e.deadline {
            e.deadline = e.vruntime + self.virtual_slice(e);
        }
    }

    /// Changes an entity's nice value (as `setpriority` does): its weight and the load change;
    /// its vruntime does not (CFS), or it keeps its lag and remaining slice in real time (EEVDF).
    /// In a group, only its share of the group changes; call [`RunQueue::regroup`] after it.
    pub fn renice(&mut self, id: usize, e: &mut Entity, nice: i32) {
        let w = weight(nice);
        let load = match e.group {
            Some(g) => {
                if e.on_rq {
                    self.groups[g].runnable = self.groups[g].runnable - e.weight + w;
                }
                self.share(g, w)
            }
            None => w << LOAD_SHIFT,
        };
        e.nice = nice;
        e.weight = w;
        self.reload(id, e, load);
    }

    /// Gives an entity a new load weight, keeping the queue's sums (see [`RunQueue::renice`]).
    fn reload(&mut self, id: usize, e: &mut Entity, load: u64) {
        if load == e.load {
            return;
        }
        let queued = e.queued;
        if queued {
            self.tree.remove(&(e.vruntime, id));
        }
        if e.on_rq {
            let avg = self.avg_vruntime() as i128;
            self.weighted_vruntime -= e.load as u128 * e.vruntime as u128;
            if self.eevdf() {
                let scale = |x: i128| x * e.load as i128 / load as i128;
                let lag = scale(avg - e.vruntime as i128);
                let left = scale(e.deadline as i128 - e.vruntime as i128);
                e.vruntime = (avg - lag).max(0) as u64;
                e.deadline = (e.vruntime as i128 + left).max(0) as u64;
            }
            self.load = self.load - e.load + load;
            self.weighted_vruntime += load as u128 * e.vruntime as u128;
        } else if self.eevdf() {
            e.vlag = (e.vlag as i128 * e.load as i128 / load as i128) as i64;
        }
        e.load = load;
        if queued {
            self.tree.insert((e.vruntime, id));
        }
    }

    /// A new cpu cgroup under the root with the kernel's group weight `weight`
    /// ([`group_weight`]); returns its id.
    pub fn add_group(&mut self, weight: u64) -> usize {
        self.groups.push(CpuGroup { weight: weight.max(1), members: Vec::new(), runnable: 0 });
        self.groups.len() - 1
    }

    /// The groups, by id.
    pub fn groups(&self) -> &[CpuGroup] {
        &self.groups
    }

    /// Sets a group's weight (as writing `cpu.weight` or `cpu.shares` does): its runnable
    /// threads' shares change at once.
    pub fn set_group_weight(&mut self, group: usize, weight: u64, entities: &mut [Entity]) {
        if self.groups[group].weight != weight.max(1) {
            self.groups[group].weight = weight.max(1);
            self.spread(group, entities);
        }
    }

    /// Moves entity `id` into `group` (or back to the root with `None`), as writing its tid to
    /// the group's `cgroup.threads` does; both groups' shares are spread anew.
    pub fn move_to_group(&mut self, id: usize, group: Option<usize>, entities: &mut [Entity]) {
        let from = entities[id].group;
        if from == group {
            return;
        }
        let on_rq = entities[id].on_rq;
        let w = entities[id].weight;
        if let Some(g) = from {
            self.groups[g].members.retain(|&m| m != id);
            if on_rq {
                self.groups[g].runnable -= w;
            }
        }
        entities[id].group = group;
        let load = match group {
            Some(g) => {
                self.groups[g].members.push(id);
                if on_rq {
                    self.groups[g].runnable += w;
                }
                self.share(g, w)
            }
            None => w << LOAD_SHIFT,
        };
        self.reload(id, &mut entities[id], load);
        for g in [from, group].into_iter().flatten() {
            self.spread(g, entities);
        }
    }

    /// After entity `id` woke, slept or was reniced: its group's weight is spread anew over the
    /// group's runnable threads (nothing to do at the root).
    pub fn regroup(&mut self, id: usize, entities: &mut [Entity]) {
        if let Some(g) = entities[id].group {
            self.spread(g, entities);
        }
    }

    /// Gives every runnable member of `group` its share of the group's weight.
    fn spread(&mut self, group: usize, entities: &mut [Entity]) {
        for i in 0..self.groups[group].members.len() {
            let m = self.groups[group].members[i];
            if entities[m].on_rq {
                let load = self.share(group, entities[m].weight);
                self.reload(m, &mut entities[m], load);
            }
        }
    }

    /// The load weight of a thread of nice weight `w` in `group`: the group's weight times the
    /// thread's share of the group's runnable weight (all of it when it is alone).
    fn share(&self, group: usize, w: u64) -> u64 {
        let g = &self.groups[group];
        let runnable = g.runnable.max(w);
        ((((g.weight as u128) << LOAD_SHIFT) * w as u128 / runnable as u128) as u64).max(1)
    }

    /// How long `e` may run now before it is preempted.
    pub fn slice(&self, e: &Entity) -> Nanos {
        if self.eevdf() {
            // Until its virtual deadline, in real time.
            let left = e.deadline.saturating_sub(e.vruntime).max(1);
            return (left as u128 * e.load as u128 / NICE_0_LOAD as u128).max(1) as Nanos;
        }
        let p = &self.params;
        let per_core = self.nr.div_ceil(self.cores) as u64;
        let nr_latency = (p.latency_ns / p.min_granularity_ns.max(1)).max(1);
        let period = if per_core > nr_latency { per_core * p.min_granularity_ns } else { p.latency_ns };
        // The load one core carries: the whole load spread over the cores in use.
        let cores_in_use = self.nr.clamp(1, self.cores) as u64;
        let load = (self.load / cores_in_use).max(e.load);
        ((period as u128 * e.load as u128 / load as u128) as Nanos).max(p.min_granularity_ns)
    }

    /// Whether a woken entity should preempt the running `current` (kernel `wakeup_preempt_entity`;
    /// never mid-slice under EEVDF with the kernel's defaults).
    pub fn should_preempt(&self, woken: &Entity, current: &Entity) -> bool {
        if self.eevdf() {
            return false;
        }
        let gran = self.params.wakeup_granularity_ns * NICE_0_LOAD / woken.load;
        woken.vruntime + gran < current.vruntime
    }

    fn insert(&mut self, id: usize, e: &mut Entity) {
        e.queued = true;
        self.tree.insert((e.vruntime, id));
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Runs always-runnable entities of the given nice values on `cores` cores for `horizon` ns,
    /// the way the simulator drives the run queue (pick, run a slice, charge, put back); returns
    /// each one's CPU time.
    fn busy(nices: &[i32], cores: usize, horizon: Nanos) -> Vec<Nanos> {
        busy_under(FairScheduler::Cfs, nices, cores, horizon)
    }

    fn busy_under(scheduler: FairScheduler, nices: &[i32], cores: usize, horizon: Nanos) -> Vec<Nanos> {
        let params = CfsParams { scheduler, context_switch_ns: 0, ..CfsParams::for_cores(cores) };
        let mut rq = RunQueue::new(cores, params);
        let mut es: Vec<Entity> = nices.iter().map(|&n| Entity::new(n)).collect();
        for (id, e) in es.iter_mut().enumerate() {
            rq.place_new(e);
            rq.wake(id, e);
        }
        run_busy(&mut rq, &mut es, cores, horizon)
    }

    /// As [`busy_under`], with cpu cgroups: `threads` are (nice, group index into `groups`, which
    /// are the groups' kernel weights); only threads with `busy` set are ever runnable.
    fn busy_in_groups(
        scheduler: FairScheduler,
        threads: &[(i32, Option<usize>, bool)],
        groups: &[u64],
        cores: usize,
        horizon: Nanos,
    ) -> Vec<Nanos> {
        let params = CfsParams { scheduler, context_switch_ns: 0, ..CfsParams::for_cores(cores) };
        let mut rq = RunQueue::new(cores, params);
        let gs: Vec<usize> = groups.iter().map(|&w| rq.add_group(w)).collect();
        let mut es: Vec<Entity> = threads.iter().map(|&(n, _, _)| Entity::new(n)).collect();
        for (id, &(_, g, busy)) in threads.iter().enumerate() {
            rq.place_new(&mut es[id]);
            rq.move_to_group(id, g.map(|g| gs[g]), &mut es);
            if busy {
                rq.wake(id, &mut es[id]);
                rq.regroup(id, &mut es);
            }
        }
        run_busy(&mut rq, &mut es, cores, horizon)
    }

    /// Runs the runnable entities on `cores` until `horizon`, slice by slice, as no thread ever
    /// sleeps; returns the CPU each got. Each core has its clock; the one furthest behind picks.
    fn run_busy(rq: &mut RunQueue, es: &mut [Entity], cores: usize, horizon: Nanos) -> Vec<Nanos> {
        let mut cpu = vec![0; es.len()];
        let mut clocks = vec![0u64; cores];
        loop {
            let (core, &now) = clocks.iter().enumerate().min_by_key(|(_, &t)| t).expect("a core");
            if now >= horizon {
                return cpu;
            }
            let id = rq.pick(es).expect("always runnable");
            let ran = rq.slice(&es[id]).min(horizon - now);
            rq.charge(&mut es[id], ran);
            cpu[id] += ran;
            clocks[core] = now + ran;
            rq.put_prev(id, &mut es[id]);
        }
    }

    #[test]
    fn group_weights_are_the_kernels_for_v1_shares_and_v2_weights() {
        assert_eq!(group_weight(CgroupVersion::V1, 1024), 1024);
        assert_eq!(group_weight(CgroupVersion::V1, 100), 100);
        assert_eq!(group_weight(CgroupVersion::V1, 1), 2, "MIN_SHARES");
        assert_eq!(group_weight(CgroupVersion::V1, 1 << 20), 1 << 18, "MAX_SHARES");
        assert_eq!(group_weight(CgroupVersion::V2, 100), 1024, "cpu.weight 100 is nice 0");
        assert_eq!(group_weight(CgroupVersion::V2, 1), 10, "round(1024 / 100)");
        assert_eq!(group_weight(CgroupVersion::V2, 10_000), 102_400);
    }

    #[test]
    fn two_groups_share_the_cpu_by_their_weights_not_by_their_thread_counts() {
        for scheduler in [FairScheduler::Cfs, FairScheduler::Eevdf] {
            for cores in [1, 2] {
                // cpu.shares 1024 and 100, three busy threads each.
                let threads: Vec<_> = (0..6).map(|i| (0, Some(i / 3), true)).collect();
                let cpu = busy_in_groups(scheduler, &threads, &[1024, 100], cores, 20_000_000_000);
                let (a, b) = (cpu[..3].iter().sum::<u64>() as f64, cpu[3..].iter().sum::<u64>() as f64);
                let want = 1024.0 / 100.0;
                assert!((a / b / want - 1.0).abs() < 0.01, "{scheduler:?} on {cores}: {a} / {b}, want {want}");
                assert_eq!(cpu.iter().sum::<u64>(), 20_000_000_000 * cores as u64, "no core idles");
            }
        }
        // The same through cgroup v2 weights (100 and 10 → 1024 and 102).
        let (a, b) = (group_weight(CgroupVersion::V2, 100), group_weight(CgroupVersion::V2, 10));
        let threads: Vec<_> = (0..6).map(|i| (0, Some(i / 3), true)).collect();
        let cpu = busy_in_groups(FairScheduler::Cfs, &threads, &[a, b], 1, 20_000_000_000);
        let ratio = cpu[..3].iter().sum::<u64>() as f64 / cpu[3..].iter().sum::<u64>() as f64;
        assert!((ratio / (a as f64 / b as f64) - 1.0).abs() < 0.01, "{ratio}");
        // Without groups, the six threads would share equally: the groups make the difference.
        let flat = busy_in_groups(FairScheduler::Cfs, &[(0, None, true); 6], &[], 1, 6_000_000_000);
        assert!(flat.iter().all(|&c| (c as f64 / 1e9 - 1.0).abs() < 0.01), "{flat:?}");
    }

    #[test]
    fn inside_a_group_nice_splits_the_group_s_share() {
        for scheduler in [FairScheduler::Cfs, FairScheduler::Eevdf] {
            // Group 0 (weight 1024) holds nice 0 and nice 10; group 1 (1024) one thread.
            let threads = [(0, Some(0), true), (10, Some(0), true), (0, Some(1), true)];
            let cpu = busy_in_groups(scheduler, &threads, &[1024, 1024], 1, 40_000_000_000);
            let ratio = cpu[0] as f64 / cpu[1] as f64;
            let want = 1.25f64.powi(10);
            assert!((ratio / want - 1.0).abs() < 0.01, "{scheduler:?}: {ratio}, want {want}");
            let group_0 = (cpu[0] + cpu[1]) as f64 / cpu[2] as f64;
            assert!((group_0 - 1.0).abs() < 0.01, "{scheduler:?}: the groups halve the core: {cpu:?}");
        }
    }

    #[test]
    fn an_idle_group_takes_nothing_and_a_root_thread_weighs_against_whole_groups() {
        // Group 1 (weight 100 000) has a thread that never runs: group 0 gets the core alone.
        let threads = [(0, Some(0), true), (0, Some(0), true), (0, Some(1), false)];
        let cpu = busy_in_groups(FairScheduler::Cfs, &threads, &[100, 100_000], 1, 10_000_000_000);
        assert_eq!((cpu[0] + cpu[1], cpu[2]), (10_000_000_000, 0));
        assert!((cpu[0] as f64 / cpu[1] as f64 - 1.0).abs() < 0.01, "{cpu:?}");
        // A nice-0 thread at the root against a group of weight 1024 with four threads: half each.
        let threads = [(0, None, true), (0, Some(0), true), (0, Some(0), true), (0, Some(0), true), (0, Some(0), true)];
        let cpu = busy_in_groups(FairScheduler::Cfs, &threads, &[1024], 1, 10_000_000_000);
        assert!((cpu[0] as f64 / 5e9 - 1.0).abs() < 0.01, "{cpu:?}");
    }

    #[test]
    fn a_member_that_sleeps_gives_its_share_to_the_rest_of_its_group() {
        let mut rq = RunQueue::new(1, CfsParams::for_cores(1));
        let g = rq.add_group(1024);
        let mut es = vec![Entity::new(0), Entity::new(0), Entity::new(0)];
        for id in 0..3 {
            rq.move_to_group(id, Some(g), &mut es);
            rq.wake(id, &mut es[id]);
            rq.regroup(id, &mut es);
        }
        assert_eq!(es.iter().map(|e| e.load).sum::<u64>(), (1024 << LOAD_SHIFT) - 1, "the group weighs 1024");
        let id = rq.pick(&mut es).unwrap();
        rq.sleep(&mut es[id]);
        rq.regroup(id, &mut es);
        let awake: Vec<u64> = (0..3).filter(|&i| i != id).map(|i| es[i].load).collect();
        assert_eq!(awake, vec![512 << LOAD_SHIFT; 2]);
        rq.renice(0, &mut es[0], 10);
        rq.move_to_group(2, None, &mut es);
        assert_eq!(es[2].load, 1024 << LOAD_SHIFT, "back at the root, its own weight");
    }

    #[test]
    fn weights_are_the_kernels_and_follow_1_25_per_nice_level() {
        assert_eq!((weight(0), weight(-20), weight(19), weight(10)), (1024, 88761, 15, 110));
        assert_eq!(weight(40), 15, "clamped");
        for n in -20..19 {
            let ratio = weight(n) as f64 / weight(n + 1) as f64;
            // Rounding to integers shows at the smallest weights (18 → 15: 1.2).
            assert!((ratio - 1.25).abs() < 0.06, "nice {n}: {ratio}");
        }
    }

    #[test]
    fn two_busy_threads_at_nice_0_and_10_share_one_core_as_1_25_to_the_10th() {
        let cpu = busy(&[0, 10], 1, 20_000_000_000);
        let ratio = cpu[0] as f64 / cpu[1] as f64;
        let want = 1.25f64.powi(10);
        assert!((ratio / want - 1.0).abs() < 0.01, "ratio {ratio}, want {want} within 1 %");
        assert_eq!(cpu.iter().sum::<u64>(), 20_000_000_000, "the core never idles");
    }

    #[test]
    fn eevdf_shares_a_core_by_weight_too() {
        let cpu = busy_under(FairScheduler::Eevdf, &[0, 10], 1, 20_000_000_000);
        let ratio = cpu[0] as f64 / cpu[1] as f64;
        let want = 1.25f64.powi(10);
        assert!((ratio / want - 1.0).abs() < 0.01, "ratio {ratio}, want {want} within 1 %");
        let cpu = busy_under(FairScheduler::Eevdf, &[0, 0, 0, 0], 2, 10_000_000_000);
        for &c in &cpu {
            assert!((c as f64 / 5e9 - 1.0).abs() < 0.01, "{cpu:?}");
        }
    }

    #[test]
    fn eevdf_slices_are_the_base_slice_and_a_sleeper_keeps_its_lag_not_a_credit() {
        let p = CfsParams { scheduler: FairScheduler::Eevdf, ..CfsParams::for_cores(2) };
        assert_eq!(p.base_slice_ns, 1_500_000, "0.75 ms × (1 + log2 2)");
        let mut rq = RunQueue::new(1, p);
        let mut es = vec![Entity::new(0), Entity::new(0)];
        for e in es.iter_mut() {
            rq.place_new(e);
        }
        rq.wake(0, &mut es[0]);
        assert_eq!(rq.slice(&es[0]), 1_500_000, "a slice is the base slice");
        // Entity 0 runs 100 ms while entity 1 sleeps with no lag: it comes back at the average
        // (entity 0's vruntime), not 3 ms behind it as CFS's sleeper credit would put it.
        assert_eq!(rq.pick(&mut es), Some(0));
        rq.charge(&mut es[0], 100_000_000);
        rq.wake(1, &mut es[1]);
        assert_eq!(es[1].vruntime, es[0].vruntime);
        assert!(!rq.should_preempt(&es[1], &es[0]), "no preemption mid-slice");
        // A reniced runnable entity keeps its lag in real time: at the average it stays there.
        rq.renice(1, &mut es[1], 5);
        assert_eq!(es[1].vruntime, es[0].vruntime);
        assert_eq!(rq.pick(&mut es), Some(1));
    }

    #[test]
    fn equal_threads_share_equally_and_more_cores_give_more_cpu() {
        let cpu = busy(&[0, 0, 0, 0], 2, 10_000_000_000);
        for &c in &cpu {
            assert!((c as f64 / 5e9 - 1.0).abs() < 0.01, "{cpu:?}");
        }
    }

    #[test]
    fn slices_follow_weight_and_stretch_with_many_threads() {
        let p = CfsParams::for_cores(1);
        assert_eq!(p.latency_ns, 6_000_000);
        let mut rq = RunQueue::new(1, p);
        let mut es = [Entity::new(0), Entity::new(0)];
        for (id, e) in es.iter_mut().enumerate() {
            rq.wake(id, e);
        }
        assert_eq!(rq.slice(&es[0]), 3_000_000, "two equal threads halve the latency");
        let mut many: Vec<Entity> = (0..20).map(|_| Entity::new(0)).collect();
        let mut rq = RunQueue::new(1, p);
        for (id, e) in many.iter_mut().enumerate() {
            rq.wake(id, e);
        }
        assert_eq!(rq.slice(&many[0]), 750_000, "20 threads: the period stretches, each gets min_granularity");
        assert_eq!(CfsParams::for_cores(176).latency_ns, 24_000_000, "scaled by 1 + log2(8)");
    }

    #[test]
    fn a_sleeper_gets_bounded_credit_and_a_renice_keeps_vruntime() {
        let mut rq = RunQueue::new(1, CfsParams::for_cores(1));
        let mut es = vec![Entity::new(0), Entity::new(0)];
        rq.wake(0, &mut es[0]);
        let id = rq.pick(&mut es).unwrap();
        rq.charge(&mut es[id], 100_000_000);
        rq.put_prev(id, &mut es[id]);
        rq.pick(&mut es);
        // Entity 1 slept from vruntime 0: it comes back 3 ms (latency / 2) behind, not 100 ms.
        rq.wake(1, &mut es[1]);
        assert_eq!(es[1].vruntime, 100_000_000 - 3_000_000);
        assert!(rq.should_preempt(&es[1], &es[0]));
        rq.renice(1, &mut es[1], 5);
        assert_eq!((es[1].weight, es[1].vruntime), (335, 97_000_000));
        assert_eq!(rq.pick(&mut es), Some(1));
    }
}

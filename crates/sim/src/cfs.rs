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
//! Limits, on purpose: there is **one run queue for all cores** (ideal load balancing: a runnable
//! thread runs on any core that frees up, with no migration cost and no affinity), and no group
//! scheduling (cgroup shares are not modelled yet). EEVDF's pick scans the eligible entities in
//! order of virtual runtime (the kernel keeps an augmented tree). Times are integer nanoseconds.

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
        Entity { nice, weight: weight(nice), vruntime: 0, on_rq: false, queued: false, deadline: 0, vlag: 0 }
    }
}

/// The run queue shared by all cores (see the module docs for why one).
pub struct RunQueue {
    /// Runnable entities waiting for a core, by (vruntime, id).
    tree: BTreeSet<(u64, usize)>,
    /// A floor under every runnable vruntime, never decreasing.
    min_vruntime: u64,
    /// Sum of the weights of runnable and running entities.
    load: u64,
    /// Sum of weight × vruntime over the runnable and running entities (EEVDF's average).
    weighted_vruntime: u128,
    /// The average when the run queue last had entities (EEVDF places newcomers there).
    last_avg: u64,
    /// Runnable and running entities.
    nr: usize,
    cores: usize,
    params: CfsParams,
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
        self.params.base_slice_ns * NICE_0_WEIGHT / e.weight
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
        if self.eevdf() {
            let avg = self.avg_vruntime() as i128;
            // Joining shifts the average towards the newcomer; the kernel inflates the lag so that
            // the lag it keeps afterwards is the one it left with.
            let lag = match self.load {
                0 => e.vlag as i128,
                load => e.vlag as i128 * (load + e.weight) as i128 / load as i128,
            };
            e.vruntime = (avg - lag).max(0) as u64;
            e.deadline = e.vruntime + self.virtual_slice(e);
        } else {
            let floor = self.min_vruntime.saturating_sub(self.params.latency_ns / 2);
            e.vruntime = e.vruntime.max(floor);
        }
        e.on_rq = true;
        self.load += e.weight;
        self.weighted_vruntime += e.weight as u128 * e.vruntime as u128;
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
        self.load -= e.weight;
        self.weighted_vruntime -= e.weight as u128 * e.vruntime as u128;
        self.nr -= 1;
        if self.load == 0 {
            self.last_avg = e.vruntime;
        }
    }

    /// Charges `delta` ns of CPU to a running entity (EEVDF: a used-up slice gets a new deadline).
    pub fn charge(&mut self, e: &mut Entity, delta: Nanos) {
        let dv = delta * NICE_0_WEIGHT / e.weight;
        e.vruntime += dv;
        if e.on_rq {
            self.weighted_vruntime += e.weight as u128 * dv as u128;
        }
        if self.eevdf() && e.vruntime >= e.deadline {
            e.deadline = e.vruntime + self.virtual_slice(e);
        }
    }

    /// Changes an entity's nice value (as `setpriority` does): its weight and the load change;
    /// its vruntime does not (CFS), or it keeps its lag and remaining slice in real time (EEVDF).
    pub fn renice(&mut self, id: usize, e: &mut Entity, nice: i32) {
        let w = weight(nice);
        let queued = e.queued;
        if queued {
            self.tree.remove(&(e.vruntime, id));
        }
        if e.on_rq {
            let avg = self.avg_vruntime() as i128;
            self.weighted_vruntime -= e.weight as u128 * e.vruntime as u128;
            if self.eevdf() {
                let scale = |x: i128| x * e.weight as i128 / w as i128;
                let lag = scale(avg - e.vruntime as i128);
                let left = scale(e.deadline as i128 - e.vruntime as i128);
                e.vruntime = (avg - lag).max(0) as u64;
                e.deadline = (e.vruntime as i128 + left).max(0) as u64;
            }
            self.load = self.load - e.weight + w;
            self.weighted_vruntime += w as u128 * e.vruntime as u128;
        } else if self.eevdf() {
            e.vlag = (e.vlag as i128 * e.weight as i128 / w as i128) as i64;
        }
        e.nice = nice;
        e.weight = w;
        if queued {
            self.tree.insert((e.vruntime, id));
        }
    }

    /// How long `e` may run now before it is preempted.
    pub fn slice(&self, e: &Entity) -> Nanos {
        if self.eevdf() {
            // Until its virtual deadline, in real time.
            let left = e.deadline.saturating_sub(e.vruntime).max(1);
            return (left as u128 * e.weight as u128 / NICE_0_WEIGHT as u128).max(1) as Nanos;
        }
        let p = &self.params;
        let per_core = self.nr.div_ceil(self.cores) as u64;
        let nr_latency = (p.latency_ns / p.min_granularity_ns.max(1)).max(1);
        let period = if per_core > nr_latency { per_core * p.min_granularity_ns } else { p.latency_ns };
        // The load one core carries: the whole load spread over the cores in use.
        let cores_in_use = self.nr.clamp(1, self.cores) as u64;
        let load = (self.load / cores_in_use).max(e.weight);
        ((period as u128 * e.weight as u128 / load as u128) as Nanos).max(p.min_granularity_ns)
    }

    /// Whether a woken entity should preempt the running `current` (kernel `wakeup_preempt_entity`;
    /// never mid-slice under EEVDF with the kernel's defaults).
    pub fn should_preempt(&self, woken: &Entity, current: &Entity) -> bool {
        if self.eevdf() {
            return false;
        }
        let gran = self.params.wakeup_granularity_ns * NICE_0_WEIGHT / woken.weight;
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
        let mut cpu = vec![0; nices.len()];
        // Each core's clock; the core that is furthest behind picks next.
        let mut clocks = vec![0u64; cores];
        loop {
            let (core, &now) = clocks.iter().enumerate().min_by_key(|(_, &t)| t).expect("a core");
            if now >= horizon {
                return cpu;
            }
            let id = rq.pick(&mut es).expect("always runnable");
            let ran = rq.slice(&es[id]).min(horizon - now);
            rq.charge(&mut es[id], ran);
            cpu[id] += ran;
            clocks[core] = now + ran;
            rq.put_prev(id, &mut es[id]);
        }
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

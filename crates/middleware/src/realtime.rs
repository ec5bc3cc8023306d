//! The real-time translator (Lachesis-RT, CF '23): the threads a policy ranks highest run in a
//! real-time class (`SCHED_RR` by default, or `SCHED_FIFO`), every thread keeps the nice value
//! the [`NiceTranslator`] gives it.
//!
//! A real-time thread runs whenever it is runnable, before every normal thread; what keeps that
//! safe (see `moirai_os::realtime` for the mechanism's own net):
//!
//! - **Few threads.** At most [`RtSettings::threads`] threads are real-time at once (by default
//!   one less than the CPUs, so a core stays for normal threads: the SPE's metrics, its other
//!   operators, the middleware), and only threads whose priority is above the lowest of the
//!   schedule: when every operator ranks the same (nothing queued), none is.
//! - **Only threads that block or park.** A real-time thread that polls in a loop takes its CPU
//!   from everything below it. Each driver says how its SPE's threads wait
//!   ([`IdleWait`]): moirai's and Flink's block; Storm's executors poll, so the Storm driver reads
//!   the wait strategy from its thread dump and real time is refused unless they park
//!   (`WaitStrategyPark`).
//! - **The kernel's throttling** must be on (checked at start-up) and, with v1
//!   `CONFIG_RT_GROUP_SCHED`, the thread's cpu group must have a real-time budget: a thread in a
//!   group without one is refused with what to do (the cgroup translator gives its own groups
//!   one, `moirai_os::cgroup::rt_budget`).
//! - **A watchdog** ([`crate::watchdog`]) at the top real-time priority demotes every real-time
//!   thread when rounds stop completing (the middleware starved, or a round hung); real time is
//!   then off for a cool-down that doubles at every trip.
//! - **Everything is recorded** in the restore log before it changes: demoted threads get their
//!   original class back, and exit, SIGTERM, a crash (`--restore-only`) and an SPE that goes away
//!   restore them.

use std::collections::{BTreeMap, BTreeSet, HashMap};
use std::time::{Duration, Instant};

use moirai_os::cgroup::rt_budget::rt_runtime_us;
use moirai_os::cgroup::{thread_cgroup, CgroupLayout, CgroupVersion, Hierarchy};
use moirai_os::realtime::{get_sched_class, set_sched_class};
use moirai_os::{OsError, RestoreLog, SchedClass, Tid};
use moirai_sched::normalize::{NiceRange, Normalization};
use moirai_sched::{Cluster, Schedule};
use serde::Deserialize;

use crate::driver::IdleWait;
use crate::observe::{Log, SharedStats};
use crate::translate::{targets, Applied, NiceTranslator, Target};
use crate::watchdog::Watchdog;
pub use crate::watchdog::WATCHDOG_PRIORITY;

/// Which real-time class the chosen threads get.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum RtClass {
    /// `SCHED_RR`: threads of equal priority take turns (Lachesis-RT's choice).
    #[default]
    Rr,
    /// `SCHED_FIFO`: a thread runs until it blocks or a higher priority wakes.
    Fifo,
}

impl std::fmt::Display for RtClass {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(match self {
            RtClass::Rr => "SCHED_RR",
            RtClass::Fifo => "SCHED_FIFO",
        })
    }
}

impl std::str::FromStr for RtClass {
    type Err = String;

    fn from_str(s: &str) -> Result<RtClass, String> {
        match s {
            "rr" => Ok(RtClass::Rr),
            "fifo" => Ok(RtClass::Fifo),
            other => Err(format!("real-time class {other:?}: use rr (SCHED_RR) or fifo (SCHED_FIFO)")),
        }
    }
}

/// How the real-time translator chooses and ranks its threads.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct RtSettings {
    /// Most threads real-time at once.
    pub threads: usize,
    /// Their class.
    pub class: RtClass,
    /// Their priorities: the highest ranked gets `priorities.1`, the next one less, never below
    /// `priorities.0`; within [1, 98] (99 is the watchdog's).
    pub priorities: (u8, u8),
}

impl Default for RtSettings {
    /// One thread less than the online CPUs (at least one), `SCHED_RR`, priorities 1..=49 (below
    /// the kernel's threaded interrupt handlers at 50).
    fn default() -> Self {
        RtSettings { threads: default_threads(), class: RtClass::Rr, priorities: (1, 49) }
    }
}

/// One less than the online CPUs, at least one.
pub fn default_threads() -> usize {
    std::thread::available_parallelism().map_or(1, |n| n.get().saturating_sub(1).max(1))
}

/// Most real-time threads a policy may ask for.
pub const MAX_RT_THREADS: usize = 4096;

impl RtSettings {
    /// Checks the ranges; the error names the key and what it accepts.
    pub fn validate(&self) -> Result<(), String> {
        if !(1..=MAX_RT_THREADS).contains(&self.threads) {
            return Err(format!("rt_threads {} is out of range: use 1..={MAX_RT_THREADS}", self.threads));
        }
        let (lo, hi) = self.priorities;
        if !(1 <= lo && lo <= hi && hi < WATCHDOG_PRIORITY) {
            return Err(format!(
                "rt_priority_min {lo} and rt_priority_max {hi} must satisfy 1 <= min <= max <= {} ({WATCHDOG_PRIORITY} \
                 is the watchdog's)",
                WATCHDOG_PRIORITY - 1
            ));
        }
        Ok(())
    }

    fn class(&self, priority: u8) -> SchedClass {
        match self.class {
            RtClass::Rr => SchedClass::RoundRobin(priority),
            RtClass::Fifo => SchedClass::Fifo(priority),
        }
    }
}

/// The threads of `schedule` that go real-time, with their real-time priority: the
/// `settings.threads` highest ranked among `eligible` ones whose priority is above the lowest of
/// the schedule (and positive), highest first; ties keep the schedule's order.
pub fn choose(
    targets: &[Target],
    settings: &RtSettings,
    mut eligible: impl FnMut(&Target) -> bool,
) -> Vec<(usize, u8)> {
    let lowest = targets.iter().map(|t| t.priority).fold(f64::INFINITY, f64::min);
    let mut ranked: Vec<usize> = (0..targets.len())
        .filter(|&i| {
            let p = targets[i].priority;
            p.is_finite() && p > 0.0 && p > lowest && eligible(&targets[i])
        })
        .collect();
    ranked.sort_by(|&a, &b| targets[b].priority.total_cmp(&targets[a].priority));
    let (lo, hi) = settings.priorities;
    ranked
        .into_iter()
        .take(settings.threads)
        .enumerate()
        .map(|(rank, i)| (i, hi.saturating_sub(rank.min(255) as u8).max(lo)))
        .collect()
}

/// A thread this translator made real-time.
#[derive(Clone, Debug)]
struct Promoted {
    start_ticks: u64,
    spe: String,
    operator: String,
    class: SchedClass,
    original: SchedClass,
}

/// What one round of the real-time translator did, besides the nice values.
#[derive(Clone, Debug, Default)]
pub struct RtApplied {
    /// The nice values of every thread (the [`NiceTranslator`]'s part).
    pub nice: Applied,
    /// The threads that are real-time now, with their class.
    pub realtime: Vec<(Target, SchedClass)>,
    /// What the log should say once (refusals, the watchdog's trips), one line each.
    pub notes: Vec<String>,
    /// Threads the watchdog demoted since the last round.
    pub demoted_by_watchdog: usize,
}

/// The cool-down after the first watchdog trip; it doubles at every further trip, up to
/// [`MAX_COOL_DOWN`].
pub const FIRST_COOL_DOWN: Duration = Duration::from_secs(30);
/// The longest cool-down.
pub const MAX_COOL_DOWN: Duration = Duration::from_secs(600);

/// The real-time translator; see the [module documentation](self).
pub struct RealTimeTranslator {
    nice: NiceTranslator,
    settings: RtSettings,
    /// The v1 cpu hierarchy when it has real-time budgets (`CONFIG_RT_GROUP_SCHED`).
    rt_groups: Option<Hierarchy>,
    promoted: HashMap<(u32, Tid), Promoted>,
    watchdog: Watchdog,
    /// Real time is off until then (after a watchdog trip).
    suspended_until: Option<Instant>,
    trips: u32,
    /// Notes already given, so each is said once.
    said: BTreeSet<String>,
}

impl RealTimeTranslator {
    /// A translator normalising nice values with `normalization` into `range`, choosing
    /// real-time threads by `settings`, guarded by a watchdog that demotes them when no round
    /// completed for `stale` (use a few policy periods).
    pub fn new(
        normalization: Normalization,
        range: NiceRange,
        settings: RtSettings,
        stale: Duration,
    ) -> Result<RealTimeTranslator, String> {
        settings.validate()?;
        let watchdog = Watchdog::start(stale)?;
        let rt_groups = CgroupLayout::detect()
            .ok()
            .map(|l| l.cpu().clone())
            .filter(|h| h.version == CgroupVersion::V1 && matches!(rt_runtime_us(&h.mount), Ok(Some(_))));
        Ok(RealTimeTranslator {
            nice: NiceTranslator::new(normalization, range),
            settings,
            rt_groups,
            promoted: HashMap::new(),
            watchdog,
            suspended_until: None,
            trips: 0,
            said: BTreeSet::new(),
        })
    }

    /// The settings.
    pub fn settings(&self) -> &RtSettings {
        &self.settings
    }

    fn note(&mut self, out: &mut RtApplied, text: String) {
        if self.said.insert(text.clone()) {
            out.notes.push(text);
        }
    }

    /// Sets the nice values `schedule` asks for, and real-time classes for its highest ranked
    /// threads of SPEs whose threads block or park (`idle`, by SPE name).
    pub fn apply(
        &mut self,
        schedule: &Schedule,
        cluster: &Cluster,
        log: &mut RestoreLog,
        idle: &BTreeMap<String, IdleWait>,
    ) -> RtApplied {
        self.watchdog.beat();
        let mut out = RtApplied { nice: self.nice.apply(schedule, cluster, log), ..RtApplied::default() };
        if let Some(n) = self.watchdog.take_trip() {
            self.trips += 1;
            let cool = FIRST_COOL_DOWN.saturating_mul(1 << (self.trips - 1).min(5)).min(MAX_COOL_DOWN);
            self.suspended_until = Some(Instant::now() + cool);
            self.promoted.clear();
            out.demoted_by_watchdog = n;
            out.notes.push(format!(
                "the real-time watchdog demoted {n} thread(s): no round completed for {:?} (the middleware starved or a \
                 round hung); real-time classes are off for {cool:?}",
                self.watchdog.stale()
            ));
        }
        if self.suspended_until.is_some_and(|t| Instant::now() < t) {
            return out;
        }
        self.suspended_until = None;
        let targets = targets(schedule, cluster);
        let mut refusals = Vec::new();
        let eligible = |t: &Target| match idle.get(&t.spe) {
            Some(IdleWait::Blocks) | Some(IdleWait::Parks) => true,
            Some(other) => {
                refusals.push((t.spe.clone(), other.clone()));
                false
            }
            None => false,
        };
        let chosen = choose(&targets, &self.settings, eligible);
        for (spe, why) in refusals {
            self.note(&mut out, format!("SPE '{spe}': no real-time classes for its threads: {why}"));
        }
        let wanted: HashMap<(u32, Tid), (usize, u8)> =
            chosen.iter().map(|&(i, prio)| ((targets[i].pid, targets[i].tid), (i, prio))).collect();
        // Demote first: at no moment are more than `threads` threads real-time.
        let leaving: Vec<(u32, Tid)> = self
            .promoted
            .iter()
            .filter(|(k, p)| {
                !wanted.get(k).is_some_and(|&(i, prio)| {
                    targets[i].start_ticks == p.start_ticks && p.class == self.settings.class(prio)
                })
            })
            .map(|(k, _)| *k)
            .collect();
        for key in leaving {
            if let Err(e) = self.demote(key, log) {
                out.nice.errors.push(e);
            }
        }
        for (key, (i, prio)) in wanted {
            let t = &targets[i];
            let class = self.settings.class(prio);
            if self.promoted.contains_key(&key) {
                out.realtime.push((t.clone(), class));
                continue;
            }
            match self.promote(t, class, log) {
                Ok(()) => out.realtime.push((t.clone(), class)),
                Err(Refused::Gone) => {}
                Err(Refused::Note(text)) => self.note(&mut out, text),
                Err(Refused::Error(text)) => out.nice.errors.push(text),
            }
        }
        out.realtime.sort_by_key(|(t, _)| (t.pid, t.tid));
        out
    }

    fn promote(&mut self, t: &Target, class: SchedClass, log: &mut RestoreLog) -> Result<(), Refused> {
        let current = get_sched_class(t.tid).map_err(|e| Refused::from_os(e, t))?;
        // Called for threads not promoted by this translator: a class someone else set (real-time
        // or idle) is theirs to keep.
        if current.is_realtime() || current == SchedClass::Idle {
            return Err(Refused::Note(format!(
                "thread {} ({}/{}) is already {current}, set by someone else: left as it is",
                t.tid, t.spe, t.operator
            )));
        }
        if let Some(h) = &self.rt_groups {
            if let Ok(dir) = thread_cgroup(t.pid, t.tid, h) {
                if dir != h.mount && matches!(rt_runtime_us(&dir), Ok(Some(0))) {
                    return Err(Refused::Note(format!(
                        "thread {} ({}/{}) is in cpu cgroup {} whose cpu.rt_runtime_us is 0 (no real-time budget, \
                         CONFIG_RT_GROUP_SCHED): give the group a budget (echo 100000 > {}/cpu.rt_runtime_us, within \
                         its parent's) or run the SPE in the root cpu group; it keeps its nice value",
                        t.tid,
                        t.spe,
                        t.operator,
                        dir.display(),
                        dir.display()
                    )));
                }
            }
        }
        log.set_sched_class(t.pid, t.tid, class).map_err(|e| Refused::from_os(e, t))?;
        let original = log.original_class(t.pid, t.tid).unwrap_or(current);
        self.watchdog.promoted(t.pid, t.tid, t.start_ticks, original);
        self.promoted.insert(
            (t.pid, t.tid),
            Promoted { start_ticks: t.start_ticks, spe: t.spe.clone(), operator: t.operator.clone(), class, original },
        );
        Ok(())
    }

    /// Puts one promoted thread back into its original class.
    fn demote(&mut self, key: (u32, Tid), log: &RestoreLog) -> Result<(), String> {
        let Some(p) = self.promoted.remove(&key) else { return Ok(()) };
        self.watchdog.demoted(key.0, key.1);
        let same = moirai_os::proc::thread_stat(key.0, key.1).is_ok_and(|s| s.start_ticks == p.start_ticks);
        if !same {
            return Ok(());
        }
        let original = log.original_class(key.0, key.1).unwrap_or(p.original);
        match set_sched_class(key.1, original) {
            Ok(()) | Err(OsError::ThreadGone { .. }) => Ok(()),
            Err(e) => Err(format!("back to {original} for thread {} ({}/{}): {e}", key.1, p.spe, p.operator)),
        }
    }

    /// Demotes every real-time thread of SPE `spe` (it stopped answering: nothing would correct
    /// a runaway thread of it); the number demoted.
    pub fn release_spe(&mut self, spe: &str, log: &RestoreLog) -> usize {
        let keys: Vec<(u32, Tid)> = self.promoted.iter().filter(|(_, p)| p.spe == spe).map(|(k, _)| *k).collect();
        let n = keys.len();
        for k in keys {
            let _ = self.demote(k, log);
        }
        n
    }

    /// Demotes every real-time thread (nice values stay); the number demoted.
    pub fn release_all(&mut self, log: &RestoreLog) -> usize {
        let keys: Vec<(u32, Tid)> = self.promoted.keys().copied().collect();
        let n = keys.len();
        for k in keys {
            let _ = self.demote(k, log);
        }
        n
    }

    /// Forgets what it set for process `pid` (its SPE was handed back to Linux): its real-time
    /// threads are demoted through `log`, and it sets everything again if the SPE is scheduled
    /// again.
    pub fn forget(&mut self, pid: u32, log: &RestoreLog) {
        let keys: Vec<(u32, Tid)> = self.promoted.keys().filter(|k| k.0 == pid).copied().collect();
        for k in keys {
            let _ = self.demote(k, log);
        }
        self.nice.forget(pid);
    }

    /// How many threads are real-time now.
    pub fn realtime_threads(&self) -> usize {
        self.promoted.len()
    }
}

/// Logs what a round of policy `policy`'s real-time translator said, and records its real-time
/// threads for `/metrics` (the daemon's `-v` lines name each thread's class beside its nice value).
pub fn report(out: &Log, stats: &SharedStats, policy: &str, rt: &RtApplied) {
    for n in &rt.notes {
        out.info(format!("policy '{policy}': {n}"));
    }
    let mut s = stats.lock();
    s.realtime.retain(|k, _| k.0 != policy);
    for (t, class) in &rt.realtime {
        let prio = match class {
            SchedClass::RoundRobin(p) | SchedClass::Fifo(p) => *p,
            _ => 0,
        };
        s.realtime.insert((policy.to_string(), t.spe.clone(), t.query.clone(), t.operator.clone(), t.tid), prio);
    }
    s.watchdog_demotions += rt.demoted_by_watchdog as u64;
}

/// Why a thread did not go real-time.
enum Refused {
    /// It ended.
    Gone,
    /// Said once in the log (a rule, not a failure).
    Note(String),
    /// An error of this round.
    Error(String),
}

impl Refused {
    fn from_os(e: OsError, t: &Target) -> Refused {
        match e {
            OsError::ThreadGone { .. } => Refused::Gone,
            e => Refused::Error(format!("real-time class for thread {} ({}/{}): {e}", t.tid, t.spe, t.operator)),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn target(tid: Tid, spe: &str, priority: f64) -> Target {
        Target {
            pid: 1,
            tid,
            start_ticks: 0,
            spe: spe.into(),
            query: "q".into(),
            operator: format!("op{tid}"),
            group: String::new(),
            priority,
        }
    }

    #[test]
    fn the_highest_ranked_eligible_threads_are_chosen_with_descending_priorities() {
        let s = RtSettings { threads: 2, class: RtClass::Rr, priorities: (10, 20) };
        let t = vec![target(1, "a", 5.0), target(2, "a", 50.0), target(3, "b", 40.0), target(4, "a", 30.0)];
        assert_eq!(choose(&t, &s, |_| true), vec![(1, 20), (2, 19)]);
        // An SPE that is not eligible gives way to the next.
        assert_eq!(choose(&t, &s, |t| t.spe == "a"), vec![(1, 20), (3, 19)]);
        // Priorities never fall below the minimum.
        let one = RtSettings { threads: 3, class: RtClass::Fifo, priorities: (7, 8) };
        assert_eq!(choose(&t, &one, |_| true), vec![(1, 8), (2, 7), (3, 7)]);
    }

    #[test]
    fn nothing_goes_real_time_when_every_operator_ranks_the_same_or_nothing_is_queued() {
        let s = RtSettings { threads: 4, ..RtSettings::default() };
        let same = vec![target(1, "a", 3.0), target(2, "a", 3.0)];
        assert!(choose(&same, &s, |_| true).is_empty(), "no operator stands out");
        let lowest = vec![target(1, "a", 0.0), target(2, "a", 0.0), target(3, "a", 2.0)];
        assert_eq!(choose(&lowest, &s, |_| true), vec![(2, 49)], "only the one above the rest");
        let bad = vec![target(1, "a", f64::NAN), target(2, "a", -1.0), target(3, "a", f64::INFINITY)];
        assert!(choose(&bad, &s, |_| true).is_empty(), "no finite positive priority above the lowest");
        assert!(choose(&[], &s, |_| true).is_empty());
    }

    #[test]
    fn settings_are_checked() {
        assert!(RtSettings::default().validate().is_ok());
        assert!(RtSettings::default().threads >= 1);
        let e = RtSettings { threads: 0, ..RtSettings::default() }.validate().unwrap_err();
        assert!(e.contains("rt_threads 0") && e.contains("1..="), "{e}");
        let e = RtSettings { priorities: (5, 99), ..RtSettings::default() }.validate().unwrap_err();
        assert!(e.contains("<= 98") && e.contains("watchdog"), "{e}");
        let e = RtSettings { priorities: (0, 10), ..RtSettings::default() }.validate().unwrap_err();
        assert!(e.contains("rt_priority_min 0"), "{e}");
        assert!(RtSettings { priorities: (9, 3), ..RtSettings::default() }.validate().is_err());
        assert_eq!("fifo".parse::<RtClass>(), Ok(RtClass::Fifo));
        assert!("deadline".parse::<RtClass>().unwrap_err().contains("use rr"));
    }
}

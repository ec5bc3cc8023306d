//! Scheduling classes of single threads: the real-time translator's mechanism. Off by default —
//! nothing here runs unless the middleware is configured for real-time priorities.
//!
//! `sched_setscheduler(2)` with a thread id changes only that thread (as `setpriority` does), so
//! a schedule can give each operator thread its own `SCHED_RR`/`SCHED_FIFO` priority, as
//! Lachesis-RT did with `chrt -r -p <prio> <tid>`. Leaving `SCHED_OTHER` keeps the thread's nice
//! value, so going back restores it too.
//!
//! # Safety net (design note)
//!
//! A real-time thread that spins starves everything below it, including the middleware that
//! would demote it. Lachesis-RT answered with a "parachute" (`chrt -r 99 sleep N && reboot`).
//! moirai's layers, from the kernel up:
//!
//! 1. **RT throttling must be on.** With `/proc/sys/kernel/sched_rt_runtime_us` at its default
//!    (950000 of a 1000000 µs period) the kernel keeps 5% of every CPU for normal threads, so a
//!    runaway RT thread slows the machine but cannot freeze it. [`rt_throttling`] reads it, and
//!    [`crate::caps::Need::RealTime`] makes [`crate::caps::preflight`] refuse real-time
//!    schedules while it is `-1` (disabled).
//! 2. **No inheritance.** Every real-time class is set with `SCHED_RESET_ON_FORK`: threads an
//!    RT operator creates start as `SCHED_OTHER`, so only threads the schedule named are RT.
//! 3. **Everything is recorded.** [`crate::restore::RestoreLog::set_sched_class`] records the
//!    original class first; exit, drop and `restore_from` after a crash put it back.
//! 4. **Watchdog (for the middleware, not built here).** A thread of the middleware at the top
//!    RT priority (99, above any operator) wakes once per scheduling period and checks that the
//!    control loop completed a round since its last wake-up; after a few missed rounds it calls
//!    `RestoreLog::restore` for the RT classes, demoting every operator thread. Because it runs
//!    above the operators, starvation cannot stop it; because it only sleeps, it costs nothing.

use serde::{Deserialize, Serialize};

use crate::error::OsError;
use crate::proc::Tid;

/// Smallest and largest real-time priority (sched(7)).
pub const RT_PRIORITY_RANGE: (u8, u8) = (1, 99);

/// A Linux scheduling class (sched(7) calls it a scheduling *policy*; moirai reserves "policy"
/// for the papers' scheduling policies).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub enum SchedClass {
    /// `SCHED_OTHER`: CFS/EEVDF, weighted by nice; the default.
    Other,
    /// `SCHED_BATCH`: like Other, treated as CPU-bound.
    Batch,
    /// `SCHED_IDLE`: runs only when nothing else wants the CPU.
    Idle,
    /// `SCHED_FIFO` with a priority in [1, 99]: runs until it blocks or a higher one is ready.
    Fifo(u8),
    /// `SCHED_RR` with a priority in [1, 99]: like FIFO, with a time slice among equals.
    RoundRobin(u8),
}

impl SchedClass {
    fn policy_and_priority(self) -> (libc::c_int, u8) {
        match self {
            SchedClass::Other => (libc::SCHED_OTHER, 0),
            SchedClass::Batch => (libc::SCHED_BATCH, 0),
            SchedClass::Idle => (libc::SCHED_IDLE, 0),
            SchedClass::Fifo(p) => (libc::SCHED_FIFO, p),
            SchedClass::RoundRobin(p) => (libc::SCHED_RR, p),
        }
    }

    /// True for `Fifo` and `RoundRobin`.
    pub fn is_realtime(self) -> bool {
        matches!(self, SchedClass::Fifo(_) | SchedClass::RoundRobin(_))
    }
}

impl std::fmt::Display for SchedClass {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            SchedClass::Other => write!(f, "SCHED_OTHER"),
            SchedClass::Batch => write!(f, "SCHED_BATCH"),
            SchedClass::Idle => write!(f, "SCHED_IDLE"),
            SchedClass::Fifo(p) => write!(f, "SCHED_FIFO priority {p}"),
            SchedClass::RoundRobin(p) => write!(f, "SCHED_RR priority {p}"),
        }
    }
}

fn check_tid(tid: Tid) -> Result<libc::pid_t, OsError> {
    // 0 would mean the calling thread.
    if tid <= 0 {
        return Err(OsError::InvalidTid { tid });
    }
    Ok(tid)
}

fn last_errno() -> i32 {
    std::io::Error::last_os_error().raw_os_error().unwrap_or(0)
}

/// The scheduling class of thread `tid` (any process).
pub fn get_sched_class(tid: Tid) -> Result<SchedClass, OsError> {
    let who = check_tid(tid)?;
    let io_err = |what: &str, code| OsError::io(format!("{what}({tid})"), std::io::Error::from_raw_os_error(code));
    // SAFETY: sched_getscheduler only reads its integer argument.
    let policy = unsafe { libc::sched_getscheduler(who) };
    if policy < 0 {
        return match last_errno() {
            libc::ESRCH => Err(OsError::ThreadGone { tid }),
            code => Err(io_err("sched_getscheduler", code)),
        };
    }
    let mut param = libc::sched_param { sched_priority: 0 };
    // SAFETY: `param` is a valid, writable sched_param that outlives the call.
    if unsafe { libc::sched_getparam(who, &mut param) } != 0 {
        return match last_errno() {
            libc::ESRCH => Err(OsError::ThreadGone { tid }),
            code => Err(io_err("sched_getparam", code)),
        };
    }
    let priority = param.sched_priority.clamp(0, 99) as u8;
    Ok(match policy & !libc::SCHED_RESET_ON_FORK {
        libc::SCHED_FIFO => SchedClass::Fifo(priority),
        libc::SCHED_RR => SchedClass::RoundRobin(priority),
        libc::SCHED_BATCH => SchedClass::Batch,
        libc::SCHED_IDLE => SchedClass::Idle,
        libc::SCHED_OTHER => SchedClass::Other,
        // SCHED_DEADLINE or a sched_ext class: moirai never sets them, and calling them Other
        // would make a restore silently change them.
        other => {
            return Err(OsError::io(
                format!("sched_getscheduler({tid})"),
                std::io::Error::other(format!("scheduling policy {other} is not one moirai knows")),
            ))
        }
    })
}

/// Sets the scheduling class of thread `tid`. Real-time classes are set with
/// `SCHED_RESET_ON_FORK` (see the module's safety note); priorities must lie in
/// [`RT_PRIORITY_RANGE`].
pub fn set_sched_class(tid: Tid, class: SchedClass) -> Result<(), OsError> {
    let who = check_tid(tid)?;
    let (mut policy, priority) = class.policy_and_priority();
    if class.is_realtime() {
        if !(RT_PRIORITY_RANGE.0..=RT_PRIORITY_RANGE.1).contains(&priority) {
            return Err(OsError::RtPriorityOutOfRange { priority });
        }
        policy |= libc::SCHED_RESET_ON_FORK;
    }
    let param = libc::sched_param { sched_priority: priority as libc::c_int };
    // SAFETY: `param` is a valid sched_param that outlives the call; the kernel only reads it.
    if unsafe { libc::sched_setscheduler(who, policy, &param) } == 0 {
        return Ok(());
    }
    match last_errno() {
        libc::ESRCH => Err(OsError::ThreadGone { tid }),
        libc::EPERM => Err(OsError::RealTimeRefused { tid, class: class.to_string() }),
        code => {
            Err(OsError::io(format!("sched_setscheduler({tid}, {class})"), std::io::Error::from_raw_os_error(code)))
        }
    }
}

/// Where the kernel's scheduler sysctls are (`sched_rt_runtime_us`, `sched_autogroup_enabled`).
pub const KERNEL_SYSCTL_DIR: &str = "/proc/sys/kernel";

/// The kernel's real-time throttling: `Some((runtime_us, period_us))`, or `None` when it is
/// disabled (`sched_rt_runtime_us` = -1) and a runaway RT thread could freeze the machine.
pub fn rt_throttling() -> Result<Option<(u64, u64)>, OsError> {
    rt_throttling_in(std::path::Path::new(KERNEL_SYSCTL_DIR))
}

/// [`rt_throttling`] as read from `dir` instead of `/proc/sys/kernel` (a copy of its two files,
/// e.g. to check what a host with throttling disabled is told).
pub fn rt_throttling_in(dir: &std::path::Path) -> Result<Option<(u64, u64)>, OsError> {
    let read = |name: &str| -> Result<i64, OsError> {
        let path = dir.join(name);
        let text = std::fs::read_to_string(&path).map_err(|e| OsError::io(format!("reading {}", path.display()), e))?;
        text.trim()
            .parse()
            .map_err(|_| OsError::io(format!("parsing {}", path.display()), std::io::Error::other(format!("{text:?}"))))
    };
    let runtime = read("sched_rt_runtime_us")?;
    let period = read("sched_rt_period_us")?;
    Ok((runtime >= 0).then_some((runtime as u64, period.max(0) as u64)))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::caps::is_root;
    use crate::proc::current_tid;
    use crate::testutil::{skip, Sleeper};

    /// Fields 40 (rt_priority) and 41 (policy) of /proc/<pid>/task/<tid>/stat.
    fn stat_policy(tid: Tid) -> (u32, u32) {
        let text = std::fs::read_to_string(format!("/proc/{}/task/{tid}/stat", std::process::id())).unwrap();
        let rest: Vec<&str> = text[text.rfind(')').unwrap() + 1..].split_whitespace().collect();
        (rest[40 - 3].parse().unwrap(), rest[41 - 3].parse().unwrap())
    }

    #[test]
    fn validates_priorities_and_tids() {
        assert!(matches!(
            set_sched_class(current_tid(), SchedClass::RoundRobin(0)),
            Err(OsError::RtPriorityOutOfRange { priority: 0 })
        ));
        assert!(matches!(
            set_sched_class(current_tid(), SchedClass::Fifo(100)),
            Err(OsError::RtPriorityOutOfRange { .. })
        ));
        assert!(matches!(set_sched_class(0, SchedClass::Other), Err(OsError::InvalidTid { tid: 0 })));
        let ended = crate::testutil::ended_thread();
        assert!(get_sched_class(ended).unwrap_err().is_thread_gone());
        assert_eq!(get_sched_class(current_tid()).unwrap(), SchedClass::Other);
    }

    #[test]
    fn throttling_is_read_from_the_given_directory() {
        let dir = crate::testutil::TempDir::new("rt-throttling");
        let write = |runtime: &str| {
            std::fs::write(dir.0.join("sched_rt_runtime_us"), runtime).unwrap();
            std::fs::write(dir.0.join("sched_rt_period_us"), "1000000\n").unwrap();
        };
        write("950000\n");
        assert_eq!(rt_throttling_in(&dir.0).unwrap(), Some((950_000, 1_000_000)));
        write("-1\n");
        assert_eq!(rt_throttling_in(&dir.0).unwrap(), None, "-1 is throttling disabled");
        write("lots\n");
        assert!(rt_throttling_in(&dir.0).unwrap_err().to_string().contains("sched_rt_runtime_us"));
        // This host: whatever it is, it parses.
        rt_throttling().unwrap();
    }

    #[test]
    fn a_blocked_thread_goes_real_time_and_back_and_its_children_do_not_inherit() {
        if !is_root() {
            skip("a_blocked_thread_goes_real_time_and_back: needs root (CAP_SYS_NICE)");
            return;
        }
        if rt_throttling().unwrap().is_none() {
            skip("a_blocked_thread_goes_real_time_and_back: RT throttling is disabled on this host");
            return;
        }
        // The thread only blocks on a channel, so being real-time costs the machine nothing.
        let a = Sleeper::spawn();
        set_sched_class(a.tid, SchedClass::RoundRobin(10)).unwrap();
        assert_eq!(get_sched_class(a.tid).unwrap(), SchedClass::RoundRobin(10));
        assert_eq!(stat_policy(a.tid), (10, libc::SCHED_RR as u32));
        set_sched_class(a.tid, SchedClass::Fifo(3)).unwrap();
        assert_eq!(get_sched_class(a.tid).unwrap(), SchedClass::Fifo(3));

        // A thread created by a real-time thread starts as SCHED_OTHER (SCHED_RESET_ON_FORK).
        let (tx, rx) = std::sync::mpsc::channel();
        let parent = std::thread::spawn(move || {
            set_sched_class(current_tid(), SchedClass::RoundRobin(5)).unwrap();
            let child = std::thread::spawn(|| get_sched_class(current_tid()).unwrap()).join().unwrap();
            tx.send(child).unwrap();
            set_sched_class(current_tid(), SchedClass::Other).unwrap();
        });
        parent.join().unwrap();
        assert_eq!(rx.recv().unwrap(), SchedClass::Other);

        set_sched_class(a.tid, SchedClass::Other).unwrap();
        assert_eq!(stat_policy(a.tid), (0, libc::SCHED_OTHER as u32));
    }
}

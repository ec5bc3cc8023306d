//! Per-thread nice values through `getpriority(2)` / `setpriority(2)`.
//!
//! POSIX makes nice a per-process attribute, but on Linux/NPTL `PRIO_PROCESS` with a *thread*
//! id reads and changes exactly that thread (getpriority(2), "BUGS"), which is what the nice
//! translator needs: one priority per operator thread. The original Lachesis forked
//! `renice -n N -p TID` for every change; a syscall costs microseconds instead of a fork.
//!
//! These functions change the OS state and record nothing. The middleware goes through
//! [`crate::restore::RestoreLog::set_nice`], which records the original value first so that
//! it can be put back.
//!
//! Nice only orders threads *within one task group*: with autogroup (sched(7)), threads of
//! different sessions do not compete by nice at all, which is one reason the cgroup translator
//! exists ([`crate::cgroup`]).

use crate::error::OsError;
use crate::proc::Tid;

/// The highest priority (lowest nice value) Linux accepts.
pub const NICE_MIN: i32 = -20;
/// The lowest priority (highest nice value) Linux accepts.
pub const NICE_MAX: i32 = 19;

/// Clamps any integer into the nice range `[NICE_MIN, NICE_MAX]`, for translators whose
/// normalisation may overshoot (the nice formula of Lachesis §5.3 is clamped the same way).
pub fn clamp_nice(value: i64) -> i32 {
    value.clamp(NICE_MIN as i64, NICE_MAX as i64) as i32
}

/// Checks that `nice` lies in `[NICE_MIN, NICE_MAX]`.
pub fn validate_nice(nice: i64) -> Result<i32, OsError> {
    if (NICE_MIN as i64..=NICE_MAX as i64).contains(&nice) {
        Ok(nice as i32)
    } else {
        Err(OsError::NiceOutOfRange { nice })
    }
}

fn check_tid(tid: Tid) -> Result<libc::id_t, OsError> {
    // 0 means "the calling thread" to the priority syscalls: passing it by mistake would
    // silently renice the middleware itself.
    if tid <= 0 {
        return Err(OsError::InvalidTid { tid });
    }
    Ok(tid as libc::id_t)
}

fn errno() -> i32 {
    std::io::Error::last_os_error().raw_os_error().unwrap_or(0)
}

/// The nice value of thread `tid` (any process).
///
/// `getpriority` returns -1 both for "nice -1" and for errors, so errno is cleared before the
/// call and checked after it.
pub fn get_nice(tid: Tid) -> Result<i32, OsError> {
    let who = check_tid(tid)?;
    // SAFETY: __errno_location returns the calling thread's errno slot, valid for the thread's
    // lifetime; writing 0 to it is how getpriority(2) says to disambiguate a -1 result.
    unsafe { *libc::__errno_location() = 0 };
    // SAFETY: getpriority only reads its two integer arguments.
    let value = unsafe { libc::getpriority(libc::PRIO_PROCESS as _, who) };
    if value == -1 {
        match errno() {
            0 => {}
            libc::ESRCH => return Err(OsError::ThreadGone { tid }),
            code => {
                return Err(OsError::io(
                    format!("getpriority(PRIO_PROCESS, {tid})"),
                    std::io::Error::from_raw_os_error(code),
                ))
            }
        }
    }
    Ok(value)
}

/// Sets the nice value of thread `tid` (any process) to `nice`, which must lie in
/// `[NICE_MIN, NICE_MAX]`.
///
/// Errors: [`OsError::ThreadGone`] if the thread ended, [`OsError::NeedsCapSysNice`] if the
/// kernel refused (lowering a nice value, or changing another user's thread, needs
/// `CAP_SYS_NICE`), [`OsError::NiceOutOfRange`] for values outside the range.
pub fn set_nice(tid: Tid, nice: i32) -> Result<(), OsError> {
    let nice = validate_nice(nice as i64)?;
    let who = check_tid(tid)?;
    // SAFETY: setpriority only reads its three integer arguments.
    let rc = unsafe { libc::setpriority(libc::PRIO_PROCESS as _, who, nice) };
    if rc == 0 {
        return Ok(());
    }
    match errno() {
        libc::ESRCH => Err(OsError::ThreadGone { tid }),
        libc::EPERM | libc::EACCES => Err(OsError::NeedsCapSysNice { tid, nice }),
        libc::EINVAL => Err(OsError::NiceOutOfRange { nice: nice as i64 }),
        code => Err(OsError::io(
            format!("setpriority(PRIO_PROCESS, {tid}, {nice})"),
            std::io::Error::from_raw_os_error(code),
        )),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::caps::is_root;
    use crate::proc::{current_tid, thread_stat};
    use crate::testutil::{skip, Sleeper};

    #[test]
    fn clamps_and_validates_the_range() {
        assert_eq!(clamp_nice(-100), -20);
        assert_eq!(clamp_nice(100), 19);
        assert_eq!(clamp_nice(3), 3);
        assert!(matches!(validate_nice(20), Err(OsError::NiceOutOfRange { nice: 20 })));
        assert!(matches!(validate_nice(-21), Err(OsError::NiceOutOfRange { nice: -21 })));
        assert_eq!(validate_nice(-20).unwrap(), -20);
        assert!(matches!(set_nice(current_tid(), 25), Err(OsError::NiceOutOfRange { nice: 25 })));
    }

    #[test]
    fn refuses_tid_zero_which_would_mean_the_caller() {
        assert!(matches!(set_nice(0, 5), Err(OsError::InvalidTid { tid: 0 })));
        assert!(matches!(get_nice(-3), Err(OsError::InvalidTid { tid: -3 })));
    }

    #[test]
    fn a_thread_that_ended_is_reported_as_gone() {
        // A thread that has been joined no longer exists; its tid is only reused after the pid
        // space wraps (pid_max is at least 32768), far beyond what this test spawns.
        let tid = crate::testutil::ended_thread();
        assert!(get_nice(tid).unwrap_err().is_thread_gone());
        assert!(set_nice(tid, 3).unwrap_err().is_thread_gone());
    }

    #[test]
    fn raising_a_threads_nice_changes_only_that_thread() {
        // Raising nice needs no privilege for one's own threads, so this runs as any user. The
        // thread ends with the guard, so nothing needs undoing.
        let pid = std::process::id();
        let a = Sleeper::spawn();
        let b = Sleeper::spawn();
        let before_b = get_nice(b.tid).unwrap();
        let target = (before_b + 5).min(NICE_MAX);
        set_nice(a.tid, target).unwrap();
        assert_eq!(get_nice(a.tid).unwrap(), target);
        assert_eq!(thread_stat(pid, a.tid).unwrap().nice, target, "field 19 of /proc/.../stat");
        assert_eq!(get_nice(b.tid).unwrap(), before_b, "the sibling thread must keep its nice value");
    }

    #[test]
    fn lowering_nice_below_zero_works_as_root() {
        if !is_root() {
            skip("lowering_nice_below_zero_works_as_root: needs root (CAP_SYS_NICE)");
            return;
        }
        let pid = std::process::id();
        let a = Sleeper::spawn();
        set_nice(a.tid, -7).unwrap();
        assert_eq!(get_nice(a.tid).unwrap(), -7, "getpriority must tell -7 apart from its error value");
        set_nice(a.tid, -1).unwrap();
        assert_eq!(get_nice(a.tid).unwrap(), -1, "-1 is a real nice value, not an error");
        assert_eq!(thread_stat(pid, a.tid).unwrap().nice, -1);
    }
}

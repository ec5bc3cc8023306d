//! Session groups (`sched_autogroup`): the task group every session gets, and its nice value.
//!
//! With `/proc/sys/kernel/sched_autogroup_enabled` = 1 (the default of most distributions), the
//! kernel puts every session (`setsid()`: a terminal, a daemon, a service) of the root cpu cgroup
//! into a task group of its own and shares the CPU first *between these groups*, equally unless
//! their nice values differ, and only then between the threads inside a group by their nice
//! values (sched(7), "The autogroup feature"). A thread's nice value therefore only weighs it
//! against threads of its own session: a busy process started from another session takes its
//! session's share whatever the nice values are.
//!
//! Two handles act across sessions: a cpu cgroup (threads in a non-root cgroup leave autogroup
//! scheduling; the middleware's cgroup translator makes one), and the session group's own nice
//! value, `/proc/<pid>/autogroup` (`echo N > /proc/<pid>/autogroup`; lowering it needs
//! `CAP_SYS_NICE`). The latter changes the weight of the *whole session* the process belongs to,
//! so [`crate::restore::RestoreLog::set_autogroup_nice`] records and restores it like a thread's
//! nice value.
//!
//! A group is named by the kernel as `/autogroup-<id>`, ids counting up from boot and never
//! reused, so a recorded id names one session for as long as any process of it lives.
//!
//! One session has no group of its own: init's (a process that never called `setsid()` below
//! PID 1 — many service managers' and containers' children). The kernel shows it as an empty
//! `/proc/<pid>/autogroup`; its threads sit in the root task group and weigh one by one against
//! each session group, and its nice cannot be set (the kernel refuses to weight the root group).
//! [`Autogroup::ROOT`] (id 0, the kernel's own id for it) names it here.

use std::fs;
use std::io;
use std::path::Path;

use crate::error::OsError;
use crate::nice::validate_nice;
use crate::realtime::KERNEL_SYSCTL_DIR;

/// A process's session group.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Autogroup {
    /// The kernel's id (`/autogroup-<id>`), unique since boot.
    pub id: u64,
    /// The group's nice value, [-20, 19]: its weight against other session groups.
    pub nice: i32,
}

impl Autogroup {
    /// The root session group: init's session, which has no task group of its own.
    pub const ROOT: Autogroup = Autogroup { id: 0, nice: 0 };

    /// Whether this is [`Autogroup::ROOT`].
    pub fn is_root(&self) -> bool {
        self.id == 0
    }
}

impl std::fmt::Display for Autogroup {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        if self.is_root() {
            write!(f, "the root session group (init's session, no group of its own)")
        } else {
            write!(f, "/autogroup-{} (nice {})", self.id, self.nice)
        }
    }
}

/// Whether the kernel schedules by session groups: `sched_autogroup_enabled` is 1. A kernel
/// without autogroup support (no such file) does not.
pub fn autogroup_enabled() -> Result<bool, OsError> {
    autogroup_enabled_in(Path::new(KERNEL_SYSCTL_DIR))
}

/// [`autogroup_enabled`] as read from `dir` instead of `/proc/sys/kernel`.
pub fn autogroup_enabled_in(dir: &Path) -> Result<bool, OsError> {
    let path = dir.join("sched_autogroup_enabled");
    match fs::read_to_string(&path) {
        Ok(text) => Ok(text.trim() != "0"),
        Err(e) if e.kind() == io::ErrorKind::NotFound => Ok(false),
        Err(e) => Err(OsError::io(format!("reading {}", path.display()), e)),
    }
}

/// Parses the text of `/proc/<pid>/autogroup`: `/autogroup-10 nice 0`, or nothing at all for a
/// process of [`Autogroup::ROOT`].
pub fn parse_autogroup(text: &str) -> Option<Autogroup> {
    if text.trim().is_empty() {
        return Some(Autogroup::ROOT);
    }
    let mut parts = text.split_whitespace();
    let id = parts.next()?.strip_prefix("/autogroup-")?.parse().ok()?;
    (parts.next()? == "nice").then_some(())?;
    let nice = parts.next()?.parse().ok()?;
    Some(Autogroup { id, nice })
}

/// The session group of process `pid`. [`OsError::ThreadGone`] if it ended.
pub fn autogroup(pid: u32) -> Result<Autogroup, OsError> {
    let path = format!("/proc/{pid}/autogroup");
    let text = match fs::read_to_string(&path) {
        Ok(t) => t,
        Err(e) if e.kind() == io::ErrorKind::NotFound => return Err(OsError::ThreadGone { tid: pid as i32 }),
        Err(e) => return Err(OsError::io(format!("reading {path}"), e)),
    };
    parse_autogroup(&text)
        .ok_or_else(|| OsError::io(format!("parsing {path}"), io::Error::other(format!("{:?}", text.trim()))))
}

/// Sets the nice value of the session group of process `pid` — of every process of that session.
/// [`OsError::RootSessionGroup`] for a process of [`Autogroup::ROOT`].
pub fn set_autogroup_nice(pid: u32, nice: i32) -> Result<(), OsError> {
    validate_nice(nice as i64)?;
    if autogroup(pid)?.is_root() {
        return Err(OsError::RootSessionGroup { pid });
    }
    let path = format!("/proc/{pid}/autogroup");
    match fs::write(&path, nice.to_string()) {
        Ok(()) => Ok(()),
        Err(e) if e.kind() == io::ErrorKind::NotFound || e.raw_os_error() == Some(libc::ESRCH) => {
            Err(OsError::ThreadGone { tid: pid as i32 })
        }
        Err(e) if e.raw_os_error() == Some(libc::EPERM) || e.raw_os_error() == Some(libc::EACCES) => {
            Err(OsError::NeedsCapSysNice { tid: pid as i32, nice })
        }
        Err(e) => Err(OsError::io(format!("writing {nice} to {path}"), e)),
    }
}

/// Some live process of session group `id`, found through `/proc/*/autogroup`.
pub fn process_in_autogroup(id: u64) -> Option<u32> {
    fs::read_dir("/proc").ok()?.flatten().find_map(|entry| {
        let pid: u32 = entry.file_name().to_str()?.parse().ok()?;
        (autogroup(pid).ok()?.id == id).then_some(pid)
    })
}

/// How many session groups other than `id` have a process now (each takes an equal share of
/// the CPU when busy, whatever the nice values of its threads).
pub fn other_autogroups(id: u64) -> usize {
    let Ok(entries) = fs::read_dir("/proc") else { return 0 };
    let ids: std::collections::BTreeSet<u64> = entries
        .flatten()
        .filter_map(|entry| {
            let pid: u32 = entry.file_name().to_str()?.parse().ok()?;
            autogroup(pid).ok().map(|g| g.id)
        })
        .filter(|g| *g != id)
        .collect();
    ids.len()
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::caps::is_root;
    use crate::testutil::{skip, TempDir};

    #[test]
    fn parses_the_proc_file() {
        assert_eq!(parse_autogroup("/autogroup-10 nice 0\n"), Some(Autogroup { id: 10, nice: 0 }));
        assert_eq!(parse_autogroup("/autogroup-123 nice -5"), Some(Autogroup { id: 123, nice: -5 }));
        assert_eq!(parse_autogroup("autogroup-1 nice 0"), None);
        assert_eq!(parse_autogroup("/autogroup-1 weight 0"), None);
        assert_eq!(parse_autogroup(""), Some(Autogroup::ROOT), "init's session shows nothing");
        assert_eq!(parse_autogroup("\n"), Some(Autogroup::ROOT));
        assert!(Autogroup::ROOT.to_string().contains("root session group"));
        assert_eq!(Autogroup { id: 7, nice: 3 }.to_string(), "/autogroup-7 (nice 3)");
    }

    /// A process of init's session (PID 1 here, or a kernel thread) has no group: it reads as
    /// the root group, and setting its nice is refused with a reason, before the kernel is asked.
    #[test]
    fn init_s_session_has_no_group_and_no_nice_to_set() {
        let Some(pid) = fs::read_dir("/proc").unwrap().flatten().find_map(|e| {
            let pid: u32 = e.file_name().to_str()?.parse().ok()?;
            autogroup(pid).ok()?.is_root().then_some(pid)
        }) else {
            skip("init_s_session_has_no_group_and_no_nice_to_set: no process of init's session is visible here");
            return;
        };
        let err = set_autogroup_nice(pid, 0).unwrap_err();
        assert!(matches!(err, OsError::RootSessionGroup { pid: p } if p == pid), "{err}");
        assert!(err.to_string().contains("leave autogroup_nice unset"), "{err}");
    }

    #[test]
    fn the_switch_is_read_from_the_given_directory() {
        let dir = TempDir::new("autogroup");
        assert!(!autogroup_enabled_in(&dir.0).unwrap(), "no file: no autogroup support");
        std::fs::write(dir.0.join("sched_autogroup_enabled"), "1\n").unwrap();
        assert!(autogroup_enabled_in(&dir.0).unwrap());
        std::fs::write(dir.0.join("sched_autogroup_enabled"), "0\n").unwrap();
        assert!(!autogroup_enabled_in(&dir.0).unwrap());
        autogroup_enabled().unwrap();
    }

    /// A child in a session of its own: its group's nice goes down and back, and the test's own
    /// session is not touched.
    #[test]
    fn a_session_groups_nice_is_set_and_read_back() {
        if !is_root() {
            skip("a_session_groups_nice_is_set_and_read_back: lowering an autogroup's nice needs CAP_SYS_NICE");
            return;
        }
        let own = autogroup(std::process::id()).unwrap();
        let mut cmd = std::process::Command::new("sleep");
        cmd.arg("30");
        // SAFETY: setsid is async-signal-safe; the closure allocates nothing.
        unsafe {
            use std::os::unix::process::CommandExt;
            cmd.pre_exec(|| if libc::setsid() < 0 { Err(io::Error::last_os_error()) } else { Ok(()) });
        }
        let mut child = cmd.spawn().unwrap();
        let sleeper = child.id();
        let guard = crate::testutil::Cleanup::new(move || {
            // SAFETY: kill only signals the child this test started.
            unsafe { libc::kill(sleeper as i32, libc::SIGKILL) };
        });
        let group = autogroup(sleeper).unwrap();
        assert_eq!(group.nice, 0);
        set_autogroup_nice(sleeper, -3).unwrap();
        assert_eq!(autogroup(sleeper).unwrap(), Autogroup { id: group.id, nice: -3 });
        assert_eq!(process_in_autogroup(group.id), Some(sleeper));
        assert!(other_autogroups(group.id) >= 1, "this test's own session is another");
        assert_eq!(autogroup(std::process::id()).unwrap(), own, "the test's own session is untouched");
        set_autogroup_nice(sleeper, 0).unwrap();
        assert!(matches!(set_autogroup_nice(sleeper, 20), Err(OsError::NiceOutOfRange { .. })));
        drop(guard);
        let _ = child.wait();
        assert!(autogroup(u32::MAX / 2).unwrap_err().is_thread_gone());
    }
}

//! The one error type of this crate.
//!
//! Every variant says what went wrong *and* what to do about it, because the person reading it
//! is usually an operator starting `moirai schedule` on a machine they did not set up.
//! [`OsError::ThreadGone`] is the exception: threads of a running SPE come and go, so callers
//! are expected to match on it (or use [`OsError::is_thread_gone`]) and carry on.

use std::io;
use std::path::PathBuf;

use crate::proc::Tid;

/// Errors of the Linux mechanisms in this crate.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum OsError {
    /// The thread ended (or never belonged to the given process). Normal for a running SPE.
    #[error("thread {tid} no longer exists (it ended; threads of a running SPE come and go)")]
    ThreadGone {
        /// The thread id.
        tid: Tid,
    },
    /// The kernel refused a nice change for lack of privilege.
    #[error(
        "lowering the nice value of thread {tid} (to {nice}) needs CAP_SYS_NICE: run moirai schedule as root or \
         grant it with `setcap cap_sys_nice+ep <path to moirai>`"
    )]
    NeedsCapSysNice {
        /// The thread id.
        tid: Tid,
        /// The nice value that was refused.
        nice: i32,
    },
    /// A nice value outside Linux's range.
    #[error("nice value {nice} is out of range: Linux nice values lie in [-20, 19] (use nice::clamp_nice)")]
    NiceOutOfRange {
        /// The rejected value.
        nice: i64,
    },
    /// The kernel refused a real-time scheduling class.
    #[error(
        "the kernel refused {class} for thread {tid}: real-time classes need CAP_SYS_NICE (run moirai schedule as \
         root or `setcap cap_sys_nice+ep <path to moirai>`), and with CONFIG_RT_GROUP_SCHED the thread's v1 cpu \
         cgroup must grant real-time runtime (cpu.rt_runtime_us > 0; groups moirai creates grant none, so keep \
         real-time threads out of them)"
    )]
    RealTimeRefused {
        /// The thread id.
        tid: Tid,
        /// The class that was refused, e.g. `SCHED_RR priority 10`.
        class: String,
    },
    /// A session group's nice asked for a process of init's session, which has no group.
    #[error(
        "process {pid} is in init's session, which has no session group of its own (it never called setsid(), \
         e.g. a service's child): its threads already weigh one by one against each session, and the kernel \
         cannot weight that session as a whole; leave autogroup_nice unset, or give its threads a cpu group \
         (the cgroup translator)"
    )]
    RootSessionGroup {
        /// The process.
        pid: u32,
    },
    /// A real-time priority outside [1, 99].
    #[error("real-time priority {priority} is out of range: SCHED_FIFO and SCHED_RR priorities lie in [1, 99]")]
    RtPriorityOutOfRange {
        /// The rejected priority.
        priority: u8,
    },
    /// A thread id that must not be passed to the kernel (0 means "the caller" to setpriority).
    #[error("{tid} is not a thread id: thread ids are positive (0 would mean the calling thread)")]
    InvalidTid {
        /// The rejected id.
        tid: Tid,
    },
    /// Reading `/proc` or another kernel interface failed.
    #[error("{what}: {source}")]
    Io {
        /// What was being done, with the path.
        what: String,
        /// The underlying error.
        #[source]
        source: io::Error,
    },
    /// A cgroupfs operation failed; `hint` says what to do.
    #[error("cgroup: cannot {action} {path}: {source}; {hint}")]
    Cgroup {
        /// What was attempted ("create", "write 1234 to", ...).
        action: String,
        /// The cgroupfs path.
        path: PathBuf,
        /// The kernel's answer.
        #[source]
        source: io::Error,
        /// What the operator can do about it.
        hint: String,
    },
    /// No usable cpu controller on this host.
    #[error("no cgroup cpu controller available: {detail}")]
    NoCpuController {
        /// What was found instead, and what to do.
        detail: String,
    },
    /// A cpu weight outside the range of the hierarchy's weight file.
    #[error("cpu weight {value} is out of range for {file}: use a value in [{min}, {max}]")]
    WeightOutOfRange {
        /// The rejected value.
        value: u64,
        /// `cpu.shares` or `cpu.weight`.
        file: &'static str,
        /// Smallest accepted value.
        min: u64,
        /// Largest accepted value.
        max: u64,
    },
    /// A group or instance name that cannot be a cgroup directory.
    #[error("invalid cgroup name {name:?}: {reason} (cgroup::sanitize_group_name makes any string valid)")]
    InvalidGroupName {
        /// The rejected name.
        name: String,
        /// Why.
        reason: &'static str,
    },
    /// A group this tree did not create.
    #[error("unknown cgroup group {name:?}: create it with CgroupTree::ensure_group first")]
    UnknownGroup {
        /// The name asked for.
        name: String,
    },
    /// Privileges or kernel features are missing; each entry says what and how to get it.
    #[error("moirai cannot enforce schedules here:\n{}", .missing.iter().map(|m| format!("  - {m}")).collect::<Vec<_>>().join("\n"))]
    Preflight {
        /// One line per missing item.
        missing: Vec<String>,
    },
    /// The restore state file could not be read, parsed or written.
    #[error("restore state file {path}: {detail}")]
    StateFile {
        /// The state file.
        path: PathBuf,
        /// What went wrong and what to do.
        detail: String,
    },
}

impl OsError {
    /// True for [`OsError::ThreadGone`]: the thread ended, which callers normally skip.
    pub fn is_thread_gone(&self) -> bool {
        matches!(self, OsError::ThreadGone { .. })
    }

    /// An [`OsError::Io`] with context.
    pub(crate) fn io(what: impl Into<String>, source: io::Error) -> OsError {
        OsError::Io { what: what.into(), source }
    }
}

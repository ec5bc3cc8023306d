//! Session groups (`sched_autogroup`, see `moirai_os::autogroup`): what per-thread nice values
//! can and cannot do on this host, said once per SPE process, and the one handle the SPE's own
//! session offers — its session group's nice value (`autogroup_nice` of an `[[spe]]`,
//! `--autogroup-nice`).
//!
//! With autogroup on, the kernel first shares the CPU equally between busy sessions, then by nice
//! inside each: the middleware's nice values rank an SPE's threads against each other only, and a
//! busy process of another session (a build in another terminal, another SPE started apart)
//! takes its session's share whatever they are. Two things act across sessions: a cpu cgroup
//! (the cgroup translator's groups: threads in a non-root group leave autogroup scheduling), and
//! the session group's nice value, which weighs the SPE's whole session — every process of it —
//! against the others; it is recorded in the state file and restored like a thread's nice value.

use std::collections::BTreeMap;

use moirai_os::autogroup::{autogroup, autogroup_enabled, other_autogroups};
use moirai_os::RestoreLog;

/// What the session-group handling knows and was asked for.
pub struct Sessions {
    /// Whether the kernel schedules by session groups.
    enabled: bool,
    /// `autogroup_nice` per SPE name.
    wanted: BTreeMap<String, i32>,
    /// The SPE process each SPE was last seen as (said and set once per process).
    seen: BTreeMap<String, u32>,
    /// Whether some policy uses per-thread nice values (the case the log line is about).
    nice: bool,
    /// Whether the cgroup translator puts the SPEs' threads into groups of their own.
    cgroup: bool,
}

impl Sessions {
    /// `wanted`: the SPEs with an `autogroup_nice`; `nice` / `cgroup`: whether policies use the
    /// nice (or realtime) translator / the cgroup translator.
    pub fn new(wanted: BTreeMap<String, i32>, nice: bool, cgroup: bool) -> Sessions {
        Sessions { enabled: autogroup_enabled().unwrap_or(false), wanted, seen: BTreeMap::new(), nice, cgroup }
    }

    /// Whether the kernel schedules by session groups.
    pub fn enabled(&self) -> bool {
        self.enabled
    }

    /// The first time SPE `spe` is seen as process `pid`: what nice can do for it here, and its
    /// session group's nice set when asked (recorded in `log` first). Returns the lines to log
    /// and the errors.
    pub fn attach(&mut self, spe: &str, pid: u32, log: &mut RestoreLog) -> (Vec<String>, Vec<String>) {
        let (mut lines, mut errors) = (Vec::new(), Vec::new());
        if pid == 0 || self.seen.get(spe) == Some(&pid) {
            return (lines, errors);
        }
        self.seen.insert(spe.to_string(), pid);
        let wanted = self.wanted.get(spe).copied();
        if !self.enabled {
            if self.nice {
                lines.push(format!(
                    "SPE '{spe}' (pid {pid}): sched_autogroup is off here, so nice values weigh its threads against \
                     every thread of the machine"
                ));
            }
            if let Some(n) = wanted {
                lines.push(format!(
                    "SPE '{spe}': autogroup_nice {n} left unset: sched_autogroup is off (kernel.sched_autogroup_enabled \
                     = 0), so a session group's nice has no effect"
                ));
            }
            return (lines, errors);
        }
        let group = match autogroup(pid) {
            Ok(g) => g,
            Err(e) => {
                errors.push(format!("SPE '{spe}' (pid {pid}): cannot read its session group: {e}"));
                return (lines, errors);
            }
        };
        let others = other_autogroups(group.id);
        if group.is_root() {
            if self.nice {
                lines.push(format!(
                    "SPE '{spe}' (pid {pid}) runs in init's session, which has no session group: with \
                     sched_autogroup on, each of its threads weighs by its nice value against each of the {others} \
                     session group(s) of this machine as a whole"
                ));
            }
            if let Some(nice) = wanted {
                errors.push(format!(
                    "SPE '{spe}': autogroup_nice {nice} left unset: {}",
                    moirai_os::OsError::RootSessionGroup { pid }
                ));
            }
            return (lines, errors);
        }
        if self.nice {
            let way_out = if self.cgroup {
                "its threads the cgroup translator moves into its groups leave session-group scheduling (the \
                 groups weigh against the root's sessions)"
                    .to_string()
            } else {
                "to weigh it against other sessions, give it a cpu group of its own (the cgroup translator, e.g. a \
                 `groups` policy by spe) or its session's nice (autogroup_nice in its [[spe]] table, or \
                 --autogroup-nice N), which changes its whole session"
                    .to_string()
            };
            lines.push(format!(
                "SPE '{spe}' (pid {pid}) runs in session group {group}; with sched_autogroup on, nice values rank its \
                 threads against each other only: against the {others} other session group(s) of this machine it gets \
                 one session's share of the CPU whatever they are; {way_out}"
            ));
        }
        if let Some(nice) = wanted {
            let mine = autogroup(std::process::id()).ok().is_some_and(|g| g.id == group.id);
            match log.set_autogroup_nice(pid, nice) {
                Ok(before) => {
                    lines.push(format!(
                        "SPE '{spe}': session group /autogroup-{} nice {} -> {nice} (every process of its session; \
                         restored on exit){}",
                        group.id,
                        before.nice,
                        if mine { "; the middleware runs in this session too" } else { "" }
                    ));
                }
                Err(e) => errors.push(format!("SPE '{spe}': session group nice {nice}: {e}")),
            }
        }
        (lines, errors)
    }
}

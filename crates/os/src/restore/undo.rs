//! Undoing a [`State`]: scheduling classes, nice values and session groups' nice values first, then cgroup membership, then the groups moirai
//! created (children before parents), then the controllers it enabled.
//!
//! Every step checks that the thing still exists and is still the recorded one; what ended is
//! skipped, what was reused is skipped, what failed stays in the state for a later attempt.

use std::collections::HashSet;
use std::fmt;
use std::io;
use std::path::{Path, PathBuf};

use crate::autogroup::{autogroup, process_in_autogroup, set_autogroup_nice};
use crate::cgroup::fs::{read_ids, write_id, CgroupFs};
use crate::cgroup::membership::tgid_of;
use crate::cgroup::{CgroupVersion, Hierarchy};
use crate::error::OsError;
use crate::nice::set_nice;
use crate::proc::Tid;
use crate::realtime::set_sched_class;

use super::heirs::undo_heirs;
use super::{identity, Identity, State};

/// What [`super::RestoreLog::restore`] did.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct RestoreReport {
    /// Threads whose original scheduling class was set again.
    pub classes_restored: usize,
    /// Threads whose original nice value was set again.
    pub nice_restored: usize,
    /// Threads moirai never changed, born at a value it set on another thread of their process
    /// (Linux starts a thread at its creator's value), set back to their process's value.
    pub heirs_restored: usize,
    /// Session groups whose original nice value was set again.
    pub autogroups_restored: usize,
    /// Threads moved back to their original cgroup one by one (v1, or v2 threads that had a
    /// cgroup of their own).
    pub threads_moved_back: usize,
    /// Processes moved back to their original cgroup as a whole (v2).
    pub processes_moved_back: usize,
    /// Threads or processes found in moirai's groups without a record (born there), moved to
    /// their process's original cgroup or, failing that, the hierarchy root.
    pub strays_moved: usize,
    /// Cgroup directories moirai created and removed.
    pub groups_removed: usize,
    /// Controllers moirai enabled and disabled again.
    pub controllers_disabled: usize,
    /// Records skipped because the thread or process ended (normal).
    pub skipped_gone: usize,
    /// Records skipped because the tid now names another thread (start time differs).
    pub skipped_reused: usize,
    /// Things deliberately left as they are, with the reason.
    pub notes: Vec<String>,
    /// Things that could not be undone; they stay in the state file.
    pub failures: Vec<String>,
}

impl RestoreReport {
    /// True if nothing failed.
    pub fn is_clean(&self) -> bool {
        self.failures.is_empty()
    }
}

impl fmt::Display for RestoreReport {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "{} classes, {} nice values ({} of threads born at a value moirai set) and {} session groups restored, {} threads and {} processes \
             moved back, {} strays moved, {} groups removed, {} controllers disabled, {} skipped (ended), {} skipped (tid reused)",
            self.classes_restored,
            self.nice_restored + self.heirs_restored,
            self.heirs_restored,
            self.autogroups_restored,
            self.threads_moved_back,
            self.processes_moved_back,
            self.strays_moved,
            self.groups_removed,
            self.controllers_disabled,
            self.skipped_gone,
            self.skipped_reused
        )?;
        for n in &self.notes {
            write!(f, "\n  note: {n}")?;
        }
        for e in &self.failures {
            write!(f, "\n  FAILED: {e}")?;
        }
        Ok(())
    }
}

/// How many times a group is drained before its removal is given up: threads may be created
/// inside it while it is drained.
const DRAIN_ATTEMPTS: usize = 5;

impl State {
    /// `dir`, or its nearest existing ancestor within the hierarchy, for a group that someone
    /// else removed meanwhile.
    fn existing(&self, fs: &dyn CgroupFs, dir: &Path) -> PathBuf {
        let Some(h) = &self.cgroup else { return dir.to_path_buf() };
        let mut d = dir;
        while !fs.is_dir(d) && d != h.mount {
            match d.parent() {
                Some(p) if h.contains(p) => d = p,
                _ => return h.mount.clone(),
            }
        }
        d.to_path_buf()
    }

    fn root(&self) -> PathBuf {
        self.cgroup.as_ref().map(|h| h.mount.clone()).unwrap_or_default()
    }

    /// The original cgroup of process `pid`, if recorded for the same process.
    fn home_of_process(&self, fs: &dyn CgroupFs, pid: u32) -> PathBuf {
        self.processes
            .iter()
            .find(|r| r.pid == pid && identity(pid, pid as Tid, r.start_ticks) == Identity::Same)
            .and_then(|r| r.original.as_deref())
            .map_or_else(|| self.root(), |d| self.existing(fs, d))
    }

    /// Where thread `tid` belongs outside moirai's groups: its own recorded cgroup, else its
    /// process's, else the hierarchy root.
    pub(crate) fn home_of_thread(&self, fs: &dyn CgroupFs, tid: Tid) -> PathBuf {
        if let Some(d) = self
            .threads
            .iter()
            .find(|r| r.tid == tid && identity(r.pid, tid, r.start_ticks) == Identity::Same)
            .and_then(|r| r.original.as_deref())
        {
            return self.existing(fs, d);
        }
        match tgid_of(tid) {
            Some(pid) => self.home_of_process(fs, pid),
            None => self.root(),
        }
    }
}

/// Undoes `state` as far as possible; see the module documentation.
pub(crate) fn undo(state: &mut State, fs: &dyn CgroupFs) -> RestoreReport {
    let mut report = RestoreReport::default();
    // Classes first: a thread back in SCHED_OTHER can then move to any cgroup.
    undo_sched(state, &mut report);
    undo_nice_and_heirs(state, &mut report);
    undo_autogroups(state, &mut report);
    if let Some(h) = state.cgroup.clone() {
        match h.version {
            CgroupVersion::V1 => undo_v1_threads(state, fs, &h, &mut report),
            CgroupVersion::V2 => undo_v2_processes(state, fs, &mut report),
        }
        remove_groups(state, fs, &h, &mut report);
        disable_controllers(state, fs, &mut report);
        if state.processes.is_empty()
            && state.threads.is_empty()
            && state.groups.is_empty()
            && state.controllers.is_empty()
        {
            state.cgroup = None;
            state.instance = None;
        }
    }
    report
}

/// Undoes the per-thread records of `state` — classes, nice values, cpu cgroups (v1 threads;
/// v2 processes, moved back whole) — and leaves the groups, controllers and process records:
/// one process let go while the others stay scheduled.
pub(crate) fn undo_threads_of(state: &mut State, fs: &dyn CgroupFs) -> RestoreReport {
    let mut report = RestoreReport::default();
    undo_sched(state, &mut report);
    undo_nice_and_heirs(state, &mut report);
    if let Some(h) = state.cgroup.clone() {
        match h.version {
            CgroupVersion::V1 => undo_v1_threads(state, fs, &h, &mut report),
            CgroupVersion::V2 => undo_v2_processes(state, fs, &mut report),
        }
    }
    report
}

/// Puts back one kind of per-thread record: a record whose thread ended or whose tid now names
/// another thread is dropped and counted; `apply` restores the others; what fails stays.
fn undo_threads<R>(
    records: &mut Vec<R>,
    report: &mut RestoreReport,
    id: impl Fn(&R) -> (u32, Tid, u64),
    apply: impl Fn(&R) -> Result<(), OsError>,
    what: impl Fn(&R) -> String,
    restored: fn(&mut RestoreReport) -> &mut usize,
) {
    records.retain(|r| {
        let (pid, tid, start_ticks) = id(r);
        match identity(pid, tid, start_ticks) {
            Identity::Gone => {
                report.skipped_gone += 1;
                false
            }
            Identity::Reused => {
                report.skipped_reused += 1;
                false
            }
            Identity::Same => match apply(r) {
                Ok(()) => {
                    *restored(report) += 1;
                    false
                }
                Err(OsError::ThreadGone { .. }) => {
                    report.skipped_gone += 1;
                    false
                }
                Err(e) => {
                    report.failures.push(format!("{}: {e}", what(r)));
                    true
                }
            },
        }
    });
}

fn undo_sched(state: &mut State, report: &mut RestoreReport) {
    undo_threads(
        &mut state.sched,
        report,
        |r| (r.pid, r.tid, r.start_ticks),
        |r| set_sched_class(r.tid, r.class),
        |r| format!("class of thread {} (pid {}) back to {}", r.tid, r.pid, r.class),
        |report| &mut report.classes_restored,
    );
}

/// Nice values: the recorded threads', then those of the threads born of them (see `heirs`).
fn undo_nice_and_heirs(state: &mut State, report: &mut RestoreReport) {
    let recorded: HashSet<(u32, Tid)> = state.nice.iter().map(|r| (r.pid, r.tid)).collect();
    undo_nice(state, report);
    undo_heirs(state, &recorded, report);
}

fn undo_nice(state: &mut State, report: &mut RestoreReport) {
    undo_threads(
        &mut state.nice,
        report,
        |r| (r.pid, r.tid, r.start_ticks),
        |r| set_nice(r.tid, r.nice),
        |r| format!("nice of thread {} (pid {}) back to {}", r.tid, r.pid, r.nice),
        |report| &mut report.nice_restored,
    );
}

/// Sets each recorded session group's nice value back, through the recorded process if it still
/// belongs to the group, else through any process of the group; a group with no process left
/// is gone (the kernel frees it with its last process).
fn undo_autogroups(state: &mut State, report: &mut RestoreReport) {
    state.autogroups.retain(|r| {
        let same = identity(r.pid, r.pid as Tid, r.start_ticks) == Identity::Same
            && autogroup(r.pid).is_ok_and(|g| g.id == r.group);
        let Some(pid) = (if same { Some(r.pid) } else { process_in_autogroup(r.group) }) else {
            report.skipped_gone += 1;
            return false;
        };
        match set_autogroup_nice(pid, r.nice) {
            Ok(()) => {
                report.autogroups_restored += 1;
                false
            }
            Err(OsError::ThreadGone { .. }) => {
                report.skipped_gone += 1;
                false
            }
            Err(e) => {
                report.failures.push(format!("nice of session group /autogroup-{} back to {}: {e}", r.group, r.nice));
                true
            }
        }
    });
}

fn undo_v1_threads(state: &mut State, fs: &dyn CgroupFs, h: &Hierarchy, report: &mut RestoreReport) {
    let threads = std::mem::take(&mut state.threads);
    for r in threads {
        match identity(r.pid, r.tid, r.start_ticks) {
            Identity::Gone => report.skipped_gone += 1,
            Identity::Reused => report.skipped_reused += 1,
            Identity::Same => {
                let home = match &r.original {
                    Some(d) => state.existing(fs, d),
                    None => state.home_of_process(fs, r.pid),
                };
                match write_id(fs, &home.join(h.threads_file()), r.tid) {
                    Ok(()) => report.threads_moved_back += 1,
                    Err(OsError::ThreadGone { .. }) => report.skipped_gone += 1,
                    Err(e) => {
                        report.failures.push(format!(
                            "thread {} (pid {}) back to {}: {e}",
                            r.tid,
                            r.pid,
                            home.display()
                        ));
                        state.threads.push(r);
                    }
                }
            }
        }
    }
    // Process records stay until the groups are gone: they are the homes of strays.
}

fn undo_v2_processes(state: &mut State, fs: &dyn CgroupFs, report: &mut RestoreReport) {
    let mut failed = Vec::new();
    for r in &state.processes {
        match identity(r.pid, r.pid as Tid, r.start_ticks) {
            Identity::Gone => report.skipped_gone += 1,
            Identity::Reused => report.skipped_reused += 1,
            Identity::Same => {
                let home = r.original.as_deref().map_or_else(|| state.root(), |d| state.existing(fs, d));
                // Writing the pid to cgroup.procs moves every thread of the process, including
                // those in threaded groups and those never recorded.
                match write_id(fs, &home.join("cgroup.procs"), r.pid as Tid) {
                    Ok(()) => report.processes_moved_back += 1,
                    Err(OsError::ThreadGone { .. }) => report.skipped_gone += 1,
                    Err(e) => {
                        report.failures.push(format!("process {} back to {}: {e}", r.pid, home.display()));
                        failed.push(r.pid);
                    }
                }
            }
        }
    }
    // Threads that had a cgroup of their own (in a threaded subtree moirai did not make) go
    // back to it; the others came home with their process.
    let threads = std::mem::take(&mut state.threads);
    for r in threads {
        if failed.contains(&r.pid) {
            state.threads.push(r);
            continue;
        }
        let Some(own) = r.original.as_deref() else { continue };
        let process_home = state.processes.iter().find(|p| p.pid == r.pid).and_then(|p| p.original.as_deref());
        if process_home == Some(own) || identity(r.pid, r.tid, r.start_ticks) != Identity::Same {
            continue;
        }
        let dir = state.existing(fs, own);
        match write_id(fs, &dir.join("cgroup.threads"), r.tid) {
            Ok(()) => report.threads_moved_back += 1,
            Err(OsError::ThreadGone { .. }) => report.skipped_gone += 1,
            Err(e) => report.notes.push(format!(
                "thread {} (pid {}) stays in its process's cgroup, not its own {}: {e}",
                r.tid,
                r.pid,
                dir.display()
            )),
        }
    }
    // Process records stay until the groups are gone: they are the homes of strays.
}

/// Empties and removes the groups moirai created, deepest first.
fn remove_groups(state: &mut State, fs: &dyn CgroupFs, h: &Hierarchy, report: &mut RestoreReport) {
    let mut groups = std::mem::take(&mut state.groups);
    // Children before parents, whatever order they were recorded in.
    groups.sort_by_key(|d| std::cmp::Reverse(d.components().count()));
    let mut kept = Vec::new();
    for dir in groups {
        if !fs.is_dir(&dir) {
            continue;
        }
        let mut last: Option<io::Error> = None;
        for _ in 0..DRAIN_ATTEMPTS {
            drain(state, fs, h, &dir, report);
            match fs.rmdir(&dir) {
                Ok(()) => {
                    report.groups_removed += 1;
                    last = None;
                    break;
                }
                Err(e) if e.kind() == io::ErrorKind::NotFound => {
                    last = None;
                    break;
                }
                Err(e) => last = Some(e),
            }
        }
        if let Some(e) = last {
            let busy = e.raw_os_error() == Some(libc::EBUSY) || e.raw_os_error() == Some(libc::ENOTEMPTY);
            if busy && state.instance.as_ref().is_some_and(|i| !dir.starts_with(i) && i.starts_with(&dir)) {
                // The shared base directory (`moirai`) now holds another instance's groups.
                report.notes.push(format!("{} kept: another moirai instance uses it", dir.display()));
            } else {
                report.failures.push(format!("removing {}: {e}", dir.display()));
                kept.push(dir);
            }
        }
    }
    kept.reverse();
    state.groups = kept;
    if state.groups.is_empty() {
        // Process records are only homes for strays; with the groups gone there are none.
        state.processes.clear();
    }
}

/// Moves every thread (v1) or process (v2) still in `dir` to where it belongs.
fn drain(state: &State, fs: &dyn CgroupFs, h: &Hierarchy, dir: &Path, report: &mut RestoreReport) {
    let ids = match read_ids(fs, &dir.join(h.threads_file())) {
        Ok(ids) => ids,
        Err(e) => {
            report.notes.push(format!("cannot list the threads of {}: {e}", dir.display()));
            return;
        }
    };
    for tid in ids {
        let result = match h.version {
            CgroupVersion::V1 => write_id(fs, &state.home_of_thread(fs, tid).join("tasks"), tid),
            CgroupVersion::V2 => {
                // In v2 a thread cannot leave its threaded domain alone: move its process.
                let Some(pid) = tgid_of(tid) else { continue };
                write_id(fs, &state.home_of_process(fs, pid).join("cgroup.procs"), pid as Tid)
            }
        };
        match result {
            Ok(()) => report.strays_moved += 1,
            Err(OsError::ThreadGone { .. }) => {}
            Err(e) => report.notes.push(format!("moving thread {tid} out of {}: {e}", dir.display())),
        }
    }
}

/// Disables the controllers moirai enabled in directories it does not own.
fn disable_controllers(state: &mut State, fs: &dyn CgroupFs, report: &mut RestoreReport) {
    let records = std::mem::take(&mut state.controllers);
    for r in records.into_iter().rev() {
        let file = r.dir.join("cgroup.subtree_control");
        if !fs.is_dir(&r.dir) {
            continue;
        }
        match fs.write(&file, &format!("-{}", r.controller)) {
            Ok(()) => report.controllers_disabled += 1,
            // A child enabled it meanwhile (top-down constraint): someone else relies on it now.
            Err(e) if e.raw_os_error() == Some(libc::EBUSY) => report.notes.push(format!(
                "{} left enabled in {}: other groups now use it",
                r.controller,
                file.display()
            )),
            Err(e) => {
                report.failures.push(format!("disabling {} in {}: {e}", r.controller, file.display()));
                state.controllers.push(r);
            }
        }
    }
}

//! Leaving every thread and cgroup as moirai found it — also after a crash.
//!
//! The middleware changes threads of processes it does not own (a Flink JVM, a moirai engine).
//! A [`RestoreLog`] records the original state *before* the first change of each thing:
//!
//! - a thread's nice value and scheduling class,
//! - a session group's nice value ([`crate::autogroup`]),
//! - a thread's cpu cgroup, and its process's (the process's is what v2 moves, and where threads
//!   born later inside a moirai group go back to),
//! - each cgroup directory moirai created, and each `cgroup.subtree_control` it changed.
//!
//! Threads are identified by `(pid, tid, start_ticks)` — field 22 of
//! `/proc/<pid>/task/<tid>/stat` — so a tid the kernel has reused for a new thread is never
//! "restored". The record is persisted as JSON after every change (temp file, `fsync`,
//! `rename`, `fsync` of the directory), so after `kill -9` the next start finds it intact and
//! [`RestoreLog::restore_from`] undoes whatever still exists. [`RestoreLog::restore`] does the
//! same at a clean exit, and dropping a log restores too (a panic unwinds through it).
//! Restoring is idempotent: what is done is dropped from the record, what failed stays for the
//! next attempt.
//!
//! Typical start of the middleware:
//!
//! ```no_run
//! # fn main() -> Result<(), moirai_os::OsError> {
//! use moirai_os::restore::RestoreLog;
//! let state = "/var/lib/moirai/schedule-node1.json";
//! let leftovers = RestoreLog::restore_from(state)?; // undo a crashed predecessor
//! if !leftovers.is_clean() {
//!     eprintln!("could not undo everything: {leftovers}");
//! }
//! let mut log = RestoreLog::create(state)?;
//! log.set_nice(4242, 4250, -5)?;
//! // ... scheduling rounds ...
//! let report = log.restore();
//! # Ok(()) }
//! ```

mod heirs;
mod state;
mod undo;

pub use undo::RestoreReport;

pub(crate) use state::{identity, Identity, State};
use state::{load, AutogroupRecord, ControllerRecord, NiceRecord, ProcessRecord, SchedRecord, ThreadRecord, FORMAT};

use std::fs;
use std::io::{self, Write};
use std::path::{Path, PathBuf};
use std::sync::Arc;

use crate::autogroup::{autogroup, set_autogroup_nice, Autogroup};
use crate::cgroup::fs::{CgroupFs, KernelFs};
use crate::cgroup::Hierarchy;
use crate::error::OsError;
use crate::nice::{get_nice, set_nice, validate_nice};
use crate::proc::{thread_stat, Tid};
use crate::realtime::{get_sched_class, set_sched_class, SchedClass};
use crate::sighting::SeenThreads;

/// Start time of the calling process, for [`State::writer_start_ticks`].
fn own_start_ticks() -> u64 {
    let pid = std::process::id();
    thread_stat(pid, pid as Tid).map(|s| s.start_ticks).unwrap_or(0)
}

/// The record of every change moirai made to threads and cgroups, persisted so it can be
/// undone. See the [module documentation](self).
#[derive(Debug)]
pub struct RestoreLog {
    path: PathBuf,
    state: State,
    fs: Arc<dyn CgroupFs>,
    dirty: bool,
    /// Restore on drop: true for a log that makes changes, false for the one-shot log of
    /// [`RestoreLog::restore_from`], which has already tried once.
    restore_on_drop: bool,
    /// The start times of the threads it changed, each confirmed by a file kept open: a
    /// round's changes check each thread's identity with one read instead of a `stat` by path.
    seen: SeenThreads,
}

impl RestoreLog {
    /// Starts a new, empty log persisted at `path` (its directory must exist).
    ///
    /// Fails if `path` holds changes that were not restored: call
    /// [`RestoreLog::restore_from`] first (and if parts of it cannot be undone, its report
    /// says which; delete the file to give up on them).
    pub fn create(path: impl Into<PathBuf>) -> Result<RestoreLog, OsError> {
        Self::create_with_fs(path.into(), Arc::new(KernelFs))
    }

    pub(crate) fn create_with_fs(path: PathBuf, fs: Arc<dyn CgroupFs>) -> Result<RestoreLog, OsError> {
        if let Some(old) = load(&path)? {
            if !old.is_empty() {
                return Err(OsError::StateFile {
                    path,
                    detail: format!(
                        "holds changes of moirai process {} that were never restored: call RestoreLog::restore_from on \
                         it first",
                        old.writer_pid
                    ),
                });
            }
        }
        let state = State {
            format: FORMAT,
            writer_pid: std::process::id(),
            writer_start_ticks: own_start_ticks(),
            ..State::default()
        };
        let log = RestoreLog { path, state, fs, dirty: false, restore_on_drop: true, seen: SeenThreads::new() };
        log.persist()?;
        Ok(log)
    }

    /// Undoes everything recorded in the state file at `path` (left by a crashed run) that
    /// still exists, and removes the file, or rewrites it with what could not be undone.
    /// A missing file means there is nothing to do. Refuses while the process that wrote the
    /// file is still running.
    pub fn restore_from(path: impl AsRef<Path>) -> Result<RestoreReport, OsError> {
        Self::restore_from_with_fs(path.as_ref(), Arc::new(KernelFs))
    }

    pub(crate) fn restore_from_with_fs(path: &Path, fs: Arc<dyn CgroupFs>) -> Result<RestoreReport, OsError> {
        let Some(state) = load(path)? else { return Ok(RestoreReport::default()) };
        let writer = state.writer_pid;
        // A writer that exited but was not reaped yet (a zombie, e.g. right after kill -9) holds
        // nothing any more: it is gone.
        if writer != std::process::id()
            && writer != 0
            && identity(writer, writer as Tid, state.writer_start_ticks) == Identity::Same
            && crate::identity::is_running(writer)
        {
            return Err(OsError::StateFile {
                path: path.to_path_buf(),
                detail: format!(
                    "belongs to moirai process {writer}, which is still running: stop it (it restores on exit) \
                     instead of restoring behind its back"
                ),
            });
        }
        let mut log = RestoreLog {
            path: path.to_path_buf(),
            state,
            fs,
            dirty: false,
            restore_on_drop: false,
            seen: SeenThreads::new(),
        };
        Ok(log.restore())
    }

    /// The state file.
    pub fn path(&self) -> &Path {
        &self.path
    }

    /// True if nothing is recorded (nothing to restore).
    pub fn is_empty(&self) -> bool {
        self.state.is_empty()
    }

    /// The nice value thread `tid` of `pid` had before moirai first changed it.
    pub fn original_nice(&self, pid: u32, tid: Tid) -> Option<i32> {
        self.state.nice.iter().find(|r| r.pid == pid && r.tid == tid).map(|r| r.nice)
    }

    /// Sets the nice value of thread `tid` of process `pid`, recording (and persisting) its
    /// original value first if this is the first change. [`OsError::ThreadGone`] if the thread
    /// ended or is not a thread of `pid`.
    pub fn set_nice(&mut self, pid: u32, tid: Tid, nice: i32) -> Result<(), OsError> {
        self.record_nice(pid, tid, nice)?;
        self.commit()?;
        set_nice(tid, nice)
    }

    /// [`RestoreLog::set_nice`] for many threads, persisting the record once: the first round
    /// of a schedule touches every thread, and one `fsync` per thread would add up.
    pub fn set_nices(&mut self, changes: &[(u32, Tid, i32)]) -> Vec<Result<(), OsError>> {
        let recorded: Vec<Result<(), OsError>> =
            changes.iter().map(|&(pid, tid, nice)| self.record_nice(pid, tid, nice)).collect();
        if let Err(e) = self.commit() {
            // Nothing may change unless its original is safely on disk.
            let msg = e.to_string();
            return changes
                .iter()
                .map(|_| Err(OsError::StateFile { path: self.path.clone(), detail: msg.clone() }))
                .collect();
        }
        changes
            .iter()
            .zip(recorded)
            .map(|(&(_, tid, nice), recorded)| recorded.and_then(|()| set_nice(tid, nice)))
            .collect()
    }

    fn record_nice(&mut self, pid: u32, tid: Tid, nice: i32) -> Result<(), OsError> {
        validate_nice(nice as i64)?;
        let start_ticks = self.seen.start_ticks(pid, tid).map_err(|_| OsError::ThreadGone { tid })?;
        let main_start = self.seen.start_ticks(pid, pid as Tid).ok();
        if let Some(i) = self.state.nice.iter().position(|r| r.pid == pid && r.tid == tid) {
            if self.state.nice[i].start_ticks == start_ticks {
                self.dirty |= self.state.note_nice_set(pid, main_start, nice)?;
                return Ok(());
            }
            // The recorded thread ended and the tid was reused: the old record is moot.
            self.state.nice.remove(i);
        }
        // A thread born of one moirai reniced starts at moirai's value: its original is its
        // process's (see `heirs`). Judged before `nice` joins the values set there: a thread
        // already at a value moirai is only about to set did not inherit it.
        let original = self.state.original_nice_of(pid, start_ticks, get_nice(tid)?);
        self.state.note_nice_set(pid, main_start, nice)?;
        self.state.nice.push(NiceRecord { pid, tid, start_ticks, nice: original });
        self.dirty = true;
        Ok(())
    }

    /// Whether process `pid` has threads moirai reniced, so that threads born there since may
    /// carry a value of moirai's ([`RestoreLog::reset_heirs`] has work to do).
    pub fn follows_heirs(&self, pid: u32) -> bool {
        self.state.heirs.iter().any(|r| r.pid == pid)
    }

    /// Hands the heirs among threads `tids` of process `pid` (new threads a caller saw appear)
    /// that moirai never changed their process's value at once, rather than at restore: threads
    /// born of a thread moirai reniced, which started at moirai's value (see `heirs`). Nothing
    /// is recorded (their original is their process's value, which they now have). Returns how
    /// many were set, and one line per failure.
    pub fn reset_heirs(&mut self, pid: u32, tids: &[Tid]) -> (usize, Vec<String>) {
        heirs::reset_heirs(&self.state, pid, tids)
    }

    /// Sets the scheduling class of thread `tid` of process `pid` (the real-time translator;
    /// see [`crate::realtime`] for the safety net), recording its original class first.
    pub fn set_sched_class(&mut self, pid: u32, tid: Tid, class: SchedClass) -> Result<(), OsError> {
        let stat = thread_stat(pid, tid).map_err(|_| OsError::ThreadGone { tid })?;
        match self.state.sched.iter().position(|r| r.pid == pid && r.tid == tid) {
            Some(i) if self.state.sched[i].start_ticks == stat.start_ticks => {}
            found => {
                if let Some(i) = found {
                    self.state.sched.remove(i);
                }
                let original = get_sched_class(tid)?;
                self.state.sched.push(SchedRecord { pid, tid, start_ticks: stat.start_ticks, class: original });
                self.dirty = true;
            }
        }
        self.commit()?;
        set_sched_class(tid, class)
    }

    /// The scheduling class thread `tid` of `pid` had before moirai first changed it.
    pub fn original_class(&self, pid: u32, tid: Tid) -> Option<SchedClass> {
        self.state.sched.iter().find(|r| r.pid == pid && r.tid == tid).map(|r| r.class)
    }

    /// Sets the nice value of the session group of process `pid` — which weighs the whole session
    /// against other sessions ([`crate::autogroup`]) — recording the group's original value first
    /// if moirai has not changed this group before. Returns the group as it was before this
    /// call. [`OsError::ThreadGone`] if the process ended.
    pub fn set_autogroup_nice(&mut self, pid: u32, nice: i32) -> Result<Autogroup, OsError> {
        crate::nice::validate_nice(nice as i64)?;
        let stat = thread_stat(pid, pid as Tid).map_err(|_| OsError::ThreadGone { tid: pid as Tid })?;
        let before = autogroup(pid)?;
        if before.is_root() {
            return Err(OsError::RootSessionGroup { pid });
        }
        if !self.state.autogroups.iter().any(|r| r.group == before.id) {
            self.state.autogroups.push(AutogroupRecord {
                pid,
                start_ticks: stat.start_ticks,
                group: before.id,
                nice: before.nice,
            });
            self.dirty = true;
        }
        self.commit()?;
        set_autogroup_nice(pid, nice)?;
        Ok(before)
    }

    /// The nice value session group `group` had before moirai first changed it.
    pub fn original_autogroup_nice(&self, group: u64) -> Option<i32> {
        self.state.autogroups.iter().find(|r| r.group == group).map(|r| r.nice)
    }

    /// Undoes everything recorded, as far as it still exists; see [`RestoreReport`]. What is
    /// undone leaves the record; what failed stays in it (and in the state file) for another
    /// attempt. The state file is removed once nothing is left.
    pub fn restore(&mut self) -> RestoreReport {
        self.seen.clear();
        let mut report = undo::undo(&mut self.state, &*self.fs);
        self.dirty = true;
        let result = if self.state.is_empty() {
            match fs::remove_file(&self.path) {
                Ok(()) => Ok(()),
                Err(e) if e.kind() == io::ErrorKind::NotFound => Ok(()),
                Err(e) => Err(OsError::io(format!("removing {}", self.path.display()), e)),
            }
        } else {
            self.persist()
        };
        self.dirty = false;
        if let Err(e) = result {
            report.failures.push(e.to_string());
        }
        report
    }

    /// Hands the threads of process `pid` back what they had before moirai changed them —
    /// their scheduling classes, nice values and cpu cgroups — and drops those records, leaving
    /// everything else recorded (the groups moirai created stay for the next change). For a
    /// middleware that lets go of one SPE while it keeps scheduling others. What fails stays
    /// recorded, for the next attempt or the final restore.
    pub fn restore_process(&mut self, pid: u32) -> RestoreReport {
        self.seen.forget_process(pid);
        let mut part =
            State { cgroup: self.state.cgroup.clone(), instance: self.state.instance.clone(), ..State::default() };
        let mine = |r: &u32| *r == pid;
        (part.nice, self.state.nice) = self.state.nice.drain(..).partition(|r| mine(&r.pid));
        (part.sched, self.state.sched) = self.state.sched.drain(..).partition(|r| mine(&r.pid));
        (part.threads, self.state.threads) = self.state.threads.drain(..).partition(|r| mine(&r.pid));
        (part.heirs, self.state.heirs) = self.state.heirs.drain(..).partition(|r| mine(&r.pid));
        // Process records are the homes of the process's threads; they stay recorded.
        part.processes = self.state.processes.iter().filter(|r| mine(&r.pid)).cloned().collect();
        let mut report = undo::undo_threads_of(&mut part, &*self.fs);
        self.state.nice.append(&mut part.nice);
        self.state.sched.append(&mut part.sched);
        self.state.threads.append(&mut part.threads);
        self.state.heirs.append(&mut part.heirs);
        self.dirty = true;
        if let Err(e) = self.commit() {
            report.failures.push(e.to_string());
        }
        report
    }

    // ---- recording, for the cgroup tree ----

    /// The filesystem cgroup changes go through.
    pub(crate) fn fs(&self) -> Arc<dyn CgroupFs> {
        Arc::clone(&self.fs)
    }

    /// Ties the log to one hierarchy and instance directory; a log serves one cgroup tree.
    pub(crate) fn bind_cgroups(&mut self, h: &Hierarchy, instance: &Path) -> Result<(), OsError> {
        match (&self.state.cgroup, &self.state.instance) {
            (None, _) => {
                self.state.cgroup = Some(h.clone());
                self.state.instance = Some(instance.to_path_buf());
                self.dirty = true;
                self.commit()
            }
            (Some(old), Some(dir)) if old == h && dir == instance => Ok(()),
            _ => Err(OsError::StateFile {
                path: self.path.clone(),
                detail: format!(
                    "already records the cgroup tree {:?}; one RestoreLog serves one CgroupTree",
                    self.state.instance
                ),
            }),
        }
    }

    /// Records (and persists) that moirai is about to create `dir`.
    pub(crate) fn record_group_created(&mut self, dir: &Path) -> Result<(), OsError> {
        if !self.created_group(dir) {
            self.state.groups.push(dir.to_path_buf());
            self.dirty = true;
        }
        self.commit()
    }

    /// Drops `dir` from the created groups (it was removed, or never made).
    pub(crate) fn forget_group(&mut self, dir: &Path) -> Result<(), OsError> {
        self.state.groups.retain(|g| g != dir);
        self.dirty = true;
        self.commit()
    }

    /// True if moirai created `dir`.
    pub(crate) fn created_group(&self, dir: &Path) -> bool {
        self.state.groups.iter().any(|g| g == dir)
    }

    /// Records (and persists) that moirai is about to enable `controller` in `dir`.
    pub(crate) fn record_controller_enabled(&mut self, dir: &Path, controller: &str) -> Result<(), OsError> {
        self.state.controllers.push(ControllerRecord { dir: dir.to_path_buf(), controller: controller.into() });
        self.dirty = true;
        self.commit()
    }

    /// Records thread `tid`'s cgroup before its first move (unless already recorded for the
    /// same thread). Persisted by [`RestoreLog::commit`].
    pub(crate) fn record_thread_cgroup(
        &mut self,
        pid: u32,
        tid: Tid,
        start_ticks: u64,
        original: Option<PathBuf>,
    ) -> Result<(), OsError> {
        if let Some(i) = self.state.threads.iter().position(|r| r.pid == pid && r.tid == tid) {
            if self.state.threads[i].start_ticks == start_ticks {
                return Ok(());
            }
            self.state.threads.remove(i);
        }
        self.state.threads.push(ThreadRecord { pid, tid, start_ticks, original });
        self.dirty = true;
        Ok(())
    }

    /// True if thread `tid` of `pid`, started at `start_ticks`, has a cgroup record.
    pub(crate) fn has_thread_cgroup(&self, pid: u32, tid: Tid, start_ticks: u64) -> bool {
        self.state.threads.iter().any(|r| r.pid == pid && r.tid == tid && r.start_ticks == start_ticks)
    }

    /// True if process `pid` (the same process, by start time) has a cgroup record.
    pub(crate) fn has_process_cgroup(&mut self, pid: u32) -> bool {
        let Some(i) = self.state.processes.iter().position(|r| r.pid == pid) else { return false };
        if identity(pid, pid as Tid, self.state.processes[i].start_ticks) == Identity::Same {
            return true;
        }
        self.state.processes.remove(i);
        self.dirty = true;
        false
    }

    /// Records process `pid`'s cgroup before the first move of one of its threads.
    /// Persisted by [`RestoreLog::commit`].
    pub(crate) fn record_process_cgroup(
        &mut self,
        pid: u32,
        start_ticks: u64,
        original: Option<PathBuf>,
    ) -> Result<(), OsError> {
        self.state.processes.retain(|r| r.pid != pid);
        self.state.processes.push(ProcessRecord { pid, start_ticks, original });
        self.dirty = true;
        Ok(())
    }

    /// Where thread `tid` belongs when it leaves moirai's groups (v1).
    pub(crate) fn home_of_thread(&self, tid: Tid) -> PathBuf {
        self.state.home_of_thread(&*self.fs, tid)
    }

    /// Persists the record if it changed since the last commit.
    pub(crate) fn commit(&mut self) -> Result<(), OsError> {
        if self.dirty {
            self.persist()?;
            self.dirty = false;
        }
        Ok(())
    }

    /// Writes the state atomically: temp file, fsync, rename over the old file, fsync the
    /// directory (so the rename itself survives a power loss).
    fn persist(&self) -> Result<(), OsError> {
        let err = |what: &str, e: io::Error| OsError::StateFile {
            path: self.path.clone(),
            detail: format!("{what}: {e} (the state file's directory must exist and be writable)"),
        };
        let json = serde_json::to_vec_pretty(&self.state).map_err(|e| err("serializing", e.into()))?;
        let mut tmp_name = self.path.file_name().unwrap_or_default().to_os_string();
        tmp_name.push(".tmp");
        let tmp = self.path.with_file_name(tmp_name);
        let mut f = fs::File::create(&tmp).map_err(|e| err("creating the temporary file", e))?;
        f.write_all(&json).map_err(|e| err("writing", e))?;
        f.sync_all().map_err(|e| err("fsync", e))?;
        drop(f);
        fs::rename(&tmp, &self.path).map_err(|e| err("renaming the temporary file", e))?;
        let dir = match self.path.parent() {
            Some(p) if !p.as_os_str().is_empty() => p,
            _ => Path::new("."),
        };
        fs::File::open(dir).and_then(|d| d.sync_all()).map_err(|e| err("fsync of the directory", e))?;
        Ok(())
    }
}

impl Drop for RestoreLog {
    /// Restores what is still recorded, so that an early return or a panic in the middleware
    /// does not leave threads reniced. A crash (`kill -9`) skips this; the state file covers it.
    fn drop(&mut self) {
        if !self.restore_on_drop {
            return;
        }
        if self.state.is_empty() {
            // Nothing to undo: do not leave an empty state file behind.
            let _ = fs::remove_file(&self.path);
            return;
        }
        let report = self.restore();
        if !report.is_clean() {
            eprintln!("moirai: restoring on drop left changes in {}: {report}", self.path.display());
        }
    }
}

#[cfg(test)]
mod tests;

//! The cgroups one middleware instance owns: `<cpu mount>/moirai/<instance>/<group>`.
//!
//! A [`CgroupTree`] is what the cgroup translator of a grouping schedule (Lachesis §5.3:
//! `group → (priority, threads)`) drives: one child group per schedule group, its priority
//! translated to a weight, its threads moved in. Every change is recorded in a
//! [`RestoreLog`] *before* it is made, so the tree can be taken down again — by
//! [`RestoreLog::restore`] at exit, or by [`RestoreLog::restore_from`] after a crash.
//!
//! **v1** (`cpu` controller on a legacy hierarchy): groups are plain directories; a thread moves
//! by writing its tid to the group's `tasks` (cgroup-v1/cgroups.rst); threads of one process
//! may sit in any groups.
//!
//! **v2** (unified hierarchy): all threads of a process share one cgroup unless it lives in a
//! *threaded subtree* (cgroup-v2.rst, "Threads"). The instance directory is made the threaded
//! domain: the scheduled *processes* are moved into it (`cgroup.procs`, recorded so it can be
//! undone), each group is a child marked `threaded` in `cgroup.type` while still empty, the cpu
//! controller is enabled top-down in `cgroup.subtree_control` (hierarchy root → `moirai` →
//! instance) so the groups get a `cpu.weight`, and single threads move by writing their tid to
//! the group's `cgroup.threads`. Threads left in the instance directory compete with the groups
//! by their nice value. Moving a process into the instance also moves its *domain* resource
//! accounting (memory, io) out of its original cgroup until it is restored; that is the price of
//! per-thread cpu groups on v2.
//!
//! ```no_run
//! # fn main() -> Result<(), moirai_os::OsError> {
//! use moirai_os::{CgroupLayout, CgroupTree, RestoreLog};
//! let layout = CgroupLayout::detect()?;
//! let mut log = RestoreLog::create("/var/lib/moirai/node1.json")?;
//! let mut tree = CgroupTree::create(&mut log, layout.cpu(), "node1")?;
//! tree.ensure_group(&mut log, "query-a")?;
//! let (min, max) = layout.cpu().weight_range(); // translate priorities into this range
//! tree.set_weight("query-a", max.min(4096).max(min))?;
//! let (pid, tid) = (4242, 4250);
//! tree.move_thread(&mut log, pid, tid, "query-a")?;
//! // ... later rounds: set_weight, move_thread(s), release_thread, remove_group ...
//! let report = log.restore(); // threads and processes home, groups removed; the tree is done
//! # Ok(()) }
//! ```

use std::collections::BTreeMap;
use std::io;
use std::path::{Path, PathBuf};
use std::sync::Arc;

use crate::cgroup::fs::{cgroup_error, read_ids, write_id, CgroupFs};
use crate::cgroup::layout::{CgroupVersion, Hierarchy};
use crate::cgroup::membership::{process_cgroup, thread_cgroup};
use crate::error::OsError;
use crate::proc::{thread_stat, Tid};
use crate::restore::RestoreLog;

/// The directory under the hierarchy root that holds all moirai instances.
pub const DEFAULT_BASE: &str = "moirai";

/// v1 control files a group name must not shadow (v2 files all contain a dot, which names
/// may not).
const RESERVED: [&str; 3] = ["tasks", "notify_on_release", "release_agent"];

/// Checks that `name` can be one cgroup directory: 1–64 characters of `[A-Za-z0-9_-]`, not a
/// v1 control file name. Dots are refused because every v2 control file contains one.
pub fn validate_group_name(name: &str) -> Result<(), OsError> {
    let bad = |reason| Err(OsError::InvalidGroupName { name: name.to_string(), reason });
    if name.is_empty() || name.len() > 64 {
        return bad("must be 1 to 64 characters long");
    }
    if !name.bytes().all(|b| b.is_ascii_alphanumeric() || b == b'_' || b == b'-') {
        return bad("may only contain ASCII letters, digits, '_' and '-'");
    }
    if RESERVED.contains(&name) {
        return bad("is the name of a cgroup v1 control file");
    }
    Ok(())
}

/// Turns any string (a Flink task name, a query name) into a valid group name: invalid
/// characters become `_`, long names are cut, reserved names get a `g_` prefix.
pub fn sanitize_group_name(raw: &str) -> String {
    let mut name: String =
        raw.chars().map(|c| if c.is_ascii_alphanumeric() || c == '-' { c } else { '_' }).take(62).collect();
    if name.is_empty() || RESERVED.contains(&name.as_str()) {
        name = format!("g_{name}");
    }
    name
}

/// The groups of one middleware instance in the cpu hierarchy.
#[derive(Debug)]
pub struct CgroupTree {
    fs: Arc<dyn CgroupFs>,
    hierarchy: Hierarchy,
    instance: PathBuf,
    groups: BTreeMap<String, PathBuf>,
}

impl CgroupTree {
    /// Creates `<mount>/moirai/<instance>` ([`DEFAULT_BASE`]) in `hierarchy` (usually
    /// [`crate::cgroup::CgroupLayout::cpu`]), recording it in `log`.
    ///
    /// Fails if the instance directory already exists: another instance of that name is
    /// running, or a crashed one was not restored.
    pub fn create(log: &mut RestoreLog, hierarchy: &Hierarchy, instance: &str) -> Result<CgroupTree, OsError> {
        Self::create_under(log, hierarchy, DEFAULT_BASE, instance)
    }

    /// Like [`CgroupTree::create`] with another base directory name than `moirai`.
    pub fn create_under(
        log: &mut RestoreLog,
        hierarchy: &Hierarchy,
        base: &str,
        instance: &str,
    ) -> Result<CgroupTree, OsError> {
        validate_group_name(base)?;
        validate_group_name(instance)?;
        let base_dir = hierarchy.mount.join(base);
        let instance_dir = base_dir.join(instance);
        if hierarchy.read_only {
            return Err(cgroup_error("create", &base_dir, io::Error::from_raw_os_error(libc::EROFS)));
        }
        let fs = log.fs();
        if fs.is_dir(&instance_dir) {
            return Err(OsError::Cgroup {
                action: "create".into(),
                path: instance_dir,
                source: io::Error::from_raw_os_error(libc::EEXIST),
                hint: format!(
                    "another moirai instance named {instance:?} is running, or a crashed one was not restored: restore \
                     its state file (RestoreLog::restore_from), or pick another instance name"
                ),
            });
        }
        if hierarchy.version == CgroupVersion::V2 {
            let file = hierarchy.mount.join("cgroup.controllers");
            let list = fs.read(&file).map_err(|e| cgroup_error("read", &file, e))?;
            if !list.split_whitespace().any(|c| c == "cpu") {
                return Err(OsError::NoCpuController {
                    detail: format!("{} lists {:?}, without cpu", file.display(), list.trim()),
                });
            }
        }
        log.bind_cgroups(hierarchy, &instance_dir)?;
        let v2 = hierarchy.version == CgroupVersion::V2;
        if v2 {
            // Top-down constraint: a group gets cpu.* files only if its parent enabled cpu.
            enable_cpu(log, &hierarchy.mount)?;
        }
        make_dir(log, &base_dir)?;
        if v2 {
            enable_cpu(log, &base_dir)?;
        }
        if !make_dir(log, &instance_dir)? {
            return Err(cgroup_error("create", &instance_dir, io::Error::from_raw_os_error(libc::EEXIST)));
        }
        if v2 {
            // Only the threaded cpu controller is enabled here, so the instance can still take
            // processes and become the threaded domain of its groups.
            enable_cpu(log, &instance_dir)?;
        }
        Ok(CgroupTree { fs, hierarchy: hierarchy.clone(), instance: instance_dir, groups: BTreeMap::new() })
    }

    /// The hierarchy the tree lives in.
    pub fn hierarchy(&self) -> &Hierarchy {
        &self.hierarchy
    }

    /// The instance directory, parent of all groups.
    pub fn instance_dir(&self) -> &Path {
        &self.instance
    }

    /// The directory of `group`, if created.
    pub fn group_dir(&self, group: &str) -> Option<&Path> {
        self.groups.get(group).map(PathBuf::as_path)
    }

    /// The names of the groups created so far, sorted.
    pub fn groups(&self) -> impl Iterator<Item = &str> {
        self.groups.keys().map(String::as_str)
    }

    fn dir(&self, group: &str) -> Result<&Path, OsError> {
        self.group_dir(group).ok_or_else(|| OsError::UnknownGroup { name: group.to_string() })
    }

    /// Creates child group `group` if it does not exist yet, and returns its directory. On v2
    /// it is made `threaded` right away, while it is still empty.
    pub fn ensure_group(&mut self, log: &mut RestoreLog, group: &str) -> Result<PathBuf, OsError> {
        validate_group_name(group)?;
        if let Some(dir) = self.groups.get(group) {
            return Ok(dir.clone());
        }
        let dir = self.instance.join(group);
        make_dir(log, &dir)?;
        if self.hierarchy.version == CgroupVersion::V2 {
            let file = dir.join("cgroup.type");
            let fs = &self.fs;
            let current = fs.read(&file).map_err(|e| cgroup_error("read", &file, e))?;
            if current.trim() != "threaded" {
                if let Err(e) = fs.write(&file, "threaded") {
                    let err = cgroup_error("write threaded to", &file, e);
                    // Leave no half-made group behind.
                    if fs.rmdir(&dir).is_ok() {
                        log.forget_group(&dir)?;
                    }
                    return Err(err);
                }
            }
        }
        self.groups.insert(group.to_string(), dir.clone());
        Ok(dir)
    }

    /// Sets the cpu weight of `group` in the hierarchy's native unit: `cpu.shares` in
    /// [2, 262144] on v1, `cpu.weight` in [1, 10000] on v2 (see
    /// [`Hierarchy::weight_range`], [`crate::cgroup::shares_to_weight`]).
    pub fn set_weight(&self, group: &str, weight: u64) -> Result<(), OsError> {
        self.write_weight(self.dir(group)?, weight)
    }

    /// Sets the cpu weight of the instance directory itself, i.e. of all moirai groups of this
    /// instance together against the rest of the machine (Lachesis gave its root group 40000
    /// shares).
    pub fn set_instance_weight(&self, weight: u64) -> Result<(), OsError> {
        self.write_weight(&self.instance, weight)
    }

    fn write_weight(&self, dir: &Path, weight: u64) -> Result<(), OsError> {
        let weight = self.hierarchy.validate_weight(weight)?;
        let file = dir.join(self.hierarchy.weight_file());
        self.fs.write(&file, &weight.to_string()).map_err(|e| cgroup_error(format!("write {weight} to"), &file, e))
    }

    /// The current cpu weight of `group`.
    pub fn weight(&self, group: &str) -> Result<u64, OsError> {
        let file = self.dir(group)?.join(self.hierarchy.weight_file());
        let text = self.fs.read(&file).map_err(|e| cgroup_error("read", &file, e))?;
        text.trim().parse().map_err(|_| cgroup_error("parse", &file, io::Error::other(format!("{text:?}"))))
    }

    /// The thread ids in `group` (`tasks` / `cgroup.threads`).
    pub fn threads_in(&self, group: &str) -> Result<Vec<Tid>, OsError> {
        read_ids(&*self.fs, &self.dir(group)?.join(self.hierarchy.threads_file()))
    }

    /// The group thread `tid` of process `pid` is in, if it is in one of this tree's groups.
    pub fn group_of(&self, pid: u32, tid: Tid) -> Result<Option<String>, OsError> {
        let dir = thread_cgroup(pid, tid, &self.hierarchy)?;
        Ok(self.groups.iter().find(|(_, d)| **d == dir).map(|(name, _)| name.clone()))
    }

    /// Moves thread `tid` of process `pid` into `group`, recording where it (and, the first
    /// time, its process) was before. On v2 the whole process first moves into the instance
    /// directory (the threaded domain). [`OsError::ThreadGone`] if the thread ended.
    pub fn move_thread(&mut self, log: &mut RestoreLog, pid: u32, tid: Tid, group: &str) -> Result<(), OsError> {
        let dir = self.record_move(log, pid, tid, group)?;
        log.commit()?;
        self.apply_move(pid, tid, &dir)
    }

    /// [`CgroupTree::move_thread`] for many `(pid, tid, group)` moves, persisting the record
    /// once: the first round of a grouping schedule moves every thread, and one `fsync` per
    /// thread would add up. One result per move, in order.
    pub fn move_threads(&mut self, log: &mut RestoreLog, moves: &[(u32, Tid, &str)]) -> Vec<Result<(), OsError>> {
        let recorded: Vec<Result<PathBuf, OsError>> =
            moves.iter().map(|&(pid, tid, group)| self.record_move(log, pid, tid, group)).collect();
        if let Err(e) = log.commit() {
            // Nothing may move unless its original is safely on disk.
            let msg = e.to_string();
            return moves
                .iter()
                .map(|_| Err(OsError::StateFile { path: log.path().to_path_buf(), detail: msg.clone() }))
                .collect();
        }
        moves
            .iter()
            .zip(recorded)
            .map(|(&(pid, tid, _), dir)| dir.and_then(|dir| self.apply_move(pid, tid, &dir)))
            .collect()
    }

    /// Records the thread's (and its process's) current cgroup unless already recorded; the
    /// caller commits. Returns the group's directory.
    fn record_move(&self, log: &mut RestoreLog, pid: u32, tid: Tid, group: &str) -> Result<PathBuf, OsError> {
        let dir = self.dir(group)?.to_path_buf();
        let h = &self.hierarchy;
        let stat = thread_stat(pid, tid).map_err(|_| OsError::ThreadGone { tid })?;
        if !log.has_thread_cgroup(pid, tid, stat.start_ticks) {
            let before = thread_cgroup(pid, tid, h)?;
            // A thread born inside our tree (created by a thread we moved) has no home of its
            // own: it goes back with its process.
            log.record_thread_cgroup(pid, tid, stat.start_ticks, self.outside(before))?;
        }
        if !log.has_process_cgroup(pid) {
            let leader = thread_stat(pid, pid as Tid).map_err(|_| OsError::ThreadGone { tid })?;
            let home = process_cgroup(pid, h)?;
            log.record_process_cgroup(pid, leader.start_ticks, self.outside(home))?;
        }
        Ok(dir)
    }

    fn apply_move(&self, pid: u32, tid: Tid, dir: &Path) -> Result<(), OsError> {
        let fs = &*self.fs;
        let h = &self.hierarchy;
        // "cgroup.procs" of a threaded domain lists every process with threads in its subtree.
        let procs = self.instance.join("cgroup.procs");
        if h.version == CgroupVersion::V2 && !read_ids(fs, &procs)?.contains(&(pid as Tid)) {
            write_id(fs, &procs, pid as Tid).map_err(|e| match e {
                OsError::ThreadGone { .. } => OsError::ThreadGone { tid },
                e => e,
            })?;
        }
        write_id(fs, &dir.join(h.threads_file()), tid)
    }

    /// Takes thread `tid` out of its group: back to its original cgroup on v1, into the
    /// instance directory on v2 (a thread cannot leave its process's threaded domain alone;
    /// the process goes home at restore).
    pub fn release_thread(&mut self, log: &mut RestoreLog, pid: u32, tid: Tid) -> Result<(), OsError> {
        thread_stat(pid, tid).map_err(|_| OsError::ThreadGone { tid })?;
        let target = self.release_target(log, tid);
        write_id(&*self.fs, &target.join(self.hierarchy.threads_file()), tid)
    }

    fn release_target(&self, log: &RestoreLog, tid: Tid) -> PathBuf {
        match self.hierarchy.version {
            CgroupVersion::V1 => log.home_of_thread(tid),
            CgroupVersion::V2 => self.instance.clone(),
        }
    }

    /// Removes `group`: its threads are released first ([`CgroupTree::release_thread`]), then
    /// the empty directory is removed.
    pub fn remove_group(&mut self, log: &mut RestoreLog, group: &str) -> Result<(), OsError> {
        let dir = self.dir(group)?.to_path_buf();
        let fs = Arc::clone(&self.fs);
        let file = dir.join(self.hierarchy.threads_file());
        // Threads may be created in the group while it is drained (they inherit the group of
        // their creator), so drain and retry a few times before giving up.
        let mut last = None;
        for _ in 0..5 {
            for tid in read_ids(&*fs, &file)? {
                match write_id(&*fs, &self.release_target(log, tid).join(self.hierarchy.threads_file()), tid) {
                    Ok(()) | Err(OsError::ThreadGone { .. }) => {}
                    Err(e) => return Err(e),
                }
            }
            match fs.rmdir(&dir) {
                Ok(()) => {
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
            return Err(cgroup_error("remove", &dir, e));
        }
        log.forget_group(&dir)?;
        self.groups.remove(group);
        Ok(())
    }

    /// `dir` unless it lies inside this instance.
    fn outside(&self, dir: PathBuf) -> Option<PathBuf> {
        (!dir.starts_with(&self.instance)).then_some(dir)
    }
}

/// Creates `dir` if missing, recording it first; true if this call created it.
fn make_dir(log: &mut RestoreLog, dir: &Path) -> Result<bool, OsError> {
    let fs = log.fs();
    if fs.is_dir(dir) {
        return Ok(false);
    }
    // Record first: a crash right after mkdir must still find the group in the state file.
    log.record_group_created(dir)?;
    match fs.mkdir(dir) {
        Ok(()) => Ok(true),
        Err(e) => {
            log.forget_group(dir)?;
            if e.kind() == io::ErrorKind::AlreadyExists {
                Ok(false)
            } else {
                Err(cgroup_error("create", dir, e))
            }
        }
    }
}

/// Enables the cpu controller in `dir/cgroup.subtree_control` if it is not yet, recording the
/// change when `dir` is not one of ours (ours are removed at restore anyway).
fn enable_cpu(log: &mut RestoreLog, dir: &Path) -> Result<(), OsError> {
    let fs = log.fs();
    let file = dir.join("cgroup.subtree_control");
    let enabled = fs.read(&file).map_err(|e| cgroup_error("read", &file, e))?;
    if enabled.split_whitespace().any(|c| c == "cpu") {
        return Ok(());
    }
    if !log.created_group(dir) {
        log.record_controller_enabled(dir, "cpu")?;
    }
    fs.write(&file, "+cpu").map_err(|e| cgroup_error("write +cpu to", &file, e))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn group_names_are_checked_and_sanitized() {
        assert!(validate_group_name("query-1_a").is_ok());
        for bad in ["", "a.b", "a/b", "..", "tasks", "with space", &"x".repeat(65)] {
            assert!(validate_group_name(bad).is_err(), "{bad:?} must be refused");
        }
        assert_eq!(sanitize_group_name("Source: foo (1/2)"), "Source__foo__1_2_");
        assert_eq!(sanitize_group_name("tasks"), "g_tasks");
        assert_eq!(sanitize_group_name(""), "g_");
        for raw in ["Source: foo (1/2)", "tasks", "", "é", &"y".repeat(300), "cgroup.procs"] {
            let name = sanitize_group_name(raw);
            assert!(validate_group_name(&name).is_ok(), "{raw:?} -> {name:?}");
        }
    }
}

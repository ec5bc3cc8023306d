//! Real-time runtime of cpu cgroups (v1, `CONFIG_RT_GROUP_SCHED`): `cpu.rt_runtime_us`.
//!
//! With real-time group scheduling compiled in, every v1 cpu group has a real-time budget per
//! period (`cpu.rt_runtime_us` of `cpu.rt_period_us`, both per CPU). A new group's budget is 0,
//! so a thread in it cannot be made `SCHED_RR`/`SCHED_FIFO` (`sched_setscheduler` fails with
//! `EPERM`) and a real-time thread cannot be moved into it (`EINVAL`)
//! (`Documentation/scheduler/sched-rt-group.rst`). The budgets of a group's children may not sum
//! to more than its own; the root's is the global `sched_rt_runtime_us`.
//!
//! So when the middleware's cgroup translator and its real-time translator work together, the
//! groups moirai creates need a budget: [`share_rt_runtime`] gives the instance directory what
//! its parent has free, and each group an equal share of it. Only directories moirai created
//! are written, and those are removed at restore, so nothing here needs a record of its own.
//! On v2, and on kernels without `CONFIG_RT_GROUP_SCHED` (most distributions), there is no such
//! file and nothing to do: real-time threads run in any group there.

use std::io;
use std::path::{Path, PathBuf};

use crate::cgroup::fs::{cgroup_error, CgroupFs};
use crate::cgroup::layout::CgroupVersion;
use crate::cgroup::tree::CgroupTree;
use crate::error::OsError;
use crate::restore::RestoreLog;

/// The real-time budget file of a v1 cpu group.
pub const RT_RUNTIME_FILE: &str = "cpu.rt_runtime_us";

/// The real-time budget of the v1 cpu group `dir` (µs per period, per CPU; -1 = unlimited, as
/// the root may be), or `None` when the group has no such file (v2, or a kernel without
/// `CONFIG_RT_GROUP_SCHED`): then real-time threads run in any group.
pub fn rt_runtime_us(dir: &Path) -> Result<Option<i64>, OsError> {
    read_runtime(&crate::cgroup::fs::KernelFs, dir)
}

fn read_runtime(fs: &dyn CgroupFs, dir: &Path) -> Result<Option<i64>, OsError> {
    let file = dir.join(RT_RUNTIME_FILE);
    match fs.read(&file) {
        Ok(text) => text
            .trim()
            .parse()
            .map(Some)
            .map_err(|_| cgroup_error("parse", &file, io::Error::other(format!("{:?}", text.trim())))),
        Err(e) if e.kind() == io::ErrorKind::NotFound => Ok(None),
        Err(e) => Err(cgroup_error("read", &file, e)),
    }
}

fn write_runtime(fs: &dyn CgroupFs, dir: &Path, us: i64) -> Result<(), OsError> {
    let file = dir.join(RT_RUNTIME_FILE);
    fs.write(&file, &us.to_string()).map_err(|e| cgroup_error(format!("write {us} to"), &file, e))
}

/// The budget `dir`'s children may still claim: its own minus what its other children hold.
fn free_in(fs: &dyn CgroupFs, dir: &Path, except: &Path) -> Result<i64, OsError> {
    let own = read_runtime(fs, dir)?.unwrap_or(0);
    if own < 0 {
        // Unlimited (only the root can be, with throttling off): nothing to divide.
        return Ok(0);
    }
    let mut taken = 0;
    let entries = std::fs::read_dir(dir).map_err(|e| cgroup_error("list", dir, e))?;
    for entry in entries.flatten() {
        let child = entry.path();
        if child == except || !fs.is_dir(&child) {
            continue;
        }
        taken += read_runtime(fs, &child)?.unwrap_or(0).max(0);
    }
    Ok((own - taken).max(0))
}

/// What [`share_rt_runtime`] gave.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct RtShare {
    /// The instance directory's budget, µs per period.
    pub instance_us: i64,
    /// Each group's budget, µs per period.
    pub per_group_us: i64,
    /// The groups that got it.
    pub groups: Vec<PathBuf>,
}

/// Gives the groups of `tree` real-time runtime (see the module documentation): the base
/// directory (if this instance created it and it has none yet) what the hierarchy root has
/// free, the instance directory (if it has none yet) what the base has free, and every group an
/// equal share of the instance's. Groups whose budget shrinks are written first, so the
/// children never claim more than their parent. Call it again after new groups were made.
/// `Ok(None)` where there is no such budget (v2, or no `CONFIG_RT_GROUP_SCHED`).
pub fn share_rt_runtime(tree: &CgroupTree, log: &RestoreLog) -> Result<Option<RtShare>, OsError> {
    let fs = log.fs();
    let fs = &*fs;
    let h = tree.hierarchy();
    let instance = tree.instance_dir();
    if h.version != CgroupVersion::V1 || read_runtime(fs, instance)?.is_none() {
        return Ok(None);
    }
    let base = instance.parent().unwrap_or(&h.mount);
    if base != h.mount && log.created_group(base) && read_runtime(fs, base)? == Some(0) {
        let free = free_in(fs, &h.mount, base)?;
        write_runtime(fs, base, free)?;
    }
    if read_runtime(fs, instance)? == Some(0) {
        let free = free_in(fs, base, instance)?;
        write_runtime(fs, instance, free)?;
    }
    let instance_us = read_runtime(fs, instance)?.unwrap_or(0);
    let groups: Vec<PathBuf> = tree.groups().filter_map(|g| tree.group_dir(g)).map(Path::to_path_buf).collect();
    let per_group_us = if groups.is_empty() { 0 } else { instance_us / groups.len() as i64 };
    let mut current = Vec::new();
    for g in &groups {
        current.push(read_runtime(fs, g)?.unwrap_or(0));
    }
    // Shrink first, then grow: the sum never exceeds the instance's budget on the way.
    for (g, now) in groups.iter().zip(&current) {
        if *now > per_group_us {
            write_runtime(fs, g, per_group_us)?;
        }
    }
    for (g, now) in groups.iter().zip(&current) {
        if *now < per_group_us {
            write_runtime(fs, g, per_group_us)?;
        }
    }
    Ok(Some(RtShare { instance_us, per_group_us, groups }))
}

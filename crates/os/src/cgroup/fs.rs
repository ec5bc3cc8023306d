//! The few cgroupfs operations moirai performs, and what their errors mean.
//!
//! All cgroup changes go through the [`CgroupFs`] trait so that the cgroup-v2 code, which this
//! project's hosts cannot always exercise for real (a hybrid host has no cpu controller on
//! v2), can be tested against a directory tree that mimics cgroupfs. [`KernelFs`] is the only
//! implementation outside tests.
//!
//! cgroupfs accepts one id per `write(2)`, and errors come back as errnos whose meaning
//! depends on the file; [`cgroup_error`] turns them into a sentence saying what to do.

use std::fs;
use std::io::{self, Write};
use std::path::Path;

use crate::error::OsError;
use crate::proc::Tid;

/// Directory and file operations on a cgroup filesystem.
pub(crate) trait CgroupFs: Send + Sync + std::fmt::Debug {
    /// Creates one group directory (not its parents).
    fn mkdir(&self, dir: &Path) -> io::Result<()>;
    /// Removes an empty group directory.
    fn rmdir(&self, dir: &Path) -> io::Result<()>;
    /// Reads a control file.
    fn read(&self, file: &Path) -> io::Result<String>;
    /// Writes `value` to an existing control file in one `write(2)`.
    fn write(&self, file: &Path, value: &str) -> io::Result<()>;
    /// True if `dir` is an existing directory.
    fn is_dir(&self, dir: &Path) -> bool;
}

/// The real cgroupfs, through the kernel.
#[derive(Debug, Default)]
pub(crate) struct KernelFs;

impl CgroupFs for KernelFs {
    fn mkdir(&self, dir: &Path) -> io::Result<()> {
        fs::create_dir(dir)
    }

    fn rmdir(&self, dir: &Path) -> io::Result<()> {
        // remove_dir is rmdir(2): on cgroupfs it removes a group with no tasks and no children,
        // control files and all; it never recurses.
        fs::remove_dir(dir)
    }

    fn read(&self, file: &Path) -> io::Result<String> {
        fs::read_to_string(file)
    }

    fn write(&self, file: &Path, value: &str) -> io::Result<()> {
        // No O_CREAT: a missing control file must fail with ENOENT (e.g. cpu.weight when the
        // cpu controller is not enabled) rather than with a misleading EACCES from kernfs.
        let mut f = fs::OpenOptions::new().write(true).open(file)?;
        let n = f.write(value.as_bytes())?;
        if n != value.len() {
            return Err(io::Error::new(io::ErrorKind::WriteZero, format!("short write of {value:?}")));
        }
        Ok(())
    }

    fn is_dir(&self, dir: &Path) -> bool {
        dir.is_dir()
    }
}

/// What the operator can do about errno `code` from a cgroupfs operation.
fn hint(code: Option<i32>) -> &'static str {
    match code {
        Some(libc::EACCES) | Some(libc::EPERM) => {
            "permission denied: run moirai schedule as root (moving other users' threads and writing cgroupfs need \
             root, or a subtree delegated to this user)"
        }
        Some(libc::EROFS) => {
            "the cgroup filesystem is mounted read-only (usual inside containers): run moirai schedule on the host, \
             or give the container a writable cgroupfs"
        }
        Some(libc::ENOENT) => {
            "it does not exist: the group was removed by someone else, or, for cpu.* files, the cpu controller is not \
             enabled for this group"
        }
        Some(libc::EBUSY) => {
            "the group is busy: a group can only be removed without threads and child groups, and on cgroup v2 a \
             domain group with controllers enabled cannot take processes (\"no internal process\" rule)"
        }
        Some(libc::EOPNOTSUPP) => {
            "cgroup v2 thread mode refused it (Documentation/admin-guide/cgroup-v2.rst, \"Threads\"): a thread can \
             only move inside its process's threaded subtree, and a group can only become threaded while empty, \
             under a parent with no domain controllers enabled"
        }
        Some(libc::EINVAL) => {
            "the kernel rejected the value: a real-time (SCHED_FIFO/SCHED_RR) thread cannot join a v1 group whose \
             cpu.rt_runtime_us is 0, and on v2 +cpu cannot be enabled while real-time threads live in non-root \
             groups; demote such threads to SCHED_OTHER or leave them out of cpu groups"
        }
        Some(libc::ENOSPC) | Some(libc::EAGAIN) => {
            "a cgroup limit was reached (cgroup.max.descendants / cgroup.max.depth): raise it or use fewer groups"
        }
        _ => "see cgroups(7)",
    }
}

/// An [`OsError::Cgroup`] for `action` on `path`.
pub(crate) fn cgroup_error(action: impl Into<String>, path: &Path, source: io::Error) -> OsError {
    let hint = hint(source.raw_os_error()).to_string();
    OsError::Cgroup { action: action.into(), path: path.to_path_buf(), source, hint }
}

/// Writes one thread or process id to a membership file (`tasks`, `cgroup.threads`,
/// `cgroup.procs`); a vanished id becomes [`OsError::ThreadGone`].
pub(crate) fn write_id(fs: &dyn CgroupFs, file: &Path, id: Tid) -> Result<(), OsError> {
    match fs.write(file, &id.to_string()) {
        Ok(()) => Ok(()),
        Err(e) if e.raw_os_error() == Some(libc::ESRCH) => Err(OsError::ThreadGone { tid: id }),
        Err(e) => Err(cgroup_error(format!("write {id} to"), file, e)),
    }
}

/// Reads a membership file into ids; a group that is gone reads as empty.
pub(crate) fn read_ids(fs: &dyn CgroupFs, file: &Path) -> Result<Vec<Tid>, OsError> {
    match fs.read(file) {
        Ok(text) => Ok(text.split_whitespace().filter_map(|s| s.parse().ok()).collect()),
        Err(e) if e.kind() == io::ErrorKind::NotFound => Ok(Vec::new()),
        Err(e) => Err(cgroup_error("read", file, e)),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn errors_carry_a_hint_naming_the_cause() {
        let path = Path::new("/sys/fs/cgroup/cpu/moirai");
        let ro = cgroup_error("create", path, io::Error::from_raw_os_error(libc::EROFS)).to_string();
        assert!(ro.contains("/sys/fs/cgroup/cpu/moirai") && ro.contains("read-only"), "{ro}");
        let perm = cgroup_error("create", path, io::Error::from_raw_os_error(libc::EACCES)).to_string();
        assert!(perm.contains("root"), "{perm}");
        let busy = cgroup_error("remove", path, io::Error::from_raw_os_error(libc::EBUSY)).to_string();
        assert!(busy.contains("without threads"), "{busy}");
    }

    #[test]
    fn missing_membership_files_read_empty_and_fail_to_write() {
        let dir = std::env::temp_dir().join(format!("moirai-os-fs-{}", std::process::id()));
        fs::create_dir_all(&dir).unwrap();
        let missing = dir.join("no-such-file");
        // A missing membership file reads as an empty group ...
        assert!(read_ids(&KernelFs, &missing).unwrap().is_empty());
        // ... and writing to it is a cgroup error naming the path, not a panic.
        let err = write_id(&KernelFs, &missing, 42).unwrap_err();
        assert!(err.to_string().contains("no-such-file"), "{err}");
        fs::remove_dir_all(&dir).unwrap();
    }
}

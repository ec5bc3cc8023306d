//! Which cgroup a thread or process is in, from `/proc/<pid>/task/<tid>/cgroup`.
//!
//! That file has one line per hierarchy: `<id>:<controllers>:<path>` for v1 (`4:cpu,cpuacct:/a`)
//! and `0::<path>` for v2, the path relative to the hierarchy root as this cgroup namespace
//! sees it; [`Hierarchy::dir_of`] turns it into a directory under the mount.

use std::fs;
use std::io;
use std::path::PathBuf;

use crate::cgroup::layout::{CgroupVersion, Hierarchy};
use crate::error::OsError;
use crate::proc::Tid;

/// The path of the `version` cpu hierarchy in a `/proc/<pid>/cgroup` text: the v1 line whose
/// controller list contains `cpu` (`4:cpu,cpuacct:/a`), or the v2 line `0::/a`.
pub fn cgroup_path_in(text: &str, version: CgroupVersion) -> Option<String> {
    text.lines().find_map(|line| {
        let mut parts = line.splitn(3, ':');
        let id = parts.next()?;
        let controllers = parts.next()?;
        let path = parts.next()?;
        let wanted = match version {
            CgroupVersion::V1 => id != "0" && controllers.split(',').any(|c| c == "cpu"),
            CgroupVersion::V2 => id == "0" && controllers.is_empty(),
        };
        wanted.then(|| path.trim_end_matches(" (deleted)").to_string())
    })
}

fn cgroup_dir_from(file: &str, h: &Hierarchy, tid: Tid) -> Result<PathBuf, OsError> {
    let text = match fs::read_to_string(file) {
        Ok(t) => t,
        Err(e) if e.kind() == io::ErrorKind::NotFound => return Err(OsError::ThreadGone { tid }),
        Err(e) => return Err(OsError::io(format!("reading {file}"), e)),
    };
    let path = cgroup_path_in(&text, h.version).ok_or_else(|| {
        OsError::io(format!("reading {file}"), io::Error::other(format!("no {:?} cpu line in {text:?}", h.version)))
    })?;
    if path.split('/').any(|p| p == "..") {
        // A cgroup outside our cgroup namespace: we could not address it anyway.
        return Err(OsError::io(
            format!("reading {file}"),
            io::Error::other(format!("cgroup {path} lies outside this cgroup namespace")),
        ));
    }
    Ok(h.dir_of(&path))
}

/// The directory of the cgroup thread `tid` of process `pid` is in, in hierarchy `h`
/// (from `/proc/<pid>/task/<tid>/cgroup`). [`OsError::ThreadGone`] if it ended.
pub fn thread_cgroup(pid: u32, tid: Tid, h: &Hierarchy) -> Result<PathBuf, OsError> {
    cgroup_dir_from(&format!("/proc/{pid}/task/{tid}/cgroup"), h, tid)
}

/// The directory of the cgroup process `pid` is in (its main thread's), in hierarchy `h`.
pub fn process_cgroup(pid: u32, h: &Hierarchy) -> Result<PathBuf, OsError> {
    cgroup_dir_from(&format!("/proc/{pid}/cgroup"), h, pid as Tid)
}

/// The thread-group id (process id) of thread `tid`, from `/proc/<tid>/status`.
pub(crate) fn tgid_of(tid: Tid) -> Option<u32> {
    let status = fs::read_to_string(format!("/proc/{tid}/status")).ok()?;
    status.lines().find_map(|l| l.strip_prefix("Tgid:")).and_then(|v| v.trim().parse().ok())
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::cgroup::CgroupLayout;
    use crate::testutil::skip;
    use std::path::Path;

    #[test]
    fn reads_cpu_lines_of_proc_cgroup() {
        let text = "9:name=systemd:/\n4:cpuacct:/x\n3:cpu,cpuacct:/moirai/a/g1\n2:cpuset:/\n0::/user.slice (deleted)\n";
        assert_eq!(cgroup_path_in(text, CgroupVersion::V1).as_deref(), Some("/moirai/a/g1"));
        assert_eq!(cgroup_path_in(text, CgroupVersion::V2).as_deref(), Some("/user.slice"));
        assert_eq!(cgroup_path_in("2:cpuset:/\n", CgroupVersion::V1), None);
        let h = Hierarchy {
            version: CgroupVersion::V2,
            mount: "/sys/fs/cgroup".into(),
            mount_root: "/".into(),
            read_only: false,
        };
        assert_eq!(h.dir_of("/"), Path::new("/sys/fs/cgroup"));
        assert_eq!(h.dir_of("/a/b"), Path::new("/sys/fs/cgroup/a/b"));
    }

    #[test]
    fn finds_own_thread_on_this_host() {
        let Ok(layout) = CgroupLayout::detect() else {
            skip("finds_own_thread_on_this_host: no cpu controller mounted");
            return;
        };
        let pid = std::process::id();
        let dir = thread_cgroup(pid, crate::proc::current_tid(), layout.cpu()).unwrap();
        assert!(dir.starts_with(&layout.cpu().mount) && dir.is_dir(), "{}", dir.display());
        assert_eq!(tgid_of(crate::proc::current_tid()), Some(pid));
    }
}

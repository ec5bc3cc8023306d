//! Which cgroup hierarchy carries the `cpu` controller on this host, and where threads are.
//!
//! Hosts come in three shapes (cgroups(7)): pure v1 (one mount per controller, `cpu` often
//! co-mounted with `cpuacct`), pure v2 (one `cgroup2` mount, controllers listed in its
//! `cgroup.controllers`), and *hybrid* (v1 controller mounts plus a `cgroup2` mount, usually at
//! `/sys/fs/cgroup/unified`, that has no controllers because they are bound to v1). A
//! controller can be bound to one hierarchy only, so at most one of them has `cpu`. The layout
//! is read from `/proc/self/mountinfo` rather than guessed from directory names, because
//! containers and distributions mount cgroupfs in different places.

use std::fs;
use std::io;
use std::path::{Path, PathBuf};

use serde::{Deserialize, Serialize};

use crate::error::OsError;

/// The cgroup API version of a hierarchy.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum CgroupVersion {
    /// Legacy hierarchies, one per controller set; per-thread placement through `tasks`.
    V1,
    /// The unified hierarchy; per-thread placement only inside threaded subtrees.
    V2,
}

/// Range of v1 `cpu.shares` (kernel MIN_SHARES 2, MAX_SHARES 1 << 18).
pub const CPU_SHARES_RANGE: (u64, u64) = (2, 262_144);
/// Range of v2 `cpu.weight` (cgroup-v2.rst "Weights").
pub const CPU_WEIGHT_RANGE: (u64, u64) = (1, 10_000);

/// Converts v1 `cpu.shares` to v2 `cpu.weight` keeping ratios between siblings
/// (`weight = shares * 100 / 1024`, rounded and clamped, as systemd does): the kernel maps
/// weight 100 to the same internal load weight as 1024 shares. runc's old linear formula maps
/// 1024 to 39 and distorts ratios, hence not used.
pub fn shares_to_weight(shares: u64) -> u64 {
    ((shares.saturating_mul(100) + 512) / 1024).clamp(CPU_WEIGHT_RANGE.0, CPU_WEIGHT_RANGE.1)
}

/// Converts v2 `cpu.weight` to v1 `cpu.shares` (inverse of [`shares_to_weight`]).
pub fn weight_to_shares(weight: u64) -> u64 {
    ((weight.saturating_mul(1024) + 50) / 100).clamp(CPU_SHARES_RANGE.0, CPU_SHARES_RANGE.1)
}

/// One mounted cgroup hierarchy.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct Hierarchy {
    /// v1 or v2.
    pub version: CgroupVersion,
    /// Where it is mounted, e.g. `/sys/fs/cgroup/cpu`.
    pub mount: PathBuf,
    /// The cgroup path the mount shows (mountinfo field 4): `/` on hosts, `/docker/<id>` for a
    /// container that sees only its own subtree without a cgroup namespace.
    pub mount_root: String,
    /// Mounted read-only: nothing can be created or moved.
    pub read_only: bool,
}

impl Hierarchy {
    /// The directory of cgroup `path` (as `/proc/<pid>/cgroup` prints it) under this mount.
    pub fn dir_of(&self, path: &str) -> PathBuf {
        let path = path.trim_end_matches(" (deleted)");
        let root = self.mount_root.trim_end_matches('/');
        let inside = match path.strip_prefix(root) {
            Some(rest) if !root.is_empty() && (rest.is_empty() || rest.starts_with('/')) => rest,
            _ => path,
        };
        let inside = inside.trim_start_matches('/');
        if inside.is_empty() {
            self.mount.clone()
        } else {
            self.mount.join(inside)
        }
    }

    /// True if `dir` lies in this hierarchy (at or below the mount).
    pub fn contains(&self, dir: &Path) -> bool {
        dir.starts_with(&self.mount)
    }

    /// The file that sets a group's cpu weight: `cpu.shares` (v1) or `cpu.weight` (v2).
    pub fn weight_file(&self) -> &'static str {
        match self.version {
            CgroupVersion::V1 => "cpu.shares",
            CgroupVersion::V2 => "cpu.weight",
        }
    }

    /// The accepted range of [`Hierarchy::weight_file`], inclusive.
    pub fn weight_range(&self) -> (u64, u64) {
        match self.version {
            CgroupVersion::V1 => CPU_SHARES_RANGE,
            CgroupVersion::V2 => CPU_WEIGHT_RANGE,
        }
    }

    /// The kernel's default weight of a new group: 1024 shares or weight 100.
    pub fn default_weight(&self) -> u64 {
        match self.version {
            CgroupVersion::V1 => 1024,
            CgroupVersion::V2 => 100,
        }
    }

    /// `weight` if it lies in [`Hierarchy::weight_range`], else [`OsError::WeightOutOfRange`].
    pub fn validate_weight(&self, weight: u64) -> Result<u64, OsError> {
        let (min, max) = self.weight_range();
        if (min..=max).contains(&weight) {
            Ok(weight)
        } else {
            Err(OsError::WeightOutOfRange { value: weight, file: self.weight_file(), min, max })
        }
    }

    /// The file one thread id is written to, to move that thread: `tasks` (v1) or
    /// `cgroup.threads` (v2).
    pub fn threads_file(&self) -> &'static str {
        match self.version {
            CgroupVersion::V1 => "tasks",
            CgroupVersion::V2 => "cgroup.threads",
        }
    }
}

/// How cgroups are mounted on this host.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum CgroupLayout {
    /// Only v1 hierarchies; `cpu` is one of them.
    V1 {
        /// The hierarchy with the `cpu` controller.
        cpu: Hierarchy,
    },
    /// The unified hierarchy, with `cpu` in its root's `cgroup.controllers`.
    V2 {
        /// The unified hierarchy.
        unified: Hierarchy,
    },
    /// v1 controller mounts plus a controller-less `cgroup2` mount; `cpu` is on v1.
    Hybrid {
        /// The v1 hierarchy with the `cpu` controller (the one moirai uses).
        cpu: Hierarchy,
        /// The unified hierarchy (no `cpu` there).
        unified: Hierarchy,
    },
}

impl CgroupLayout {
    /// Detects the layout of the calling process's mount namespace.
    pub fn detect() -> Result<CgroupLayout, OsError> {
        let text =
            fs::read_to_string("/proc/self/mountinfo").map_err(|e| OsError::io("reading /proc/self/mountinfo", e))?;
        Self::from_mountinfo(&text, |dir| fs::read_to_string(dir.join("cgroup.controllers")))
    }

    /// Derives the layout from a mountinfo text (proc(5)); `controllers` reads the
    /// `cgroup.controllers` file of a `cgroup2` mount, given its directory.
    pub fn from_mountinfo(
        mountinfo: &str,
        controllers: impl Fn(&Path) -> io::Result<String>,
    ) -> Result<CgroupLayout, OsError> {
        let mut v1_cpu: Option<Hierarchy> = None;
        let mut v2: Option<Hierarchy> = None;
        for line in mountinfo.lines().filter(|l| !l.trim().is_empty()) {
            let Some(m) = MountLine::parse(line) else { continue };
            let candidate = |version| Hierarchy {
                version,
                mount: m.mount_point.clone(),
                mount_root: m.root.clone(),
                read_only: m.read_only,
            };
            // With several mounts of one hierarchy (bind mounts), the one showing the most of
            // it (shortest root) maps the most paths.
            let better = |old: &Option<Hierarchy>| old.as_ref().is_none_or(|o| m.root.len() < o.mount_root.len());
            match m.fstype.as_str() {
                "cgroup" if m.super_options.split(',').any(|o| o == "cpu") && better(&v1_cpu) => {
                    v1_cpu = Some(candidate(CgroupVersion::V1))
                }
                "cgroup2" if better(&v2) => v2 = Some(candidate(CgroupVersion::V2)),
                _ => {}
            }
        }
        match (v1_cpu, v2) {
            (Some(cpu), Some(unified)) => Ok(CgroupLayout::Hybrid { cpu, unified }),
            (Some(cpu), None) => Ok(CgroupLayout::V1 { cpu }),
            (None, Some(unified)) => match controllers(&unified.mount) {
                Ok(list) if list.split_whitespace().any(|c| c == "cpu") => Ok(CgroupLayout::V2 { unified }),
                Ok(list) => Err(OsError::NoCpuController {
                    detail: format!(
                        "the cgroup2 hierarchy at {} lists no cpu in cgroup.controllers (it lists {:?}) and no v1 \
                         hierarchy has cpu: the cpu controller is disabled (cgroup_disable=cpu on the kernel command \
                         line) or bound to a v1 hierarchy that is not mounted here",
                        unified.mount.display(),
                        list.trim()
                    ),
                }),
                Err(e) => Err(OsError::NoCpuController {
                    detail: format!("cannot read {}/cgroup.controllers: {e}", unified.mount.display()),
                }),
            },
            (None, None) => Err(OsError::NoCpuController {
                detail:
                    "no cgroup filesystem is mounted: mount the unified hierarchy (`mount -t cgroup2 none \
                         /sys/fs/cgroup`) or the v1 cpu controller (`mount -t cgroup -o cpu cgroup /sys/fs/cgroup/cpu`)"
                        .into(),
            }),
        }
    }

    /// The hierarchy that carries the `cpu` controller: the one moirai creates groups in.
    pub fn cpu(&self) -> &Hierarchy {
        match self {
            CgroupLayout::V1 { cpu } | CgroupLayout::Hybrid { cpu, .. } => cpu,
            CgroupLayout::V2 { unified } => unified,
        }
    }

    /// The unified (v2) hierarchy, if mounted.
    pub fn unified(&self) -> Option<&Hierarchy> {
        match self {
            CgroupLayout::V1 { .. } => None,
            CgroupLayout::V2 { unified } | CgroupLayout::Hybrid { unified, .. } => Some(unified),
        }
    }
}

/// The fields of one mountinfo line that matter here.
struct MountLine {
    root: String,
    mount_point: PathBuf,
    read_only: bool,
    fstype: String,
    super_options: String,
}

impl MountLine {
    /// `36 35 98:0 /mnt1 /mnt2 rw,noatime master:1 - ext3 /dev/root rw,errors=continue`: six
    /// fixed fields, optional fields up to a lone `-`, then type, source and super options.
    fn parse(line: &str) -> Option<MountLine> {
        let mut fields = line.split(' ');
        let _id = fields.next()?;
        let _parent = fields.next()?;
        let _dev = fields.next()?;
        let root = unescape(fields.next()?);
        let mount_point = PathBuf::from(unescape(fields.next()?));
        let options = fields.next()?;
        for f in fields.by_ref() {
            if f == "-" {
                break;
            }
        }
        let fstype = fields.next()?.to_string();
        let _source = fields.next()?;
        let super_options = fields.next().unwrap_or("").to_string();
        let read_only = options.split(',').any(|o| o == "ro") || super_options.split(',').any(|o| o == "ro");
        Some(MountLine { root, mount_point, read_only, fstype, super_options })
    }
}

/// Undoes mountinfo's octal escapes (`\040` for a space, ...).
fn unescape(field: &str) -> String {
    let bytes = field.as_bytes();
    let mut out = Vec::with_capacity(bytes.len());
    let mut i = 0;
    while i < bytes.len() {
        let octal = bytes
            .get(i + 1..i + 4)
            .filter(|d| d.iter().all(|b| (b'0'..=b'7').contains(b)))
            .and_then(|d| u8::try_from(d.iter().fold(0u32, |v, b| v * 8 + u32::from(b - b'0'))).ok());
        if let (b'\\', Some(v)) = (bytes[i], octal) {
            out.push(v);
            i += 4;
            continue;
        }
        out.push(bytes[i]);
        i += 1;
    }
    String::from_utf8_lossy(&out).into_owned()
}

#[cfg(test)]
mod tests {
    use super::*;

    /// This machine: v1 controllers under /sys/fs/cgroup, empty cgroup2 at .../unified.
    const HYBRID: &str = "\
22 27 0:21 / /proc rw,relatime - proc proc rw
31 23 0:28 / /sys/fs/cgroup rw,relatime - tmpfs tmpfs rw,mode=755
32 31 0:29 / /sys/fs/cgroup/cpu rw,relatime - cgroup cgroup rw,cpu
33 31 0:30 / /sys/fs/cgroup/cpuacct rw,relatime - cgroup cgroup rw,cpuacct
34 31 0:31 / /sys/fs/cgroup/cpuset rw,relatime - cgroup cgroup rw,cpuset
40 31 0:37 / /sys/fs/cgroup/systemd rw,relatime - cgroup cgroup rw,name=systemd
41 31 0:38 / /sys/fs/cgroup/unified rw,relatime - cgroup2 cgroup2 rw
";

    /// A systemd host on cgroup v2 only (Fedora, Ubuntu 22.04+).
    const PURE_V2: &str = "\
24 30 0:22 / /sys rw,nosuid,nodev,noexec,relatime shared:7 - sysfs sysfs rw
35 24 0:30 / /sys/fs/cgroup rw,nosuid,nodev,noexec,relatime shared:9 - cgroup2 cgroup2 rw,nsdelegate,memory_recursiveprot
";

    /// An older pure-v1 host with cpu and cpuacct co-mounted and read-only inside a container.
    const PURE_V1_RO: &str = "\
600 599 0:60 / /sys/fs/cgroup ro,nosuid,nodev,noexec - tmpfs tmpfs ro,mode=755
601 600 0:27 /docker/abc /sys/fs/cgroup/cpu,cpuacct ro,nosuid,nodev,noexec,relatime master:11 - cgroup cpu rw,cpu,cpuacct
602 600 0:28 /docker/abc /sys/fs/cgroup/cpuset ro,nosuid,nodev,noexec,relatime master:12 - cgroup cpuset rw,cpuset
";

    fn controllers(list: &'static str) -> impl Fn(&Path) -> io::Result<String> {
        move |_| Ok(list.to_string())
    }

    #[test]
    fn detects_this_hybrid_host_layout() {
        let layout = CgroupLayout::from_mountinfo(HYBRID, controllers("hugetlb\n")).unwrap();
        let CgroupLayout::Hybrid { cpu, unified } = &layout else { panic!("{layout:?}") };
        assert_eq!(cpu.mount, Path::new("/sys/fs/cgroup/cpu"));
        assert_eq!(cpu.version, CgroupVersion::V1);
        assert_eq!(unified.mount, Path::new("/sys/fs/cgroup/unified"));
        assert_eq!(layout.cpu().weight_file(), "cpu.shares");
        assert!(!cpu.read_only);
    }

    #[test]
    fn detects_pure_v2_only_with_cpu_in_controllers() {
        let layout = CgroupLayout::from_mountinfo(PURE_V2, controllers("cpuset cpu io memory pids\n")).unwrap();
        let CgroupLayout::V2 { unified } = &layout else { panic!("{layout:?}") };
        assert_eq!(unified.mount, Path::new("/sys/fs/cgroup"));
        assert_eq!(layout.cpu().weight_file(), "cpu.weight");
        assert_eq!(layout.cpu().threads_file(), "cgroup.threads");

        let err = CgroupLayout::from_mountinfo(PURE_V2, controllers("memory io\n")).unwrap_err();
        assert!(matches!(err, OsError::NoCpuController { .. }), "{err}");
        assert!(err.to_string().contains("/sys/fs/cgroup"), "{err}");
    }

    #[test]
    fn detects_pure_v1_comounted_read_only_container() {
        let layout = CgroupLayout::from_mountinfo(PURE_V1_RO, controllers("")).unwrap();
        let CgroupLayout::V1 { cpu } = &layout else { panic!("{layout:?}") };
        assert_eq!(cpu.mount, Path::new("/sys/fs/cgroup/cpu,cpuacct"));
        assert_eq!(cpu.mount_root, "/docker/abc");
        assert!(cpu.read_only);
        // Without a cgroup namespace the container's /proc/<pid>/cgroup shows host paths.
        assert_eq!(cpu.dir_of("/docker/abc/x"), Path::new("/sys/fs/cgroup/cpu,cpuacct/x"));
        assert_eq!(cpu.dir_of("/docker/abc"), Path::new("/sys/fs/cgroup/cpu,cpuacct"));
    }

    #[test]
    fn no_cgroup_mounts_is_a_clear_error() {
        let err = CgroupLayout::from_mountinfo("22 27 0:21 / /proc rw - proc proc rw\n", controllers("")).unwrap_err();
        assert!(err.to_string().contains("mount -t cgroup2"), "{err}");
    }

    #[test]
    fn unescapes_mount_points() {
        assert_eq!(unescape("/mnt/with\\040space"), "/mnt/with space");
        assert_eq!(unescape("/plain"), "/plain");
        assert_eq!(unescape("/odd\\"), "/odd\\");
    }

    #[test]
    fn converts_shares_and_weights_keeping_the_default() {
        assert_eq!(shares_to_weight(1024), 100);
        assert_eq!(weight_to_shares(100), 1024);
        assert_eq!(shares_to_weight(2), 1);
        assert_eq!(shares_to_weight(262_144), 10_000);
        assert_eq!(weight_to_shares(1), 10);
        assert_eq!(weight_to_shares(10_000), 102_400);
        // Ratios survive: 4096:1024 is 4:1 either way.
        assert_eq!(shares_to_weight(4096), 4 * shares_to_weight(1024));
    }

    #[test]
    fn validates_weights_per_version() {
        let v1 = Hierarchy { version: CgroupVersion::V1, mount: "/x".into(), mount_root: "/".into(), read_only: false };
        let v2 = Hierarchy { version: CgroupVersion::V2, ..v1.clone() };
        assert!(v1.validate_weight(1).is_err() && v1.validate_weight(2).is_ok());
        assert!(v1.validate_weight(262_145).is_err());
        assert!(v2.validate_weight(0).is_err() && v2.validate_weight(10_000).is_ok());
        let err = v2.validate_weight(10_001).unwrap_err().to_string();
        assert!(err.contains("cpu.weight") && err.contains("[1, 10000]"), "{err}");
    }
}

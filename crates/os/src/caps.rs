//! Privilege checks before the middleware touches anything.
//!
//! Lachesis simply ran as `sudo java` and failed half-way through a round when something was
//! not allowed. [`preflight`] instead checks up front what a schedule will need and lists every
//! missing item with the way to get it, so the operator fixes everything in one go.
//!
//! Capabilities are read from the `CapEff` line of `/proc/self/status` (proc(5)): the effective
//! set is what the kernel checks, and being uid 0 does not imply it (a container may drop
//! `CAP_SYS_NICE` from root), while a non-root binary may hold it through `setcap`.

use std::ffi::CString;
use std::fs;
use std::os::unix::ffi::OsStrExt;
use std::path::Path;

use crate::cgroup::{CgroupLayout, Hierarchy};
use crate::error::OsError;
use crate::realtime::{rt_throttling_in, KERNEL_SYSCTL_DIR};

/// The capabilities moirai may need.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Cap {
    /// `CAP_SYS_NICE`: lower nice values, renice other users' threads, real-time policies.
    SysNice,
    /// `CAP_SYS_ADMIN`: broad administration; some cgroup operations check it.
    SysAdmin,
}

impl Cap {
    /// The capability's bit number (linux/capability.h).
    pub const fn bit(self) -> u32 {
        match self {
            Cap::SysNice => 23,
            Cap::SysAdmin => 21,
        }
    }

    /// The capability's name as capabilities(7) spells it.
    pub const fn name(self) -> &'static str {
        match self {
            Cap::SysNice => "CAP_SYS_NICE",
            Cap::SysAdmin => "CAP_SYS_ADMIN",
        }
    }

    /// True if `cap_eff` (a `CapEff` bit set) contains this capability.
    pub const fn is_in(self, cap_eff: u64) -> bool {
        cap_eff & (1u64 << self.bit()) != 0
    }
}

/// Parses the `CapEff:` line of a `/proc/<pid>/status` text into its bit set.
pub fn parse_cap_eff(status: &str) -> Result<u64, OsError> {
    let bad = |detail: String| OsError::io("parsing CapEff of /proc/self/status", std::io::Error::other(detail));
    let hex =
        status.lines().find_map(|l| l.strip_prefix("CapEff:")).ok_or_else(|| bad("no CapEff line".into()))?.trim();
    u64::from_str_radix(hex, 16).map_err(|e| bad(format!("{hex:?} is not a hexadecimal bit set: {e}")))
}

/// The calling process's effective capability set.
pub fn effective_capabilities() -> Result<u64, OsError> {
    let status = fs::read_to_string("/proc/self/status").map_err(|e| OsError::io("reading /proc/self/status", e))?;
    parse_cap_eff(&status)
}

/// True if the calling process holds `cap` in its effective set.
pub fn has_capability(cap: Cap) -> Result<bool, OsError> {
    Ok(cap.is_in(effective_capabilities()?))
}

/// The effective user id of the calling process (geteuid(2)).
pub fn euid() -> u32 {
    // SAFETY: geteuid has no preconditions and cannot fail.
    unsafe { libc::geteuid() }
}

/// True if the effective user id is 0.
pub fn is_root() -> bool {
    euid() == 0
}

/// What a schedule is going to do, for [`preflight`].
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Need {
    /// Set per-thread nice values of other processes, including lowering them (nice translator).
    Nice,
    /// Create cpu cgroups and move threads into them (cgroup translator).
    Cgroups,
    /// Give threads real-time classes (real-time translator): CAP_SYS_NICE, and the kernel's RT
    /// throttling switched on (see [`crate::realtime`]).
    RealTime,
}

/// What the calling process may do, as far as [`preflight`] cares.
#[derive(Clone, Debug)]
pub struct Privileges {
    /// The effective user id.
    pub euid: u32,
    /// The effective capability set (`CapEff`).
    pub cap_eff: u64,
    /// The cpu hierarchy and whether its root directory is writable for us, or why there is
    /// no usable one.
    pub cgroup: Result<(Hierarchy, bool), String>,
    /// The kernel's RT throttling (`runtime_us`, `period_us`), `None` if disabled.
    pub rt_throttling: Option<(u64, u64)>,
}

impl Privileges {
    /// Probes the calling process: effective uid and capabilities, the cgroup layout and
    /// write access to the cpu hierarchy.
    pub fn probe() -> Result<Privileges, OsError> {
        Self::probe_in(Path::new(KERNEL_SYSCTL_DIR))
    }

    /// [`Privileges::probe`] with the kernel's scheduler sysctls read from `kernel` instead of
    /// `/proc/sys/kernel`.
    pub fn probe_in(kernel: &Path) -> Result<Privileges, OsError> {
        let euid = euid();
        let cgroup = match CgroupLayout::detect() {
            Ok(layout) => {
                let cpu = layout.cpu().clone();
                let writable = writable(&cpu.mount);
                Ok((cpu, writable))
            }
            Err(e) => Err(e.to_string()),
        };
        Ok(Privileges { euid, cap_eff: effective_capabilities()?, cgroup, rt_throttling: rt_throttling_in(kernel)? })
    }

    /// One line per item in `needs` that these privileges do not cover, saying how to get it.
    pub fn missing(&self, needs: &[Need]) -> Vec<String> {
        let mut out = Vec::new();
        for need in needs {
            match need {
                Need::Nice if !Cap::SysNice.is_in(self.cap_eff) => out.push(format!(
                    "the nice translator needs CAP_SYS_NICE to lower nice values and renice other users' threads \
                     (effective uid {}, CapEff {:016x}): run moirai schedule as root or grant it with \
                     `setcap cap_sys_nice+ep <path to moirai>`",
                    self.euid, self.cap_eff
                )),
                Need::Nice => {}
                Need::RealTime => {
                    if !Cap::SysNice.is_in(self.cap_eff) {
                        out.push(format!(
                            "the real-time translator needs CAP_SYS_NICE (effective uid {}): run moirai schedule as \
                             root or grant it with `setcap cap_sys_nice+ep <path to moirai>`",
                            self.euid
                        ));
                    }
                    if self.rt_throttling.is_none() {
                        out.push(
                            "real-time throttling is disabled (/proc/sys/kernel/sched_rt_runtime_us is -1), so a \
                             spinning real-time operator could freeze the machine: `sysctl -w \
                             kernel.sched_rt_runtime_us=950000` before using real-time classes"
                                .to_string(),
                        );
                    }
                }
                Need::Cgroups => match &self.cgroup {
                    Err(why) => out.push(format!("the cgroup translator needs a cpu controller: {why}")),
                    Ok((h, _)) if h.read_only => out.push(format!(
                        "the cgroup filesystem at {} is mounted read-only (usual inside containers): run moirai \
                         schedule on the host, or give the container a writable cgroupfs (e.g. `docker run \
                         --privileged` or `--cgroupns=private` with cgroupfs mounted rw)",
                        h.mount.display()
                    )),
                    Ok((h, false)) => out.push(format!(
                        "the cgroup translator must create groups in {} but effective uid {} cannot write there: run \
                         moirai schedule as root, or delegate a subtree to this user (chown the directory and its \
                         cgroup.procs, cgroup.threads, cgroup.subtree_control and tasks files)",
                        h.mount.display(),
                        self.euid
                    )),
                    Ok(_) => {}
                },
            }
        }
        out
    }
}

/// True if the effective user may write into `dir` (faccessat with `AT_EACCESS`).
fn writable(dir: &Path) -> bool {
    let Ok(c) = CString::new(dir.as_os_str().as_bytes()) else {
        return false;
    };
    // SAFETY: `c` is a valid NUL-terminated path that outlives the call; faccessat only reads it.
    unsafe { libc::faccessat(libc::AT_FDCWD, c.as_ptr(), libc::W_OK, libc::AT_EACCESS) == 0 }
}

/// Checks that the calling process can do everything in `needs`; the error lists each missing
/// item and how to get it ([`OsError::Preflight`]).
pub fn preflight(needs: &[Need]) -> Result<(), OsError> {
    preflight_in(needs, Path::new(KERNEL_SYSCTL_DIR))
}

/// [`preflight`] with the kernel's scheduler sysctls read from `kernel` ([`Privileges::probe_in`]).
pub fn preflight_in(needs: &[Need], kernel: &Path) -> Result<(), OsError> {
    let missing = Privileges::probe_in(kernel)?.missing(needs);
    if missing.is_empty() {
        Ok(())
    } else {
        Err(OsError::Preflight { missing })
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::cgroup::CgroupVersion;
    use crate::testutil::skip;
    use std::path::PathBuf;

    const ROOT_STATUS: &str = "Name:\tcat\nUid:\t0\t0\t0\t0\nCapInh:\t0000000000000000\nCapPrm:\t000001ffffffffff\n\
                               CapEff:\t000001ffffffffff\nCapBnd:\t000001ffffffffff\n";

    #[test]
    fn parses_cap_eff_lines() {
        let all = parse_cap_eff(ROOT_STATUS).unwrap();
        assert!(Cap::SysNice.is_in(all) && Cap::SysAdmin.is_in(all));
        // An unprivileged process: empty set.
        let none = parse_cap_eff("CapEff:\t0000000000000000\n").unwrap();
        assert!(!Cap::SysNice.is_in(none) && !Cap::SysAdmin.is_in(none));
        // Only CAP_SYS_NICE (bit 23), as `setcap cap_sys_nice+ep` gives.
        let nice_only = parse_cap_eff("CapEff:\t0000000000800000\n").unwrap();
        assert!(Cap::SysNice.is_in(nice_only) && !Cap::SysAdmin.is_in(nice_only));
        // Only CAP_SYS_ADMIN (bit 21).
        let admin_only = parse_cap_eff("CapEff:\t0000000000200000\n").unwrap();
        assert!(!Cap::SysNice.is_in(admin_only) && Cap::SysAdmin.is_in(admin_only));
        assert!(parse_cap_eff("CapPrm:\t0\n").is_err());
        assert!(parse_cap_eff("CapEff:\tzz\n").is_err());
    }

    #[test]
    fn real_process_capabilities_agree_with_root() {
        let caps = effective_capabilities().unwrap();
        if is_root() {
            // Root in this project's CI holds CAP_SYS_NICE; a root without it could not run the
            // middleware either, so this is worth failing on.
            assert!(Cap::SysNice.is_in(caps), "root without CAP_SYS_NICE: CapEff {caps:016x}");
            assert!(has_capability(Cap::SysNice).unwrap());
        } else {
            eprintln!("not root: only checking that CapEff ({caps:016x}) parses");
        }
    }

    fn hierarchy(read_only: bool) -> Hierarchy {
        Hierarchy {
            version: CgroupVersion::V1,
            mount: PathBuf::from("/sys/fs/cgroup/cpu"),
            mount_root: "/".into(),
            read_only,
        }
    }

    #[test]
    fn preflight_names_each_missing_item() {
        let unprivileged =
            Privileges { euid: 1000, cap_eff: 0, cgroup: Ok((hierarchy(false), false)), rt_throttling: None };
        let missing = unprivileged.missing(&[Need::Nice, Need::Cgroups]);
        assert_eq!(missing.len(), 2, "{missing:?}");
        assert!(missing[0].contains("CAP_SYS_NICE") && missing[0].contains("setcap cap_sys_nice+ep"));
        assert!(missing[1].contains("/sys/fs/cgroup/cpu") && missing[1].contains("uid 1000"));

        let read_only = Privileges {
            euid: 0,
            cap_eff: 1 << 23,
            cgroup: Ok((hierarchy(true), true)),
            rt_throttling: Some((950_000, 1_000_000)),
        };
        let missing = read_only.missing(&[Need::Nice, Need::Cgroups]);
        assert_eq!(missing.len(), 1);
        assert!(missing[0].contains("read-only"));

        let no_cpu = Privileges {
            euid: 0,
            cap_eff: 1 << 23,
            cgroup: Err("nothing mounted".into()),
            rt_throttling: Some((950_000, 1_000_000)),
        };
        assert!(no_cpu.missing(&[Need::Cgroups])[0].contains("nothing mounted"));
        assert!(no_cpu.missing(&[Need::Nice]).is_empty());

        // Real time: both the capability and the throttling are named.
        let rt = unprivileged.missing(&[Need::RealTime]);
        assert_eq!(rt.len(), 2, "{rt:?}");
        assert!(rt[1].contains("sched_rt_runtime_us"));
        assert!(read_only.missing(&[Need::RealTime]).is_empty());

        let err = OsError::Preflight { missing: unprivileged.missing(&[Need::Nice, Need::Cgroups]) };
        assert!(err.to_string().lines().count() >= 3, "one line per missing item: {err}");
    }

    #[test]
    fn a_real_time_preflight_on_a_host_without_throttling_says_how_to_turn_it_on() {
        let dir = crate::testutil::TempDir::new("preflight-rt");
        std::fs::write(dir.0.join("sched_rt_runtime_us"), "-1\n").unwrap();
        std::fs::write(dir.0.join("sched_rt_period_us"), "1000000\n").unwrap();
        let err = preflight_in(&[Need::RealTime], &dir.0).unwrap_err().to_string();
        assert!(err.contains("real-time throttling is disabled"), "{err}");
        assert!(err.contains("sysctl -w kernel.sched_rt_runtime_us=950000"), "{err}");
        // The nice translator does not care.
        if Cap::SysNice.is_in(effective_capabilities().unwrap()) {
            preflight_in(&[Need::Nice], &dir.0).unwrap();
        }
    }

    #[test]
    fn preflight_passes_for_root_here() {
        if !is_root() {
            skip("preflight_passes_for_root_here: needs root");
            return;
        }
        preflight(&[Need::Nice]).unwrap();
        // Cgroups are only checked where a cpu controller exists.
        if CgroupLayout::detect().is_ok() {
            preflight(&[Need::Nice, Need::Cgroups]).unwrap();
        }
    }
}

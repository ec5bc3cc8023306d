//! Process resource limits: the descriptor limit (`RLIMIT_NOFILE`), and telling a descriptor
//! shortage (`EMFILE`, `ENFILE`) from other I/O errors.
//!
//! A daemon that serves clients and reads `/proc` needs descriptors for both; a shortage must be
//! seen as what it is, not as "the file is not there" (see `docs/schedule.md`).

use std::io;

/// The soft and hard descriptor limits of this process.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct NofileLimit {
    /// What the kernel enforces now (`ulimit -Sn`).
    pub soft: u64,
    /// The most the soft limit may be raised to without privilege (`ulimit -Hn`).
    pub hard: u64,
}

/// This process's descriptor limits.
pub fn nofile() -> io::Result<NofileLimit> {
    let mut lim = libc::rlimit { rlim_cur: 0, rlim_max: 0 };
    // SAFETY: getrlimit writes one rlimit struct, which `lim` is.
    if unsafe { libc::getrlimit(libc::RLIMIT_NOFILE, &mut lim) } != 0 {
        return Err(io::Error::last_os_error());
    }
    Ok(NofileLimit { soft: lim.rlim_cur, hard: lim.rlim_max })
}

/// The most descriptors a process may have at all (`/proc/sys/fs/nr_open`): an unlimited hard
/// limit still cannot raise the soft one above it.
fn nr_open() -> u64 {
    std::fs::read_to_string("/proc/sys/fs/nr_open").ok().and_then(|s| s.trim().parse().ok()).unwrap_or(1 << 20)
}

/// Raises the soft descriptor limit to the hard one (at most `nr_open`), which needs no
/// privilege; returns the limits before and after.
pub fn raise_nofile() -> io::Result<(NofileLimit, NofileLimit)> {
    let before = nofile()?;
    let target = before.hard.min(nr_open());
    if target <= before.soft {
        return Ok((before, before));
    }
    let lim = libc::rlimit { rlim_cur: target, rlim_max: before.hard };
    // SAFETY: setrlimit reads one rlimit struct, which `lim` is.
    if unsafe { libc::setrlimit(libc::RLIMIT_NOFILE, &lim) } != 0 {
        return Err(io::Error::last_os_error());
    }
    Ok((before, nofile()?))
}

/// True when `e` says the process (`EMFILE`) or the system (`ENFILE`) ran out of descriptors.
pub fn is_out_of_descriptors(e: &io::Error) -> bool {
    matches!(e.raw_os_error(), Some(libc::EMFILE) | Some(libc::ENFILE))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_soft_limit_rises_to_the_hard_one_and_a_shortage_is_told_apart() {
        // One descriptor below where it was (harmless to the other tests of this process), then
        // raised again.
        let now = nofile().unwrap();
        let lower = libc::rlimit { rlim_cur: now.soft - 1, rlim_max: now.hard };
        // SAFETY: setrlimit reads one rlimit struct, which `lower` is.
        assert_eq!(unsafe { libc::setrlimit(libc::RLIMIT_NOFILE, &lower) }, 0);
        let (before, after) = raise_nofile().unwrap();
        assert_eq!(before.soft, now.soft - 1);
        assert_eq!(after.soft, now.hard.min(nr_open()));
        assert!(after.soft >= now.soft);
        assert_eq!(nofile().unwrap(), after);
        assert!(is_out_of_descriptors(&io::Error::from_raw_os_error(libc::EMFILE)));
        assert!(is_out_of_descriptors(&io::Error::from_raw_os_error(libc::ENFILE)));
        assert!(!is_out_of_descriptors(&io::Error::from_raw_os_error(libc::ENOENT)));
        assert!(!is_out_of_descriptors(&io::Error::other("x")));
    }
}

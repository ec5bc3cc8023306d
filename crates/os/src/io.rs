//! Thin safe wrappers of the file-descriptor system calls a server loop needs: waiting on several
//! descriptors at once (`poll(2)`) and the process's descriptor limit (`getrlimit(2)`).

use std::os::fd::{AsRawFd, RawFd};
use std::time::Duration;

/// Readable (or a connection to accept) — `POLLIN`.
pub const READABLE: i16 = libc::POLLIN;
/// Writable without blocking — `POLLOUT`.
pub const WRITABLE: i16 = libc::POLLOUT;

/// One descriptor to wait on, what for, and (after [`poll`]) what happened.
#[derive(Clone, Copy, Debug)]
#[repr(transparent)]
pub struct PollFd(libc::pollfd);

impl PollFd {
    /// Waits on `fd` for `events` ([`READABLE`], [`WRITABLE`], or 0 for errors only).
    pub fn new(fd: &impl AsRawFd, events: i16) -> PollFd {
        PollFd::raw(fd.as_raw_fd(), events)
    }

    /// As [`PollFd::new`], for a raw descriptor.
    pub fn raw(fd: RawFd, events: i16) -> PollFd {
        PollFd(libc::pollfd { fd, events, revents: 0 })
    }

    /// What happened to it in the last [`poll`] (`POLLIN`, `POLLOUT`, `POLLERR`, `POLLHUP`, ...;
    /// 0 for nothing).
    pub fn revents(&self) -> i16 {
        self.0.revents
    }
}

/// Waits until one of `fds` is ready or `timeout` passes (`poll(2)`); returns how many are ready
/// (0 on timeout). An interrupted wait (`EINTR`) returns `Ok(0)`.
pub fn poll(fds: &mut [PollFd], timeout: Duration) -> std::io::Result<usize> {
    let ms = i32::try_from(timeout.as_millis()).unwrap_or(i32::MAX);
    // SAFETY: `PollFd` is `repr(transparent)` over `libc::pollfd`, and `fds` is a valid, writable array of `fds.len()` of them that outlives the call.
    let n = unsafe { libc::poll(fds.as_mut_ptr().cast::<libc::pollfd>(), fds.len() as libc::nfds_t, ms) };
    if n < 0 {
        let e = std::io::Error::last_os_error();
        return if e.kind() == std::io::ErrorKind::Interrupted { Ok(0) } else { Err(e) };
    }
    Ok(n as usize)
}

/// The process's soft limit of open file descriptors (`RLIMIT_NOFILE`), if it can be read
/// (`u64::MAX` when unlimited).
pub fn open_files_limit() -> Option<u64> {
    let mut lim = libc::rlimit { rlim_cur: 0, rlim_max: 0 };
    // SAFETY: getrlimit with a valid, writable rlimit struct.
    let ok = unsafe { libc::getrlimit(libc::RLIMIT_NOFILE, &mut lim) } == 0;
    ok.then_some(lim.rlim_cur)
}

/// True when `e` says the process or the system ran out of file descriptors (`EMFILE`, `ENFILE`).
pub fn is_out_of_descriptors(e: &std::io::Error) -> bool {
    matches!(e.raw_os_error(), Some(libc::EMFILE) | Some(libc::ENFILE))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn poll_sees_a_readable_socket_and_times_out_on_a_quiet_one() {
        let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
        let mut fds = [PollFd::new(&listener, READABLE)];
        assert_eq!(poll(&mut fds, Duration::from_millis(10)).unwrap(), 0);
        let _client = std::net::TcpStream::connect(listener.local_addr().unwrap()).unwrap();
        assert_eq!(poll(&mut fds, Duration::from_secs(5)).unwrap(), 1);
        assert!(fds[0].revents() & READABLE != 0);
        assert!(open_files_limit().is_some_and(|n| n > 0));
    }
}

//! Waiting for several sockets at once: `poll(2)` behind a safe call, so that a server can watch
//! its listener and every open connection from one thread (an idle client costs a descriptor,
//! not a thread).

use std::io;
use std::os::fd::RawFd;
use std::time::Duration;

/// One descriptor to watch, and what it was found ready for.
#[derive(Clone, Copy)]
#[repr(transparent)]
pub struct PollFd(libc::pollfd);

impl PollFd {
    /// Watches `fd` for input (`read`) and/or room to write (`write`); neither: only errors and
    /// hang-ups are reported.
    pub fn new(fd: RawFd, read: bool, write: bool) -> PollFd {
        let mut events = 0;
        if read {
            events |= libc::POLLIN;
        }
        if write {
            events |= libc::POLLOUT;
        }
        PollFd(libc::pollfd { fd, events, revents: 0 })
    }

    /// Something happened: input, room to write, an error or a hang-up.
    pub fn ready(&self) -> bool {
        self.0.revents != 0
    }

    /// Input is waiting (or the peer hung up, or an error is pending: a read will tell).
    pub fn readable(&self) -> bool {
        self.0.revents & (libc::POLLIN | libc::POLLHUP | libc::POLLERR) != 0
    }
}

/// Waits until one of `fds` is ready or `timeout` passed; returns how many are ready (0: the
/// timeout, or a signal interrupted the wait).
pub fn poll(fds: &mut [PollFd], timeout: Duration) -> io::Result<usize> {
    let ms = timeout.as_millis().min(i32::MAX as u128) as libc::c_int;
    // SAFETY: `PollFd` is a transparent pollfd, so `fds` is a valid array of `fds.len()` pollfd
    // structs that outlives the call.
    let n = unsafe { libc::poll(fds.as_mut_ptr().cast::<libc::pollfd>(), fds.len() as libc::nfds_t, ms) };
    if n < 0 {
        let e = io::Error::last_os_error();
        return if e.kind() == io::ErrorKind::Interrupted { Ok(0) } else { Err(e) };
    }
    Ok(n as usize)
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::io::Write;
    use std::os::fd::AsRawFd;

    #[test]
    fn a_socket_is_ready_when_bytes_arrive() {
        let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
        let mut client = std::net::TcpStream::connect(listener.local_addr().unwrap()).unwrap();
        let (server, _) = listener.accept().unwrap();
        let mut fds = [PollFd::new(server.as_raw_fd(), true, false)];
        assert_eq!(poll(&mut fds, Duration::from_millis(20)).unwrap(), 0);
        assert!(!fds[0].ready());
        client.write_all(b"x").unwrap();
        assert_eq!(poll(&mut fds, Duration::from_secs(5)).unwrap(), 1);
        assert!(fds[0].ready() && fds[0].readable());
    }
}

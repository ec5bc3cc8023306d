//! Exclusive advisory locks on whole files (`flock(2)`), the one implementation behind every
//! lock file of moirai: [`crate::identity::LockFile`], the middleware's state-file lock and the
//! lab's build lock.
//!
//! An `flock` lock belongs to the open file description: two `open`s of the same path conflict
//! even within one process, a `dup` (or a child forked before `exec`, when the descriptor is not
//! close-on-exec) shares it, and it ends when the last descriptor of that description is closed
//! — also when its process dies, so a crashed holder leaves no stale lock.

use std::io;
use std::os::fd::{AsFd, AsRawFd};

/// `flock(fd, operation)`, retried when a signal interrupts it.
fn flock(file: &impl AsFd, operation: libc::c_int) -> io::Result<()> {
    let fd = file.as_fd().as_raw_fd();
    loop {
        // SAFETY: flock(2) on a descriptor that the borrowed `AsFd` keeps open for the call; no
        // memory is passed.
        if unsafe { libc::flock(fd, operation) } == 0 {
            return Ok(());
        }
        let e = io::Error::last_os_error();
        if e.kind() != io::ErrorKind::Interrupted {
            return Err(e);
        }
    }
}

/// Takes an exclusive lock on `file`, waiting as long as another open file description holds
/// one. The lock is held until `file` (and every descriptor sharing its description) is closed.
pub fn lock_exclusive(file: &impl AsFd) -> io::Result<()> {
    flock(file, libc::LOCK_EX)
}

/// Takes an exclusive lock on `file` if nobody else holds one: `Ok(true)` when taken,
/// `Ok(false)` when another open file description holds a lock on the file (`EWOULDBLOCK`).
/// Other errors are the kernel's (e.g. `ENOLCK`), with their `raw_os_error`.
pub fn try_lock_exclusive(file: &impl AsFd) -> io::Result<bool> {
    match flock(file, libc::LOCK_EX | libc::LOCK_NB) {
        Ok(()) => Ok(true),
        Err(e) if e.kind() == io::ErrorKind::WouldBlock => Ok(false),
        Err(e) => Err(e),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::testutil::TempDir;
    use std::fs::File;
    use std::sync::atomic::{AtomicBool, Ordering};
    use std::sync::Arc;
    use std::time::{Duration, Instant};

    /// Opens `path` anew: a file description of its own, so its lock conflicts with others.
    fn open(path: &std::path::Path) -> File {
        std::fs::OpenOptions::new().read(true).write(true).create(true).truncate(false).open(path).unwrap()
    }

    /// `try_lock_exclusive` until it succeeds: another test of this process may fork (to spawn a
    /// child) while a descriptor is open, and the child shares its lock until its `exec` closes
    /// the descriptor (O_CLOEXEC) — a moment.
    fn lock_soon(file: &File) {
        let deadline = Instant::now() + Duration::from_secs(10);
        while !try_lock_exclusive(file).unwrap() {
            assert!(Instant::now() < deadline, "the lock was never released");
            std::thread::sleep(Duration::from_millis(5));
        }
    }

    #[test]
    fn a_second_exclusive_lock_is_refused_while_the_first_is_held() {
        let dir = TempDir::new("lock-try");
        let path = dir.0.join("x.lock");
        let first = open(&path);
        lock_soon(&first);
        let second = open(&path);
        assert!(!try_lock_exclusive(&second).unwrap(), "two exclusive locks on one file");
        // Taking it again through the same description is no conflict.
        assert!(try_lock_exclusive(&first).unwrap());
        drop(first);
        lock_soon(&second);
        assert!(!try_lock_exclusive(&open(&path)).unwrap(), "the second holder now excludes others");
    }

    #[test]
    fn a_blocking_lock_waits_until_the_holder_lets_go() {
        let dir = TempDir::new("lock-wait");
        let path = dir.0.join("x.lock");
        let holder = open(&path);
        lock_soon(&holder);
        let released = Arc::new(AtomicBool::new(false));
        let waiter = {
            let (path, released) = (path.clone(), released.clone());
            std::thread::spawn(move || {
                let file = open(&path);
                lock_exclusive(&file).unwrap();
                // Only the holder's release can have let this lock through (a child forked by
                // another test meanwhile would hold it longer, never shorter).
                released.load(Ordering::SeqCst)
            })
        };
        std::thread::sleep(Duration::from_millis(50));
        assert!(!waiter.is_finished(), "the lock was granted while held");
        released.store(true, Ordering::SeqCst);
        drop(holder);
        assert!(waiter.join().unwrap(), "the waiter got the lock before the holder let go");
    }
}

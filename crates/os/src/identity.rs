//! Who a process is: the process listening on a local TCP port, a process's owner and
//! executable, whether it has exited; and exclusive lock files that name their holder.
//!
//! The middleware runs as root and changes other processes' threads, so it must know that the
//! process an endpoint names is the one serving that endpoint (see `docs/schedule.md`).

use std::collections::BTreeSet;
use std::fs::File;
use std::io::{self, Read, Seek, Write};
use std::os::unix::fs::MetadataExt;
use std::path::{Path, PathBuf};

/// The inodes of the listening TCP sockets (IPv4 and IPv6) on `port` (any port: `None`), as
/// `/proc/<pid>/fd` links name them (`socket:[inode]`), with their ports.
fn listening_sockets(port: Option<u16>) -> io::Result<Vec<(String, u16)>> {
    let mut sockets = Vec::new();
    for table in ["/proc/net/tcp", "/proc/net/tcp6"] {
        let text = match std::fs::read_to_string(table) {
            Ok(text) => text,
            // No IPv6 on this kernel.
            Err(e) if e.kind() == io::ErrorKind::NotFound => continue,
            Err(e) => return Err(e),
        };
        for line in text.lines().skip(1) {
            let f: Vec<&str> = line.split_whitespace().collect();
            let listening = f.get(3) == Some(&"0A");
            let on = f.get(1).and_then(|a| a.rsplit(':').next()).and_then(|p| u16::from_str_radix(p, 16).ok());
            if let (true, Some(on), Some(inode)) = (listening, on, f.get(9)) {
                if port.is_none_or(|p| p == on) {
                    sockets.push((format!("socket:[{inode}]"), on));
                }
            }
        }
    }
    Ok(sockets)
}

/// The socket links among the descriptors of `pid`, with their descriptor numbers; an error when
/// they cannot be listed for lack of descriptors (other errors: another user's process without
/// root, an exited one, are none).
fn socket_links(pid: u32) -> io::Result<Vec<(u32, String)>> {
    let fds = match std::fs::read_dir(format!("/proc/{pid}/fd")) {
        Ok(fds) => fds,
        Err(e) if crate::limits::is_out_of_descriptors(&e) => return Err(e),
        Err(_) => return Ok(Vec::new()),
    };
    // readlink needs no descriptor of its own.
    Ok(fds
        .flatten()
        .filter_map(|fd| {
            let n = fd.file_name().to_str()?.parse().ok()?;
            Some((n, std::fs::read_link(fd.path()).ok()?.to_string_lossy().into_owned()))
        })
        .collect())
}

/// The process holding a listening TCP socket on `port` (IPv4 or IPv6), from `/proc/net/tcp{,6}`
/// and the processes' descriptors. `Ok(None)` if nobody listens there or the holder's
/// descriptors cannot be read (another user's process, without root); an error when `/proc`
/// itself cannot be read — above all when this process is out of descriptors
/// ([`crate::limits::is_out_of_descriptors`]), which says nothing about who listens. Errors are
/// the system's own (their `raw_os_error` kept), without a path.
pub fn listening_pid(port: u16) -> io::Result<Option<u32>> {
    Ok(listener(port)?.map(|l| l.pid))
}

/// Which descriptor of which process holds a listening TCP socket: what [`listener`] found, kept
/// so that [`Listener::still_listening`] can check it again with one `readlink` instead of
/// scanning every socket and process of the machine.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Listener {
    /// The process.
    pub pid: u32,
    /// Its descriptor of the socket.
    pub fd: u32,
    /// The socket's `socket:[inode]` link text.
    link: String,
}

impl Listener {
    /// Whether the process still holds this very socket. A listening socket cannot be bound to
    /// another port, its inode is not reused while it lives, and it dies with the process (a
    /// reused pid holds other sockets), so this proves that `pid` still listens on the port
    /// [`listener`] was asked about — without reading `/proc/net/tcp`, whose length grows with
    /// every connection of the machine (each closed one stays in TIME_WAIT for a minute).
    pub fn still_listening(&self) -> bool {
        std::fs::read_link(format!("/proc/{}/fd/{}", self.pid, self.fd))
            .is_ok_and(|l| l.as_os_str().as_encoded_bytes() == self.link.as_bytes())
    }
}

/// The process and descriptor holding a listening TCP socket on `port`, as [`listening_pid`]
/// finds it (and with its errors).
pub fn listener(port: u16) -> io::Result<Option<Listener>> {
    let sockets: BTreeSet<String> = listening_sockets(Some(port))?.into_iter().map(|(s, _)| s).collect();
    if sockets.is_empty() {
        return Ok(None);
    }
    for entry in std::fs::read_dir("/proc")? {
        let entry = entry?;
        let Some(pid) = entry.file_name().to_str().and_then(|s| s.parse::<u32>().ok()) else { continue };
        if let Some((fd, link)) = socket_links(pid)?.into_iter().find(|(_, l)| sockets.contains(l)) {
            return Ok(Some(Listener { pid, fd, link }));
        }
    }
    Ok(None)
}

/// The TCP ports process `pid` listens on (IPv4 or IPv6), sorted; empty when its descriptors
/// cannot be read.
pub fn listening_ports(pid: u32) -> io::Result<Vec<u16>> {
    let links: BTreeSet<String> = socket_links(pid)?.into_iter().map(|(_, l)| l).collect();
    let mut ports: Vec<u16> =
        listening_sockets(None)?.into_iter().filter(|(s, _)| links.contains(s)).map(|(_, p)| p).collect();
    ports.sort_unstable();
    ports.dedup();
    Ok(ports)
}

/// The effective uid and gid of a process (`/proc/<pid>/status`); `None` if it does not exist.
pub fn owner(pid: u32) -> Option<(u32, u32)> {
    let status = std::fs::read_to_string(format!("/proc/{pid}/status")).ok()?;
    let field = |key: &str| -> Option<u32> {
        status.lines().find_map(|l| l.strip_prefix(key))?.split_whitespace().nth(1)?.parse().ok()
    };
    Some((field("Uid:")?, field("Gid:")?))
}

/// The executable of a process (`/proc/<pid>/exe`).
pub fn executable(pid: u32) -> io::Result<PathBuf> {
    std::fs::read_link(format!("/proc/{pid}/exe"))
}

/// True while process `pid` runs: it exists and is not a zombie (exited, not yet reaped by its
/// parent, and holding nothing any more).
pub fn is_running(pid: u32) -> bool {
    match std::fs::read_to_string(format!("/proc/{pid}/stat")) {
        // The state follows the command name, which is in parentheses and may contain any byte.
        Ok(stat) => {
            stat.rsplit_once(')').and_then(|(_, rest)| rest.split_whitespace().next()).is_some_and(|s| s != "Z")
        }
        Err(_) => false,
    }
}

/// An exclusive lock on a file ([`crate::lock`]), held until dropped; the file names the holder.
#[derive(Debug)]
pub struct LockFile {
    file: File,
    path: PathBuf,
}

impl LockFile {
    /// Takes the lock on `path` without waiting and writes `holder` into the file. If another
    /// process holds it, returns `Err(Ok(what that holder wrote))`; `Err(Err(message))` when the
    /// file cannot be opened, locked or written. A lock dies with its process: a holder that crashed
    /// leaves no stale lock (its file stays, unlocked, and is reused); one that lets go removes
    /// the file.
    pub fn try_acquire(path: &Path, holder: &str) -> Result<LockFile, Result<String, String>> {
        loop {
            let mut file = std::fs::OpenOptions::new()
                .read(true)
                .write(true)
                .create(true)
                .truncate(false)
                .open(path)
                .map_err(|e| Err(format!("cannot open {}: {e}", path.display())))?;
            let locked = crate::lock::try_lock_exclusive(&file)
                .map_err(|e| Err(format!("cannot lock {}: {e}", path.display())))?;
            if !locked {
                let mut held = String::new();
                let _ = file.read_to_string(&mut held);
                return Err(Ok(held.trim().to_string()));
            }
            // A holder removes the file when it lets go: if it did so between our open and our
            // flock, we hold a lock on a file nobody else can find; open the path again.
            let same = std::fs::metadata(path).ok().map(|m| (m.dev(), m.ino()));
            let ours = file.metadata().ok().map(|m| (m.dev(), m.ino()));
            if same.is_none() || same != ours {
                continue;
            }
            let written = file.set_len(0).and_then(|_| file.rewind()).and_then(|_| writeln!(file, "{holder}"));
            written.map_err(|e| Err(format!("cannot write {}: {e}", path.display())))?;
            return Ok(LockFile { file, path: path.to_path_buf() });
        }
    }

    /// Where the lock is.
    pub fn path(&self) -> &Path {
        &self.path
    }
}

/// Removes the lock files `<dir>/<prefix>*.lock` that no process holds (left by holders that
/// were killed); returns how many. A held lock is never touched.
pub fn remove_stale_locks(dir: &Path, prefix: &str) -> usize {
    let Ok(entries) = std::fs::read_dir(dir) else { return 0 };
    entries
        .flatten()
        .map(|e| e.path())
        .filter(|p| {
            p.file_name().and_then(|n| n.to_str()).is_some_and(|n| n.starts_with(prefix) && n.ends_with(".lock"))
        })
        .filter(|p| LockFile::try_acquire(p, "").is_ok()) // dropped at once: removed
        .count()
}

impl Drop for LockFile {
    fn drop(&mut self) {
        // Removed while still locked, so that locks keyed by pid do not pile up; a process that
        // opened the old file meanwhile sees it is gone after its flock and opens the path again
        // (see `try_acquire`). Emptied first, for one that reads it meanwhile.
        let _ = self.file.set_len(0);
        let _ = std::fs::remove_file(&self.path);
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::os::fd::AsRawFd;

    #[test]
    fn the_listener_of_a_port_is_this_process() {
        let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
        let port = listener.local_addr().unwrap().port();
        assert_eq!(listening_pid(port).unwrap(), Some(std::process::id()));
        assert!(listening_ports(std::process::id()).unwrap().contains(&port));
        drop(listener);
        assert_eq!(listening_pid(port).unwrap(), None);
        assert!(!listening_ports(std::process::id()).unwrap().contains(&port));
    }

    #[test]
    fn a_found_listener_is_checked_again_by_its_descriptor() {
        let socket = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
        let port = socket.local_addr().unwrap().port();
        let found = listener(port).unwrap().expect("this process listens");
        assert_eq!((found.pid, found.fd), (std::process::id(), socket.as_raw_fd() as u32));
        assert!(found.still_listening());
        drop(socket);
        assert!(!found.still_listening(), "the socket is closed");
        // The descriptor number reused by another socket (the lowest free one, unless another
        // test took it meanwhile) is not the listener.
        let other = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
        if other.as_raw_fd() as u32 == found.fd {
            assert!(!found.still_listening(), "another socket on the same descriptor");
        }
    }

    #[test]
    fn owner_executable_and_running() {
        let me = std::process::id();
        assert_eq!(owner(me).map(|o| o.0), Some(crate::caps::euid()));
        assert_eq!(executable(me).unwrap(), std::env::current_exe().unwrap());
        assert!(is_running(me));
        assert!(!is_running(u32::MAX / 2));
    }

    #[test]
    fn a_zombie_is_not_running() {
        let mut child = std::process::Command::new("true").spawn().unwrap();
        let pid = child.id();
        // Exited but not reaped: a zombie until wait().
        let deadline = std::time::Instant::now() + std::time::Duration::from_secs(10);
        while is_running(pid) {
            assert!(std::time::Instant::now() < deadline, "the child never exited");
            std::thread::sleep(std::time::Duration::from_millis(5));
        }
        assert!(std::path::Path::new(&format!("/proc/{pid}")).exists(), "still a zombie, not reaped");
        child.wait().unwrap();
    }

    #[test]
    fn a_lock_is_exclusive_names_its_holder_and_ends_with_its_holder() {
        let dir = std::env::temp_dir().join(format!("moirai-lock-test-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let path = dir.join("x.lock");
        let first = LockFile::try_acquire(&path, "pid 1 state /a").unwrap();
        // flock locks belong to the open file description: a second open conflicts even here.
        assert_eq!(LockFile::try_acquire(&path, "pid 2").unwrap_err(), Ok("pid 1 state /a".to_string()));
        drop(first);
        // Another test of this process may fork (to spawn a child) while the descriptor is open:
        // the child holds the lock until its exec closes the descriptor (O_CLOEXEC), a moment.
        let deadline = std::time::Instant::now() + std::time::Duration::from_secs(10);
        let again = loop {
            match LockFile::try_acquire(&path, "pid 3") {
                Ok(lock) => break lock,
                Err(held) => {
                    assert_eq!(held, Ok(String::new()), "a dropped lock names no holder");
                    assert!(std::time::Instant::now() < deadline, "the lock was never released");
                    std::thread::sleep(std::time::Duration::from_millis(5));
                }
            }
        };
        assert_eq!(again.path(), path);
        drop(again);
        assert!(!path.exists(), "a lock let go of leaves no file behind");
        // A holder killed without letting go leaves its file; it is stale once nobody holds it.
        let held = LockFile::try_acquire(&dir.join("a.lock"), "held").unwrap();
        std::fs::write(dir.join("b.lock"), "middleware pid 1 (killed)").unwrap();
        assert_eq!(remove_stale_locks(&dir, ""), 1);
        assert!(dir.join("a.lock").exists() && !dir.join("b.lock").exists());
        drop(held);
        std::fs::remove_dir_all(&dir).unwrap();
    }
}

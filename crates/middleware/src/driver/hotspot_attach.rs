//! A command to a HotSpot JVM over its attach protocol, spoken directly: what `jcmd <pid>
//! Thread.print` does, without starting a JVM to do it. jcmd costs ~0.3 s of CPU a dump (a JVM
//! starting); this costs the middleware a few system calls and the target the dump itself.
//!
//! The protocol (HotSpot on Linux, version 1, which JDK 8 to 25 accept): once its attach listener
//! runs, the JVM listens on the UNIX socket `/tmp/.java_pid<ns pid>` of its own mount namespace.
//! It starts the listener on `SIGQUIT` when a file `.attach_pid<ns pid>` exists in its working
//! directory or in its `/tmp`, created by its own user or by root; without that file, `SIGQUIT`
//! only prints a thread dump to the JVM's stdout. A client writes `1`, the command and three
//! arguments, each ended by a NUL byte; the JVM answers a status line (`0`: done) and the
//! command's output, then closes the connection. It accepts a client of its own effective user
//! and group, or root. A JVM that is killed leaves its socket file behind; one that later gets the
//! same pid finds that file without a listener, which is then removed and the listener started. `<ns pid>` is the JVM's pid in its own pid namespace (the last `NSpid` of
//! `/proc/<pid>/status`); its `/tmp` is `/proc/<pid>/root/tmp` from here.

use std::io::{Read, Write};
use std::os::unix::fs::PermissionsExt;
use std::os::unix::net::UnixStream;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, Instant};

use moirai_os::process::{signal_process, Signal};

/// How long a JVM may take to start its attach listener after `SIGQUIT` (jcmd waits 10 s).
const LISTENER_START: Duration = Duration::from_secs(10);

/// The longest a wait (for the listener, for an answer) goes without looking at the caller's stop
/// flag: a dump under way when the middleware is told to stop ends within this, not at its
/// timeout (a stop has a few seconds to restore everything).
const STOP_CHECK: Duration = Duration::from_millis(100);

/// Why a command did not run: before the JVM took it (`connected: false`: a caller may try
/// another way, e.g. jcmd) or after (the JVM took it and failed or did not answer in time).
#[derive(Debug)]
pub struct AttachError {
    /// Whether the JVM had accepted the connection.
    pub connected: bool,
    /// What went wrong, naming the JVM and the path.
    pub message: String,
}

impl AttachError {
    fn before(message: String) -> AttachError {
        AttachError { connected: false, message }
    }
}

/// Runs diagnostic command `command` (e.g. `Thread.print`) in JVM `pid`, as `jcmd <pid> <command>`
/// would, and returns its output; the whole exchange ends by `timeout`, or soon after `stop` is
/// raised. Starts the JVM's attach listener first when it is not running, which only a process
/// that maps HotSpot's `libjvm.so` is sent `SIGQUIT` for (its default action would end any other
/// process).
pub fn jcmd(pid: u32, command: &str, timeout: Duration, stop: &AtomicBool) -> Result<String, AttachError> {
    let deadline = Instant::now() + timeout;
    let ns_pid = ns_pid(pid).ok_or_else(|| AttachError::before(format!("process {pid} is gone")))?;
    let tmp = PathBuf::from(format!("/proc/{pid}/root/tmp"));
    let socket = tmp.join(format!(".java_pid{ns_pid}"));
    if !is_socket(&socket) {
        start_listener(pid, ns_pid, &tmp, &socket, deadline.min(Instant::now() + LISTENER_START), stop)?;
    }
    let cannot = |e: std::io::Error| {
        AttachError::before(format!("cannot connect to JVM {pid}'s attach socket {}: {e}", socket.display()))
    };
    let mut stream = match UnixStream::connect(&socket) {
        Ok(stream) => stream,
        // A socket file nobody listens on: left by a JVM that was killed (it removes its socket
        // only when it exits normally) and whose pid this one has now. Removed, and the listener
        // started as for a JVM without one.
        Err(e) if e.kind() == std::io::ErrorKind::ConnectionRefused => {
            let _ = std::fs::remove_file(&socket);
            start_listener(pid, ns_pid, &tmp, &socket, deadline.min(Instant::now() + LISTENER_START), stop)?;
            UnixStream::connect(&socket).map_err(cannot)?
        }
        Err(e) => return Err(cannot(e)),
    };
    let failed = |what: &str, e: std::io::Error| AttachError {
        connected: true,
        message: format!("JVM {pid} over its attach socket: {what}: {e}"),
    };
    let mut request = Vec::with_capacity(32 + command.len());
    for part in ["1", "jcmd", command, "", ""] {
        request.extend_from_slice(part.as_bytes());
        request.push(0);
    }
    stream.set_write_timeout(Some(remaining(deadline))).map_err(|e| failed("timeout", e))?;
    stream.write_all(&request).map_err(|e| failed("sending the command", e))?;
    let answer = read_answer(&mut stream, deadline, stop).map_err(|why| AttachError {
        connected: true,
        message: match why {
            Unanswered::Timeout => format!("JVM {pid} did not answer {command} within {timeout:?}"),
            Unanswered::Stopped => format!("gave up waiting for JVM {pid}'s {command}: stopping"),
            Unanswered::Io(e) => format!("JVM {pid} over its attach socket: reading the answer: {e}"),
        },
    })?;
    parse_answer(&String::from_utf8_lossy(&answer))
        .map_err(|message| AttachError { connected: true, message: format!("JVM {pid}, {command}: {message}") })
}

/// Why no whole answer came.
#[derive(Debug)]
enum Unanswered {
    Timeout,
    Stopped,
    Io(std::io::Error),
}

/// Reads until the peer closes the connection, by `deadline`, looking at `stop` at least every
/// [`STOP_CHECK`].
fn read_answer(stream: &mut UnixStream, deadline: Instant, stop: &AtomicBool) -> Result<Vec<u8>, Unanswered> {
    let mut answer = Vec::new();
    let mut buf = [0u8; 64 * 1024];
    loop {
        if stop.load(Ordering::SeqCst) {
            return Err(Unanswered::Stopped);
        }
        let left = remaining(deadline);
        if left.is_zero() {
            return Err(Unanswered::Timeout);
        }
        stream.set_read_timeout(Some(left.min(STOP_CHECK))).map_err(Unanswered::Io)?;
        match stream.read(&mut buf) {
            Ok(0) => return Ok(answer),
            Ok(n) => answer.extend_from_slice(&buf[..n]),
            Err(e) if e.kind() == std::io::ErrorKind::Interrupted => {}
            Err(e) if matches!(e.kind(), std::io::ErrorKind::WouldBlock | std::io::ErrorKind::TimedOut) => {}
            Err(e) => return Err(Unanswered::Io(e)),
        }
    }
}

/// The output of an answer (`<status>\n<output>`), or the JVM's message when the status is not 0.
fn parse_answer(answer: &str) -> Result<String, String> {
    let (status, output) = answer.split_once('\n').unwrap_or((answer, ""));
    match status.trim().parse::<i32>() {
        Ok(0) => Ok(output.to_string()),
        Ok(code) => Err(format!("failed with status {code}: {:.300}", output.trim())),
        Err(_) => Err(format!("not an attach answer: {:.100}", answer.trim())),
    }
}

/// Asks the JVM to start its attach listener and waits until its socket exists, by `deadline` (or
/// until `stop` is raised).
fn start_listener(
    pid: u32,
    ns_pid: u32,
    tmp: &Path,
    socket: &Path,
    deadline: Instant,
    stop: &AtomicBool,
) -> Result<(), AttachError> {
    if !maps_libjvm(pid) {
        return Err(AttachError::before(format!(
            "process {pid} does not run HotSpot (no libjvm.so mapped): not sending it SIGQUIT"
        )));
    }
    // The working directory first, as jcmd does; the JVM's /tmp where that is not writable.
    let name = format!(".attach_pid{ns_pid}");
    let candidates = [PathBuf::from(format!("/proc/{pid}/cwd")).join(&name), tmp.join(&name)];
    let trigger = candidates
        .iter()
        .find(|path| std::fs::File::create(path).is_ok())
        .ok_or_else(|| {
            AttachError::before(format!("cannot create {} or {}", candidates[0].display(), candidates[1].display()))
        })?
        .clone();
    let _ = std::fs::set_permissions(&trigger, std::fs::Permissions::from_mode(0o600));
    // Owned by the JVM's user: JDK 8 accepts no other owner (later JDKs accept root too).
    if let Some((uid, gid)) = moirai_os::identity::owner(pid) {
        let _ = std::os::unix::fs::chown(&trigger, Some(uid), Some(gid));
    }
    let started = (|| {
        signal_process(pid, Signal::QUIT)
            .map_err(|e| AttachError::before(format!("cannot signal JVM {pid} to start its attach listener: {e}")))?;
        while !is_socket(socket) {
            if stop.load(Ordering::SeqCst) {
                return Err(AttachError::before(format!("gave up waiting for JVM {pid}'s attach listener: stopping")));
            }
            if Instant::now() >= deadline {
                return Err(AttachError::before(format!(
                    "JVM {pid} started no attach listener ({} did not appear; was it started with \
                     -XX:+DisableAttachMechanism?)",
                    socket.display()
                )));
            }
            std::thread::sleep(Duration::from_millis(10));
        }
        Ok(())
    })();
    let _ = std::fs::remove_file(&trigger);
    started
}

fn remaining(deadline: Instant) -> Duration {
    deadline.saturating_duration_since(Instant::now())
}

fn is_socket(path: &Path) -> bool {
    use std::os::unix::fs::FileTypeExt;
    std::fs::metadata(path).is_ok_and(|m| m.file_type().is_socket())
}

/// The process's pid in its own (innermost) pid namespace: the last `NSpid` of its status, or
/// `pid` on kernels without that line.
fn ns_pid(pid: u32) -> Option<u32> {
    let status = std::fs::read_to_string(format!("/proc/{pid}/status")).ok()?;
    let ns =
        status.lines().find_map(|l| l.strip_prefix("NSpid:")).and_then(|l| l.split_whitespace().last()?.parse().ok());
    Some(ns.unwrap_or(pid))
}

/// Whether the process maps HotSpot's library (a JVM, whatever its executable is called).
fn maps_libjvm(pid: u32) -> bool {
    std::fs::read_to_string(format!("/proc/{pid}/maps")).is_ok_and(|maps| maps.contains("/libjvm.so"))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn an_answer_is_its_output_when_its_status_is_zero() {
        assert_eq!(
            parse_answer("0\nFull thread dump\n\"main\" nid=0x1\n").unwrap(),
            "Full thread dump\n\"main\" nid=0x1\n"
        );
        let e = parse_answer("1\njava.lang.IllegalArgumentException: Unknown diagnostic command\n").unwrap_err();
        assert!(e.contains("status 1") && e.contains("Unknown diagnostic command"), "{e}");
        assert!(parse_answer("").unwrap_err().contains("not an attach answer"));
    }

    /// This process is no JVM: it is never sent SIGQUIT (the test would die of it), and says why.
    #[test]
    fn a_process_without_hotspot_is_not_signalled() {
        let stop = AtomicBool::new(false);
        let e = jcmd(std::process::id(), "Thread.print", Duration::from_secs(1), &stop).unwrap_err();
        assert!(!e.connected);
        assert!(e.message.contains("does not run HotSpot"), "{}", e.message);
        let e = jcmd(u32::MAX - 1, "Thread.print", Duration::from_secs(1), &stop).unwrap_err();
        assert!(e.message.contains("is gone"), "{}", e.message);
    }

    /// A JVM that does not answer (busy, starved of CPU) holds a dump until its timeout, unless
    /// the caller stops: then the wait ends within a few of its checks.
    #[test]
    fn a_stop_ends_the_wait_for_an_answer_and_an_answer_is_read_to_its_end() {
        let (mut ours, mut theirs) = UnixStream::pair().unwrap();
        let stop = std::sync::Arc::new(AtomicBool::new(false));
        let raise = {
            let stop = stop.clone();
            std::thread::spawn(move || {
                std::thread::sleep(Duration::from_millis(300));
                stop.store(true, Ordering::SeqCst);
            })
        };
        let start = Instant::now();
        let why = read_answer(&mut ours, Instant::now() + Duration::from_secs(60), &stop).unwrap_err();
        let waited = start.elapsed();
        raise.join().unwrap();
        assert!(matches!(why, Unanswered::Stopped), "{why:?}");
        assert!(waited >= Duration::from_millis(300) && waited < Duration::from_secs(5), "waited {waited:?}");
        // Without a stop, the timeout ends it.
        let calm = AtomicBool::new(false);
        let why = read_answer(&mut ours, Instant::now() + Duration::from_millis(250), &calm).unwrap_err();
        assert!(matches!(why, Unanswered::Timeout), "{why:?}");
        // An answer in pieces, then the peer closes: all of it.
        theirs.write_all(b"0\nFull thread").unwrap();
        theirs.write_all(b" dump\n").unwrap();
        drop(theirs);
        let answer = read_answer(&mut ours, Instant::now() + Duration::from_secs(60), &calm).unwrap();
        assert_eq!(answer, b"0\nFull thread dump\n");
    }
}

//! Child processes of the lab: the engine run (or Flink job) and the middleware of one point.
//!
//! Every child gets its own process group, so that a Ctrl-C typed at the terminal reaches the
//! lab alone and the lab stops its children in order (middleware first, so it can restore the
//! threads it steered); and a parent-death signal, so that a child never outlives a lab that was
//! killed outright. Children are stopped by PID only — the signal goes to the process group the
//! child leads (its id is the child's PID), so helpers the child started stop with it — and only
//! while the child is not yet reaped, so a signal can never reach a process that reused the PID.

use std::io::Read;
use std::path::Path;
use std::process::{Command, ExitStatus, Stdio};
use std::sync::atomic::{AtomicBool, Ordering};
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

use moirai_os::process::{set_parent_death_signal, signal_group};
use moirai_os::Signal;

/// Bytes of a child's stdout kept (the engine's JSON summary is on its last line).
const STDOUT_KEEP: usize = 1 << 20;
/// Bytes of a child's stderr kept, to explain a failure.
const STDERR_KEEP: usize = 16 << 10;
/// How often a waiting loop looks at its children and at the stop flag.
pub(crate) const POLL: Duration = Duration::from_millis(20);

/// A running child whose stdout and stderr are read on two threads (reading them one after the
/// other could deadlock on a full pipe).
pub struct Child {
    inner: std::process::Child,
    status: Option<ExitStatus>,
    stdout: Option<JoinHandle<Vec<u8>>>,
    stderr: Option<JoinHandle<Vec<u8>>>,
}

/// How waiting for a child ended.
#[derive(Debug)]
pub enum Outcome {
    /// The child exited by itself.
    Exited(ExitStatus),
    /// The deadline passed; the child was killed.
    TimedOut,
    /// The stop flag was raised (Ctrl-C); the child was killed.
    Interrupted,
}

impl Child {
    /// Starts `program args...` with stdin closed and stdout/stderr captured.
    pub fn spawn(program: &Path, args: &[String]) -> std::io::Result<Child> {
        let mut cmd = Command::new(program);
        cmd.args(args).stderr(Stdio::piped());
        Self::start(cmd)
    }

    /// Starts `cmd` with stdin closed, stdout captured and stderr written to `stderr` (a log
    /// file: a JVM's log is too long to keep in memory, and worth keeping after a failure).
    /// [`Child::output`] then returns an empty stderr.
    pub fn spawn_logged(mut cmd: Command, stderr: std::fs::File) -> std::io::Result<Child> {
        cmd.stderr(stderr);
        Self::start(cmd)
    }

    fn start(mut cmd: Command) -> std::io::Result<Child> {
        cmd.stdin(Stdio::null()).stdout(Stdio::piped());
        configure(&mut cmd);
        let mut inner = cmd.spawn()?;
        let stdout = inner.stdout.take().map(|s| tail_reader(s, STDOUT_KEEP));
        let stderr = inner.stderr.take().map(|s| tail_reader(s, STDERR_KEEP));
        Ok(Child { inner, status: None, stdout, stderr })
    }

    /// The child's PID.
    pub fn pid(&self) -> u32 {
        self.inner.id()
    }

    /// The exit status, if the child has exited (it is then reaped).
    pub fn try_wait(&mut self) -> Option<ExitStatus> {
        if self.status.is_none() {
            // An error here means the child was already reaped, which only this struct does.
            self.status = self.inner.try_wait().ok().flatten();
        }
        self.status
    }

    /// Waits until the child exits, `deadline` passes or `stop` is raised; in the last two
    /// cases the child is stopped ([`Child::terminate`] with SIGTERM).
    pub fn wait_until(&mut self, deadline: Instant, stop: &AtomicBool) -> Outcome {
        loop {
            if let Some(status) = self.try_wait() {
                return Outcome::Exited(status);
            }
            if stop.load(Ordering::SeqCst) {
                self.terminate(Signal::TERM, Duration::from_secs(2));
                return Outcome::Interrupted;
            }
            if Instant::now() >= deadline {
                self.terminate(Signal::TERM, Duration::from_secs(2));
                return Outcome::TimedOut;
            }
            std::thread::sleep(POLL);
        }
    }

    /// Sends `signal` to the child by PID, waits up to `grace` for it to exit, then sends
    /// SIGKILL and reaps it. Returns its exit status.
    pub fn terminate(&mut self, signal: Signal, grace: Duration) -> Option<ExitStatus> {
        if self.try_wait().is_some() {
            return self.status;
        }
        self.signal(signal);
        let until = Instant::now() + grace;
        while Instant::now() < until {
            if self.try_wait().is_some() {
                return self.status;
            }
            std::thread::sleep(POLL.min(Duration::from_millis(5)));
        }
        if self.try_wait().is_none() {
            self.signal(Signal::KILL);
            self.status = self.inner.wait().ok();
        }
        self.status
    }

    fn signal(&self, signal: Signal) {
        // Only a child this struct has not reaped gets a signal: its PID cannot have been reused.
        // It leads its own process group (`process_group(0)` at spawn), whose id is its PID.
        if self.status.is_none() {
            let _ = signal_group(self.inner.id(), signal);
        }
    }

    /// Everything kept of stdout and the tail of stderr, once the child has exited (they are
    /// empty if it has not).
    pub fn output(&mut self) -> (String, String) {
        if self.status.is_none() {
            return (String::new(), String::new());
        }
        let join = |h: Option<JoinHandle<Vec<u8>>>| {
            h.and_then(|h| h.join().ok()).map(|b| String::from_utf8_lossy(&b).into_owned()).unwrap_or_default()
        };
        (join(self.stdout.take()), join(self.stderr.take()))
    }
}

impl Drop for Child {
    /// A child is never left behind, also when the lab unwinds from a bug.
    fn drop(&mut self) {
        if self.status.is_none() {
            self.terminate(Signal::KILL, Duration::from_millis(100));
        }
    }
}

/// Own process group and a parent-death signal (see the module doc).
fn configure(cmd: &mut Command) {
    use std::os::unix::process::CommandExt;
    cmd.process_group(0);
    set_parent_death_signal(cmd, Signal::TERM);
}

/// Reads a pipe to its end on a thread, keeping the last `keep` bytes.
fn tail_reader<R: Read + Send + 'static>(mut pipe: R, keep: usize) -> JoinHandle<Vec<u8>> {
    std::thread::spawn(move || {
        let mut kept = Vec::new();
        let mut buf = [0u8; 8192];
        loop {
            match pipe.read(&mut buf) {
                Ok(0) | Err(_) => break,
                Ok(n) => {
                    kept.extend_from_slice(&buf[..n]);
                    if kept.len() > 2 * keep {
                        kept.drain(..kept.len() - keep);
                    }
                }
            }
        }
        if kept.len() > keep {
            kept.drain(..kept.len() - keep);
        }
        kept
    })
}

/// The last `lines` lines of `text`, trimmed, for an error message.
pub fn tail_lines(text: &str, lines: usize) -> String {
    let all: Vec<&str> = text.lines().filter(|l| !l.trim().is_empty()).collect();
    all[all.len().saturating_sub(lines)..].join("\n")
}

/// The last `lines` lines of a log file (read from its last 64 KiB), trimmed, for an error
/// message; empty if the file cannot be read.
pub fn file_tail(path: &Path, lines: usize) -> String {
    use std::io::{Seek, SeekFrom};
    let Ok(mut f) = std::fs::File::open(path) else { return String::new() };
    let len = f.metadata().map(|m| m.len()).unwrap_or(0);
    let _ = f.seek(SeekFrom::Start(len.saturating_sub(64 << 10)));
    let mut bytes = Vec::new();
    let _ = f.read_to_end(&mut bytes);
    tail_lines(&String::from_utf8_lossy(&bytes), lines)
}

/// A TCP port on 127.0.0.1 that is free now (bound with port 0, then released). Another process
/// may take it before the child binds it; the caller retries on "address in use".
pub fn free_port() -> std::io::Result<u16> {
    Ok(std::net::TcpListener::bind("127.0.0.1:0")?.local_addr()?.port())
}

/// Waits until something accepts TCP connections on `127.0.0.1:port`, the child exits, `stop`
/// is raised or `timeout` passes. True if the port answered.
pub fn wait_for_port(port: u16, child: &mut Child, timeout: Duration, stop: &AtomicBool) -> bool {
    let addr = std::net::SocketAddr::from(([127, 0, 0, 1], port));
    let until = Instant::now() + timeout;
    while Instant::now() < until && !stop.load(Ordering::SeqCst) && child.try_wait().is_none() {
        if std::net::TcpStream::connect_timeout(&addr, Duration::from_millis(200)).is_ok() {
            return true;
        }
        std::thread::sleep(Duration::from_millis(10));
    }
    false
}

/// Describes an exit status for a failure message.
pub fn describe(status: ExitStatus) -> String {
    use std::os::unix::process::ExitStatusExt;
    match (status.code(), status.signal()) {
        (Some(code), _) => format!("exit code {code}"),
        (None, Some(sig)) => format!("killed by signal {sig}"),
        _ => "unknown exit status".to_string(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn sh(script: &str) -> Child {
        Child::spawn(Path::new("/bin/sh"), &["-c".to_string(), script.to_string()]).unwrap()
    }

    fn alive(pid: u32) -> bool {
        // A reaped child has no /proc entry.
        Path::new(&format!("/proc/{pid}")).exists()
    }

    #[test]
    fn captures_stdout_and_stderr_tail() {
        let mut c = sh("echo first; echo '{\"a\":1}'; for i in 1 2 3; do echo err$i >&2; done; exit 3");
        let outcome = c.wait_until(Instant::now() + Duration::from_secs(30), &AtomicBool::new(false));
        assert!(matches!(outcome, Outcome::Exited(s) if s.code() == Some(3)), "{outcome:?}");
        let (out, err) = c.output();
        assert_eq!(out, "first\n{\"a\":1}\n");
        assert_eq!(tail_lines(&err, 2), "err2\nerr3");
    }

    #[test]
    fn a_child_past_its_deadline_is_killed() {
        let mut c = sh("sleep 300");
        let pid = c.pid();
        let outcome = c.wait_until(Instant::now() + Duration::from_millis(100), &AtomicBool::new(false));
        assert!(matches!(outcome, Outcome::TimedOut), "{outcome:?}");
        assert!(!alive(pid), "the child {pid} is still there");
    }

    #[test]
    fn a_child_ignoring_sigterm_gets_sigkill() {
        // The shell ignores TERM, so only the SIGKILL after the grace period ends it.
        let mut c = sh("trap '' TERM; echo ready; while :; do sleep 0.05; done");
        let pid = c.pid();
        std::thread::sleep(Duration::from_millis(200));
        let status = c.terminate(Signal::TERM, Duration::from_millis(200)).unwrap();
        use std::os::unix::process::ExitStatusExt;
        assert_eq!(status.signal(), Some(Signal::KILL.number()));
        assert!(!alive(pid));
    }

    #[test]
    fn the_stop_flag_interrupts_waiting() {
        let mut c = sh("sleep 300");
        let stop = AtomicBool::new(true);
        assert!(matches!(c.wait_until(Instant::now() + Duration::from_secs(300), &stop), Outcome::Interrupted));
        assert!(c.try_wait().is_some());
    }

    #[test]
    fn dropping_a_child_stops_it() {
        let c = sh("sleep 300");
        let pid = c.pid();
        drop(c);
        assert!(!alive(pid));
    }

    #[test]
    fn finds_a_port_that_can_be_bound() {
        let port = free_port().unwrap();
        assert_ne!(port, 0);
        std::net::TcpListener::bind(("127.0.0.1", port)).unwrap();
    }
}

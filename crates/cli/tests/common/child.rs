//! Child processes for the hardening tests: stopped by PID when their guard drops (also when a
//! test fails), their output drained while they run (a full pipe would block them), waits with
//! a deadline. Included by path (`#[path]`) by the tests that use it.

use std::io::Read;
use std::net::TcpListener;
use std::process::{Child, Command, Stdio};
use std::sync::{Arc, Mutex};
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

/// Only turns a hang into a failure; nothing here asserts on speed.
pub const PATIENCE: Duration = Duration::from_secs(90);

/// A running child whose stdout and stderr are collected.
pub struct Proc {
    child: Option<Child>,
    out: Arc<Mutex<String>>,
    err: Arc<Mutex<String>>,
    readers: Vec<JoinHandle<()>>,
}

fn drain(from: impl Read + Send + 'static, into: Arc<Mutex<String>>) -> JoinHandle<()> {
    std::thread::spawn(move || {
        let mut from = from;
        let mut buf = [0u8; 8192];
        while let Ok(n) = from.read(&mut buf) {
            if n == 0 {
                return;
            }
            into.lock().unwrap().push_str(&String::from_utf8_lossy(&buf[..n]));
        }
    })
}

impl Proc {
    /// Starts `cmd` with no stdin.
    pub fn spawn(cmd: &mut Command) -> Proc {
        let mut child = cmd
            .stdin(Stdio::null())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .unwrap_or_else(|e| panic!("cannot start {cmd:?}: {e}"));
        let (out, err) = (Arc::new(Mutex::new(String::new())), Arc::new(Mutex::new(String::new())));
        let readers = vec![
            drain(child.stdout.take().expect("piped"), out.clone()),
            drain(child.stderr.take().expect("piped"), err.clone()),
        ];
        Proc { child: Some(child), out, err, readers }
    }

    /// Its pid.
    pub fn pid(&self) -> u32 {
        self.child.as_ref().expect("running").id()
    }

    /// What it wrote on stderr so far.
    pub fn stderr(&self) -> String {
        self.err.lock().unwrap().clone()
    }

    /// Sends `signal`.
    pub fn signal(&self, signal: i32) {
        // SAFETY: kill(2) on the pid of our own child, not reaped yet.
        unsafe { libc::kill(self.pid() as i32, signal) };
    }

    /// Waits for the exit (killing it after `patience`); returns the exit code, stdout and stderr.
    pub fn wait(mut self, patience: Duration) -> (Option<i32>, String, String) {
        let mut child = self.child.take().expect("running");
        let deadline = Instant::now() + patience;
        let status = loop {
            if let Some(status) = child.try_wait().expect("try_wait") {
                break status;
            }
            if Instant::now() > deadline {
                let _ = child.kill();
                let _ = child.wait();
                panic!("process {} did not exit within {patience:?}; stderr:\n{}", child.id(), self.stderr());
            }
            std::thread::sleep(Duration::from_millis(20));
        };
        for r in self.readers.drain(..) {
            let _ = r.join();
        }
        let out = self.out.lock().unwrap().clone();
        (status.code(), out, self.stderr())
    }
}

impl Drop for Proc {
    fn drop(&mut self) {
        if let Some(mut c) = self.child.take() {
            let _ = c.kill();
            let _ = c.wait();
        }
    }
}

/// A port nobody listens on (a moment ago).
pub fn free_port() -> u16 {
    TcpListener::bind("127.0.0.1:0").unwrap().local_addr().unwrap().port()
}

/// Waits until `ok`, failing the test after [`PATIENCE`].
pub fn wait_until(what: &str, mut ok: impl FnMut() -> bool) {
    let deadline = Instant::now() + PATIENCE;
    while !ok() {
        assert!(Instant::now() < deadline, "timed out waiting for {what}");
        std::thread::sleep(Duration::from_millis(50));
    }
}

/// Raises this process's soft descriptor limit so that it can hold `n` sockets.
pub fn allow_descriptors(n: u64) {
    let mut lim = libc::rlimit { rlim_cur: 0, rlim_max: 0 };
    // SAFETY: getrlimit/setrlimit with a valid, writable rlimit struct.
    unsafe {
        libc::getrlimit(libc::RLIMIT_NOFILE, &mut lim);
        if lim.rlim_cur < n {
            lim.rlim_cur = n.min(lim.rlim_max);
            libc::setrlimit(libc::RLIMIT_NOFILE, &lim);
        }
    }
}

/// Whether the tests run as root.
pub fn is_root() -> bool {
    // SAFETY: geteuid has no preconditions.
    unsafe { libc::geteuid() == 0 }
}

//! The engine's metrics endpoint survives what clients do to it: thousands of idle connections
//! against a low descriptor limit, a client that sends half a request and stalls, keep-alive.
//! A real engine process (`moirai run` under `ulimit -n 256`), real sockets; the engine is
//! stopped by its PID when the guard drops, also when a test fails.

use std::io::{BufRead, BufReader, Read, Write};
use std::net::{TcpListener, TcpStream};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

const BIN: &str = env!("CARGO_BIN_EXE_moirai");
/// Only turns a hang into a failure.
const PATIENCE: Duration = Duration::from_secs(60);

struct Engine {
    child: Child,
    port: u16,
}

impl Engine {
    /// `moirai run syn` serving its metrics, with at most `nofile` descriptors.
    fn start(nofile: u32) -> Engine {
        let port = TcpListener::bind("127.0.0.1:0").unwrap().local_addr().unwrap().port();
        let script = format!(
            "ulimit -n {nofile} && exec {BIN} run syn --ops 3 --rate 20000 --duration 120s --metrics-addr 127.0.0.1:{port}"
        );
        let child = Command::new("bash")
            .args(["-c", &script])
            .stdout(Stdio::null())
            .stderr(Stdio::piped())
            .spawn()
            .expect("start the engine");
        let engine = Engine { child, port };
        let deadline = Instant::now() + PATIENCE;
        while get(port, "/topology").is_none() {
            assert!(Instant::now() < deadline, "the endpoint never answered");
            std::thread::sleep(Duration::from_millis(50));
        }
        engine
    }

    fn tuples_in(&self) -> u64 {
        let text = get(self.port, "/metrics").expect("/metrics answers");
        text.lines()
            .filter(|l| l.starts_with("moirai_operator_tuples_in_total{") && l.contains("source"))
            .map(|l| l.rsplit(' ').next().unwrap().parse::<f64>().unwrap() as u64)
            .sum()
    }

    /// Stops it and returns its stderr.
    fn stop(mut self) -> String {
        let _ = self.child.kill();
        let _ = self.child.wait();
        let mut err = String::new();
        self.child.stderr.take().map(|mut e| e.read_to_string(&mut err));
        err
    }
}

impl Drop for Engine {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// One GET on a fresh connection; the body if the status is 200.
fn get(port: u16, path: &str) -> Option<String> {
    let resp = ureq::get(&format!("http://127.0.0.1:{port}{path}")).timeout(Duration::from_secs(10)).call().ok()?;
    resp.into_string().ok()
}

/// Raises this process's descriptor limit so that it can hold `n` sockets.
fn allow_descriptors(n: u64) {
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

#[test]
fn two_thousand_idle_connections_do_not_take_the_endpoint_down() {
    allow_descriptors(4096);
    let engine = Engine::start(256);
    let mut idle = Vec::new();
    for _ in 0..2000 {
        // Connections beyond what the engine keeps are closed by it; the connect itself succeeds
        // (the kernel's backlog) or is refused, both fine.
        if let Ok(s) = TcpStream::connect(("127.0.0.1", engine.port)) {
            idle.push(s);
        }
    }
    assert!(idle.len() > 1000, "the test opened its connections ({})", idle.len());
    // Still serving, while they are open; and the engine still processes tuples.
    let first = engine.tuples_in();
    std::thread::sleep(Duration::from_millis(300));
    assert!(engine.tuples_in() > first, "tuples still flow");
    assert!(get(engine.port, "/topology").is_some_and(|t| t.contains("\"pid\"")));
    drop(idle);
    std::thread::sleep(Duration::from_millis(300));
    for _ in 0..20 {
        assert!(get(engine.port, "/metrics").is_some(), "served after the flood");
    }
    let err = engine.stop();
    assert!(err.matches("out of file descriptors").count() <= 1, "an incident is reported once:\n{err}");
}

#[test]
fn a_slow_client_does_not_block_others_and_is_timed_out() {
    let engine = Engine::start(1024);
    let mut slow = TcpStream::connect(("127.0.0.1", engine.port)).unwrap();
    slow.write_all(b"GET /metrics HTTP/1.1\r\nHost: x\r\n").unwrap();
    // Others are served while it stalls.
    for _ in 0..5 {
        assert!(get(engine.port, "/metrics").is_some());
    }
    // Within the head timeout (5 s) plus slack, the server closes it.
    slow.set_read_timeout(Some(Duration::from_secs(20))).unwrap();
    let started = Instant::now();
    let mut buf = [0u8; 16];
    let n = slow.read(&mut buf).unwrap_or(0);
    assert_eq!(n, 0, "closed without an answer to half a request");
    assert!(started.elapsed() < Duration::from_secs(19), "closed by the server, not by our read timeout");
    drop(engine);
}

#[test]
fn keep_alive_serves_several_requests_on_one_connection() {
    let engine = Engine::start(1024);
    let stream = TcpStream::connect(("127.0.0.1", engine.port)).unwrap();
    stream.set_read_timeout(Some(Duration::from_secs(10))).unwrap();
    let mut writer = stream.try_clone().unwrap();
    let mut reader = BufReader::new(stream);
    for path in ["/metrics", "/topology", "/metrics"] {
        write!(writer, "GET {path} HTTP/1.1\r\nHost: x\r\n\r\n").unwrap();
        let mut status = String::new();
        reader.read_line(&mut status).unwrap();
        assert!(status.starts_with("HTTP/1.1 200"), "{path}: {status}");
        let mut length = 0;
        loop {
            let mut line = String::new();
            reader.read_line(&mut line).unwrap();
            if line == "\r\n" {
                break;
            }
            if let Some(v) = line.to_ascii_lowercase().strip_prefix("content-length:") {
                length = v.trim().parse().unwrap();
            }
        }
        let mut body = vec![0; length];
        reader.read_exact(&mut body).unwrap();
        assert!(!body.is_empty(), "{path}");
    }
    drop(engine);
}

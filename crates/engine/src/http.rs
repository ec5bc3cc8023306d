//! The metrics endpoint: `/metrics` (Prometheus text exposition) and `/topology` (JSON).
//!
//! A small, bounded HTTP/1.1 server on one thread of its own: a `poll(2)` loop over the listener
//! and every open connection, so an idle client costs one descriptor and no thread. It reads
//! counters and channel occupancy only when asked, so it costs nothing between scrapes. The
//! format is documented in `docs/metrics-endpoint.md`, the contract the middleware relies on.
//!
//! Bounds, so that no client can take the endpoint down:
//! - at most [`MAX_CONNECTIONS`] open connections, and never more than a quarter of the process's
//!   descriptor limit (`RLIMIT_NOFILE`), so the engine keeps descriptors of its own; a new one
//!   beyond closes the one idle longest;
//! - a request head must arrive whole within [`HEAD_TIMEOUT`] and fit in [`MAX_HEAD`] bytes;
//!   a keep-alive connection idle for [`IDLE_TIMEOUT`] is closed;
//! - when the process runs out of file descriptors all the same (`EMFILE`/`ENFILE`), the loop
//!   lowers its cap below what is open, closes the connection idle longest or pauses accepting
//!   for a moment, and keeps serving; it says so (a `tracing` warning) at most once a minute (with how many
//!   more times it happened), so a flood cannot fill a log or block on a full pipe;
//! - responses go out in one write (head and body together) with `TCP_NODELAY`, so keep-alive
//!   clients never wait for a delayed ACK.

use std::fmt::Write as _;
use std::io::{ErrorKind, Read, Write};
use std::net::{SocketAddr, TcpListener, TcpStream};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

use moirai_os::io::{is_out_of_descriptors, poll, PollFd, READABLE, WRITABLE};

use crate::metrics::{names, LatencySummary};
use crate::sync::lock;
use crate::view::EngineView;

/// Most connections open at once.
pub const MAX_CONNECTIONS: usize = 256;
/// Longest request head, bytes.
pub const MAX_HEAD: usize = 8192;
/// How long a request head may take to arrive once it started.
pub const HEAD_TIMEOUT: Duration = Duration::from_secs(5);
/// How long a keep-alive connection may sit idle.
pub const IDLE_TIMEOUT: Duration = Duration::from_secs(60);
/// How often the loop wakes to check timeouts and the stop flag.
const TICK: Duration = Duration::from_millis(100);
/// Least time between two reports of running out of descriptors.
const REPORT_EVERY: Duration = Duration::from_secs(60);

/// The connection cap for this process: [`MAX_CONNECTIONS`], at most a quarter of the soft
/// descriptor limit (at least one).
fn connection_cap() -> usize {
    let quarter = match moirai_os::io::open_files_limit() {
        Some(limit) => usize::try_from(limit / 4).unwrap_or(usize::MAX),
        None => MAX_CONNECTIONS,
    };
    MAX_CONNECTIONS.min(quarter).max(1)
}

/// The running endpoint.
pub(crate) struct MetricsServer {
    stop: Arc<AtomicBool>,
    thread: Option<JoinHandle<()>>,
    addr: SocketAddr,
}

impl MetricsServer {
    pub(crate) fn start(addr: SocketAddr, view: Arc<EngineView>) -> std::io::Result<MetricsServer> {
        let listener = TcpListener::bind(addr)?;
        listener.set_nonblocking(true)?;
        let addr = listener.local_addr()?;
        let stop = Arc::new(AtomicBool::new(false));
        let flag = stop.clone();
        let thread = std::thread::Builder::new().name("moirai-http".into()).spawn(move || {
            let server = Server {
                listener,
                conns: Vec::new(),
                cap: connection_cap(),
                view,
                paused_until: None,
                fd_reported: None,
                fd_unreported: 0,
            };
            server.run(&flag);
        })?;
        Ok(MetricsServer { stop, thread: Some(thread), addr })
    }

    pub(crate) fn addr(&self) -> SocketAddr {
        self.addr
    }

    pub(crate) fn stop(mut self) {
        self.stop.store(true, Ordering::SeqCst);
        if let Some(t) = self.thread.take() {
            let _ = t.join();
        }
    }
}

impl Drop for MetricsServer {
    fn drop(&mut self) {
        self.stop.store(true, Ordering::SeqCst);
    }
}

/// One client connection.
struct Conn {
    stream: TcpStream,
    /// What arrived of the current request head.
    head: Vec<u8>,
    /// When its first byte arrived.
    head_since: Option<Instant>,
    /// Response bytes not written yet, and how many of them were.
    out: Vec<u8>,
    written: usize,
    /// Close once `out` is written.
    close_after: bool,
    last_active: Instant,
}

impl Conn {
    fn idle(&self) -> bool {
        self.head.is_empty() && self.written >= self.out.len()
    }
}

struct Server {
    listener: TcpListener,
    conns: Vec<Conn>,
    /// Most connections kept open (lowered when descriptors run out).
    cap: usize,
    view: Arc<EngineView>,
    /// Accepting is paused (out of descriptors, nothing to close) until then.
    paused_until: Option<Instant>,
    /// When running out of descriptors was last reported, and how often since.
    fd_reported: Option<Instant>,
    fd_unreported: u64,
}

impl Server {
    fn run(mut self, stop: &AtomicBool) {
        while !stop.load(Ordering::SeqCst) {
            let now = Instant::now();
            let accepting = self.paused_until.is_none_or(|t| now >= t);
            let mut fds = Vec::with_capacity(self.conns.len() + 1);
            fds.push(PollFd::new(&self.listener, if accepting { READABLE } else { 0 }));
            for c in &self.conns {
                let events = if c.written < c.out.len() { WRITABLE } else { READABLE };
                fds.push(PollFd::new(&c.stream, events));
            }
            if poll(&mut fds, TICK).is_err() {
                continue;
            }
            // Connections first (indices stay valid), then accept, then timeouts.
            let mut closed = vec![false; self.conns.len()];
            for (i, pfd) in fds[1..].iter().enumerate() {
                if pfd.revents() != 0 {
                    closed[i] = !self.serve(i);
                }
            }
            let mut i = 0;
            self.conns.retain(|_| {
                i += 1;
                !closed[i - 1]
            });
            if fds[0].revents() & READABLE != 0 {
                self.accept();
            }
            let now = Instant::now();
            self.conns.retain(|c| match c.head_since {
                Some(since) => now - since < HEAD_TIMEOUT,
                None => !c.idle() || now - c.last_active < IDLE_TIMEOUT,
            });
        }
    }

    /// Accepts every pending connection it can.
    fn accept(&mut self) {
        loop {
            match self.listener.accept() {
                Ok((stream, _)) => {
                    if self.conns.len() >= self.cap && !self.close_idlest() {
                        // Every connection is busy: this one waits for nothing, it is closed.
                        drop(stream);
                        continue;
                    }
                    if stream.set_nonblocking(true).is_err() {
                        continue;
                    }
                    let _ = stream.set_nodelay(true);
                    let now = Instant::now();
                    self.conns.push(Conn {
                        stream,
                        head: Vec::new(),
                        head_since: None,
                        out: Vec::new(),
                        written: 0,
                        close_after: false,
                        last_active: now,
                    });
                }
                Err(e) if e.kind() == ErrorKind::WouldBlock => return,
                Err(e) if e.kind() == ErrorKind::Interrupted || e.kind() == ErrorKind::ConnectionAborted => {}
                Err(e) if is_out_of_descriptors(&e) => {
                    self.out_of_descriptors(&e);
                    if !self.close_idlest() {
                        self.paused_until = Some(Instant::now() + TICK);
                        return;
                    }
                }
                Err(e) => {
                    tracing::warn!("moirai engine: metrics endpoint: accept failed: {e}; serving on");
                    self.paused_until = Some(Instant::now() + TICK);
                    return;
                }
            }
        }
    }

    /// Lowers the cap below what is open and reports the shortage, at most once a minute.
    fn out_of_descriptors(&mut self, e: &std::io::Error) {
        self.cap = self.conns.len().saturating_sub(1).max(1);
        let now = Instant::now();
        if self.fd_reported.is_some_and(|at| now - at < REPORT_EVERY) {
            self.fd_unreported += 1;
            return;
        }
        let again = match self.fd_unreported {
            0 => String::new(),
            n => format!(" ({n} more time(s) since the last report)"),
        };
        tracing::warn!(
            "moirai engine: metrics endpoint: out of file descriptors ({e}) with {} connections open{again}; \
             keeping at most {} and serving on (raise `ulimit -n` if this recurs)",
            self.conns.len(),
            self.cap
        );
        self.fd_reported = Some(now);
        self.fd_unreported = 0;
    }

    /// Closes the connection idle longest; false if none is idle.
    fn close_idlest(&mut self) -> bool {
        let idlest = self.conns.iter().enumerate().filter(|(_, c)| c.idle()).min_by_key(|(_, c)| c.last_active);
        match idlest.map(|(i, _)| i) {
            Some(i) => {
                self.conns.swap_remove(i);
                true
            }
            None => false,
        }
    }

    /// Reads or writes what connection `i` is ready for; false when it is to be closed.
    fn serve(&mut self, i: usize) -> bool {
        let c = &mut self.conns[i];
        c.last_active = Instant::now();
        if c.written < c.out.len() {
            return flush(c);
        }
        let mut buf = [0u8; 4096];
        loop {
            match c.stream.read(&mut buf) {
                Ok(0) => return false,
                Ok(n) => {
                    c.head_since.get_or_insert_with(Instant::now);
                    c.head.extend_from_slice(&buf[..n]);
                    if c.head.len() > MAX_HEAD && find_end(&c.head).is_none() {
                        c.out = response(431, "text/plain", "request head too large\n", false);
                        c.written = 0;
                        c.close_after = true;
                        return flush(c);
                    }
                    if n < buf.len() {
                        break;
                    }
                }
                Err(e) if e.kind() == ErrorKind::WouldBlock => break,
                Err(e) if e.kind() == ErrorKind::Interrupted => {}
                Err(_) => return false,
            }
        }
        let Some(end) = find_end(&c.head) else { return true };
        let head = String::from_utf8_lossy(&c.head[..end]).into_owned();
        // Pipelined bytes after the head are not expected from GET clients: dropped.
        c.head.clear();
        c.head_since = None;
        let mut lines = head.lines();
        let request = lines.next().unwrap_or("");
        let mut parts = request.split_whitespace();
        let (method, url, version) =
            (parts.next().unwrap_or(""), parts.next().unwrap_or(""), parts.next().unwrap_or(""));
        let close_asked = lines.any(|l| {
            l.split_once(':').is_some_and(|(k, v)| {
                k.trim().eq_ignore_ascii_case("connection") && v.trim().eq_ignore_ascii_case("close")
            })
        });
        let keep_alive = version == "HTTP/1.1" && !close_asked;
        let (status, content_type, body) = if method != "GET" && method != "HEAD" {
            (405, "text/plain", format!("method {method} not allowed; use GET\n"))
        } else {
            respond(url, &self.view)
        };
        let mut out = response(status, content_type, &body, keep_alive);
        if method == "HEAD" {
            out.truncate(out.len() - body.len());
        }
        c.out = out;
        c.written = 0;
        c.close_after = !keep_alive;
        flush(c)
    }
}

/// Writes what it can of the pending response; false when the connection is to be closed.
fn flush(c: &mut Conn) -> bool {
    while c.written < c.out.len() {
        match c.stream.write(&c.out[c.written..]) {
            Ok(0) => return false,
            Ok(n) => c.written += n,
            Err(e) if e.kind() == ErrorKind::WouldBlock => return true,
            Err(e) if e.kind() == ErrorKind::Interrupted => {}
            Err(_) => return false,
        }
    }
    c.out.clear();
    c.written = 0;
    !c.close_after
}

/// The end of a request head (after its blank line).
fn find_end(bytes: &[u8]) -> Option<usize> {
    bytes.windows(4).position(|w| w == b"\r\n\r\n").map(|p| p + 4)
}

/// A whole response, head and body, ready for one write.
fn response(status: u16, content_type: &str, body: &str, keep_alive: bool) -> Vec<u8> {
    let reason = match status {
        200 => "OK",
        404 => "Not Found",
        405 => "Method Not Allowed",
        431 => "Request Header Fields Too Large",
        _ => "Internal Server Error",
    };
    let connection = if keep_alive { "keep-alive" } else { "close" };
    let mut out = format!(
        "HTTP/1.1 {status} {reason}\r\nContent-Type: {content_type}\r\nContent-Length: {}\r\nConnection: {connection}\r\n\r\n",
        body.len()
    )
    .into_bytes();
    out.extend_from_slice(body.as_bytes());
    out
}

fn respond(url: &str, view: &EngineView) -> (u16, &'static str, String) {
    match url.split('?').next().unwrap_or("") {
        "/metrics" => (200, "text/plain; version=0.0.4; charset=utf-8", prometheus(view)),
        "/topology" => match serde_json::to_string_pretty(&view.topology()) {
            Ok(json) => (200, "application/json", json),
            Err(e) => (500, "text/plain", format!("cannot serialise the topology: {e}\n")),
        },
        "/" => (200, "text/plain", "moirai engine: GET /metrics (Prometheus), GET /topology (JSON)\n".into()),
        other => (404, "text/plain", format!("no such endpoint: {other}; try /metrics or /topology\n")),
    }
}

/// Escapes a Prometheus label value.
fn escape(value: &str) -> String {
    value.replace('\\', "\\\\").replace('"', "\\\"").replace('\n', "\\n")
}

/// Renders every metric in the Prometheus text exposition format 0.0.4.
pub(crate) fn prometheus(view: &EngineView) -> String {
    let ops = view.snapshot();
    let mut out = String::new();
    let labels = |o: &crate::metrics::OperatorSnapshot| {
        format!("query=\"{}\",operator=\"{}\",id=\"{}\",tid=\"{}\"", escape(&o.query), escape(&o.name), o.id, o.tid)
    };
    type Get = fn(&crate::metrics::OperatorSnapshot) -> f64;
    let families: [(&str, &str, &str, Get); 9] = [
        (
            names::TUPLES_IN,
            "counter",
            "Tuples taken from the operator's input channels (generated, for a source).",
            |o| o.tuples_in as f64,
        ),
        (names::TUPLES_OUT, "counter", "Tuples sent to the operator's output channels (consumed, for a sink).", |o| {
            o.tuples_out as f64
        }),
        (names::QUEUE_LEN, "gauge", "Tuples queued in the operator's input channels.", |o| o.queue_len as f64),
        (names::HEAD_WAIT, "gauge", "Age of the oldest tuple queued for the operator, seconds.", |o| {
            o.head_wait_ns as f64 / 1e9
        }),
        (names::CPU, "counter", "CPU time of the operator's thread, seconds.", |o| o.cpu_ns as f64 / 1e9),
        (names::COST, "gauge", "CPU nanoseconds per input tuple since start.", |o| o.cost_ns()),
        (names::SELECTIVITY, "gauge", "Output tuples per input tuple since start.", |o| o.selectivity()),
        (names::BLOCKED, "counter", "Time blocked on full output channels (backpressure), seconds.", |o| {
            o.blocked_ns as f64 / 1e9
        }),
        (names::BACKLOG, "gauge", "Tuples a source is behind its offered schedule (the external queue).", |o| {
            o.backlog as f64
        }),
    ];
    for (name, kind, help, get) in families {
        let _ = writeln!(out, "# HELP {name} {help}\n# TYPE {name} {kind}");
        for o in &ops {
            let _ = writeln!(out, "{name}{{{}}} {}", labels(o), get(o));
        }
    }
    for (name, help, e2e) in [
        (names::LATENCY, "Processing latency at the sink (egress - ingress), seconds.", false),
        (names::E2E_LATENCY, "End-to-end latency at the sink (egress - intended send time), seconds.", true),
    ] {
        let _ = writeln!(out, "# HELP {name} {help}\n# TYPE {name} summary");
        for (id, sink) in view.sinks() {
            let h = if e2e { lock(&sink.e2e).clone() } else { lock(&sink.processing).clone() };
            let o = &ops[*id];
            let s = LatencySummary::of(&h);
            for (q, v) in [("0.5", s.p50), ("0.99", s.p99), ("0.999", s.p999)] {
                let _ = writeln!(out, "{name}{{{},quantile=\"{q}\"}} {}", labels(o), v / 1e3);
            }
            let _ = writeln!(out, "{name}_sum{{{}}} {}", labels(o), s.mean * s.count as f64 / 1e3);
            let _ = writeln!(out, "{name}_count{{{}}} {}", labels(o), s.count);
        }
    }
    let exchanges = view.exchanges();
    if !exchanges.is_empty() {
        let labels =
            |x: &crate::exchange::ExchangeSnapshot| format!("exchange=\"{}\",policy=\"{}\"", escape(&x.name), x.policy);
        let _ = writeln!(
            out,
            "# HELP {n} Tuples in an outgoing queue of a Hone exchange at its last tick.\n# TYPE {n} gauge",
            n = names::EXCHANGE_BACKLOG
        );
        for x in &exchanges {
            for (queue, b) in x.backlogs.iter().enumerate() {
                let _ = writeln!(out, "{}{{{},queue=\"{queue}\"}} {b}", names::EXCHANGE_BACKLOG, labels(x));
            }
        }
        type Get = fn(&crate::exchange::ExchangeSnapshot) -> u64;
        let families: [(&str, &str, &str, Get); 3] = [
            (names::EXCHANGE_MAX_BACKLOG, "gauge", "Largest backlog of any outgoing queue at any tick.", |x| {
                x.max_backlog
            }),
            (names::EXCHANGE_SENT, "counter", "Tuples the exchange's link carried.", |x| x.sent),
            (names::EXCHANGE_TICKS, "counter", "Scheduling intervals the exchange ran.", |x| x.ticks),
        ];
        for (name, kind, help, get) in families {
            let _ = writeln!(out, "# HELP {name} {help}\n# TYPE {name} {kind}");
            for x in &exchanges {
                let _ = writeln!(out, "{name}{{{}}} {}", labels(x), get(x));
            }
        }
    }
    let level = view.thread_level();
    let (name, threading) = (names::THREAD_LEVEL, view.threading());
    let _ =
        writeln!(out, "# HELP {name} Worker threads running operators now (pool threading models; 0 for dedicated).");
    let _ = writeln!(out, "# TYPE {name} gauge\n{name}{{threading=\"{}\"}} {level}", escape(&threading.to_string()));
    out
}

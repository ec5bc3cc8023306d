//! The poll loop: accepts, reads request heads, writes responses, enforces the bounds of the
//! crate documentation.

use std::io::{ErrorKind, Read, Write};
use std::net::{SocketAddr, TcpListener, TcpStream};
use std::os::fd::AsRawFd;
use std::os::unix::net::UnixStream;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

use moirai_os::limits;
use moirai_os::poll::{poll, PollFd};

use crate::request::{head_end, Request, Response};
use crate::Handler;

/// The server's bounds.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Limits {
    /// Most connections open at once (further capped at a quarter of the descriptor limit).
    pub max_connections: usize,
    /// Longest request head, bytes.
    pub max_head: usize,
    /// How long a request head may take to arrive once its first byte did.
    pub head_timeout: Duration,
    /// How long a client may take to read a response.
    pub write_timeout: Duration,
    /// How long a connection may sit idle, before its first request or between two.
    pub idle_timeout: Duration,
}

impl Default for Limits {
    fn default() -> Self {
        Limits {
            max_connections: 256,
            max_head: 8192,
            head_timeout: Duration::from_secs(5),
            write_timeout: Duration::from_secs(10),
            idle_timeout: Duration::from_secs(60),
        }
    }
}

/// How long accepting pauses when the process is out of descriptors (or accept fails), and how
/// long the loop backs off when `poll` itself fails.
const TICK: Duration = Duration::from_millis(100);
/// Least time between two reports of running out of descriptors.
const REPORT_EVERY: Duration = Duration::from_secs(60);

/// Where the server's reports go (it has only one: running out of descriptors).
pub type Report = Box<dyn Fn(&str) + Send>;

/// A running server; stopped (and its thread joined) when dropped.
pub struct Server {
    stop: Arc<AtomicBool>,
    /// The loop's end of this pair becomes readable (end of file) when this one is closed: how a
    /// stop wakes the loop, which otherwise sleeps in `poll` until a client or a timeout is due.
    waker: Option<UnixStream>,
    thread: Option<JoinHandle<()>>,
    addr: SocketAddr,
}

impl Server {
    /// Serves `handler` on `addr` with the default [`Limits`], reporting on stderr; `label` names
    /// the endpoint in reports (`moirai engine: metrics endpoint`).
    pub fn start(addr: SocketAddr, label: &str, handler: impl Handler) -> std::io::Result<Server> {
        Server::start_with(addr, label, Limits::default(), Box::new(|m| eprintln!("{m}")), handler)
    }

    /// The same with given limits and a `report` for the reports.
    pub fn start_with(
        addr: SocketAddr,
        label: &str,
        limits: Limits,
        report: Report,
        handler: impl Handler,
    ) -> std::io::Result<Server> {
        let listener = TcpListener::bind(addr)?;
        listener.set_nonblocking(true)?;
        let addr = listener.local_addr()?;
        let stop = Arc::new(AtomicBool::new(false));
        let flag = stop.clone();
        let (waker, woken) = UnixStream::pair()?;
        let label = label.to_string();
        let thread = std::thread::Builder::new().name("moirai-http".into()).spawn(move || {
            let cap = connection_cap(limits.max_connections);
            let server = Loop {
                listener,
                conns: Vec::new(),
                cap,
                limits,
                handler,
                label,
                report,
                paused_until: None,
                fd_reported: None,
                fd_unreported: 0,
            };
            server.run(&flag, &woken);
        })?;
        Ok(Server { stop, waker: Some(waker), thread: Some(thread), addr })
    }

    /// Where it listens.
    pub fn addr(&self) -> SocketAddr {
        self.addr
    }

    /// Stops it and waits for its thread (which wakes at once).
    pub fn stop(self) {}
}

impl Drop for Server {
    fn drop(&mut self) {
        self.stop.store(true, Ordering::SeqCst);
        // Closing our end wakes the loop's poll (its end reads end of file).
        drop(self.waker.take());
        if let Some(t) = self.thread.take() {
            let _ = t.join();
        }
    }
}

/// The connection cap for this process: `max`, at most a quarter of the soft descriptor limit
/// (at least one).
fn connection_cap(max: usize) -> usize {
    let quarter = limits::nofile().map_or(max, |l| usize::try_from(l.soft / 4).unwrap_or(usize::MAX));
    max.min(quarter).max(1)
}

/// One client connection.
struct Conn {
    stream: TcpStream,
    /// What arrived of the current request head, and when its first byte did.
    head: Vec<u8>,
    head_since: Option<Instant>,
    /// Response bytes, how many were written, and when the response was ready.
    out: Vec<u8>,
    written: usize,
    out_since: Option<Instant>,
    /// Close once `out` is written.
    close_after: bool,
    last_active: Instant,
}

impl Conn {
    /// A connection just accepted at `now`, with nothing read or to write.
    fn new(stream: TcpStream, now: Instant) -> Conn {
        Conn {
            stream,
            head: Vec::new(),
            head_since: None,
            out: Vec::new(),
            written: 0,
            out_since: None,
            close_after: false,
            last_active: now,
        }
    }

    fn idle(&self) -> bool {
        self.head.is_empty() && self.written >= self.out.len()
    }

    /// When the bound of `limits` that applies now runs out.
    fn deadline(&self, limits: &Limits) -> Instant {
        match (self.head_since, self.out_since) {
            (Some(since), _) => since + limits.head_timeout,
            (None, Some(since)) => since + limits.write_timeout,
            (None, None) => self.last_active + limits.idle_timeout,
        }
    }

    /// Whether a bound of `limits` ran out at `now`.
    fn timed_out(&self, now: Instant, limits: &Limits) -> bool {
        now >= self.deadline(limits)
    }

    /// Queues `out` for writing and writes what it can; false when the connection is to be closed.
    fn respond(&mut self, out: Vec<u8>, close_after: bool) -> bool {
        self.out = out;
        self.written = 0;
        self.out_since = Some(Instant::now());
        self.close_after = close_after;
        self.flush()
    }

    /// Writes what it can of the pending response; false when the connection is to be closed.
    fn flush(&mut self) -> bool {
        while self.written < self.out.len() {
            match self.stream.write(&self.out[self.written..]) {
                Ok(0) => return false,
                Ok(n) => self.written += n,
                Err(e) if e.kind() == ErrorKind::WouldBlock => return true,
                Err(e) if e.kind() == ErrorKind::Interrupted => {}
                Err(_) => return false,
            }
        }
        self.out.clear();
        self.written = 0;
        self.out_since = None;
        !self.close_after
    }
}

struct Loop<H> {
    listener: TcpListener,
    conns: Vec<Conn>,
    /// Most connections kept open (lowered when descriptors run out).
    cap: usize,
    limits: Limits,
    handler: H,
    label: String,
    report: Report,
    /// Accepting is paused (out of descriptors, nothing to close) until then.
    paused_until: Option<Instant>,
    /// When running out of descriptors was last reported, and how often since.
    fd_reported: Option<Instant>,
    fd_unreported: u64,
}

impl<H: Handler> Loop<H> {
    /// Serves until `stop` is set; `woken` becomes readable when the server is dropped. The loop
    /// sleeps in `poll` until a descriptor is ready or the earliest timeout is due (a connection's
    /// bound, the end of a pause in accepting); with nothing open and nothing paused, it sleeps
    /// until a client connects or the server stops: an idle server never wakes.
    fn run(mut self, stop: &AtomicBool, woken: &UnixStream) {
        while !stop.load(Ordering::SeqCst) {
            let now = Instant::now();
            if self.paused_until.is_some_and(|t| now >= t) {
                self.paused_until = None;
            }
            let accepting = self.paused_until.is_none();
            let mut fds = Vec::with_capacity(self.conns.len() + 2);
            fds.push(PollFd::new(woken.as_raw_fd(), true, false));
            fds.push(PollFd::new(self.listener.as_raw_fd(), accepting, false));
            for c in &self.conns {
                let writing = c.written < c.out.len();
                fds.push(PollFd::new(c.stream.as_raw_fd(), !writing, writing));
            }
            if poll(&mut fds, self.timeout(now)).is_err() {
                std::thread::sleep(TICK);
                continue;
            }
            if fds[0].ready() {
                // The server was dropped (its end of the pair closed).
                return;
            }
            let fds = &fds[1..];
            // Connections first (indices stay valid), then accept, then timeouts.
            let mut closed = vec![false; self.conns.len()];
            for (i, pfd) in fds[1..].iter().enumerate() {
                if pfd.ready() {
                    closed[i] = !self.serve(i);
                }
            }
            let mut i = 0;
            self.conns.retain(|_| {
                i += 1;
                !closed[i - 1]
            });
            if fds[0].readable() {
                self.accept();
            }
            let now = Instant::now();
            let limits = self.limits;
            self.conns.retain(|c| !c.timed_out(now, &limits));
        }
    }

    /// How long `poll` may sleep from `now`: until the earliest connection bound or the end of a
    /// pause in accepting (rounded up to whole milliseconds, poll's unit, so that the loop does
    /// not spin just before a deadline), or indefinitely (as long as poll allows) when there is
    /// neither.
    fn timeout(&self, now: Instant) -> Duration {
        let limits = self.limits;
        let earliest = self.conns.iter().map(|c| c.deadline(&limits)).chain(self.paused_until).min();
        match earliest {
            None => Duration::MAX,
            Some(at) => {
                let left = at.saturating_duration_since(now);
                let ms = left.as_nanos().div_ceil(1_000_000);
                Duration::from_millis(u64::try_from(ms).unwrap_or(u64::MAX))
            }
        }
    }

    /// Accepts every pending connection it can.
    fn accept(&mut self) {
        loop {
            match self.listener.accept() {
                Ok((stream, _)) => {
                    if self.conns.len() >= self.cap {
                        self.make_room();
                    }
                    if stream.set_nonblocking(true).is_err() {
                        continue;
                    }
                    let _ = stream.set_nodelay(true);
                    self.conns.push(Conn::new(stream, Instant::now()));
                }
                Err(e) if e.kind() == ErrorKind::WouldBlock => return,
                Err(e) if e.kind() == ErrorKind::Interrupted || e.kind() == ErrorKind::ConnectionAborted => {}
                Err(e) if limits::is_out_of_descriptors(&e) => {
                    self.out_of_descriptors(&e);
                    if !self.make_room() {
                        self.paused_until = Some(Instant::now() + TICK);
                        return;
                    }
                }
                Err(e) => {
                    (self.report)(&format!("{}: accept failed: {e}; serving on", self.label));
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
        (self.report)(&format!(
            "{}: out of file descriptors ({e}) with {} connections open{again}; keeping at most {} and serving on \
             (raise `ulimit -n` if this recurs)",
            self.label,
            self.conns.len(),
            self.cap
        ));
        self.fd_reported = Some(now);
        self.fd_unreported = 0;
    }

    /// Closes the connection idle longest or, when none is idle, the one whose request or
    /// response has been under way longest (a client that trickles a head or does not read
    /// holds its slot no longer than a new client needs it); false if none is open.
    fn make_room(&mut self) -> bool {
        let idlest = self.conns.iter().enumerate().filter(|(_, c)| c.idle()).min_by_key(|(_, c)| c.last_active);
        let slowest = || {
            let started = |c: &Conn| c.head_since.or(c.out_since).unwrap_or(c.last_active);
            self.conns.iter().enumerate().min_by_key(|(_, c)| started(c))
        };
        match idlest.or_else(slowest).map(|(i, _)| i) {
            Some(i) => {
                self.conns.swap_remove(i);
                true
            }
            None => false,
        }
    }

    /// Reads or writes what connection `i` is ready for; false when it is to be closed.
    fn serve(&mut self, i: usize) -> bool {
        let max_head = self.limits.max_head;
        let c = &mut self.conns[i];
        c.last_active = Instant::now();
        if c.written < c.out.len() {
            return c.flush();
        }
        let mut buf = [0u8; 4096];
        loop {
            match c.stream.read(&mut buf) {
                Ok(0) => return false,
                Ok(n) => {
                    c.head_since.get_or_insert_with(Instant::now);
                    c.head.extend_from_slice(&buf[..n]);
                    if c.head.len() > max_head && head_end(&c.head).is_none() {
                        c.head = Vec::new();
                        c.head_since = None;
                        let out = Response::text(431, "request head too large\n").encode(false, true);
                        return c.respond(out, true);
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
        let Some(end) = head_end(&c.head) else { return true };
        let head = String::from_utf8_lossy(&c.head[..end]).into_owned();
        // Pipelined bytes after the head are not expected from GET clients: dropped.
        c.head.clear();
        c.head_since = None;
        let request = Request::parse(&head);
        let keep_alive = request.keep_alive();
        let response = if request.method.is_empty() {
            Response::text(400, "not an HTTP request\n")
        } else {
            self.handler.handle(&request)
        };
        let out = response.encode(keep_alive, request.method != "HEAD");
        self.conns[i].respond(out, !keep_alive)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::io::BufRead;

    fn echo(r: &Request<'_>) -> Response {
        match r.path() {
            "/" => Response::text(200, format!("{} {}\n", r.method, r.header("host").unwrap_or("-"))),
            _ => Response::text(404, "no\n"),
        }
    }

    fn idle_loop(limits: Limits) -> Loop<fn(&Request<'_>) -> Response> {
        Loop {
            listener: TcpListener::bind("127.0.0.1:0").unwrap(),
            conns: Vec::new(),
            cap: 4,
            limits,
            handler: echo,
            label: "test".into(),
            report: Box::new(|_| {}),
            paused_until: None,
            fd_reported: None,
            fd_unreported: 0,
        }
    }

    #[test]
    fn an_idle_server_sleeps_until_a_client_or_a_bound_is_due() {
        let limits = Limits { idle_timeout: Duration::from_secs(7), ..Limits::default() };
        let mut server = idle_loop(limits);
        let now = Instant::now();
        // Nothing open, nothing paused: no timeout at all (no periodic tick).
        assert_eq!(server.timeout(now), Duration::MAX);
        // A pause in accepting ends the sleep when it ends, rounded up to poll's milliseconds.
        server.paused_until = Some(now + Duration::from_micros(2_500));
        assert_eq!(server.timeout(now), Duration::from_millis(3));
        // An open connection's idle bound is due in 7 s: the sleep ends no later.
        server.paused_until = None;
        let stream = TcpStream::connect(server.listener.local_addr().unwrap()).unwrap();
        server.conns.push(Conn::new(stream, now));
        assert_eq!(server.timeout(now), Duration::from_secs(7));
        // A head under way is bound by the head timeout instead.
        server.conns[0].head_since = Some(now);
        assert_eq!(server.timeout(now), limits.head_timeout);
        // A bound already due: poll returns at once.
        assert_eq!(server.timeout(now + Duration::from_secs(60)), Duration::ZERO);
    }

    #[test]
    fn a_stopped_server_wakes_from_its_untimed_sleep() {
        // No client, no bound due: the loop sleeps without a timeout; dropping the server must
        // still end its thread (a lost wake-up would hang this test).
        let server =
            Server::start_with("127.0.0.1:0".parse().unwrap(), "test", Limits::default(), Box::new(|_| {}), echo)
                .unwrap();
        std::thread::sleep(Duration::from_millis(50));
        server.stop();
    }

    #[test]
    fn serves_the_handler_and_times_out_a_client_that_does_not_read() {
        let limits = Limits { write_timeout: Duration::from_millis(300), ..Limits::default() };
        let server =
            Server::start_with("127.0.0.1:0".parse().unwrap(), "test", limits, Box::new(|_| {}), |r: &Request<'_>| {
                if r.path() == "/big" {
                    Response::text(200, "x".repeat(32 << 20))
                } else {
                    echo(r)
                }
            })
            .unwrap();
        let base = format!("http://{}", server.addr());
        let body = ureq::get(&format!("{base}/")).set("Host", "h:1").call().unwrap().into_string().unwrap();
        assert_eq!(body, "GET h:1\n");
        assert_eq!(ureq::get(&format!("{base}/x")).call().unwrap_err().into_response().unwrap().status(), 404);
        // 32 MiB asked for and never read: the server gives up on it after the write timeout.
        let mut slow = TcpStream::connect(server.addr()).unwrap();
        slow.write_all(b"GET /big HTTP/1.1\r\n\r\n").unwrap();
        std::thread::sleep(Duration::from_millis(800));
        slow.set_read_timeout(Some(Duration::from_secs(5))).unwrap();
        let mut reader = std::io::BufReader::new(slow);
        let mut got = 0usize;
        loop {
            let buf = match reader.fill_buf() {
                Ok(b) if !b.is_empty() => b.len(),
                _ => break,
            };
            got += buf;
            reader.consume(buf);
        }
        assert!(got < 32 << 20, "the response was cut off ({got} bytes)");
        // Others are still served.
        assert!(ureq::get(&format!("{base}/")).call().is_ok());
        server.stop();
    }
}

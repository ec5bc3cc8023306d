//! The middleware's own observability: what each round cost and decided, as log lines and as a
//! Prometheus endpoint (`--metrics-addr`).

use std::collections::BTreeMap;
use std::fmt::Write;
use std::net::SocketAddr;
use std::sync::{Arc, Mutex, MutexGuard};
use std::thread::JoinHandle;
use std::time::Instant;

use tiny_http::{Header, Response, Server};

use crate::translate::Applied;

/// Counters of the running middleware.
#[derive(Debug, Default)]
pub struct Stats {
    /// Rounds run.
    pub rounds: u64,
    /// Duration of the last round, ns.
    pub last_round_ns: u64,
    /// Sum of round durations, ns.
    pub total_round_ns: u64,
    /// Longest round, ns.
    pub max_round_ns: u64,
    /// OS calls that changed something.
    pub changes: u64,
    /// Errors (drivers, policies, translators).
    pub errors: u64,
    /// SPEs that answered in the last round.
    pub spes_up: usize,
    /// Threads scheduled in the last round.
    pub threads: usize,
    /// The last value applied per (policy, spe, query, operator, tid).
    pub applied: BTreeMap<(String, String, String, String, i32), i64>,
}

impl Stats {
    /// Records a policy's translation.
    pub fn record_applied(&mut self, policy: &str, applied: &Applied) {
        self.applied.retain(|k, _| k.0 != policy);
        for (t, v) in &applied.values {
            self.applied.insert((policy.to_string(), t.spe.clone(), t.query.clone(), t.operator.clone(), t.tid), *v);
        }
        self.changes += applied.changed as u64;
        self.errors += applied.errors.len() as u64;
    }
}

/// Shared stats.
#[derive(Clone, Default)]
pub struct SharedStats(Arc<Mutex<Stats>>);

impl SharedStats {
    /// Locks the stats.
    pub fn lock(&self) -> MutexGuard<'_, Stats> {
        self.0.lock().unwrap_or_else(|e| e.into_inner())
    }
}

fn escape(v: &str) -> String {
    v.replace('\\', "\\\\").replace('"', "\\\"").replace('\n', "\\n")
}

/// Renders the stats in the Prometheus text format.
pub fn render(stats: &Stats, cpu_seconds: f64) -> String {
    let mut o = String::new();
    let mut family = |name: &str, kind: &str, help: &str, value: f64| {
        let _ = writeln!(o, "# HELP {name} {help}\n# TYPE {name} {kind}\n{name} {value}");
    };
    family("moirai_schedule_rounds_total", "counter", "Scheduling rounds run.", stats.rounds as f64);
    family(
        "moirai_schedule_round_seconds_last",
        "gauge",
        "Duration of the last round.",
        stats.last_round_ns as f64 / 1e9,
    );
    family("moirai_schedule_round_seconds_max", "gauge", "Longest round.", stats.max_round_ns as f64 / 1e9);
    family(
        "moirai_schedule_round_seconds_total",
        "counter",
        "Time spent in rounds.",
        stats.total_round_ns as f64 / 1e9,
    );
    family("moirai_schedule_cpu_seconds_total", "counter", "CPU time of the middleware process.", cpu_seconds);
    family(
        "moirai_schedule_changes_total",
        "counter",
        "OS calls that changed a nice value, weight or group.",
        stats.changes as f64,
    );
    family(
        "moirai_schedule_errors_total",
        "counter",
        "Errors of drivers, policies and translators.",
        stats.errors as f64,
    );
    family("moirai_schedule_spes_up", "gauge", "SPEs that answered in the last round.", stats.spes_up as f64);
    family("moirai_schedule_threads", "gauge", "Threads scheduled in the last round.", stats.threads as f64);
    let _ = writeln!(
        o,
        "# HELP moirai_schedule_applied The value last applied to a thread: its nice value, or its group's weight.\n\
         # TYPE moirai_schedule_applied gauge"
    );
    for ((policy, spe, query, operator, tid), v) in &stats.applied {
        let _ = writeln!(
            o,
            "moirai_schedule_applied{{policy=\"{}\",spe=\"{}\",query=\"{}\",operator=\"{}\",tid=\"{tid}\"}} {v}",
            escape(policy),
            escape(spe),
            escape(query),
            escape(operator)
        );
    }
    o
}

/// The endpoint.
pub struct StatsServer {
    server: Arc<Server>,
    thread: Option<JoinHandle<()>>,
    addr: SocketAddr,
}

impl StatsServer {
    /// Serves `stats` on `addr`.
    pub fn start(addr: SocketAddr, stats: SharedStats) -> Result<StatsServer, String> {
        let server = Arc::new(Server::http(addr).map_err(|e| format!("cannot serve metrics on {addr}: {e}"))?);
        let addr = server.server_addr().to_ip().unwrap_or(addr);
        let s = server.clone();
        let pid = std::process::id();
        let thread = std::thread::Builder::new()
            .name("moirai-sched-http".into())
            .spawn(move || {
                for request in s.incoming_requests() {
                    let (code, body) = if request.url().split('?').next() == Some("/metrics") {
                        let cpu = moirai_os::proc::process_cpu_ns(pid).unwrap_or(0) as f64 / 1e9;
                        (200, render(&stats.lock(), cpu))
                    } else {
                        (404, "moirai schedule: GET /metrics\n".to_string())
                    };
                    let header =
                        Header::from_bytes("Content-Type", "text/plain; version=0.0.4").expect("static header");
                    let _ = request.respond(Response::from_string(body).with_status_code(code).with_header(header));
                }
            })
            .map_err(|e| e.to_string())?;
        Ok(StatsServer { server, thread: Some(thread), addr })
    }

    /// Where it listens.
    pub fn addr(&self) -> SocketAddr {
        self.addr
    }
}

impl Drop for StatsServer {
    fn drop(&mut self) {
        self.server.unblock();
        if let Some(t) = self.thread.take() {
            let _ = t.join();
        }
    }
}

/// Log lines on stderr, stamped with seconds since start.
#[derive(Clone)]
pub struct Log {
    start: Instant,
    /// Print every decision.
    pub verbose: bool,
    /// Print nothing but errors.
    pub quiet: bool,
}

impl Log {
    /// A log starting now.
    pub fn new(verbose: bool, quiet: bool) -> Self {
        Log { start: Instant::now(), verbose, quiet }
    }

    /// An informational line.
    pub fn info(&self, msg: impl AsRef<str>) {
        if !self.quiet {
            eprintln!("[{:>9.3}] {}", self.start.elapsed().as_secs_f64(), msg.as_ref());
        }
    }

    /// A line shown with `--verbose` only.
    pub fn debug(&self, msg: impl AsRef<str>) {
        if self.verbose && !self.quiet {
            eprintln!("[{:>9.3}] {}", self.start.elapsed().as_secs_f64(), msg.as_ref());
        }
    }

    /// An error line, always shown.
    pub fn error(&self, msg: impl AsRef<str>) {
        eprintln!("[{:>9.3}] error: {}", self.start.elapsed().as_secs_f64(), msg.as_ref());
    }
}

//! The middleware's own observability: what each round cost and decided, as log lines, as a
//! Prometheus endpoint (`--metrics-addr`) and as a live dashboard (`--ui`, see
//! [`crate::dashboard`]); one server serves both when they share an address. The server is the
//! engine's bounded one (`moirai-http`): the middleware runs as root next to the SPEs it steers,
//! so no client may take its descriptors or threads.

use std::collections::{BTreeMap, HashMap};
use std::fmt::Write;
use std::net::SocketAddr;
use std::sync::{Arc, Mutex, MutexGuard};
use std::time::{Duration, Instant};

use moirai_http::{Request, Response, Server};
use moirai_os::Tid;

use crate::activity::SpeActivity;
use crate::translate::{Applied, Target};

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
    /// The real-time priority of each thread a realtime policy made real-time, per (policy, spe,
    /// query, operator, tid).
    pub realtime: BTreeMap<(String, String, String, String, i32), u8>,
    /// Threads the real-time watchdog demoted.
    pub watchdog_demotions: u64,
    /// The dashboard's JSON of the last round ([`crate::dashboard::State`]), serialised once per
    /// round when the dashboard is on.
    pub dashboard: Option<Arc<str>>,
    /// Per SPE: whether the middleware acts on it now, and why.
    pub activity: BTreeMap<String, SpeActivity>,
    /// The machine's busy CPU share over the last round, when the activation rule reads it.
    pub machine_busy: Option<f64>,
    /// Per SPE: thread dumps of its JVM taken so far.
    pub thread_dumps: BTreeMap<String, u64>,
    /// When the middleware started: the clock of the rounds and of the activity's times.
    pub started: Option<Instant>,
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

/// A gauge family with one sample per thread, labelled by policy, SPE, query, operator and tid.
fn thread_family<V: std::fmt::Display>(
    o: &mut String,
    name: &str,
    help: &str,
    samples: &BTreeMap<(String, String, String, String, i32), V>,
) {
    let _ = writeln!(o, "# HELP {name} {help}\n# TYPE {name} gauge");
    for ((policy, spe, query, operator, tid), v) in samples {
        let _ = writeln!(
            o,
            "{name}{{policy=\"{}\",spe=\"{}\",query=\"{}\",operator=\"{}\",tid=\"{tid}\"}} {v}",
            escape(policy),
            escape(spe),
            escape(query),
            escape(operator)
        );
    }
}

/// Renders the stats in the Prometheus text format, `uptime` after the middleware's start.
pub fn render(stats: &Stats, cpu_seconds: f64, uptime: Duration) -> String {
    let mut o = String::new();
    let mut family = |name: &str, kind: &str, help: &str, value: f64| {
        let _ = writeln!(o, "# HELP {name} {help}\n# TYPE {name} {kind}\n{name} {value}");
    };
    family(
        "moirai_schedule_uptime_seconds",
        "gauge",
        "Seconds since the middleware started (the clock of moirai_schedule_first_active_seconds).",
        uptime.as_secs_f64(),
    );
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
    if let Some(busy) = stats.machine_busy {
        family(
            "moirai_schedule_machine_cpu_busy",
            "gauge",
            "Share of the machine's CPU that was busy over the last round (the activation rule's input).",
            busy,
        );
    }
    let _ = writeln!(
        o,
        "# HELP moirai_schedule_active Whether the middleware acts on the SPE now (1) or leaves it to Linux (0); \
         reason: why (starting, cpu_room, keeping_up, rate_fell_back, probing, no_gain, comparing, behind, losing_ground, \
         holding, always).\n\
         # TYPE moirai_schedule_active gauge"
    );
    for (spe, a) in &stats.activity {
        let _ =
            writeln!(o, "moirai_schedule_active{{spe=\"{}\",reason=\"{}\"}} {}", escape(spe), a.code, a.active as u8);
    }
    let _ = writeln!(
        o,
        "# HELP moirai_schedule_counter_period_seconds How often the SPE refreshes the counters the activation rule \
         reads, as the rule allows for it: its driver's measure (Storm's reporter period, Flink's metric fetcher \
         interval), else its kind's default; 0: read live.\n\
         # TYPE moirai_schedule_counter_period_seconds gauge"
    );
    for (spe, a) in &stats.activity {
        let period = a.counter_period.as_secs_f64();
        let _ = writeln!(o, "moirai_schedule_counter_period_seconds{{spe=\"{}\"}} {period}", escape(spe));
    }
    let _ = writeln!(
        o,
        "# HELP moirai_schedule_activations_total Times the middleware started acting on the SPE.\n\
         # TYPE moirai_schedule_activations_total counter"
    );
    for (spe, a) in &stats.activity {
        let _ = writeln!(o, "moirai_schedule_activations_total{{spe=\"{}\"}} {}", escape(spe), a.activations);
    }
    let _ = writeln!(
        o,
        "# HELP moirai_schedule_releases_total Times the middleware turned idle on the SPE, by reason (cpu_room, \
         keeping_up, rate_fell_back, probing, no_gain, comparing; absent until it first did).\n\
         # TYPE moirai_schedule_releases_total counter"
    );
    for (spe, a) in &stats.activity {
        for (reason, n) in &a.releases {
            let _ = writeln!(o, "moirai_schedule_releases_total{{spe=\"{}\",reason=\"{reason}\"}} {n}", escape(spe));
        }
    }
    let _ = writeln!(
        o,
        "# HELP moirai_schedule_active_seconds_total Seconds the middleware has acted on the SPE (from the round \
         that found it active to the one that found it idle, or to now).\n\
         # TYPE moirai_schedule_active_seconds_total counter"
    );
    for (spe, a) in &stats.activity {
        let _ =
            writeln!(o, "moirai_schedule_active_seconds_total{{spe=\"{}\"}} {}", escape(spe), a.time.seconds(uptime));
    }
    let _ = writeln!(
        o,
        "# HELP moirai_schedule_first_active_seconds When the middleware first acted on the SPE, in seconds since \
         it started (absent while it never has).\n\
         # TYPE moirai_schedule_first_active_seconds gauge"
    );
    for (spe, a) in &stats.activity {
        if let Some(first) = a.time.first {
            let _ =
                writeln!(o, "moirai_schedule_first_active_seconds{{spe=\"{}\"}} {}", escape(spe), first.as_secs_f64());
        }
    }
    if stats.thread_dumps.values().any(|&n| n > 0) {
        let _ = writeln!(
            o,
            "# HELP moirai_schedule_thread_dumps_total Thread dumps of the SPE's JVM taken to map its threads (each \
             stops the JVM at a safepoint for a moment).\n\
             # TYPE moirai_schedule_thread_dumps_total counter"
        );
        for (spe, n) in &stats.thread_dumps {
            let _ = writeln!(o, "moirai_schedule_thread_dumps_total{{spe=\"{}\"}} {n}", escape(spe));
        }
    }
    thread_family(
        &mut o,
        "moirai_schedule_applied",
        "The value last applied to a thread: its nice value, or its group's weight.",
        &stats.applied,
    );
    if stats.realtime.is_empty() && stats.watchdog_demotions == 0 {
        return o;
    }
    thread_family(
        &mut o,
        "moirai_schedule_realtime",
        "The real-time priority of a thread a realtime policy made real-time.",
        &stats.realtime,
    );
    let _ = writeln!(
        o,
        "# HELP moirai_schedule_watchdog_demotions_total Threads the real-time watchdog put back into their original class.\n\
         # TYPE moirai_schedule_watchdog_demotions_total counter\nmoirai_schedule_watchdog_demotions_total {}",
        stats.watchdog_demotions
    );
    o
}

/// What a server answers.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Routes {
    /// `GET /metrics`.
    pub metrics: bool,
    /// `GET /` and `GET /api/state`.
    pub ui: bool,
    /// Whether the dashboard answers requests for any host name; otherwise only for loopback
    /// addresses and `localhost` (a web page elsewhere cannot rebind its name to this machine
    /// and read the state).
    pub ui_public: bool,
}

/// Whether a `Host` header names this machine's loopback interface (`127.0.0.1:9466`,
/// `localhost:9466`, `[::1]:9466`), or is absent (HTTP/1.0).
fn loopback_host(host: Option<&str>) -> bool {
    let Some(host) = host else { return true };
    let name = match host.strip_prefix('[') {
        Some(v6) => v6.split(']').next().unwrap_or(""),
        None => host.rsplit_once(':').map_or(host, |(name, _)| name),
    };
    name.eq_ignore_ascii_case("localhost") || name.parse::<std::net::IpAddr>().is_ok_and(|ip| ip.is_loopback())
}

/// The answer to `GET path` (`host`: the request's Host header): status, content type, body.
pub fn answer(routes: Routes, path: &str, host: Option<&str>, stats: &SharedStats) -> (u16, &'static str, String) {
    const TEXT: &str = "text/plain; charset=utf-8";
    let path = path.split('?').next().unwrap_or("");
    match path {
        "/metrics" if routes.metrics => {
            let cpu = moirai_os::proc::process_cpu_ns(std::process::id()).unwrap_or(0) as f64 / 1e9;
            let stats = stats.lock();
            let uptime = stats.started.map_or(Duration::ZERO, |s| s.elapsed());
            (200, "text/plain; version=0.0.4", render(&stats, cpu, uptime))
        }
        "/" | "/api/state" if routes.ui && !routes.ui_public && !loopback_host(host) => (
            403,
            TEXT,
            "moirai schedule: the dashboard answers loopback host names only (127.0.0.1, localhost, [::1]); \
             start it with --ui-public to serve other names\n"
                .into(),
        ),
        "/" if routes.ui => (200, "text/html; charset=utf-8", crate::dashboard::PAGE.to_string()),
        "/api/state" if routes.ui => match stats.lock().dashboard.clone() {
            Some(json) => (200, "application/json", json.to_string()),
            None => (503, "application/json", "{\"error\":\"no round has run yet\"}".into()),
        },
        _ => {
            let mut paths = Vec::new();
            if routes.ui {
                paths.extend(["/", "/api/state"]);
            }
            if routes.metrics {
                paths.push("/metrics");
            }
            (404, TEXT, format!("moirai schedule: GET {}\n", paths.join(", ")))
        }
    }
}

/// The page loads nothing from anywhere but talks to this server.
const PAGE_POLICY: &str = "default-src 'none'; script-src 'unsafe-inline'; style-src 'unsafe-inline'; \
                           connect-src 'self'; img-src data:; base-uri 'none'; form-action 'none'; \
                           frame-ancestors 'none'";

/// The response to `request`: [`answer`] with the headers every answer carries.
fn respond(routes: Routes, request: &Request<'_>, stats: &SharedStats) -> Response {
    let (code, kind, body) = if request.method != "GET" && request.method != "HEAD" {
        (405, "text/plain; charset=utf-8", "moirai schedule: GET only\n".to_string())
    } else {
        answer(routes, request.target, request.header("host"), stats)
    };
    let response = Response::new(code, kind, body)
        .with_header("Cache-Control", "no-store")
        .with_header("X-Content-Type-Options", "nosniff");
    if kind.starts_with("text/html") {
        response.with_header("Content-Security-Policy", PAGE_POLICY)
    } else {
        response
    }
}

/// The endpoint.
pub struct StatsServer {
    server: Server,
}

impl StatsServer {
    /// Serves `stats` on `addr`, answering `routes`; what goes wrong while serving (running out
    /// of descriptors) goes to `log`.
    pub fn start(addr: SocketAddr, stats: SharedStats, routes: Routes, log: Log) -> Result<StatsServer, String> {
        let (what, label) = match (routes.metrics, routes.ui) {
            (true, true) => ("metrics and the dashboard", "metrics endpoint and dashboard"),
            (false, true) => ("the dashboard", "dashboard"),
            _ => ("metrics", "metrics endpoint"),
        };
        let report = Box::new(move |m: &str| log.error(m));
        let handler = move |r: &Request<'_>| respond(routes, r, &stats);
        let server = Server::start_with(addr, label, moirai_http::Limits::default(), report, handler)
            .map_err(|e| format!("cannot serve {what} on {addr}: {e}"))?;
        Ok(StatsServer { server })
    }

    /// Where it listens.
    pub fn addr(&self) -> SocketAddr {
        self.server.addr()
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

    /// Lines shown with `--verbose` only, stamped alike and written at once (one system call for
    /// a round's lines instead of one each).
    pub fn debug_lines(&self, lines: &[String]) {
        if !self.verbose || self.quiet || lines.is_empty() {
            return;
        }
        let stamp = format!("[{:>9.3}] ", self.start.elapsed().as_secs_f64());
        let mut text = String::with_capacity(lines.iter().map(|l| stamp.len() + l.len() + 1).sum());
        for line in lines {
            text.push_str(&stamp);
            text.push_str(line);
            text.push('\n');
        }
        let _ = std::io::Write::write_all(&mut std::io::stderr().lock(), text.as_bytes());
    }

    /// An error line, always shown.
    pub fn error(&self, msg: impl AsRef<str>) {
        eprintln!("[{:>9.3}] error: {}", self.start.elapsed().as_secs_f64(), msg.as_ref());
    }
}

/// What `-v` last said of each thread's value, per policy: a round's log names the threads whose
/// value changed, not every thread every round (100 threads at a 200 ms period were 500 lines a
/// second, and the middleware's CPU twice the quiet one's).
#[derive(Default)]
pub struct ShownValues(BTreeMap<String, HashMap<(u32, Tid), String>>);

impl ShownValues {
    /// The lines for the threads of `policy`'s round whose value differs from the one last shown
    /// (or that were not in its last round); forgets the threads the round no longer names.
    pub fn changed<'a>(&mut self, policy: &str, values: impl IntoIterator<Item = (&'a Target, String)>) -> Vec<String> {
        let last = self.0.remove(policy).unwrap_or_default();
        let mut now = HashMap::with_capacity(last.len());
        let mut lines = Vec::new();
        for (t, value) in values {
            if last.get(&(t.pid, t.tid)) != Some(&value) {
                lines.push(format!(
                    "policy '{policy}': {}/{}/{} tid {} priority {:.3} -> {value}",
                    t.spe, t.query, t.operator, t.tid, t.priority
                ));
            }
            now.insert((t.pid, t.tid), value);
        }
        self.0.insert(policy.to_string(), now);
        lines
    }

    /// Forgets what was shown for `policy` (none of its SPEs is scheduled now): its next round
    /// names every thread again.
    pub fn forget(&mut self, policy: &str) {
        self.0.remove(policy);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const BOTH: Routes = Routes { metrics: true, ui: true, ui_public: false };

    #[test]
    fn verbose_names_a_threads_value_when_it_changes_not_every_round() {
        let (a, b) = (crate::translate::tests::target(10, 2.5), crate::translate::tests::target(11, 2.5));
        let mut shown = ShownValues::default();
        let round = |shown: &mut ShownValues, policy: &str, values: &[(&Target, &str)]| {
            shown.changed(policy, values.iter().map(|(t, v)| (*t, v.to_string())))
        };
        assert_eq!(
            round(&mut shown, "qs", &[(&a, "0"), (&b, "19")]),
            ["policy 'qs': e/q/op10 tid 10 priority 2.500 -> 0", "policy 'qs': e/q/op11 tid 11 priority 2.500 -> 19"]
        );
        assert!(round(&mut shown, "qs", &[(&a, "0"), (&b, "19")]).is_empty(), "nothing changed");
        assert_eq!(
            round(&mut shown, "qs", &[(&a, "0"), (&b, "7")]),
            ["policy 'qs': e/q/op11 tid 11 priority 2.500 -> 7"]
        );
        // Another policy keeps its own record.
        assert_eq!(round(&mut shown, "fcfs", &[(&a, "0")]).len(), 1);
        // A thread the round no longer names (its SPE handed back to Linux) is named again when
        // it is set again, even to the value it had.
        assert!(round(&mut shown, "qs", &[(&a, "0")]).is_empty());
        assert_eq!(round(&mut shown, "qs", &[(&a, "0"), (&b, "7")]).len(), 1);
        // A policy with no SPE scheduled runs no round: forgotten, all its threads are named again.
        shown.forget("qs");
        assert_eq!(round(&mut shown, "qs", &[(&a, "0"), (&b, "7")]).len(), 2);
    }

    #[test]
    fn routes_answer_what_they_serve() {
        let stats = SharedStats::default();
        let local = Some("127.0.0.1:9466");
        let (code, kind, body) = answer(BOTH, "/", local, &stats);
        assert_eq!((code, kind), (200, "text/html; charset=utf-8"));
        assert!(body.contains("/api/state"));
        let (code, _, body) = answer(BOTH, "/api/state", local, &stats);
        assert_eq!(code, 503, "no round yet: {body}");
        stats.lock().dashboard = Some(Arc::from("{\"round\":1}"));
        assert_eq!(answer(BOTH, "/api/state?x=1", local, &stats), (200, "application/json", "{\"round\":1}".into()));
        assert_eq!(answer(BOTH, "/metrics", local, &stats).0, 200);

        let metrics_only = Routes { metrics: true, ui: false, ui_public: false };
        let (code, _, body) = answer(metrics_only, "/", local, &stats);
        assert_eq!(code, 404);
        assert_eq!(body, "moirai schedule: GET /metrics\n");
        let ui_only = Routes { metrics: false, ui: true, ui_public: false };
        let (code, _, body) = answer(ui_only, "/metrics", local, &stats);
        assert_eq!(code, 404);
        assert_eq!(body, "moirai schedule: GET /, /api/state\n");
    }

    #[test]
    fn metrics_say_how_long_since_when_and_why_not_the_middleware_acted_on_each_spe() {
        use crate::activity::ActiveTime;
        let s = |ms: u64| Duration::from_millis(ms);
        let view = |active: bool, time: ActiveTime| SpeActivity {
            active,
            reason: String::new(),
            code: if active { "behind" } else { "cpu_room" },
            since: Duration::ZERO,
            activations: u64::from(time.first.is_some()),
            releases: BTreeMap::new(),
            time,
            counter_period: Duration::from_secs(1),
        };
        let mut stats = Stats::default();
        // Acted on from 1.5 s to 4 s, and again since 6 s; never on "idle".
        let engine = ActiveTime { closed: s(2500), open_since: Some(s(6000)), first: Some(s(1500)) };
        // … and handed back once at 4 s, the scheduling having changed nothing.
        let engine = SpeActivity { releases: BTreeMap::from([("no_gain", 1)]), ..view(true, engine) };
        stats.activity.insert("engine".into(), engine);
        stats.activity.insert("idle".into(), view(false, ActiveTime::default()));
        let text = render(&stats, 0.25, s(7250));
        let lines: Vec<&str> = text.lines().collect();
        for expected in [
            "moirai_schedule_uptime_seconds 7.25",
            "moirai_schedule_active_seconds_total{spe=\"engine\"} 3.75",
            "moirai_schedule_active_seconds_total{spe=\"idle\"} 0",
            "moirai_schedule_first_active_seconds{spe=\"engine\"} 1.5",
            "moirai_schedule_counter_period_seconds{spe=\"idle\"} 1",
            "moirai_schedule_releases_total{spe=\"engine\",reason=\"no_gain\"} 1",
            "# TYPE moirai_schedule_active_seconds_total counter",
            "# TYPE moirai_schedule_releases_total counter",
            "# TYPE moirai_schedule_first_active_seconds gauge",
        ] {
            assert!(lines.contains(&expected), "no line '{expected}' in:\n{text}");
        }
        assert!(!text.contains("first_active_seconds{spe=\"idle\"}"), "never active: no first activation");
        assert!(!text.contains("releases_total{spe=\"idle\""), "never handed back: no release");
        // Through the endpoint: the uptime runs on the middleware's clock.
        let shared = SharedStats::default();
        shared.lock().started = Some(Instant::now() - s(3000));
        let (_, _, body) = answer(BOTH, "/metrics", None, &shared);
        let uptime: f64 = body
            .lines()
            .find_map(|l| l.strip_prefix("moirai_schedule_uptime_seconds "))
            .and_then(|v| v.parse().ok())
            .expect("an uptime");
        assert!((3.0..60.0).contains(&uptime), "{uptime}");
    }

    #[test]
    fn thread_dumps_are_counted_per_spe_once_there_are_any() {
        let mut stats = Stats::default();
        stats.thread_dumps.insert("engine".into(), 0);
        let text = render(&stats, 0.0, Duration::from_secs(1));
        assert!(!text.contains("thread_dumps"), "no family without a dump:\n{text}");
        stats.thread_dumps.insert("flink".into(), 3);
        let text = render(&stats, 0.0, Duration::from_secs(1));
        let lines: Vec<&str> = text.lines().collect();
        for expected in [
            "# TYPE moirai_schedule_thread_dumps_total counter",
            "moirai_schedule_thread_dumps_total{spe=\"flink\"} 3",
            "moirai_schedule_thread_dumps_total{spe=\"engine\"} 0",
        ] {
            assert!(lines.contains(&expected), "no line '{expected}' in:\n{text}");
        }
    }

    #[test]
    fn the_dashboard_answers_loopback_host_names_only() {
        let stats = SharedStats::default();
        for host in
            [None, Some("127.0.0.1:1"), Some("localhost:1"), Some("LOCALHOST"), Some("[::1]:1"), Some("127.0.0.2")]
        {
            assert_eq!(answer(BOTH, "/", host, &stats).0, 200, "{host:?}");
        }
        for host in [Some("evil.example:9466"), Some("10.0.0.1:9466"), Some("[::2]:1"), Some("")] {
            let (code, _, body) = answer(BOTH, "/", host, &stats);
            assert_eq!(code, 403, "{host:?}");
            assert!(body.contains("--ui-public"), "{body}");
            assert_eq!(answer(BOTH, "/api/state", host, &stats).0, 403);
        }
        // --ui-public: any name; /metrics never checked names.
        let public = Routes { ui_public: true, ..BOTH };
        assert_eq!(answer(public, "/", Some("dashboard.example:80"), &stats).0, 200);
        assert_eq!(answer(BOTH, "/metrics", Some("prometheus.example"), &stats).0, 200);
    }
}

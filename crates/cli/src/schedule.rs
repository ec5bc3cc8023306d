//! `moirai schedule`: the middleware, from a TOML file or flags.

use std::path::PathBuf;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::Duration;

use clap::Args;
use moirai_middleware::activity::ActivationMode;
use moirai_middleware::config::DEFAULT_ACTIVATION_THRESHOLD;
use moirai_middleware::config::{
    parse_period, Config, DriverKind, PolicyConfig, SpeConfig, TranslatorKind, DEFAULT_STATE_FILE,
};
use moirai_middleware::observe::Log;
use moirai_middleware::{Daemon, DaemonError};
use moirai_sched::{Level, PolicySpec};

#[derive(Args, Debug)]
pub struct ScheduleArgs {
    /// A TOML configuration (SPEs, policies with periods, translators and scopes); see
    /// docs/schedule.md. Flags below cover the common case instead.
    #[arg(long, conflicts_with_all = ["engine", "flink", "flink_taskmanager", "flink_prometheus", "storm", "policy", "script"])]
    config: Option<PathBuf>,
    /// A moirai engine's metrics endpoint, e.g. http://127.0.0.1:9464 (repeat for several).
    #[arg(long)]
    engine: Vec<String>,
    /// An Apache Flink cluster's REST API, e.g. http://127.0.0.1:8081 (repeat for several): its
    /// running jobs' subtasks on this machine are scheduled.
    #[arg(long)]
    flink: Vec<String>,
    /// What a Flink subtask's queue_len (and QS's queue size) counts: buffers (network buffers
    /// queued at its inputs, Flink's inputQueueLength) or records (estimated from record counters).
    #[arg(long, default_value = "buffers", value_parser = |s: &str| s.parse::<moirai_middleware::FlinkQueue>())]
    flink_queue: moirai_middleware::FlinkQueue,
    /// What a Flink or Storm source's queue_len (and QS's queue size) counts: capped (its backlog,
    /// at most as much as the fullest queue of the other operators of its job) or backlog (all of it).
    #[arg(long, default_value = "capped", value_parser = |s: &str| s.parse::<moirai_middleware::SourceQueue>())]
    source_queue: moirai_middleware::SourceQueue,
    /// This node's TaskManager in a Flink cluster of several nodes (its resource id, host, or
    /// host:dataPort as /taskmanagers shows them): only its subtasks are scheduled.
    #[arg(long, value_name = "ID")]
    flink_taskmanager: Option<String>,
    /// The Prometheus reporter of the --flink cluster's TaskManager on this node, e.g.
    /// http://127.0.0.1:9249/metrics (one per --flink, in the same order): the subtasks' counters
    /// come from one scrape per round instead of a REST request per job vertex.
    #[arg(long, value_name = "URL")]
    flink_prometheus: Vec<String>,
    /// Apache Storm workers on this machine, by the directory their CsvStormReporter writes into
    /// (the topology's csv.log.dir; repeat for several).
    #[arg(long, value_name = "METRICS_DIR")]
    storm: Vec<PathBuf>,
    /// The policy: qs (queue size), hr (highest rate), fcfs (head-of-queue wait), random, or
    /// script (with --script).
    #[arg(long)]
    policy: Option<String>,
    /// A user-defined priority per operator, e.g. "queue_size * cost" (implies --policy script).
    #[arg(long)]
    script: Option<String>,
    /// Write priorities on logical operators (fused chains take the max, replicas inherit) or
    /// physical ones.
    #[arg(long, default_value = "physical")]
    level: String,
    /// How priorities reach Linux: nice (per thread), cgroup (cpu.shares / cpu.weight per
    /// operator), or realtime (nice per thread, and SCHED_RR for the highest ranked threads).
    #[arg(long, default_value = "nice")]
    translator: String,
    /// realtime translator: most threads real-time at once [default: the CPUs - 1, at least 1].
    #[arg(long, value_name = "N", conflicts_with = "config")]
    rt_threads: Option<usize>,
    /// realtime translator: rr (SCHED_RR) or fifo (SCHED_FIFO) [default: rr].
    #[arg(long, conflicts_with = "config", value_parser = |s: &str| s.parse::<moirai_middleware::realtime::RtClass>())]
    rt_class: Option<moirai_middleware::realtime::RtClass>,
    /// Set the nice value of each SPE's session group (sched_autogroup: its whole session against
    /// other sessions) to N while scheduling; restored on exit.
    #[arg(long, value_name = "N", allow_hyphen_values = true)]
    autogroup_nice: Option<i32>,
    /// Nice value for the highest priority (the nice translator maps priorities into
    /// [--nice-best, --nice-worst]; below 0 raises threads above every unscheduled thread of the
    /// machine, the SPE's own metrics thread included).
    #[arg(long, default_value_t = moirai_middleware::config::DEFAULT_NICE.best, allow_hyphen_values = true)]
    nice_best: i32,
    /// Nice value for the lowest priority.
    #[arg(long, default_value_t = moirai_middleware::config::DEFAULT_NICE.worst, allow_hyphen_values = true)]
    nice_worst: i32,
    /// Smooth each thread's priority over rounds: the weight of the newest round, above 0 and at
    /// most 1 (1 = no smoothing) [default: 0.5].
    #[arg(long)]
    smoothing: Option<f64>,
    /// How often the policy runs, e.g. 1s or 100ms [default: 200ms when every SPE is a moirai
    /// engine, else 1s: Flink's and Storm's metrics refresh about once a second].
    #[arg(long)]
    period: Option<String>,
    /// Where original nice values and cgroups are recorded until restored.
    #[arg(long)]
    state_file: Option<PathBuf>,
    /// Serve the middleware's own metrics here, e.g. 127.0.0.1:9465.
    #[arg(long)]
    metrics_addr: Option<std::net::SocketAddr>,
    /// Serve a live dashboard here, e.g. 127.0.0.1:9466: the query graphs with queues, rates,
    /// priorities and applied values, refreshed every round (GET / and GET /api/state). The same
    /// address as --metrics-addr serves both from one server.
    #[arg(long, value_name = "ADDR")]
    ui: Option<std::net::SocketAddr>,
    /// Allow --ui on an address other machines can reach (refused otherwise: the dashboard shows
    /// the SPEs' processes and threads, and the middleware runs as root).
    #[arg(long)]
    ui_public: bool,
    /// When the policies' schedules are enforced on an SPE: auto (only while the machine's CPU is
    /// saturated and the SPE falls behind: tuples wait at its sources or in its queues; or while
    /// the CPU is nearly saturated, 0.15 below the threshold, and its backlog keeps growing; its
    /// threads get their original values back when that ends) or always.
    #[arg(long, value_name = "auto|always", value_parser = |s: &str| s.parse::<ActivationMode>())]
    activation: Option<ActivationMode>,
    /// The share of the machine's CPU (0.5 to 1.0) at or above which it counts as fully used, for
    /// --activation auto [default: 0.9].
    #[arg(long, value_name = "SHARE")]
    activation_threshold: Option<f64>,
    /// How much input waiting counts as behind, for --activation auto, in time at the input
    /// rate (10ms to 10s) [default: per SPE kind, see docs/schedule.md].
    #[arg(long, value_name = "DURATION", value_parser = |s: &str| moirai_middleware::config::parse_activation_lag(s))]
    activation_lag: Option<Duration>,
    /// How long an SPE counts as starting after its sources first report an intake (0s to 10min),
    /// for --activation auto: a gain found against a window that began then does not hold back
    /// the comparison with Linux [default: per SPE kind: 20s for Storm, none otherwise].
    #[arg(long, value_name = "DURATION", value_parser = |s: &str| moirai_middleware::config::parse_activation_startup(s))]
    activation_startup: Option<Duration>,
    /// How often to look at the SPEs while the rule finds every one idle and keeping up (0s to
    /// 10s), for --activation auto: an SPE that falls behind is seen up to this much later, and
    /// from then on every period [default: 1s; 0s: every period].
    #[arg(long, value_name = "DURATION", value_parser = |s: &str| moirai_middleware::config::parse_quiet_period(s))]
    activation_quiet_period: Option<Duration>,
    /// Stop after this many rounds (then restore), instead of running until SIGINT/SIGTERM.
    #[arg(long)]
    rounds: Option<u64>,
    /// Undo what a crashed run left in the state file, then exit.
    #[arg(long)]
    restore_only: bool,
    /// Log every decision.
    #[arg(long, short)]
    verbose: bool,
    /// Log errors only.
    #[arg(long, short)]
    quiet: bool,
}

fn from_flags(a: &ScheduleArgs) -> Result<Config, String> {
    let level = match a.level.as_str() {
        "physical" => Level::Physical,
        "logical" => Level::Logical,
        other => return Err(format!("--level {other:?}: use physical or logical")),
    };
    let spec = match (a.policy.as_deref(), &a.script) {
        (None | Some("script"), Some(script)) => {
            PolicySpec::Script { script: script.clone(), level, max_operations: None, time_limit_ms: None }
        }
        (Some("script"), None) => return Err("--policy script needs --script \"<expression>\"".into()),
        (Some(_), Some(_)) => return Err("--script implies --policy script; drop --policy".into()),
        (None, None) => {
            return Err("no policy: give --policy qs (or hr, fcfs, random), --script, or --config FILE".into())
        }
        // The middleware's policies by name: the OS-level names of moirai_contract::policies.
        (Some(name), None) if moirai_contract::policies::find(name).is_some_and(|p| p.os_level) => {
            moirai_contract::sched::policy_spec(name, level).map_err(|e| e.to_string())?
        }
        (Some(other), None) => {
            let names: Vec<&str> = moirai_contract::policies::os_level().collect();
            return Err(format!(
                "unknown policy {other:?}: use {}, or script (more in a --config file)",
                names.join(", ")
            ));
        }
    };
    let name = a.policy.clone().unwrap_or_else(|| "script".into());
    let mut policy = PolicyConfig::new(&name, spec);
    let given =
        [(DriverKind::Moirai, a.engine.len()), (DriverKind::Flink, a.flink.len()), (DriverKind::Storm, a.storm.len())];
    policy.period = match &a.period {
        Some(p) => parse_period(p)?,
        None => moirai_middleware::config::default_period(given.into_iter().filter(|(_, n)| *n > 0).map(|(k, _)| k)),
    };
    policy.translator = match a.translator.as_str() {
        "nice" => TranslatorKind::Nice,
        "cgroup" => TranslatorKind::Cgroup,
        "realtime" => TranslatorKind::Realtime,
        other => return Err(format!("--translator {other:?}: use nice, cgroup or realtime")),
    };
    if policy.translator != TranslatorKind::Realtime && (a.rt_threads.is_some() || a.rt_class.is_some()) {
        return Err("--rt-threads and --rt-class are for --translator realtime".into());
    }
    policy.rt.threads = a.rt_threads.unwrap_or(policy.rt.threads);
    policy.rt.class = a.rt_class.unwrap_or(policy.rt.class);
    policy.nice = moirai_sched::NiceRange { best: a.nice_best, worst: a.nice_worst };
    policy.nice.validate()?;
    if let Some(s) = a.smoothing {
        moirai_middleware::config::check_smoothing(s).map_err(|e| format!("--{e}"))?;
        policy.smoothing = s;
    }
    if policy.translator == TranslatorKind::Cgroup {
        policy.normalization = moirai_sched::Normalization::Logarithmic;
    }
    if a.engine.is_empty() && a.flink.is_empty() && a.storm.is_empty() {
        return Err("no SPE: give --engine http://127.0.0.1:9464 (the engine's --metrics-addr), --flink \
                    http://127.0.0.1:8081 (Flink's REST API), --storm DIR (Storm's CSV metrics directory), or \
                    --config FILE"
            .into());
    }
    if a.flink_taskmanager.is_some() && a.flink.is_empty() {
        return Err(
            "--flink-taskmanager names the TaskManager of a --flink cluster on this node; give --flink URL too".into(),
        );
    }
    if !a.flink_prometheus.is_empty() && a.flink_prometheus.len() != a.flink.len() {
        return Err(format!(
            "--flink-prometheus names the reporter of each --flink cluster's TaskManager, in order: {} given for {} \
             --flink",
            a.flink_prometheus.len(),
            a.flink.len()
        ));
    }
    let storm: Vec<String> = a.storm.iter().map(|d| d.display().to_string()).collect();
    let spes = [
        (DriverKind::Moirai, "engine", &a.engine),
        (DriverKind::Flink, "flink", &a.flink),
        (DriverKind::Storm, "storm", &storm),
    ]
    .into_iter()
    .flat_map(|(driver, base, urls)| {
        urls.iter().enumerate().map(move |(i, url)| SpeConfig {
            name: if urls.len() == 1 { base.into() } else { format!("{base}{i}") },
            driver,
            url: if driver == DriverKind::Storm { String::new() } else { url.clone() },
            metrics_dir: (driver == DriverKind::Storm).then(|| PathBuf::from(url)),
            pid: None,
            uid: None,
            exe: None,
            allow_owner_change: false,
            queue: (driver == DriverKind::Flink).then_some(a.flink_queue),
            source_queue: (driver != DriverKind::Moirai).then_some(a.source_queue),
            taskmanager: if driver == DriverKind::Flink { a.flink_taskmanager.clone() } else { None },
            prometheus: if driver == DriverKind::Flink { a.flink_prometheus.get(i).cloned() } else { None },
            autogroup_nice: a.autogroup_nice,
        })
    })
    .collect();
    let config = Config {
        state_file: a.state_file.clone().unwrap_or_else(|| DEFAULT_STATE_FILE.into()),
        metrics_addr: a.metrics_addr,
        ui_addr: a.ui,
        ui_public: a.ui_public,
        spes,
        policies: vec![policy],
        activation: a.activation.unwrap_or_default(),
        activation_threshold: a.activation_threshold.unwrap_or(DEFAULT_ACTIVATION_THRESHOLD),
        activation_lag: a.activation_lag,
        activation_startup: a.activation_startup,
        activation_quiet_period: a.activation_quiet_period.unwrap_or(moirai_middleware::config::DEFAULT_QUIET_PERIOD),
    };
    config.validate()?;
    Ok(config)
}

/// How long the scheduling loop has after SIGINT/SIGTERM to restore and exit by itself.
pub const STOP_GRACE: Duration = Duration::from_secs(5);

/// After a stop request, gives the loop [`STOP_GRACE`] to finish; then restores every original
/// value from the state file itself and ends the process (exit code 1).
fn watchdog(stop: &AtomicBool, finished: &AtomicBool, state: &std::path::Path, log: &Log) {
    // Parked until the signal handler unparks it (a spurious wake-up only looks again): it never
    // wakes by itself, and when the loop ends on its own the process exits with it parked.
    while !stop.load(Ordering::SeqCst) {
        if finished.load(Ordering::SeqCst) {
            return;
        }
        std::thread::park();
    }
    let deadline = std::time::Instant::now() + STOP_GRACE;
    while std::time::Instant::now() < deadline {
        if finished.load(Ordering::SeqCst) {
            return;
        }
        std::thread::sleep(Duration::from_millis(20));
    }
    log.error(format!(
        "the scheduling loop did not stop within {STOP_GRACE:?} of the signal (a policy stuck?); restoring from {} \
         and exiting",
        state.display()
    ));
    match moirai_os::RestoreLog::restore_from(state) {
        Ok(report) => log.info(format!("{}: {report}", state.display())),
        Err(e) => log.error(format!("{e}; run `moirai schedule --restore-only --state-file {}`", state.display())),
    }
    moirai_middleware::driver::moirai::remove_own_locks(state);
    std::process::exit(1);
}

pub fn run(a: ScheduleArgs) -> i32 {
    let log = Log::new(a.verbose, a.quiet);
    if a.restore_only {
        let path = a.state_file.clone().unwrap_or_else(|| DEFAULT_STATE_FILE.into());
        if path.is_dir() {
            log.error(format!("the state file {} is a directory; name the file in it", path.display()));
            return 2;
        }
        moirai_middleware::driver::moirai::remove_stale_locks();
        return match moirai_os::RestoreLog::restore_from(&path) {
            Ok(report) if report.is_clean() => {
                log.info(format!("{}: {report}", path.display()));
                0
            }
            Ok(report) => {
                // What could not be undone stays in the state file for another try.
                log.error(format!("{}: not everything could be restored: {report}", path.display()));
                1
            }
            Err(e) => {
                log.error(e.to_string());
                1
            }
        };
    }
    let config = match &a.config {
        Some(path) => std::fs::read_to_string(path)
            .map_err(|e| format!("cannot read {}: {e}", path.display()))
            .and_then(|text| Config::from_toml(&text).map_err(|e| format!("{}: {e}", path.display())))
            .map(|mut c| {
                if let Some(s) = &a.state_file {
                    c.state_file = s.clone();
                }
                if a.metrics_addr.is_some() {
                    c.metrics_addr = a.metrics_addr;
                }
                if a.ui.is_some() {
                    c.ui_addr = a.ui;
                }
                c.ui_public |= a.ui_public;
                if a.autogroup_nice.is_some() {
                    c.spes.iter_mut().for_each(|s| s.autogroup_nice = a.autogroup_nice);
                }
                if let Some(mode) = a.activation {
                    c.activation = mode;
                }
                if let Some(share) = a.activation_threshold {
                    c.activation_threshold = share;
                }
                if a.activation_lag.is_some() {
                    c.activation_lag = a.activation_lag;
                }
                if a.activation_startup.is_some() {
                    c.activation_startup = a.activation_startup;
                }
                if let Some(p) = a.activation_quiet_period {
                    c.activation_quiet_period = p;
                }
                c
            })
            .and_then(|c| c.validate().map(|()| c)),
        None => from_flags(&a),
    };
    let config = match config {
        Ok(c) => c,
        Err(e) => {
            log.error(e);
            return 2;
        }
    };
    let stop = Arc::new(AtomicBool::new(false));
    // The signal is seen on ctrlc's own thread; if the scheduling loop does not end within the
    // grace period (stuck in a policy), this watchdog restores from the state file and exits.
    let finished = Arc::new(AtomicBool::new(false));
    let watchdog_thread = {
        let (stop, finished, state, out) = (stop.clone(), finished.clone(), config.state_file.clone(), log.clone());
        match std::thread::Builder::new()
            .name("stop-watchdog".into())
            .spawn(move || watchdog(&stop, &finished, &state, &out))
        {
            Ok(t) => t.thread().clone(),
            Err(e) => {
                log.error(format!("cannot start the stop watchdog: {e}"));
                return 1;
            }
        }
    };
    // The loop and the watchdog sleep parked (no wake-ups in slices): the handler wakes both.
    let (flag, main_thread) = (stop.clone(), std::thread::current());
    if let Err(e) = ctrlc::set_handler(move || {
        flag.store(true, Ordering::SeqCst);
        main_thread.unpark();
        watchdog_thread.unpark();
    }) {
        log.error(format!("cannot handle SIGINT/SIGTERM: {e}"));
        return 1;
    }
    let daemon = match Daemon::new(config, log.clone()) {
        Ok(d) => d,
        Err(e @ DaemonError::Config(_)) => {
            log.error(e.to_string());
            return 2;
        }
        Err(e) => {
            log.error(e.to_string());
            return 1;
        }
    };
    let report = daemon.run(&stop, a.rounds);
    finished.store(true, Ordering::SeqCst);
    // Give the log a moment to flush before exit on slow terminals.
    std::thread::sleep(Duration::from_millis(1));
    if report.is_clean() {
        0
    } else {
        1
    }
}

//! The middleware of a point, as the lab sees it: started beside the SPE with a metrics endpoint
//! of its own (`--metrics-addr 127.0.0.1:PORT`, a free port), watched over the measured window,
//! and stopped with SIGINT so that it restores what it steered.
//!
//! At the first poll at or after the window's start, and at its end (or when the SPE exits before
//! it), the lab samples the middleware's CPU (its own and that of the children it waited for:
//! `jcmd`) and scrapes its `/metrics` (at the start, again every poll until it answers). From the
//! two scrapes:
//!
//! - **`middleware_active_share`** = Σ over SPEs Δ`moirai_schedule_active_seconds_total` /
//!   Δ`moirai_schedule_uptime_seconds`: the share of the window in which the middleware acted on
//!   the SPE (a lab run has one). Both counters run on the middleware's own clock, so the share of
//!   one SPE is in [0, 1] whatever the scrapes' latency.
//! - **`middleware_first_active_s`**: when the middleware first acted on an SPE
//!   (`moirai_schedule_first_active_seconds`, seconds after its own start), in seconds after the
//!   SPE's start — the instant the lab takes as the start of the SPE's run (the engine's spawn;
//!   the moment a Flink job was RUNNING or a Storm spout emitted). The lab places the
//!   middleware's start on its own clock as the instant of a scrape (the middle of its request)
//!   minus the uptime that scrape reported; empty when it never acted.
//!
//! - **`middleware_activations`** and **`middleware_releases`**: how many times the middleware
//!   started acting on the SPE, and how many times it turned idle on it, by reason (`no_gain`,
//!   `probing`, …: the labels of `moirai_schedule_releases_total`), from its start to the
//!   window's end — why it acted for the share it did.
//!
//! A configuration of the engine's policy executor (`qs@policy:2`) has no middleware: its
//! scheduler is inside the engine, and the same columns come from its run summary
//! ([`policy_activity`]: the share of the measured window in which its priorities ordered the
//! ready queue, when they first did, and its activations and releases over the run).
//!
//! A middleware that cannot listen on the chosen port is retried on another one (as the engine
//! is); one whose `/metrics` does not answer fails its point, since the lab could not say whether
//! it acted.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use moirai_os::Signal;

use crate::point::Point;
use crate::process::{describe, file_tail, free_port, Child};
use crate::spec::Configuration;

/// How long the middleware may take to stop after SIGINT (it restores the threads it steered).
const MIDDLEWARE_GRACE: Duration = Duration::from_secs(5);
/// How long one scrape of `/metrics` may take.
const SCRAPE_TIMEOUT: Duration = Duration::from_secs(2);

/// How the middleware failed a point.
#[derive(Debug, PartialEq)]
pub enum MwFailure {
    /// It could not listen on the port the lab chose (another process took it between the lab's
    /// probe and its bind): another attempt, on another port, may work.
    PortTaken(String),
    /// Anything else.
    Failed(String),
}

/// The arguments of `moirai schedule` for a point: the SPE (`target`: `--engine URL`,
/// `--flink URL` or `--storm DIR`), the policy (`script:EXPR` is `--script EXPR`), its own state
/// file, quiet, the sweep's period unless the configuration names one, and the configuration's
/// own middleware flags. [`Middleware::spawn`] adds `--metrics-addr`.
pub fn schedule_args(
    config: &Configuration,
    policy: &str,
    target: &[String],
    state: &Path,
    period: Option<Duration>,
) -> Vec<String> {
    let (flag, policy) = match policy.strip_prefix("script:") {
        Some(expression) => ("--script", expression),
        None => ("--policy", policy),
    };
    let mut args: Vec<String> = std::iter::once("schedule".to_string())
        .chain(target.iter().cloned())
        .chain([flag, policy, "--state-file", &state.display().to_string()].iter().map(|s| s.to_string()))
        .collect();
    // Errors only, unless the configuration asks for every decision (`qs/verbose`).
    if !config.schedule_args.iter().any(|a| a == "--verbose") {
        args.push("--quiet".to_string());
    }
    // `qs/translator=realtime`: the configuration's own middleware flags; a `/period=` of its own
    // replaces the sweep's period, and without either the middleware's default for the SPE's
    // kind applies.
    if let (Some(period), false) = (period, config.schedule_args.iter().any(|a| a == "--period")) {
        args.extend(["--period".to_string(), format!("{}ms", period.as_millis().max(1))]);
    }
    args.extend(config.schedule_args.iter().cloned());
    args
}

/// What one scrape of the middleware's `/metrics` said.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct MwState {
    /// `moirai_schedule_uptime_seconds`.
    pub uptime_s: f64,
    /// `moirai_schedule_active_seconds_total` per SPE.
    pub active_s: BTreeMap<String, f64>,
    /// `moirai_schedule_first_active_seconds` per SPE that was ever active.
    pub first_active_s: BTreeMap<String, f64>,
    /// `moirai_schedule_activations_total` per SPE.
    pub activations: BTreeMap<String, f64>,
    /// `moirai_schedule_releases_total` per (SPE, reason).
    pub releases: BTreeMap<(String, String), f64>,
}

impl MwState {
    /// Reads the families the lab needs from the Prometheus text of `/metrics`; an SPE that is not
    /// listed yet (before the first round) has acted for 0 s.
    pub fn parse(text: &str) -> Result<MwState, String> {
        let mut state = MwState::default();
        let mut uptime = None;
        for line in text.lines().filter(|l| !l.starts_with('#')) {
            let Some((series, value)) = line.rsplit_once(' ') else { continue };
            let (name, labels) = series.split_once('{').unwrap_or((series, ""));
            let per_spe = match name {
                "moirai_schedule_uptime_seconds" => None,
                "moirai_schedule_active_seconds_total" => Some(&mut state.active_s),
                "moirai_schedule_first_active_seconds" => Some(&mut state.first_active_s),
                "moirai_schedule_activations_total" => Some(&mut state.activations),
                "moirai_schedule_releases_total" => None,
                _ => continue,
            };
            let value: f64 = match value.parse() {
                Ok(v) if f64::is_finite(v) && v >= 0.0 => v,
                _ => return Err(format!("`{line}` has no finite value >= 0")),
            };
            if name == "moirai_schedule_uptime_seconds" {
                uptime = Some(value);
                continue;
            }
            let spe = label(labels, "spe").ok_or(format!("`{line}` names no SPE"))?;
            match per_spe {
                Some(map) => {
                    map.insert(spe, value);
                }
                None => {
                    let reason = label(labels, "reason").ok_or(format!("`{line}` names no reason"))?;
                    state.releases.insert((spe, reason), value);
                }
            }
        }
        state.uptime_s = uptime.ok_or(
            "no moirai_schedule_uptime_seconds: is the middleware older than the lab (a `moirai` binary of another \
             build)?",
        )?;
        Ok(state)
    }
}

/// The value of the label `key` in `labels` (what follows `{`), escapes left as they are.
fn label(labels: &str, key: &str) -> Option<String> {
    let key = format!("{key}=\"");
    // At the start or after a comma: not the end of another label's name.
    let start = labels.match_indices(&key).find(|&(i, _)| i == 0 || labels[..i].ends_with(','))?.0 + key.len();
    let rest = &labels[start..];
    let mut escaped = false;
    let end = rest.char_indices().find(|&(_, c)| {
        let closes = c == '"' && !escaped;
        escaped = c == '\\' && !escaped;
        closes
    })?;
    Some(rest[..end.0].to_string())
}

/// For a point of the engine's policy executor: the scheduler-active columns from its run
/// summary (`policy_active_share`, `policy_first_active_s`, seconds after the engine's start);
/// nothing for any other point.
pub fn policy_activity(point: &mut Point) {
    let Some(extra) = point.run.as_ref().map(|r| &r.extra) else { return };
    if let Some(share) = extra.get("policy_active_share").and_then(serde_json::Value::as_f64) {
        point.middleware_active_share = Some(share);
        point.middleware_first_active_s = extra.get("policy_first_active_s").and_then(serde_json::Value::as_f64);
        let changes = extra.get("activation_changes").and_then(serde_json::Value::as_array);
        let (mut activations, mut releases) = (0, BTreeMap::new());
        for c in changes.into_iter().flatten() {
            match (c["active"].as_bool(), c["code"].as_str()) {
                (Some(true), _) => activations += 1,
                (Some(false), Some(code)) => *releases.entry(code.to_string()).or_default() += 1,
                _ => {}
            }
        }
        point.middleware_activations = Some(activations);
        point.middleware_releases = releases;
    }
}

/// How many times the middleware started acting, and turned idle by reason, summed over the
/// SPEs of one scrape.
pub fn activations_and_releases(state: &MwState) -> (u64, BTreeMap<String, u64>) {
    let activations = state.activations.values().sum::<f64>() as u64;
    let mut releases = BTreeMap::new();
    for ((_, reason), n) in &state.releases {
        *releases.entry(reason.clone()).or_default() += *n as u64;
    }
    (activations, releases)
}

/// The share of the window between two scrapes in which the middleware acted, summed over SPEs;
/// `None` when the scrapes span no time.
pub fn active_share(start: &MwState, end: &MwState) -> Option<f64> {
    let wall = end.uptime_s - start.uptime_s;
    if wall <= 0.0 {
        return None;
    }
    // Each SPE's part is at most the window: both counters run on the middleware's clock, so more
    // is the rounding of their decimal text.
    // A fold from +0.0, not `sum()`, whose empty sum is -0.0: a middleware that has not yet seen
    // an SPE acted 0 % of the window, not "-0".
    let active = end
        .active_s
        .iter()
        .map(|(spe, s)| (s - start.active_s.get(spe).copied().unwrap_or(0.0)).clamp(0.0, wall))
        .fold(0.0, |all, one| all + one);
    Some(active / wall)
}

/// When the middleware first acted on an SPE, in seconds after `t0` (the SPE's start), from a
/// scrape made at `at`; `None` when it never acted.
pub fn first_active_after(state: &MwState, at: Instant, t0: Instant) -> Option<f64> {
    let first = state.first_active_s.values().copied().fold(f64::INFINITY, f64::min);
    if !first.is_finite() {
        return None;
    }
    let started = at.checked_sub(Duration::from_secs_f64(state.uptime_s))?;
    // A scrape's latency can put it a hair before `t0`: never negative.
    Some((started + Duration::from_secs_f64(first)).saturating_duration_since(t0).as_secs_f64())
}

/// A running middleware of a point.
pub struct Middleware {
    child: Child,
    port: u16,
    agent: ureq::Agent,
    /// Its CPU (with its children's) at the window's start and end, ns.
    cpu: [Option<(Instant, u64)>; 2],
    /// Its state at the window's start and end, with the instant of the scrape.
    state: [Option<(Instant, MwState)>; 2],
    /// Why the last scrape failed, while none has answered at that end of the window.
    scrape_error: Option<String>,
    /// Where its stderr goes (what it says: attached, active, warnings, the restore).
    log: PathBuf,
}

impl Middleware {
    /// Starts `moirai schedule <args> --metrics-addr 127.0.0.1:PORT` on a free port, its stderr
    /// written to `log` (its directory is made).
    pub fn spawn(exe: &Path, mut args: Vec<String>, log: &Path) -> Result<Middleware, String> {
        let port = free_port()
            .map_err(|e| format!("no free TCP port on 127.0.0.1 for the middleware's metrics endpoint: {e}"))?;
        args.extend(["--metrics-addr".to_string(), format!("127.0.0.1:{port}")]);
        if let Some(dir) = log.parent() {
            std::fs::create_dir_all(dir).map_err(|e| format!("cannot create {}: {e}", dir.display()))?;
        }
        let file = std::fs::File::create(log).map_err(|e| format!("cannot create {}: {e}", log.display()))?;
        let mut cmd = std::process::Command::new(exe);
        cmd.args(&args);
        let child = Child::spawn_logged(cmd, file).map_err(|e| format!("cannot start the middleware: {e}"))?;
        let agent = ureq::AgentBuilder::new().timeout(SCRAPE_TIMEOUT).build();
        Ok(Middleware {
            child,
            port,
            agent,
            cpu: [None, None],
            state: [None, None],
            scrape_error: None,
            log: log.to_path_buf(),
        })
    }

    /// Watches it at one poll of the point, sampling at the window's `start` and `end`; says why
    /// the point fails when it exited.
    pub fn watch(&mut self, start: Instant, end: Instant) -> Result<(), MwFailure> {
        if let Some(status) = self.child.try_wait() {
            let tail = file_tail(&self.log, 5);
            let what = format!("the middleware exited during the run ({}): {tail}", describe(status));
            return Err(if tail.contains("cannot serve metrics") && tail.contains("in use") {
                MwFailure::PortTaken(what)
            } else {
                MwFailure::Failed(what)
            });
        }
        let now = Instant::now();
        if now >= start && now < end {
            if self.cpu[0].is_none() {
                self.cpu[0] = cpu_sample(self.child.pid());
            }
            if self.state[0].is_none() {
                self.state[0] = self.scrape();
            }
        }
        if now >= end {
            self.sample_end();
        }
        Ok(())
    }

    /// The samples at the window's end, unless taken.
    fn sample_end(&mut self) {
        if self.cpu[1].is_none() {
            self.cpu[1] = cpu_sample(self.child.pid());
        }
        if self.state[1].is_none() {
            if self.state[0].is_none() && self.scrape_error.is_some() {
                // Its start was never measured: say why, rather than scrape once more.
                return;
            }
            self.scrape_error = None;
            self.state[1] = self.scrape();
        }
    }

    fn scrape(&mut self) -> Option<(Instant, MwState)> {
        let url = format!("http://127.0.0.1:{}/metrics", self.port);
        let sent = Instant::now();
        let text = self.agent.get(&url).call().map_err(|e| e.to_string()).and_then(|r| {
            let got = Instant::now();
            r.into_string().map(|t| (got, t)).map_err(|e| e.to_string())
        });
        match text.and_then(|(got, t)| MwState::parse(&t).map(|s| (sent + (got - sent) / 2, s))) {
            Ok(sample) => {
                self.scrape_error = None;
                Some(sample)
            }
            Err(e) => {
                self.scrape_error = Some(format!("{url}: {e}"));
                None
            }
        }
    }

    /// Takes the end-of-window samples if the SPE ended first, records the middleware's CPU and
    /// state in `point` (`t0`: the SPE's start), and stops it with SIGINT. Says why the point
    /// fails when it did not stop cleanly or its state could not be read.
    pub fn finish(mut self, t0: Instant, point: &mut Point) -> Result<(), MwFailure> {
        let was_running = self.child.try_wait().is_none();
        if was_running {
            self.sample_end();
        }
        if let [Some((t_a, a)), Some((t_b, b))] = self.cpu {
            let wall = t_b.duration_since(t_a).as_secs_f64();
            if wall > 0.0 {
                point.middleware_cpu = Some(b.saturating_sub(a) as f64 / 1e9 / wall);
            }
        }
        if let [Some((_, a)), Some((at, b))] = &self.state {
            point.middleware_active_share = active_share(a, b);
            point.middleware_first_active_s = first_active_after(b, *at, t0);
            let (activations, releases) = activations_and_releases(b);
            point.middleware_activations = Some(activations);
            point.middleware_releases = releases;
        }
        let status = self.child.terminate(Signal::INT, MIDDLEWARE_GRACE);
        if !was_running {
            return Ok(());
        }
        use std::os::unix::process::ExitStatusExt;
        match status {
            Some(s) if s.signal() == Some(Signal::KILL.number()) => {
                return Err(MwFailure::Failed(format!(
                    "the middleware did not stop within {MIDDLEWARE_GRACE:?} of SIGINT"
                )))
            }
            // 130 = 128 + SIGINT, the conventional exit code of a process stopped by Ctrl-C.
            Some(s) if !s.success() && s.signal() != Some(Signal::INT.number()) && s.code() != Some(130) => {
                return Err(MwFailure::Failed(format!(
                    "the middleware failed on SIGINT ({}): {}",
                    describe(s),
                    file_tail(&self.log, 5)
                )))
            }
            _ => {}
        }
        match self.scrape_error {
            Some(e) => Err(MwFailure::Failed(format!(
                "the middleware's metrics did not answer over the measured window, so the lab cannot say whether it \
                 acted: {e}"
            ))),
            None => Ok(()),
        }
    }
}

/// One node of a standalone cluster, as its middleware is told it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct NodeTarget {
    /// The node's TaskManager (`--flink-taskmanager ID`).
    pub taskmanager: String,
    /// Its Prometheus reporter (`--flink-prometheus URL`), if it has one.
    pub prometheus: Option<String>,
}

/// Starts the middlewares of a point: one (`nodes` empty), with the state file `state` and the
/// log `log`; or one per node of a standalone cluster, each told its node's TaskManager
/// (`--flink-taskmanager ID`) and reporter (`--flink-prometheus URL`), with a state file and a log
/// of its own (`state` and `log` with `-ID` before the extension).
pub fn spawn_per_node(
    exe: &Path,
    args: Vec<String>,
    state: &Path,
    log: &Path,
    nodes: &[NodeTarget],
) -> Result<Vec<Middleware>, String> {
    if nodes.is_empty() {
        return Ok(vec![Middleware::spawn(exe, args, log)?]);
    }
    let own = state.display().to_string();
    let mut out = Vec::new();
    for node in nodes {
        let id = &node.taskmanager;
        let node_state = with_node(state, id, "json");
        let node_log = with_node(log, id, "log");
        let mut a: Vec<String> =
            args.iter().map(|x| if *x == own { node_state.display().to_string() } else { x.clone() }).collect();
        a.extend(["--flink-taskmanager".to_string(), id.clone()]);
        if let Some(url) = &node.prometheus {
            a.extend(["--flink-prometheus".to_string(), url.clone()]);
        }
        // On an error the ones started are dropped, which stops them.
        out.push(Middleware::spawn(exe, a, &node_log)?);
    }
    Ok(out)
}

/// `dir/name.ext` → `dir/name-ID.ext`.
fn with_node(path: &Path, id: &str, ext: &str) -> PathBuf {
    let stem = path.file_stem().map(|s| s.to_string_lossy().into_owned()).unwrap_or_default();
    path.with_file_name(format!("{stem}-{id}.{ext}"))
}

/// [`Middleware::finish`] for every middleware of a point: with one per node, the point's CPU is
/// their sum (each node's in [`Point::middleware_cpu_nodes`]), its active share their mean, its
/// first activation the earliest, its activations and releases their sums; the first failure fails the point (all are stopped).
pub fn finish_all(mws: Vec<Middleware>, t0: Instant, point: &mut Point) -> Result<(), MwFailure> {
    if mws.len() <= 1 {
        return mws.into_iter().next().map_or(Ok(()), |m| m.finish(t0, point));
    }
    let mut result = Ok(());
    let mut nodes = Vec::new();
    for m in mws {
        let mut p = point.clone();
        let r = m.finish(t0, &mut p);
        if result.is_ok() {
            result = r;
        }
        nodes.push(p);
    }
    let all = |f: fn(&Point) -> Option<f64>| nodes.iter().map(f).collect::<Option<Vec<f64>>>();
    if let Some(cpu) = all(|p| p.middleware_cpu) {
        point.middleware_cpu = Some(cpu.iter().sum());
        point.middleware_cpu_nodes = cpu;
    }
    point.middleware_active_share = all(|p| p.middleware_active_share).map(|s| s.iter().sum::<f64>() / s.len() as f64);
    point.middleware_first_active_s =
        nodes.iter().filter_map(|p| p.middleware_first_active_s).min_by(|a, b| a.total_cmp(b));
    point.middleware_activations = nodes.iter().map(|p| p.middleware_activations).sum();
    point.middleware_releases = BTreeMap::new();
    for (reason, n) in nodes.iter().flat_map(|p| &p.middleware_releases) {
        *point.middleware_releases.entry(reason.clone()).or_default() += n;
    }
    result
}

/// Per configuration with a scheduler that decides when to act (a middleware, the engine's policy
/// executor): in how many points it first acted more than a tenth of the measured window into it.
/// Such a window holds Linux alone and the scheduler's first rounds, so it says little of either;
/// the rule needs its confirmation and its first verdict (several seconds each) before it settles.
/// The window runs from `window_start_s` to `window_end_s` after the SPE's start. Empty when no
/// point did.
pub fn late_start_lines(points: &[Point], window_start_s: f64, window_end_s: f64) -> Vec<String> {
    let late_after = window_start_s + 0.1 * (window_end_s - window_start_s);
    let mut configurations: Vec<&str> = Vec::new();
    for p in points.iter().filter(|p| p.middleware_active_share.is_some()) {
        if !configurations.contains(&p.configuration.as_str()) {
            configurations.push(&p.configuration);
        }
    }
    let mut lines = Vec::new();
    for c in configurations {
        let watched: Vec<&Point> = points
            .iter()
            .filter(|p| p.configuration == c && p.failure.is_none() && p.middleware_active_share.is_some())
            .collect();
        let late: Vec<f64> =
            watched.iter().filter_map(|p| p.middleware_first_active_s).filter(|&s| s > late_after).collect();
        if late.is_empty() {
            continue;
        }
        let (lo, hi) = late.iter().fold((f64::INFINITY, f64::NEG_INFINITY), |(lo, hi), &s| (lo.min(s), hi.max(s)));
        let when = if hi - lo < 0.05 { format!("{lo:.1} s") } else { format!("{lo:.1}–{hi:.1} s") };
        lines.push(format!(
            "note: {c}: in {} of {} points its scheduler first acted inside the measured window (at {when} after the \
             SPE's start; the window is {window_start_s:.1}–{window_end_s:.1} s), so those windows mix Linux alone \
             with its first rounds: for its steady state, run longer points (e.g. --duration 150s --warmup 0.4)",
            late.len(),
            watched.len()
        ));
    }
    lines
}

/// The middleware's CPU so far, with that of the children it waited for (`jcmd` for a JVM's
/// thread dump).
fn cpu_sample(pid: u32) -> Option<(Instant, u64)> {
    moirai_os::proc::process_and_children_cpu_ns(pid).ok().map(|ns| (Instant::now(), ns))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::progress::releases_text;

    #[test]
    fn a_scheduler_that_first_acted_inside_the_window_is_named_with_when() {
        let at = |config: &str, rep: u32, first: Option<f64>| {
            let mut p = crate::summary::tests::point(config, 40_000.0, rep, 40_000.0, 10.0);
            p.middleware_active_share = Some(if first.is_some() { 0.5 } else { 0.0 });
            p.middleware_first_active_s = first;
            p
        };
        // A window from 4 s to 10 s: acting from 4.5 s is within its first tenth.
        let mut points = vec![
            at("qs", 1, Some(2.0)),
            at("qs", 2, Some(7.3)),
            at("qs", 3, Some(4.5)),
            at("qs", 4, None),
            at("os", 1, None),
            at("qs/activation=always", 1, Some(0.2)),
        ];
        points[4].middleware_active_share = None;
        let lines = late_start_lines(&points, 4.0, 10.0);
        assert_eq!(lines.len(), 1, "{lines:?}");
        assert!(lines[0].starts_with("note: qs: in 1 of 4 points its scheduler first acted inside"), "{}", lines[0]);
        assert!(lines[0].contains("at 7.3 s after") && lines[0].contains("the window is 4.0–10.0 s"), "{}", lines[0]);
        points.push(at("qs", 5, Some(9.0)));
        assert!(late_start_lines(&points, 4.0, 10.0)[0].contains("in 2 of 5 points"), "a range");
        assert!(late_start_lines(&points, 4.0, 10.0)[0].contains("at 7.3–9.0 s after"));
        // A failed point is not counted.
        points.last_mut().unwrap().failure = Some("it crashed".into());
        assert!(late_start_lines(&points, 4.0, 10.0)[0].contains("in 1 of 4 points"));
        assert!(late_start_lines(&points, 8.0, 10.0).is_empty(), "every first act before the window");
    }

    const METRICS: &str = "# HELP moirai_schedule_uptime_seconds Seconds since the middleware started.\n\
        # TYPE moirai_schedule_uptime_seconds gauge\n\
        moirai_schedule_uptime_seconds 12.5\n\
        moirai_schedule_rounds_total 12\n\
        moirai_schedule_active{spe=\"engine\",reason=\"behind\"} 1\n\
        moirai_schedule_active_seconds_total{spe=\"engine\"} 4.25\n\
        moirai_schedule_active_seconds_total{spe=\"a \\\"b\\\"\"} 0\n\
        moirai_schedule_first_active_seconds{spe=\"engine\"} 8.25\n\
        moirai_schedule_activations_total{spe=\"engine\"} 3\n\
        moirai_schedule_releases_total{spe=\"engine\",reason=\"no_gain\"} 1\n\
        moirai_schedule_releases_total{spe=\"engine\",reason=\"probing\"} 1\n";

    #[test]
    fn the_state_is_read_from_the_middlewares_metrics() {
        let s = MwState::parse(METRICS).unwrap();
        assert_eq!(s.uptime_s, 12.5);
        assert_eq!(s.active_s.len(), 2);
        assert_eq!(s.active_s["engine"], 4.25);
        assert_eq!(s.active_s["a \\\"b\\\""], 0.0);
        assert_eq!(s.first_active_s.iter().collect::<Vec<_>>(), [(&"engine".to_string(), &8.25)]);
        let (activations, releases) = activations_and_releases(&s);
        assert_eq!(activations, 3);
        assert_eq!(releases_text(&releases), "no_gain:1 probing:1");
        // Before its first round a middleware lists no SPE.
        assert_eq!(MwState::parse("moirai_schedule_uptime_seconds 0.01\n").unwrap().active_s.len(), 0);
        let e = MwState::parse("moirai_schedule_rounds_total 3\n").unwrap_err();
        assert!(e.contains("no moirai_schedule_uptime_seconds"), "{e}");
        let e = MwState::parse("moirai_schedule_uptime_seconds NaN\n").unwrap_err();
        assert!(e.contains("no finite value"), "{e}");
        let e = MwState::parse("moirai_schedule_uptime_seconds 1\nmoirai_schedule_active_seconds_total 3\n");
        assert!(e.unwrap_err().contains("names no SPE"));
        let e = MwState::parse("moirai_schedule_uptime_seconds 1\nmoirai_schedule_releases_total{spe=\"e\"} 3\n");
        assert!(e.unwrap_err().contains("names no reason"));
        // A label whose name ends like another's is not that one.
        assert_eq!(label("xspe=\"a\",spe=\"b\"", "spe").as_deref(), Some("b"));
    }

    #[test]
    fn the_share_and_the_first_activation_come_from_two_scrapes() {
        let state = |uptime: f64, active: f64, first: Option<f64>| MwState {
            uptime_s: uptime,
            active_s: [("engine".to_string(), active)].into_iter().collect(),
            first_active_s: first.map(|f| ("engine".to_string(), f)).into_iter().collect(),
            ..MwState::default()
        };
        // Idle for the first 2 s of a 10 s window, then active.
        let (a, b) = (state(3.0, 0.0, None), state(13.0, 8.0, Some(5.0)));
        assert_eq!(active_share(&a, &b), Some(0.8));
        assert_eq!(active_share(&MwState { active_s: BTreeMap::new(), ..a.clone() }, &b), Some(0.8));
        assert_eq!(active_share(&b, &b), None, "no time between the scrapes");
        assert_eq!(active_share(&a, &state(13.0, 0.0, None)), Some(0.0));
        // No SPE seen yet at either scrape: 0, printed as such (not -0).
        let none = |uptime: f64| MwState { uptime_s: uptime, ..MwState::default() };
        let share = active_share(&none(1.0), &none(2.0)).unwrap();
        assert!(share == 0.0 && share.is_sign_positive(), "{share:?}");
        // Acting the whole window, whatever the rounding of the text: 0.2 / 0.2 is 1.0000000000000002 here.
        let whole = (state(0.1, 0.06, None), state(0.3, 0.26, Some(0.04)));
        assert_eq!(active_share(&whole.0, &whole.1), Some(1.0));
        // The SPE started 1.5 s before the middleware; the scrape at `at` says 13 s of uptime.
        let t0 = Instant::now();
        let at = t0 + Duration::from_millis(14_500);
        let first = first_active_after(&b, at, t0).unwrap();
        assert!((first - 6.5).abs() < 1e-6, "{first}");
        assert_eq!(first_active_after(&a, at, t0), None, "never active");
    }

    #[test]
    fn the_policy_executor_s_activity_comes_from_its_run_summary() {
        let mut p = crate::summary::tests::point("qs@policy:2", 80_000.0, 1, 79_000.0, 2.0);
        let run = p.run.as_mut().unwrap();
        run.extra.insert("policy_active_share".into(), serde_json::json!(0.46));
        run.extra.insert("policy_first_active_s".into(), serde_json::json!(1.4));
        run.extra.insert(
            "activation_changes".into(),
            serde_json::json!([
                { "at_s": 1.4, "active": true, "code": "behind", "reason": "…" },
                { "at_s": 11.4, "active": false, "code": "no_gain", "reason": "…" },
                { "at_s": 31.6, "active": true, "code": "behind", "reason": "…" },
            ]),
        );
        policy_activity(&mut p);
        assert_eq!((p.middleware_active_share, p.middleware_first_active_s), (Some(0.46), Some(1.4)));
        assert_eq!(p.middleware_activations, Some(2));
        assert_eq!(releases_text(&p.middleware_releases), "no_gain:1");
        // A point of another configuration has none of it.
        let mut os = crate::summary::tests::point("os", 80_000.0, 1, 79_000.0, 2.0);
        policy_activity(&mut os);
        assert_eq!((os.middleware_active_share, os.middleware_activations), (None, None));
    }

    #[test]
    fn the_middleware_gets_the_points_target_policy_and_period() {
        let c = Configuration::parse("qs").unwrap();
        let target = ["--engine".to_string(), "http://127.0.0.1:9".to_string()];
        let state = Path::new("/tmp/s.json");
        let args = schedule_args(&c, "qs", &target, state, Some(Duration::from_millis(500))).join(" ");
        assert_eq!(
            args,
            "schedule --engine http://127.0.0.1:9 --policy qs --state-file /tmp/s.json --quiet --period 500ms"
        );
        let args = schedule_args(&c, "qs", &target, state, None).join(" ");
        assert!(!args.contains("--period"), "the middleware's default for the SPE's kind: {args}");
        let c = Configuration::parse("qs/activation=always/period=2s").unwrap();
        let args = schedule_args(&c, "script:queue_len", &target, state, Some(Duration::from_millis(500))).join(" ");
        assert!(args.contains("--script queue_len"), "{args}");
        assert!(args.ends_with("--quiet --activation always --period 2s"), "{args}");
        let c = Configuration::parse("qs/verbose").unwrap();
        let args = schedule_args(&c, "qs", &target, state, None).join(" ");
        assert!(args.ends_with("--state-file /tmp/s.json --verbose"), "every decision logged, not --quiet: {args}");
    }
}

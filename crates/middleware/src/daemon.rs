//! The control loop (Lachesis Algorithm 1): wake at the GCD of the policies' periods, observe the
//! SPEs, derive metrics, run the policies that are due, translate their schedules into Linux.
//!
//! Safety: before anything changes, a crashed run's state file is restored; every change is
//! recorded (with the original value) in a new one; on exit the recorded originals are put back.
//! Only the processes the drivers report are touched. An SPE that is down is logged and retried
//! every tick; the loop never exits because of it, and never spins.

use std::collections::{BTreeMap, HashMap};
use std::fs::File;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use moirai_os::caps::{preflight, Need};
use moirai_os::cgroup::CgroupLayout;
use moirai_os::{RestoreLog, RestoreReport};
use moirai_sched::{Capabilities, Cluster, Controller, Due, Metric, OpRef, Schedule};

use crate::activity::{self, ActivationMode, Activity};
use crate::config::{Config, PolicyConfig, TranslatorKind};
use crate::dashboard::{PolicyInfo, Recorder, RoundRecord};
use crate::driver::{Driver, Observation};
use crate::observe::{Log, Routes, SharedStats, ShownValues, StatsServer};
use crate::realtime::RealTimeTranslator;
use crate::session::Sessions;
use crate::translate::{Applied, CgroupTranslator, NiceTranslator};

/// Why the middleware cannot start or go on.
#[derive(Debug, thiserror::Error)]
pub enum DaemonError {
    /// The configuration is wrong.
    #[error("{0}")]
    Config(String),
    /// A privilege is missing.
    #[error("{0}")]
    Privilege(String),
    /// The state file or its lock.
    #[error("{0}")]
    State(String),
}

enum Translator {
    Nice(NiceTranslator),
    Cgroup(CgroupTranslator),
    RealTime(Box<RealTimeTranslator>),
}

/// The middleware: drivers, the scheduling [`Controller`] and one translator per policy.
pub struct Daemon {
    drivers: Vec<Box<dyn Driver>>,
    /// The policies' configurations, in the controller's order.
    configs: Vec<PolicyConfig>,
    /// Each policy's translator, in the controller's order.
    translators: Vec<Translator>,
    controller: Controller,
    log: RestoreLog,
    _lock: File,
    stats: SharedStats,
    server: Option<StatsServer>,
    /// The dashboard's own server, when it is not [`Daemon::server`].
    ui_server: Option<StatsServer>,
    /// The dashboard's state, when it is on.
    recorder: Option<Recorder>,
    /// What the round in progress collected for the dashboard.
    record: RoundRecord,
    out: Log,
    start: Instant,
    /// Per SPE: `None` when it answered last time, else the error last reported (logged when it
    /// changes, e.g. from "unreachable" to a refusal, not every round).
    down: BTreeMap<String, Option<String>>,
    /// Session groups: what nice can do for each SPE, and their `autogroup_nice`.
    sessions: Sessions,
    /// Whether the schedules are enforced on each SPE now.
    activity: Activity,
    /// Per SPE: the reason last shown with `-v`, as [`shown_as`] gives it.
    shown: BTreeMap<String, String>,
    /// Per policy: each thread's value last shown with `-v`.
    shown_values: ShownValues,
    /// How often to run a round while every SPE's rule is quiet.
    quiet_period: Duration,
    /// Whether every SPE's rule was quiet after the last round.
    quiet: bool,
}

/// Takes an exclusive lock on `<state file>.lock`, so two middlewares never share a state file.
fn lock_state(path: &std::path::Path) -> Result<File, DaemonError> {
    let lock_path = path.with_extension("lock");
    let file = File::create(&lock_path)
        .map_err(|e| DaemonError::State(format!("cannot create {}: {e}", lock_path.display())))?;
    let locked = moirai_os::lock::try_lock_exclusive(&file)
        .map_err(|e| DaemonError::State(format!("cannot lock {}: {e}", lock_path.display())))?;
    if !locked {
        return Err(DaemonError::State(format!(
            "another moirai schedule uses the state file {} (lock {} is held); stop it, or give this one its own \
             --state-file",
            path.display(),
            lock_path.display()
        )));
    }
    Ok(file)
}

impl Daemon {
    /// Prepares everything, restoring a crashed run first; touches no SPE thread yet.
    pub fn new(config: Config, out: Log) -> Result<Daemon, DaemonError> {
        config.validate().map_err(DaemonError::Config)?;
        // Bad input before anything is created (the state file's lock is `<file>.lock`).
        let state = &config.state_file;
        if state.is_dir() {
            return Err(DaemonError::Config(format!(
                "the state file {} is a directory; give a file in it, e.g. {}",
                state.display(),
                state.join("moirai-schedule.json").display()
            )));
        }
        let mut needs: Vec<Need> = Vec::new();
        for p in &config.policies {
            let need: &[Need] = match p.translator {
                TranslatorKind::Nice => &[Need::Nice],
                TranslatorKind::Cgroup => &[Need::Cgroups],
                TranslatorKind::Realtime => &[Need::Nice, Need::RealTime],
            };
            for need in need {
                if !needs.contains(need) {
                    needs.push(*need);
                }
            }
        }
        if config.policies.iter().filter(|p| p.translator == TranslatorKind::Cgroup).count() > 1 {
            return Err(DaemonError::Config(
                "more than one policy uses the cgroup translator; a thread can be in one cpu group only: keep one \
                 cgroup policy (e.g. shares per query) and use nice for the others"
                    .into(),
            ));
        }
        preflight(&needs).map_err(|e| DaemonError::Privilege(e.to_string()))?;
        // Descriptors for its endpoints and for `/proc`, which every round reads: as many as the
        // hard limit allows, which needs no privilege.
        match moirai_os::limits::raise_nofile() {
            Ok((before, after)) if after.soft > before.soft => {
                out.debug(format!("descriptor limit raised from {} to {}", before.soft, after.soft))
            }
            Ok(_) => {}
            Err(e) => out.error(format!("cannot raise the descriptor limit to the hard one: {e}")),
        }
        // The middleware must not be starved by the threads it raises: when a policy hands out
        // nice values below 0, it runs at the best of them itself (the threads it starts later —
        // its HTTP servers, jcmd for a thread dump — inherit it). Measured: 100 spinning Storm
        // executors at nice -10..-20 left a middleware at nice 0 two rounds in 75 s.
        let best = config
            .policies
            .iter()
            .filter(|p| matches!(p.translator, TranslatorKind::Nice | TranslatorKind::Realtime))
            .map(|p| p.nice.best)
            .min();
        if let Some(best) = best.filter(|b| *b < 0) {
            let me = moirai_os::proc::current_tid();
            match moirai_os::nice::set_nice(me, best) {
                Ok(()) => out.debug(format!("running at nice {best}, the best value its policies hand out")),
                Err(e) => out.error(format!("cannot raise the middleware itself to nice {best}: {e}")),
            }
        }

        if let Some(dir) = state.parent() {
            std::fs::create_dir_all(dir)
                .map_err(|e| DaemonError::State(format!("cannot create {}: {e}", dir.display())))?;
        }
        let lock = lock_state(state)?;
        if state.exists() {
            let report = RestoreLog::restore_from(state).map_err(|e| DaemonError::State(e.to_string()))?;
            out.info(format!("restored what a previous run left in {}: {report}", state.display()));
        }
        let mut log = RestoreLog::create(state).map_err(|e| DaemonError::State(e.to_string()))?;
        let drivers = crate::drivers::open(&config.spes, state)
            .map_err(|(spe, e)| DaemonError::Config(format!("SPE '{spe}': {e}")))?;

        let (mut policies, mut translators) = (Vec::new(), Vec::new());
        let realtime = config.policies.iter().any(|p| p.translator == TranslatorKind::Realtime);
        for p in &config.policies {
            let policy = p.spec.build(&p.name).map_err(|e| DaemonError::Config(format!("policy '{}': {e}", p.name)))?;
            let translator = match p.translator {
                TranslatorKind::Nice => {
                    Translator::Nice(NiceTranslator::new(p.normalization, p.nice).smoothing(p.smoothing))
                }
                TranslatorKind::Cgroup => {
                    let layout = CgroupLayout::detect().map_err(|e| DaemonError::Privilege(e.to_string()))?;
                    let instance = format!("schedule-{}", std::process::id());
                    let mut t = CgroupTranslator::new(&mut log, layout.cpu(), &instance, p.normalization, p.weights)
                        .map_err(|e| DaemonError::Privilege(format!("policy '{}': {e}", p.name)))?;
                    if realtime {
                        // Real-time threads may then run in its groups (v1 CONFIG_RT_GROUP_SCHED).
                        t.grant_realtime();
                    }
                    Translator::Cgroup(t)
                }
                TranslatorKind::Realtime => {
                    // Stale after three periods without a round (at least 5 s: a thread dump may
                    // take a few seconds).
                    let stale = (p.period * 3).max(Duration::from_secs(5));
                    Translator::RealTime(Box::new(
                        RealTimeTranslator::new(p.normalization, p.nice, p.rt.clone(), stale)
                            .map_err(|e| DaemonError::Privilege(format!("policy '{}': {e}", p.name)))?,
                    ))
                }
            };
            policies.push((p.run(), policy));
            translators.push(translator);
        }
        // A missing primitive is a configuration error, named now rather than in the first round.
        let capabilities: Vec<Capabilities> = drivers
            .iter()
            .map(|d| Capabilities { spe: d.spe().to_string(), driver: d.kind().to_string(), provides: d.provides() })
            .collect();
        let controller = Controller::new(policies, capabilities).map_err(|e| DaemonError::Config(e.to_string()))?;
        let kinds: Vec<(String, String)> =
            drivers.iter().map(|d| (d.spe().to_string(), d.kind().to_string())).collect();
        let activity = Activity::new(
            config.activation,
            config.activation_threshold,
            (config.activation_lag, config.activation_startup),
            &kinds,
        );
        let stats = SharedStats::default();
        // One server when the metrics and the dashboard share an address, else one each.
        let shared = config.metrics_addr.is_some() && config.metrics_addr == config.ui_addr;
        let ui_public = config.ui_public;
        let server = match config.metrics_addr {
            Some(addr) => Some(
                StatsServer::start(addr, stats.clone(), Routes { metrics: true, ui: shared, ui_public }, out.clone())
                    .map_err(DaemonError::Config)?,
            ),
            None => None,
        };
        let ui_server = match config.ui_addr.filter(|_| !shared) {
            Some(addr) => Some(
                StatsServer::start(addr, stats.clone(), Routes { metrics: false, ui: true, ui_public }, out.clone())
                    .map_err(DaemonError::Config)?,
            ),
            None => None,
        };
        if let Some(s) = &server {
            out.info(format!("serving the middleware's metrics on http://{}/metrics", s.addr()));
        }
        let ui_addr = if shared { server.as_ref() } else { ui_server.as_ref() }.map(StatsServer::addr);
        if let Some(addr) = ui_addr {
            out.info(format!("serving the dashboard on http://{addr}/"));
        }
        let recorder = config.ui_addr.map(|_| {
            let spes = drivers.iter().map(|d| (d.spe().to_string(), d.kind().to_string())).collect();
            let policies = config
                .policies
                .iter()
                .zip(&translators)
                .map(|(p, t)| PolicyInfo {
                    name: p.name.clone(),
                    translator: match t {
                        Translator::Nice(_) => "nice".into(),
                        Translator::Cgroup(_) => "cgroup".into(),
                        Translator::RealTime(_) => "realtime".into(),
                    },
                    applies: match t {
                        Translator::Nice(_) => "nice".into(),
                        Translator::Cgroup(c) => c.knob().into(),
                        Translator::RealTime(r) => {
                            format!("nice + {} (up to {} threads)", r.settings().class, r.settings().threads)
                        }
                    },
                    period: p.period,
                })
                .collect();
            Recorder::new(spes, policies, controller.tick(), std::process::id())
        });
        let sessions = Sessions::new(
            config.spes.iter().filter_map(|s| Some((s.name.clone(), s.autogroup_nice?))).collect(),
            config.policies.iter().any(|p| p.translator != TranslatorKind::Cgroup),
            config.policies.iter().any(|p| p.translator == TranslatorKind::Cgroup),
        );
        // The clock of the rounds, of the activity's times and of the endpoint's uptime.
        let start = Instant::now();
        stats.lock().started = Some(start);
        Ok(Daemon {
            drivers,
            configs: config.policies,
            translators,
            controller,
            log,
            _lock: lock,
            stats,
            server,
            ui_server,
            recorder,
            record: RoundRecord::default(),
            out,
            start,
            down: BTreeMap::new(),
            sessions,
            activity,
            shown: BTreeMap::new(),
            shown_values: ShownValues::default(),
            quiet_period: config.activation_quiet_period,
            quiet: false,
        })
    }

    /// The middleware's stats (shared with its endpoint).
    pub fn stats(&self) -> SharedStats {
        self.stats.clone()
    }

    /// Where the middleware's own metrics are served, if they are.
    pub fn metrics_addr(&self) -> Option<std::net::SocketAddr> {
        self.server.as_ref().map(|s| s.addr())
    }

    /// Where the dashboard is served, if it is.
    pub fn ui_addr(&self) -> Option<std::net::SocketAddr> {
        self.recorder.as_ref()?;
        self.ui_server.as_ref().or(self.server.as_ref()).map(|s| s.addr())
    }

    /// Runs rounds until `stop` is set (or `rounds` have run), then restores everything. Between
    /// rounds the calling thread parks: whoever sets `stop` should unpark it (else the stop is
    /// seen within [`STOP_SLICE`]); inside a round, a driver's long wait (a thread dump) ends.
    pub fn run(mut self, stop: &Arc<AtomicBool>, rounds: Option<u64>) -> RestoreReport {
        for d in &mut self.drivers {
            d.give_up_on(stop);
        }
        let names: Vec<String> =
            self.configs.iter().map(|p| format!("{} every {:?} via {:?}", p.name, p.period, p.translator)).collect();
        self.out.info(format!(
            "scheduling {} SPE(s) with {}; tick {:?}; state file {}",
            self.drivers.len(),
            names.join(", "),
            self.controller.tick(),
            self.log.path().display()
        ));
        match self.activity.mode() {
            ActivationMode::Auto => {
                let rule = moirai_sched::ActivationConfig {
                    cpu_threshold: self.activity.cpu_threshold(),
                    ..moirai_sched::ActivationConfig::default()
                };
                self.out.info(format!(
                    "acting on an SPE only while scheduling can help: the machine's CPU at least {:.0} % busy and the \
                     SPE falling behind (tuples waiting at its sources or in its queues), or at least {:.0} % busy \
                     and the SPE losing ground (its backlog growing) (--activation always acts from the start); a \
                     round at most every {:?} while every SPE keeps up (--activation-quiet-period)",
                    rule.cpu_threshold * 100.0,
                    rule.losing_ground_level() * 100.0,
                    self.quiet_period
                ))
            }
            ActivationMode::Always => self.out.info("acting on every SPE from the first round (--activation always)"),
        }
        let mut done = 0u64;
        let mut last_round = None;
        while !stop.load(Ordering::SeqCst) && rounds.is_none_or(|r| done < r) {
            let now = self.start.elapsed();
            let due = self.controller.due(now);
            if !due.is_empty() {
                last_round = Some(now);
                self.round(&due);
                done += 1;
                self.note_quiet();
            }
            if rounds.is_some_and(|r| done >= r) {
                break;
            }
            // Sleep to the next tick with something due. Whoever sets `stop` unparks this thread
            // (the CLI's signal handler does), so the stop is prompt without waking up in slices
            // (which cost ~1 ms of CPU a second); a caller that does not unpark waits at most
            // STOP_SLICE.
            let mut wake = self.start + self.controller.next_due(now);
            // While every SPE keeps up and is left to Linux, a round every quiet period: each
            // costs the middleware and the SPE CPU, and the rule cannot act before a round sees
            // an SPE behind anyway.
            if let Some(at) = last_round.filter(|_| self.quiet) {
                wake = wake.max(self.start + at + self.quiet_period);
            }
            while !stop.load(Ordering::SeqCst) {
                let left = wake.saturating_duration_since(Instant::now());
                if left.is_zero() {
                    break;
                }
                std::thread::park_timeout(left.min(STOP_SLICE));
            }
        }
        self.out.info("stopping: restoring original nice values and cgroups");
        let report = self.log.restore();
        self.out.info(format!("restored: {report}"));
        report
    }

    fn observe(&mut self) -> Vec<Observation> {
        let mut observations = Vec::new();
        let mut released = Vec::new();
        let auto = self.activity.mode() == ActivationMode::Auto;
        self.activity.sample_cpu();
        for d in &mut self.drivers {
            // What the controller's metric provider needs; everything the driver offers when the
            // provider does not cover this SPE yet.
            let mut metrics: Vec<Metric> =
                self.controller.needed(d.spe()).unwrap_or_else(|| d.provides().into_iter().collect());
            let mut extra: &[Metric] = &[];
            if self.recorder.is_some() {
                // The dashboard's queues and rates, where the driver has them.
                extra = &Recorder::EXTRA_METRICS;
            } else if auto {
                // The activation rule's: the sources' backlogs and input.
                extra = &ACTIVATION_METRICS;
            }
            if !extra.is_empty() {
                let provides = d.provides();
                for &m in extra {
                    if provides.contains(&m) && !metrics.contains(&m) {
                        metrics.push(m);
                    }
                }
            }
            let result = d.observe(&metrics);
            // What went wrong without keeping the SPE from being scheduled (e.g. a `/proc` read
            // that found no descriptor: the last thread mapping is kept).
            for e in d.take_errors() {
                self.out.error(format!("SPE '{}': {e}", d.spe()));
                self.stats.lock().errors += 1;
            }
            let dumps = d.thread_dumps();
            let before = self.stats.lock().thread_dumps.insert(d.spe().to_string(), dumps).unwrap_or(0);
            if dumps > before {
                self.out.debug(format!(
                    "SPE '{}': took a thread dump of its JVM to map its threads ({dumps} so far; each stops the JVM \
                     at a safepoint for a moment)",
                    d.spe()
                ));
            }
            match result {
                Ok(o) => {
                    if let Some(Some(_)) = self.down.insert(d.spe().to_string(), None) {
                        self.out.info(format!("SPE '{}' is back", d.spe()));
                    }
                    let (lines, errors) = self.sessions.attach(d.spe(), o.topology.pid, &mut self.log);
                    lines.iter().for_each(|l| self.out.info(l));
                    errors.iter().for_each(|e| self.out.error(e));
                    let at = self.start.elapsed();
                    if self.out.verbose && self.activity.mode() == ActivationMode::Auto {
                        self.out.debug(activity::describe_load(d.spe(), at, self.activity.busy(), d.sources()));
                    }
                    if let Some(t) = self.activity.update(d.spe(), at, d.sources()) {
                        self.out.info(activity::describe(d.spe(), &t));
                        // Said once: `-v` says the reason again only when it changes after this.
                        self.shown.insert(d.spe().to_string(), shown_as(t.reason.code(), &t.reason.to_string()));
                        if !t.active {
                            released.push((d.spe().to_string(), o.topology.pid));
                        }
                    }
                    observations.push(o);
                }
                Err(e) => {
                    let e = e.to_string();
                    // Nothing would correct a runaway real-time thread of an SPE that does not answer.
                    for t in &mut self.translators {
                        if let Translator::RealTime(rt) = t {
                            let n = rt.release_spe(d.spe(), &self.log);
                            if n > 0 {
                                self.out.info(format!(
                                    "SPE '{}' does not answer: {n} real-time thread(s) demoted",
                                    d.spe()
                                ));
                            }
                        }
                    }
                    if self.recorder.is_some() {
                        self.record.down.insert(d.spe().to_string(), e.clone());
                    }
                    if self.down.insert(d.spe().to_string(), Some(e.clone())).flatten() != Some(e.clone()) {
                        self.out.error(format!("SPE '{}' unavailable: {e}; retrying every tick", d.spe()));
                        self.stats.lock().errors += 1;
                    }
                }
            }
        }
        for (spe, pid) in released {
            self.release(&spe, pid);
        }
        self.activity.account(self.start.elapsed());
        self.show_activity();
        observations
    }

    /// Follows whether every SPE's rule is quiet after a round; with `-v`, says when that changes.
    fn note_quiet(&mut self) {
        let quiet = self.activity.is_quiet();
        if quiet != self.quiet && self.out.verbose {
            self.out.debug(if quiet {
                format!(
                    "quiet: every SPE keeps up and is left to Linux; a round every {:?} until one falls behind",
                    self.quiet_period
                )
            } else {
                "no longer quiet: a round every period".to_string()
            });
        }
        self.quiet = quiet;
    }

    /// Hands every thread of SPE `spe` (process `pid`) back its original value, now that the
    /// middleware leaves it to Linux.
    fn release(&mut self, spe: &str, pid: u32) {
        for t in &mut self.translators {
            match t {
                Translator::Nice(t) => t.forget(pid),
                Translator::Cgroup(t) => t.forget(pid),
                Translator::RealTime(t) => t.forget(pid, &self.log),
            }
        }
        let report = self.log.restore_process(pid);
        self.out.debug(format!("SPE '{spe}': {report}"));
        for f in &report.failures {
            self.fail(format!("SPE '{spe}': handing a thread back its original value: {f}"));
        }
        let mut stats = self.stats.lock();
        stats.applied.retain(|k, _| k.1 != spe);
        stats.changes += (report.nice_restored + report.classes_restored + report.threads_moved_back) as u64;
    }

    /// Publishes each SPE's activity; with `-v`, says why whenever the reason changes.
    fn show_activity(&mut self) {
        let views = self.activity.views();
        if self.out.verbose {
            for (spe, v) in &views {
                let shown = shown_as(v.code, &v.reason);
                if self.shown.get(spe) != Some(&shown) {
                    self.shown.insert(spe.clone(), shown);
                    let state = if v.active { "active" } else { "idle" };
                    self.out.debug(format!("SPE '{spe}': {state} — {}", v.reason));
                }
            }
        }
        let mut stats = self.stats.lock();
        stats.machine_busy = self.activity.busy();
        stats.activity = views;
    }

    fn round(&mut self, due: &Due) {
        let started = Instant::now();
        self.record = RoundRecord::default();
        let scheduled = self.schedule(due);
        let ns = started.elapsed().as_nanos() as u64;
        self.publish(ns);
        // A skipped round is not counted (it did not schedule anything).
        let Some((spes_up, threads)) = scheduled else { return };
        let mut s = self.stats.lock();
        s.rounds += 1;
        s.last_round_ns = ns;
        s.total_round_ns += ns;
        s.max_round_ns = s.max_round_ns.max(ns);
        s.spes_up = spes_up;
        s.threads = threads;
        let (rounds, changes) = (s.rounds, s.changes);
        drop(s);
        if rounds == 1 || rounds % 60 == 0 {
            self.out.info(format!(
                "round {rounds}: {spes_up} SPE(s) up, {threads} thread(s) scheduled, {changes} change(s) so far, {:.2} ms",
                ns as f64 / 1e6
            ));
        }
    }

    /// The dashboard's state after a round of `ns` nanoseconds, when the dashboard is on.
    fn publish(&mut self, ns: u64) {
        let Some(recorder) = &mut self.recorder else { return };
        let mut record = std::mem::take(&mut self.record);
        record.round_ns = ns;
        record.activation = self.activity.mode().as_str();
        record.machine_busy = self.activity.busy();
        record.activity = self.activity.views();
        (record.changes, record.errors) = {
            let s = self.stats.lock();
            (s.changes, s.errors)
        };
        let state = recorder.record(record);
        match serde_json::to_string(&state) {
            Ok(json) => self.stats.lock().dashboard = Some(json.into()),
            Err(e) => self.out.error(format!("dashboard: {e}")),
        }
    }

    /// Observes, runs the due policies and applies their schedules; returns the SPEs up and the
    /// threads scheduled, or `None` when the round was skipped.
    fn schedule(&mut self, due: &Due) -> Option<(usize, usize)> {
        let observations = self.observe();
        let at = self.start.elapsed();
        if self.recorder.is_some() {
            self.record.at = at;
            self.record.observed = observations.clone();
        }
        let round = match self.controller.round(due, at, observations) {
            Ok(r) => r,
            Err(e) => {
                self.record.skipped = Some(e.to_string());
                self.fail(e.to_string());
                return None;
            }
        };
        let cluster = &round.cluster;
        for (i, w) in &round.warnings {
            self.out.info(format!("policy '{}': {w}", self.configs[*i].name));
        }
        let mut threads = 0;
        // One policy at a time, each schedule enforced before the next policy runs (a policy that
        // hangs does not hold back the others' schedules).
        for &policy in round.policies() {
            let decision = self.controller.decide(&round, policy);
            let name = &self.configs[decision.policy].name;
            if self.recorder.is_some() {
                let error = decision.schedule.as_ref().err().map(|e| e.to_string());
                self.record.ran.insert(name.clone(), error);
                if let Ok(schedule) = &decision.schedule {
                    record_priorities(&mut self.record, name, schedule, cluster);
                }
            }
            let schedule = match decision.schedule {
                Ok(s) => {
                    if decision.changed {
                        self.out.info(format!("policy '{name}' works again"));
                    }
                    s
                }
                Err(e) => {
                    // Skipped this round; said once until it works again, counted every time.
                    if decision.changed {
                        self.fail(format!("policy '{name}': {e} (skipped until it works again)"));
                    } else {
                        self.stats.lock().errors += 1;
                    }
                    continue;
                }
            };
            // Only the SPEs on which scheduling can help now.
            let Some(schedule) = self.activity.filter(schedule, cluster) else {
                self.stats.lock().applied.retain(|k, _| k.0 != *name);
                self.shown_values.forget(name);
                continue;
            };
            // Real-time classes by thread (the real-time translator), for the log.
            let mut classes = HashMap::new();
            let applied: Applied = match &mut self.translators[decision.policy] {
                Translator::Nice(t) => t.apply(&schedule, cluster, &mut self.log),
                Translator::Cgroup(t) => t.apply(&schedule, cluster, &mut self.log),
                Translator::RealTime(t) => {
                    let idle = self.drivers.iter().map(|d| (d.spe().to_string(), d.idle_wait())).collect();
                    let rt = t.apply(&schedule, cluster, &mut self.log, &idle);
                    crate::realtime::report(&self.out, &self.stats, name, &rt);
                    if self.out.verbose {
                        classes.extend(rt.realtime.iter().map(|(t, class)| ((t.pid, t.tid), class.to_string())));
                    }
                    rt.nice
                }
            };
            threads += applied.values.len();
            for e in &applied.errors {
                self.out.error(format!("policy '{name}': {e}"));
            }
            if self.out.verbose {
                let values = applied.values.iter().map(|(t, v)| match classes.get(&(t.pid, t.tid)) {
                    Some(class) => (t, format!("{v}, {class}")),
                    None => (t, v.to_string()),
                });
                self.out.debug_lines(&self.shown_values.changed(name, values));
            }
            if self.recorder.is_some() {
                for (t, v) in &applied.values {
                    self.record.applied.entry((t.spe.clone(), t.tid)).or_default().insert(name.clone(), *v);
                }
            }
            self.stats.lock().record_applied(name, &applied);
        }
        Some((cluster.spes().len(), threads))
    }

    fn fail(&self, msg: String) {
        self.out.error(msg);
        self.stats.lock().errors += 1;
    }
}

/// The longest the loop sleeps between two looks at the stop flag when nobody unparks it.
pub const STOP_SLICE: Duration = Duration::from_secs(1);

/// What the activation rule needs sampled, when the policies do not need it anyway: the
/// sources' backlog (their `queue_len`) and input (`tuples_in`).
const ACTIVATION_METRICS: [Metric; 2] = [Metric::QueueLen, Metric::TuplesIn];

/// What `-v` compares to say an SPE's reason again: its code, and for "still needed" its words
/// too (fixed texts that tell why, e.g. after a verdict found a gain), where other reasons'
/// words change with their figures every round.
fn shown_as(code: &'static str, reason: &str) -> String {
    if code == "holding" {
        reason.to_string()
    } else {
        code.to_string()
    }
}

/// Notes the priority `policy`'s `schedule` gave each operator, for the dashboard.
fn record_priorities(record: &mut RoundRecord, policy: &str, schedule: &Schedule, cluster: &Cluster) {
    let mut note = |op: OpRef, priority: f64| {
        let key = (cluster.spe(op.spe).name().to_string(), op.op);
        record.priorities.entry(key).or_default().insert(policy.to_string(), priority);
    };
    match schedule {
        Schedule::Single(map) => map.iter().for_each(|(&op, &p)| note(op, p)),
        Schedule::Grouping(groups) => {
            for g in groups {
                g.members.iter().for_each(|&op| note(op, g.priority));
            }
        }
    }
}

//! The control loop (Lachesis Algorithm 1): wake at the GCD of the policies' periods, observe the
//! SPEs, derive metrics, run the policies that are due, translate their schedules into Linux.
//!
//! Safety: before anything changes, a crashed run's state file is restored; every change is
//! recorded (with the original value) in a new one; on exit the recorded originals are put back.
//! Only the processes the drivers report are touched. An SPE that is down is logged and retried
//! every tick; the loop never exits because of it, and never spins.

use std::collections::{BTreeMap, BTreeSet};
use std::fs::File;
use std::os::fd::AsRawFd;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, Instant};

use moirai_os::caps::{preflight, Need};
use moirai_os::cgroup::CgroupLayout;
use moirai_os::{RestoreLog, RestoreReport};
use moirai_sched::{
    Capabilities, Clock, Cluster, MetricProvider, OpRef, Policy, PolicyContext, Requirement, Samples, SpeTopology,
};

use crate::config::{Config, DriverKind, PolicyConfig, TranslatorKind};
use crate::driver::flink::FlinkDriver;
use crate::driver::moirai::{MoiraiDriver, Pins};
use crate::driver::{Driver, Observation};
use crate::observe::{Log, SharedStats, StatsServer};
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
}

struct Running {
    config: PolicyConfig,
    policy: Box<dyn Policy>,
    translator: Translator,
}

/// The middleware.
pub struct Daemon {
    drivers: Vec<Box<dyn Driver>>,
    policies: Vec<Running>,
    clock: Clock,
    /// The provider for the SPEs that answered last, rebuilt when that set changes.
    provider: Option<(Vec<String>, MetricProvider)>,
    log: RestoreLog,
    _lock: File,
    stats: SharedStats,
    server: Option<StatsServer>,
    out: Log,
    start: Instant,
    /// Per SPE: `None` when it answered last time, else the error last reported (logged when it
    /// changes, e.g. from "unreachable" to a refusal, not every round).
    down: BTreeMap<String, Option<String>>,
    /// Whether the policies' warnings about the topology were shown.
    warned: bool,
    /// Policies whose last round failed (reported when they start failing, not every round).
    failing: BTreeSet<String>,
}

fn requirement(p: &Running) -> Requirement {
    Requirement { policy: p.config.name.clone(), metrics: p.policy.metrics(), spes: p.config.scope.spe_names() }
}

/// Takes an exclusive lock on `<state file>.lock`, so two middlewares never share a state file.
fn lock_state(path: &std::path::Path) -> Result<File, DaemonError> {
    let lock_path = path.with_extension("lock");
    let file = File::create(&lock_path)
        .map_err(|e| DaemonError::State(format!("cannot create {}: {e}", lock_path.display())))?;
    // SAFETY: flock on a valid, open descriptor; no memory is passed.
    let rc = unsafe { libc::flock(file.as_raw_fd(), libc::LOCK_EX | libc::LOCK_NB) };
    if rc != 0 {
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
            let need = match p.translator {
                TranslatorKind::Nice => Need::Nice,
                TranslatorKind::Cgroup => Need::Cgroups,
            };
            if !needs.contains(&need) {
                needs.push(need);
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

        let mut drivers: Vec<Box<dyn Driver>> = Vec::new();
        for spe in &config.spes {
            let bad = |e: String| DaemonError::Config(format!("SPE '{}': {e}", spe.name));
            match spe.driver {
                DriverKind::Moirai => {
                    let pins = Pins {
                        pid: spe.pid,
                        uid: spe.uid,
                        exe: spe.exe.clone(),
                        allow_owner_change: spe.allow_owner_change,
                    };
                    let driver = MoiraiDriver::new(&spe.name, &spe.url, pins, state.clone()).map_err(bad)?;
                    drivers.push(Box::new(driver))
                }
                DriverKind::Flink => {
                    drivers.push(Box::new(FlinkDriver::new(&spe.name, &spe.url, spe.pid).map_err(bad)?))
                }
            }
        }

        let mut policies = Vec::new();
        for p in &config.policies {
            let policy = p.spec.build(&p.name).map_err(|e| DaemonError::Config(format!("policy '{}': {e}", p.name)))?;
            let translator = match p.translator {
                TranslatorKind::Nice => Translator::Nice(NiceTranslator::new(p.normalization, p.nice)),
                TranslatorKind::Cgroup => {
                    let layout = CgroupLayout::detect().map_err(|e| DaemonError::Privilege(e.to_string()))?;
                    let instance = format!("schedule-{}", std::process::id());
                    Translator::Cgroup(
                        CgroupTranslator::new(&mut log, layout.cpu(), &instance, p.normalization, p.weights)
                            .map_err(|e| DaemonError::Privilege(format!("policy '{}': {e}", p.name)))?,
                    )
                }
            };
            policies.push(Running { config: p.clone(), policy, translator });
        }
        // A missing primitive is a configuration error, named now rather than in the first round.
        let capabilities: Vec<Capabilities> = drivers
            .iter()
            .map(|d| Capabilities { spe: d.spe().to_string(), driver: d.kind().to_string(), provides: d.provides() })
            .collect();
        MetricProvider::new(&policies.iter().map(requirement).collect::<Vec<_>>(), &capabilities)
            .map_err(|e| DaemonError::Config(e.to_string()))?;

        let clock = Clock::new(&policies.iter().map(|p| p.config.period).collect::<Vec<_>>())
            .map_err(|e| DaemonError::Config(e.to_string()))?;
        let stats = SharedStats::default();
        let server = match config.metrics_addr {
            Some(addr) => Some(StatsServer::start(addr, stats.clone()).map_err(DaemonError::Config)?),
            None => None,
        };
        if let Some(s) = &server {
            out.info(format!("serving the middleware's metrics on http://{}/metrics", s.addr()));
        }
        Ok(Daemon {
            drivers,
            policies,
            clock,
            provider: None,
            log,
            _lock: lock,
            stats,
            server,
            out,
            start: Instant::now(),
            down: BTreeMap::new(),
            warned: false,
            failing: BTreeSet::new(),
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

    /// Runs rounds until `stop` is set (or `rounds` have run), then restores everything.
    pub fn run(mut self, stop: &AtomicBool, rounds: Option<u64>) -> RestoreReport {
        let names: Vec<String> = self
            .policies
            .iter()
            .map(|p| format!("{} every {:?} via {:?}", p.config.name, p.config.period, p.config.translator))
            .collect();
        self.out.info(format!(
            "scheduling {} SPE(s) with {}; tick {:?}; state file {}",
            self.drivers.len(),
            names.join(", "),
            self.clock.tick(),
            self.log.path().display()
        ));
        let mut last: Option<u64> = None;
        let mut done = 0u64;
        while !stop.load(Ordering::SeqCst) && rounds.is_none_or(|r| done < r) {
            let now = self.clock.tick_at(self.start.elapsed());
            let due = self.clock.due_between(last, now);
            last = Some(now);
            if !due.is_empty() {
                self.round(&due);
                done += 1;
            }
            if rounds.is_some_and(|r| done >= r) {
                break;
            }
            // Sleep to the next tick with something due, in slices so a stop request is prompt.
            let wake = self.start + self.clock.deadline(self.clock.next_due(now));
            while !stop.load(Ordering::SeqCst) {
                let left = wake.saturating_duration_since(Instant::now());
                if left.is_zero() {
                    break;
                }
                std::thread::sleep(left.min(Duration::from_millis(50)));
            }
        }
        self.out.info("stopping: restoring original nice values and cgroups");
        let report = self.log.restore();
        self.out.info(format!("restored: {report}"));
        report
    }

    fn observe(&mut self) -> Vec<Observation> {
        // Only SPEs the provider covers get a narrowed metric list; before the provider exists, or
        // for an SPE that was down when it was built (a re-attach), sample everything the driver
        // offers, so the round that rebuilds the provider has every value it asks for.
        let needed: BTreeMap<String, Vec<moirai_sched::Metric>> = match &self.provider {
            Some((_, p)) => {
                self.drivers.iter().filter_map(|d| Some((d.spe().to_string(), p.needed(d.spe())?))).collect()
            }
            None => BTreeMap::new(),
        };
        let mut observations = Vec::new();
        for d in &mut self.drivers {
            let metrics = needed.get(d.spe()).cloned().unwrap_or_else(|| d.provides().into_iter().collect());
            let result = d.observe(&metrics);
            match result {
                Ok(o) => {
                    if let Some(Some(_)) = self.down.insert(d.spe().to_string(), None) {
                        self.out.info(format!("SPE '{}' is back", d.spe()));
                    }
                    observations.push(o);
                }
                Err(e) => {
                    let e = e.to_string();
                    if self.down.insert(d.spe().to_string(), Some(e.clone())).flatten() != Some(e.clone()) {
                        self.out.error(format!("SPE '{}' unavailable: {e}; retrying every tick", d.spe()));
                        self.stats.lock().errors += 1;
                    }
                }
            }
        }
        observations
    }

    fn round(&mut self, due: &[usize]) {
        let started = Instant::now();
        let observations = self.observe();
        let at = self.start.elapsed();
        let topologies: Vec<SpeTopology> = observations.iter().map(|o| o.topology.clone()).collect();
        let live: Vec<String> = topologies.iter().map(|t| t.name.clone()).collect();
        let cluster = match Cluster::new(topologies) {
            Ok(c) => c,
            Err(e) => return self.fail(format!("inconsistent topology: {e}")),
        };
        if self.provider.as_ref().is_none_or(|(names, _)| *names != live) {
            match self.build_provider(&live) {
                Ok(p) => self.provider = Some((live.clone(), p)),
                Err(e) => return self.fail(e),
            }
        }
        let mut samples = Samples::new(&cluster, at);
        for (spe, o) in observations.iter().enumerate() {
            samples.set_time(spe, at);
            for &(op, metric, value) in &o.samples {
                if op < cluster.spe(spe).physical_len() {
                    samples.set(OpRef { spe, op }, metric, value);
                }
            }
        }
        let provider = &mut self.provider.as_mut().expect("built above").1;
        let values = match provider.update(&cluster, &samples) {
            Ok(v) => v,
            Err(e) => return self.fail(format!("metrics: {e}")),
        };
        let mut threads = 0;
        if !self.warned {
            self.warned = true;
            for p in &self.policies {
                for w in p.policy.warnings(&cluster) {
                    self.out.info(format!("policy '{}': {w}", p.config.name));
                }
            }
        }
        for &i in due {
            let running = &mut self.policies[i];
            let scoped = running.config.scope.spe_names();
            if scoped.as_ref().is_some_and(|s| !s.iter().any(|n| live.contains(n))) {
                continue;
            }
            let scope = running.config.scope.resolve(&cluster);
            let ctx = PolicyContext { cluster: &cluster, metrics: &values, scope: &scope };
            let schedule = match running.policy.schedule(&ctx) {
                Ok(s) => {
                    if self.failing.remove(&running.config.name) {
                        self.out.info(format!("policy '{}' works again", running.config.name));
                    }
                    s
                }
                Err(e) => {
                    // Skipped this round; said once until it works again, counted every time.
                    let msg = format!("policy '{}': {e} (skipped until it works again)", running.config.name);
                    if self.failing.insert(running.config.name.clone()) {
                        self.fail(msg);
                    } else {
                        self.stats.lock().errors += 1;
                    }
                    continue;
                }
            };
            let applied: Applied = match &mut running.translator {
                Translator::Nice(t) => t.apply(&schedule, &cluster, &mut self.log),
                Translator::Cgroup(t) => t.apply(&schedule, &cluster, &mut self.log),
            };
            threads += applied.values.len();
            for e in &applied.errors {
                self.out.error(format!("policy '{}': {e}", running.config.name));
            }
            if self.out.verbose {
                for (t, v) in &applied.values {
                    self.out.debug(format!(
                        "policy '{}': {}/{}/{} tid {} priority {:.3} -> {v}",
                        running.config.name, t.spe, t.query, t.operator, t.tid, t.priority
                    ));
                }
            }
            self.stats.lock().record_applied(&running.config.name, &applied);
        }
        let ns = started.elapsed().as_nanos() as u64;
        let mut s = self.stats.lock();
        s.rounds += 1;
        s.last_round_ns = ns;
        s.total_round_ns += ns;
        s.max_round_ns = s.max_round_ns.max(ns);
        s.spes_up = live.len();
        s.threads = threads;
        let (rounds, changes) = (s.rounds, s.changes);
        drop(s);
        if rounds == 1 || rounds % 60 == 0 {
            self.out.info(format!(
                "round {rounds}: {} SPE(s) up, {threads} thread(s) scheduled, {changes} change(s) so far, {:.2} ms",
                live.len(),
                ns as f64 / 1e6
            ));
        }
    }

    fn build_provider(&self, live: &[String]) -> Result<MetricProvider, String> {
        let capabilities: Vec<Capabilities> = self
            .drivers
            .iter()
            .filter(|d| live.iter().any(|n| n == d.spe()))
            .map(|d| Capabilities { spe: d.spe().to_string(), driver: d.kind().to_string(), provides: d.provides() })
            .collect();
        let requirements: Vec<Requirement> = self
            .policies
            .iter()
            .map(requirement)
            .map(|mut r| {
                r.spes = Some(match r.spes.take() {
                    Some(s) => s.into_iter().filter(|n| live.contains(n)).collect(),
                    None => live.iter().cloned().collect(),
                });
                r
            })
            .collect();
        MetricProvider::new(&requirements, &capabilities).map_err(|e| e.to_string())
    }

    fn fail(&self, msg: String) {
        self.out.error(msg);
        self.stats.lock().errors += 1;
    }
}

//! Whether the middleware acts on each SPE now: the daemon's side of the activation rule
//! ([`moirai_sched::activation`]).
//!
//! Every round the daemon reads the machine's CPU once (`/proc/stat`) and, per SPE that
//! answered, what its sources showed ([`SourceLoad`]); one [`Activation`] per SPE decides. The
//! policies' schedules are enforced only on the threads of active SPEs; an SPE that turns idle
//! gets every thread's original value back (the daemon does that through the restore log).
//! With [`ActivationMode::Always`] every SPE is always active, as before the rule existed.
//!
//! Each round also counts how long the middleware has acted on each SPE ([`ActiveTime`]): a
//! stretch begins at the round that finds it active and ends at the round that finds it idle
//! (its threads keep the values applied in between), so the time is the time between rounds
//! while active.

use std::collections::BTreeMap;
use std::time::Duration;

use crate::driver::SourceLoad;
pub use moirai_contract::policies::ActivationMode;
use moirai_sched::activation::{Activation, ActivationConfig, LoadSample, Transition};
use moirai_sched::{Cluster, Schedule};

/// The rule's windows for an SPE whose driver is `kind`: a JVM SPE's metrics (Flink's REST
/// store, Storm's CSV reporter) refresh about once a second, so its confirm window spans more
/// rounds; the losing-ground window (3 s) is the same for every kind (measured on Flink: 9 s
/// there started acting 10 s into a 20 s run). `lag`, when given, replaces the kind's (the
/// rule's default, 100 ms, on every kind: see `docs/schedule.md`, "When it acts", for what 25 ms
/// did on moirai's engine, and why it is not the default there). `startup`, when given, replaces
/// the kind's start-up (20 s for Storm's warming worker, none elsewhere).
pub fn config_for(
    kind: &str,
    cpu_threshold: f64,
    lag: Option<Duration>,
    startup: Option<Duration>,
) -> ActivationConfig {
    let base = ActivationConfig { cpu_threshold, ..ActivationConfig::default() };
    let kinds = match kind {
        // Their metrics refresh about once a second (Storm's reporter as moirai's jobs set it up,
        // Flink's REST metric store) until the driver has measured the period
        // (`SourceLoad::counter_period`, which replaces this in `Activity::update`).
        "flink" | "storm" => {
            let jvm =
                ActivationConfig { confirm: Duration::from_secs(3), counter_period: Duration::from_secs(1), ..base };
            // Storm's worker warms up: it took in about 30k tuples/s of Linear Road in its 4th
            // second and 50–68k over later 10 s windows, so a gain found against its first
            // seconds is none (docs/schedule.md, "When it acts"). Not measured on Flink yet.
            if kind == "storm" {
                ActivationConfig { startup: Duration::from_secs(20), ..jvm }
            } else {
                jvm
            }
        }
        _ => base,
    };
    ActivationConfig { startup: startup.unwrap_or(kinds.startup), ..kinds.with_lag(lag.unwrap_or(kinds.lag)) }
}

/// What an SPE's rule says now, for the log, the dashboard and `/metrics`.
#[derive(Clone, Debug, PartialEq)]
pub struct SpeActivity {
    /// Whether the middleware acts on it.
    pub active: bool,
    /// Why, for people.
    pub reason: String,
    /// Why, as a stable code ([`moirai_sched::activation::Reason::code`], or `always`).
    pub code: &'static str,
    /// Since when (since the middleware started).
    pub since: Duration,
    /// How many times it became active.
    pub activations: u64,
    /// How many times it turned idle, per reason code (`no_gain`, `probing`, …).
    pub releases: BTreeMap<&'static str, u64>,
    /// How long the middleware has acted on it.
    pub time: ActiveTime,
    /// How often the SPE refreshes the counters the rule reads, as the rule allows for it (its
    /// driver's measure, or its kind's default; zero: read live).
    pub counter_period: Duration,
}

/// How long the middleware has acted on an SPE, on the daemon's clock (since it started).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct ActiveTime {
    /// The stretches that ended.
    pub closed: Duration,
    /// When the stretch under way began (the round that found the SPE active), if it is active.
    pub open_since: Option<Duration>,
    /// When it was first found active, if ever.
    pub first: Option<Duration>,
}

impl ActiveTime {
    /// Time acted on it up to `now` (the stretch under way counts up to `now`).
    pub fn seconds(&self, now: Duration) -> f64 {
        let open = self.open_since.map_or(Duration::ZERO, |since| now.saturating_sub(since));
        (self.closed + open).as_secs_f64()
    }

    /// The round at `at` found the SPE `active` or not.
    fn account(&mut self, at: Duration, active: bool) {
        match (active, self.open_since) {
            (true, None) => {
                self.open_since = Some(at);
                self.first.get_or_insert(at);
            }
            (false, Some(since)) => {
                self.closed += at.saturating_sub(since);
                self.open_since = None;
            }
            _ => {}
        }
    }
}

/// One SPE's rule and what it did so far.
struct SpeRule {
    rule: Activation,
    /// How many times it became active.
    activations: u64,
    /// How many times it turned idle, per reason code.
    releases: BTreeMap<&'static str, u64>,
    /// How long it was active.
    time: ActiveTime,
}

/// The activation rules of the SPEs.
pub struct Activity {
    mode: ActivationMode,
    cpu_threshold: f64,
    /// Per SPE name.
    rules: BTreeMap<String, SpeRule>,
    /// The machine's CPU ticks at the last reading (busy, total).
    cpu_before: Option<(u64, u64)>,
    /// The machine's busy share since the reading before.
    busy: Option<f64>,
}

impl Activity {
    /// Rules for SPEs of the given `(name, driver kind)`; `lag` and `startup`, when given,
    /// replace each kind's ([`config_for`]).
    pub fn new(
        mode: ActivationMode,
        cpu_threshold: f64,
        (lag, startup): (Option<Duration>, Option<Duration>),
        spes: &[(String, String)],
    ) -> Activity {
        let rules = spes
            .iter()
            .map(|(name, kind)| {
                let rule = Activation::new(config_for(kind, cpu_threshold, lag, startup));
                (name.clone(), SpeRule { rule, activations: 0, releases: BTreeMap::new(), time: ActiveTime::default() })
            })
            .collect();
        Activity { mode, cpu_threshold, rules, cpu_before: None, busy: None }
    }

    /// The mode.
    pub fn mode(&self) -> ActivationMode {
        self.mode
    }

    /// Whether the rule of every SPE is [quiet](Activation::is_quiet) (idle, the SPE seen
    /// keeping up): the daemon may look less often then. Never with [`ActivationMode::Always`],
    /// nor while an SPE has not answered yet.
    pub fn is_quiet(&self) -> bool {
        self.mode == ActivationMode::Auto && !self.rules.is_empty() && self.rules.values().all(|r| r.rule.is_quiet())
    }

    /// The CPU threshold of the rules.
    pub fn cpu_threshold(&self) -> f64 {
        self.cpu_threshold
    }

    /// Reads the machine's CPU (`/proc/stat`, one small file); call once per round, before
    /// [`Activity::update`].
    pub fn sample_cpu(&mut self) {
        if self.mode == ActivationMode::Always {
            return;
        }
        let now = moirai_os::proc::machine_cpu_ticks().ok();
        self.busy = match (self.cpu_before, now) {
            (Some((b0, t0)), Some((b1, t1))) if t1 > t0 => Some((b1.saturating_sub(b0)) as f64 / (t1 - t0) as f64),
            _ => None,
        };
        if now.is_some() {
            self.cpu_before = now;
        }
    }

    /// The machine's busy share over the last round (0..=1), if known.
    pub fn busy(&self) -> Option<f64> {
        self.busy
    }

    /// Feeds SPE `spe`'s rule what its sources showed at `at`; returns its state change, if any.
    pub fn update(&mut self, spe: &str, at: Duration, sources: Option<SourceLoad>) -> Option<Transition> {
        if self.mode == ActivationMode::Always {
            return None;
        }
        let spe = self.rules.get_mut(spe)?;
        if let Some(period) = sources.and_then(|s| s.counter_period) {
            spe.rule.set_counter_period(period);
        }
        let sample = LoadSample {
            at,
            cpu_busy: self.busy,
            backlog: sources.and_then(|s| s.waiting()),
            source_backlog: sources.and_then(|s| s.backlog),
            ingested: sources.map(|s| s.ingested),
        };
        let t = spe.rule.update(sample);
        match &t {
            Some(t) if t.active => spe.activations += 1,
            Some(t) => *spe.releases.entry(t.reason.code()).or_default() += 1,
            None => {}
        }
        t
    }

    /// Whether the middleware acts on SPE `spe` now.
    pub fn is_active(&self, spe: &str) -> bool {
        self.mode == ActivationMode::Always || self.rules.get(spe).is_some_and(|s| s.rule.is_active())
    }

    /// Counts the time acted on each SPE up to the round at `at`; call once per round, after
    /// [`Activity::update`].
    pub fn account(&mut self, at: Duration) {
        let always = self.mode == ActivationMode::Always;
        for spe in self.rules.values_mut() {
            spe.time.account(at, always || spe.rule.is_active());
        }
    }

    /// What SPE `spe`'s rule says now.
    pub fn view(&self, spe: &str) -> Option<SpeActivity> {
        let SpeRule { rule, activations, releases, time } = self.rules.get(spe)?;
        if self.mode == ActivationMode::Always {
            return Some(SpeActivity {
                active: true,
                reason: "always active (--activation always)".into(),
                code: "always",
                since: Duration::ZERO,
                // Acting from the first round on, it started once.
                activations: u64::from(time.first.is_some()),
                releases: BTreeMap::new(),
                time: *time,
                counter_period: rule.config().counter_period,
            });
        }
        Some(SpeActivity {
            active: rule.is_active(),
            reason: rule.reason().to_string(),
            code: rule.reason().code(),
            since: rule.since(),
            activations: *activations,
            releases: releases.clone(),
            time: *time,
            counter_period: rule.config().counter_period,
        })
    }

    /// Every SPE's view, by name.
    pub fn views(&self) -> BTreeMap<String, SpeActivity> {
        self.rules.keys().filter_map(|n| Some((n.clone(), self.view(n)?))).collect()
    }

    /// `schedule` without the operators of idle SPEs; `None` when nothing is left.
    pub fn filter(&self, schedule: Schedule, cluster: &Cluster) -> Option<Schedule> {
        if self.mode == ActivationMode::Always {
            return Some(schedule);
        }
        let active = |spe: usize| self.is_active(cluster.spe(spe).name());
        match schedule {
            Schedule::Single(mut map) => {
                map.retain(|op, _| active(op.spe));
                (!map.is_empty()).then_some(Schedule::Single(map))
            }
            Schedule::Grouping(mut groups) => {
                for g in &mut groups {
                    g.members.retain(|op| active(op.spe));
                }
                groups.retain(|g| !g.members.is_empty());
                (!groups.is_empty()).then_some(Schedule::Grouping(groups))
            }
        }
    }
}

/// What the rule is told about SPE `spe` in the round at `at`, for `-v`: the machine's busy
/// share, the tuples waiting in the SPE and the tuples its sources took in so far.
pub fn describe_load(spe: &str, at: Duration, busy: Option<f64>, sources: Option<SourceLoad>) -> String {
    let figure = |v: Option<f64>, scale: f64| v.map_or_else(|| "?".to_string(), |v| format!("{:.0}", v * scale));
    format!(
        "SPE '{spe}': load at {:.2} s: machine {} % busy, {} tuple(s) waiting, {} taken in",
        at.as_secs_f64(),
        figure(busy, 100.0),
        figure(sources.and_then(|s| s.waiting()), 1.0),
        figure(sources.map(|s| s.ingested), 1.0),
    )
}

/// Says what a state change means, for the log.
pub fn describe(spe: &str, t: &Transition) -> String {
    match (t.active, &t.reason) {
        (true, reason) => format!("SPE '{spe}': active — {reason}; scheduling its threads"),
        (false, reason) => format!("SPE '{spe}': idle — {reason}; its threads are back to their original values"),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use moirai_sched::{Group, OpRef};

    #[test]
    fn the_contract_s_activation_defaults_are_the_rule_s() {
        let rule = moirai_sched::activation::ActivationConfig::default();
        assert_eq!(moirai_contract::policies::DEFAULT_ACTIVATION_THRESHOLD, rule.cpu_threshold);
        assert_eq!(
            moirai_contract::policies::ACTIVATION_THRESHOLD_RANGE,
            moirai_sched::activation::CPU_THRESHOLD_RANGE
        );
        assert_eq!(moirai_contract::policies::ACTIVATION_LAG_RANGE, moirai_sched::activation::LAG_RANGE);
    }

    /// What the sources showed: `backlog` tuples waiting, `ingested` taken in so far.
    fn load(backlog: f64, ingested: f64) -> SourceLoad {
        SourceLoad { backlog: Some(backlog), ingested, ..SourceLoad::default() }
    }

    fn spes() -> Vec<(String, String)> {
        vec![("engine".into(), "moirai".into()), ("flink".into(), "flink".into())]
    }

    #[test]
    fn modes_are_read_and_always_acts_everywhere() {
        assert_eq!("auto".parse::<ActivationMode>(), Ok(ActivationMode::Auto));
        assert_eq!("always".parse::<ActivationMode>(), Ok(ActivationMode::Always));
        assert!("sometimes".parse::<ActivationMode>().unwrap_err().contains("auto or always"));
        let always = Activity::new(ActivationMode::Always, 0.9, (None, None), &spes());
        assert!(always.is_active("engine") && always.is_active("flink"));
        assert_eq!(always.view("engine").unwrap().code, "always");
        let auto = Activity::new(ActivationMode::Auto, 0.9, (None, None), &spes());
        assert!(!auto.is_active("engine"));
        assert_eq!(auto.view("flink").unwrap().code, "starting");
        assert_eq!(auto.views().len(), 2);
        assert!(!auto.is_active("unknown"));
    }

    #[test]
    fn jvm_spes_confirm_over_more_rounds_and_a_given_lag_replaces_the_kinds() {
        assert_eq!(config_for("moirai", 0.8, None, None).confirm, Duration::from_secs(1));
        assert_eq!(config_for("flink", 0.8, None, None).confirm, Duration::from_secs(3));
        assert_eq!(
            config_for("flink", 0.8, None, None).losing_ground,
            config_for("moirai", 0.8, None, None).losing_ground
        );
        assert_eq!(config_for("storm", 0.95, None, None).cpu_threshold, 0.95);
        assert_eq!(
            config_for("storm", 0.9, None, None).counter_period,
            Duration::from_secs(1),
            "its reporter's period"
        );
        assert_eq!(config_for("moirai", 0.9, None, None).counter_period, Duration::ZERO, "read live");
        assert_eq!(config_for("flink", 0.9, None, None).lag, Duration::from_millis(100));
        let engine = config_for("moirai", 0.9, Some(Duration::from_millis(25)), None);
        assert_eq!((engine.lag, engine.keep_up), (Duration::from_millis(25), Duration::from_millis(100)));
        let lag = Some(Duration::from_millis(40));
        assert_eq!(config_for("storm", 0.9, lag, None).lag, Duration::from_millis(40), "the given lag, any kind");
        assert_eq!(config_for("storm", 0.9, lag, None).confirm, Duration::from_secs(3), "the kind's other windows");
        // The start-up: 20 s for Storm's warming worker, none elsewhere, unless given.
        assert_eq!(config_for("storm", 0.9, None, None).startup, Duration::from_secs(20));
        assert_eq!(config_for("flink", 0.9, None, None).startup, Duration::ZERO);
        assert_eq!(config_for("moirai", 0.9, None, None).startup, Duration::ZERO);
        let startup = Some(Duration::from_secs(45));
        assert_eq!(config_for("flink", 0.9, lag, startup).startup, Duration::from_secs(45), "the given one, any kind");
        assert_eq!(config_for("flink", 0.9, lag, startup).lag, Duration::from_millis(40), "with the given lag");
        assert_eq!(config_for("storm", 0.9, None, Some(Duration::ZERO)).startup, Duration::ZERO);
    }

    #[test]
    fn the_counter_period_a_driver_measured_replaces_the_kinds() {
        let mut a =
            Activity::new(ActivationMode::Auto, 0.9, (None, None), &[("storm".to_string(), "storm".to_string())]);
        let period = |a: &Activity| a.view("storm").unwrap().counter_period;
        assert_eq!(period(&a), Duration::from_secs(1), "the kind's, until a driver says");
        let shown = load(0.0, 1.0);
        a.update("storm", Duration::from_secs(1), Some(shown));
        assert_eq!(period(&a), Duration::from_secs(1), "not measured: unchanged");
        let slow = SourceLoad { counter_period: Some(Duration::from_secs(10)), ..shown };
        a.update("storm", Duration::from_secs(2), Some(slow));
        assert_eq!(period(&a), Duration::from_secs(10), "Storm's default reporter period, measured");
        a.update("storm", Duration::from_secs(3), None);
        assert_eq!(period(&a), Duration::from_secs(10), "a round without sources changes nothing");
    }

    #[test]
    fn an_active_spe_is_scheduled_and_an_idle_one_is_left_out() {
        let mut a = Activity::new(ActivationMode::Auto, 0.9, (None, None), &spes());
        a.busy = Some(1.0);
        // The engine falls behind for a second, from the round after the first one (the one
        // that opens the window must be behind too): active at the sixth.
        for i in 0..=8u64 {
            let shown = load(10_000.0 * i as f64, 20_000.0 * i as f64);
            let t = a.update("engine", Duration::from_millis(200 * i), Some(shown));
            assert_eq!(t.is_some(), i == 6, "round {i}");
        }
        assert!(a.is_active("engine") && !a.is_active("flink"));
        assert_eq!(a.view("engine").unwrap().activations, 1);
        let cluster = moirai_sched::Cluster::new(vec![topology("engine"), topology("flink")]).unwrap();
        let single =
            Schedule::Single([(OpRef { spe: 0, op: 0 }, 1.0), (OpRef { spe: 1, op: 0 }, 2.0)].into_iter().collect());
        let Some(Schedule::Single(kept)) = a.filter(single, &cluster) else { panic!("the engine is active") };
        assert_eq!(kept.keys().map(|o| o.spe).collect::<Vec<_>>(), [0]);
        let grouping = Schedule::Grouping(vec![
            Group { name: "engine".into(), priority: 1.0, members: vec![OpRef { spe: 0, op: 0 }] },
            Group { name: "flink".into(), priority: 1.0, members: vec![OpRef { spe: 1, op: 0 }] },
        ]);
        let Some(Schedule::Grouping(kept)) = a.filter(grouping, &cluster) else { panic!() };
        assert_eq!(kept.iter().map(|g| g.name.as_str()).collect::<Vec<_>>(), ["engine"]);
        let flink_only = Schedule::Single([(OpRef { spe: 1, op: 0 }, 2.0)].into_iter().collect());
        assert!(a.filter(flink_only, &cluster).is_none(), "nothing of an idle SPE is scheduled");
        // The backlog drains and the machine has room: idle after the release window, counted
        // under its reason.
        assert!(a.view("engine").unwrap().releases.is_empty());
        a.busy = Some(0.3);
        let released = (9..=70u64).find_map(|i| {
            let shown = load(0.0, 20_000.0 * i as f64);
            a.update("engine", Duration::from_millis(200 * i), Some(shown)).map(|t| (i, t))
        });
        let (i, t) = released.expect("handed back");
        assert!(!t.active && i >= 55, "not before 10 s of acting: round {i}");
        assert_eq!(a.view("engine").unwrap().releases, BTreeMap::from([("cpu_room", 1)]));
    }

    #[test]
    fn the_time_acted_on_an_spe_runs_from_the_round_that_activates_it_to_the_one_that_releases_it() {
        let ms = Duration::from_millis;
        let close = |a: f64, b: f64| (a - b).abs() < 1e-9;
        let mut a = Activity::new(ActivationMode::Auto, 0.9, (None, None), &spes());
        a.busy = Some(1.0);
        // Falling behind: active at the round of 1.2 s (as above).
        for i in 0..=6u64 {
            let shown = load(10_000.0 * i as f64, 20_000.0 * i as f64);
            a.update("engine", ms(200 * i), Some(shown));
            a.account(ms(200 * i));
        }
        let v = a.view("engine").unwrap();
        assert!(v.active);
        assert_eq!(v.time.first, Some(ms(1200)));
        assert!(close(v.time.seconds(ms(1200)), 0.0));
        assert!(close(v.time.seconds(ms(1700)), 0.5), "the stretch under way counts up to now");
        let flink = a.view("flink").unwrap().time;
        assert_eq!((flink.first, flink.seconds(ms(1700))), (None, 0.0), "never active");
        // Then room on the machine and no backlog: released after the 10 s release window.
        a.busy = Some(0.3);
        let mut released = None;
        for i in 7..=80u64 {
            let shown = load(0.0, 100_000.0 + 20_000.0 * i as f64);
            if let Some(t) = a.update("engine", ms(200 * i), Some(shown)) {
                assert!(!t.active && released.is_none(), "one release, no flapping");
                released = Some(ms(200 * i));
            }
            a.account(ms(200 * i));
        }
        let released = released.expect("released once the machine had room");
        assert!((ms(11_000)..=ms(12_000)).contains(&released), "{released:?}");
        let v = a.view("engine").unwrap();
        assert!(!v.active);
        let acted = (released - ms(1200)).as_secs_f64();
        assert!(close(v.time.seconds(ms(16_000)), acted), "frozen while idle: {:?}", v.time);
        assert_eq!(v.time.first, Some(ms(1200)));

        // Always: acted on from the first round on.
        let mut always = Activity::new(ActivationMode::Always, 0.9, (None, None), &spes());
        always.account(ms(30));
        always.account(ms(530));
        let t = always.view("engine").unwrap().time;
        assert_eq!(t.first, Some(ms(30)));
        assert!(close(t.seconds(ms(2030)), 2.0));
    }

    fn topology(name: &str) -> moirai_sched::SpeTopology {
        use moirai_sched::{LogicalOperator, OpKind, PhysicalOperator};
        moirai_sched::SpeTopology {
            name: name.into(),
            pid: 1,
            queries: vec!["q".into()],
            logical: vec![LogicalOperator { name: "s".into(), query: "q".into(), kind: OpKind::Source }],
            logical_edges: vec![],
            physical: vec![PhysicalOperator {
                name: "s (1/1)".into(),
                query: "q".into(),
                logical: vec![0],
                instance: 0,
                threads: vec![],
            }],
            physical_edges: vec![],
        }
    }
}

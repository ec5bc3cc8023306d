//! The configuration of `moirai schedule`: the SPEs to attach to and the policies to run, from a
//! TOML file or, for the common cases, from flags.
//!
//! ```toml
//! state_file = "/run/moirai/schedule.json"   # where original nice values / cgroups are kept
//! metrics_addr = "127.0.0.1:9465"            # the middleware's own /metrics (optional)
//! ui = "127.0.0.1:9466"                      # the live dashboard (optional; loopback unless
//! # ui_public = true                         # this says otherwise)
//! # activation = "auto"                      # act only while scheduling can help (or "always")
//! # activation_threshold = 0.9               # the machine's CPU share that counts as fully used
//! # activation_lag = "100ms"                 # input waiting that counts as behind (default: per
//!                                            # SPE kind)
//! # activation_startup = "20s"               # how long an SPE counts as starting (default: per
//!                                            # SPE kind: 20s for Storm, none otherwise)
//! # activation_quiet_period = "1s"           # how often to look while every SPE is quiet (idle
//!                                            # and keeping up; at most the policies' period)
//!
//! [[spe]]
//! name = "engine"
//! driver = "moirai"                          # moirai, flink or storm
//! url = "http://127.0.0.1:9464"
//! # pid = 4711                               # pins: the engine must be this process,
//! # uid = 1000                               # of this owner,
//! # exe = "/usr/local/bin/moirai"            # running this executable
//! # allow_owner_change = false               # re-attach to an engine of another owner
//!
//! [[spe]]
//! name = "flink"
//! driver = "flink"
//! url = "http://127.0.0.1:8081"              # Flink's REST API
//! # pid = 4242                               # the TaskManager JVM, if several run here
//! # taskmanager = "tm-node1"                 # this node's TaskManager in a cluster: its id,
//!                                            # host or host:dataPort (docs/flink-cluster.md)
//! # queue = "buffers"                        # queue_len in network buffers (default) or "records"
//! # source_queue = "capped"                  # a source's queue_len: its backlog capped at the
//!                                            # fullest operator queue (default) or "backlog"
//!
//! [[spe]]
//! name = "storm"
//! driver = "storm"
//! metrics_dir = "/var/lib/storm/metrics"     # csv.log.dir of Storm's CsvStormReporter
//! # pid = 4343                               # the worker JVM, if several run here
//! # source_queue = "capped"                  # as for Flink
//!
//! [[policy]]
//! name = "shares"
//! type = "groups"                            # CPU shares per query ...
//! by = "query"
//! priority = { constant = { values = { q1 = 4, q2 = 1 } } }
//! translator = "cgroup"
//! period = "5s"
//!
//! [[policy]]
//! name = "qs"
//! type = "qs"                                # ... and queue-size nice per operator inside
//! translator = "nice"
//! period = "1s"
//! queries = ["q1"]                           # scope (also: spes = ["engine"])
//! ```
//!
//! A policy table holds the policy itself (`type` and its fields, see
//! [`moirai_sched::PolicySpec`]: `qs`, `hr`, `fcfs`, `metric`, `random`, `constant`, `script`,
//! `groups`) and how it is run: `name`, `period`, `translator`, `normalization`, `nice_best`,
//! `nice_worst`, `weight_min`, `weight_max`, `spes`, `queries`, and for the `realtime`
//! translator `rt_threads`, `rt_class`, `rt_priority_min`, `rt_priority_max`
//! ([`crate::realtime::RtSettings`]). Unknown keys are errors.

use std::collections::BTreeSet;
use std::net::SocketAddr;
use std::path::PathBuf;
use std::time::Duration;

use moirai_sched::{ActivationConfig, NiceRange, Normalization, PolicyRun, PolicySpec, Scope};

use crate::activity::ActivationMode;
use serde::Deserialize;

use crate::realtime::{RtClass, RtSettings};

/// The whole configuration.
#[derive(Clone, Debug)]
pub struct Config {
    /// The state file of the restore log.
    pub state_file: PathBuf,
    /// Where to serve the middleware's own metrics.
    pub metrics_addr: Option<SocketAddr>,
    /// Where to serve the live dashboard (`/` and `/api/state`).
    pub ui_addr: Option<SocketAddr>,
    /// Whether the dashboard may listen on an address other machines can reach.
    pub ui_public: bool,
    /// SPEs to attach to.
    pub spes: Vec<SpeConfig>,
    /// Policies to run.
    pub policies: Vec<PolicyConfig>,
    /// When the policies' schedules are enforced on an SPE (see [`crate::activity`]).
    pub activation: ActivationMode,
    /// The share of the machine's CPU at which it counts as fully used, for the activation rule.
    pub activation_threshold: f64,
    /// How much input waiting counts as behind, in time at the input rate, for the activation
    /// rule; `None`: each SPE kind's default ([`crate::activity::config_for`]).
    pub activation_lag: Option<Duration>,
    /// How long an SPE counts as starting after its sources first report an intake, for the
    /// activation rule; `None`: each SPE kind's default ([`crate::activity::config_for`]).
    pub activation_startup: Option<Duration>,
    /// How often the daemon runs a round while the activation rule of every SPE is
    /// [quiet](moirai_sched::activation::Activation::is_quiet) (idle, and the SPE keeping up);
    /// where it is not longer than a policy's period, every period.
    pub activation_quiet_period: Duration,
}

pub use moirai_contract::policies::DEFAULT_ACTIVATION_THRESHOLD;

/// The default state file.
pub const DEFAULT_STATE_FILE: &str = "/run/moirai/schedule-state.json";

/// Which driver talks to an SPE.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum DriverKind {
    /// moirai's engine, through its `/topology` and `/metrics` endpoint.
    Moirai,
    /// An Apache Flink cluster, through its REST API and a thread dump of its TaskManager.
    Flink,
    /// Apache Storm workers, through the CSV files of Storm's metrics reporter and a thread dump
    /// of the worker JVM.
    Storm,
}

impl DriverKind {
    /// How often a policy governing SPEs of this kind runs when no period is given: as fast as
    /// the SPE's metrics change and a round stays cheap. moirai's engine answers from live
    /// counters, and on the Lachesis SYN at 1.25× its saturation point a 200 ms period gave an
    /// end-to-end p99 0.11× Linux's where 1 s gave 0.40× (docs/schedule.md, "Defaults");
    /// Flink's REST metrics and Storm's metrics reporter refresh about once a second, so a shorter
    /// period would only read the same figures again.
    pub fn default_period(self) -> Duration {
        match self {
            DriverKind::Moirai => Duration::from_millis(200),
            DriverKind::Flink | DriverKind::Storm => Duration::from_secs(1),
        }
    }

    /// Its name in the configuration.
    pub fn as_str(self) -> &'static str {
        match self {
            DriverKind::Moirai => "moirai",
            DriverKind::Flink => "flink",
            DriverKind::Storm => "storm",
        }
    }
}

/// One SPE.
#[derive(Clone, Debug, Deserialize, PartialEq)]
#[serde(deny_unknown_fields)]
pub struct SpeConfig {
    /// Its name in scopes, logs and metrics.
    pub name: String,
    /// The driver.
    pub driver: DriverKind,
    /// The SPE's endpoint: the engine's metrics address (`http://127.0.0.1:9464`) or Flink's REST
    /// API (`http://127.0.0.1:8081`); none for Storm.
    #[serde(default)]
    pub url: String,
    /// Storm only: the directory Storm's `CsvStormReporter` writes into (`csv.log.dir`).
    #[serde(default)]
    pub metrics_dir: Option<PathBuf>,
    /// Flink (Storm): the pid of the TaskManager (worker) JVM on this machine, found by its
    /// threads' names when absent and needed when several run here. moirai: a pin — the engine's
    /// `/topology` must name this process, or nothing is touched.
    #[serde(default)]
    pub pid: Option<u32>,
    /// moirai only: the engine's process must belong to this uid.
    #[serde(default)]
    pub uid: Option<u32>,
    /// moirai only: the engine's process must run this executable.
    #[serde(default)]
    pub exe: Option<std::path::PathBuf>,
    /// moirai only: attach again when the engine behind the URL restarts under another owner
    /// (off: refused, since a local user could otherwise take over the port).
    #[serde(default)]
    pub allow_owner_change: bool,
    /// Flink only: what `queue_len` reports (see [`FlinkQueue`]); absent: the default.
    #[serde(default)]
    pub queue: Option<FlinkQueue>,
    /// Flink and Storm: what a source's `queue_len` counts (see [`SourceQueue`]); absent: the
    /// default.
    #[serde(default)]
    pub source_queue: Option<SourceQueue>,
    /// Flink only: the TaskManager of this node in a cluster of several — its resource id, its
    /// host, or `host:dataPort` as the REST API's `/taskmanagers` shows them. Only its subtasks
    /// are scheduled; absent: every subtask whose thread is found in this machine's JVM.
    #[serde(default)]
    pub taskmanager: Option<String>,
    /// Flink only: the Prometheus reporter of this node's TaskManager
    /// (`http://127.0.0.1:9249/metrics`): the subtasks' counters are read from one scrape of it
    /// per round instead of the REST API's metrics (one request per job vertex). Absent: REST.
    #[serde(default)]
    pub prometheus: Option<String>,
    /// The nice value of the SPE process's session group (`sched_autogroup`), which weighs its
    /// whole session against other sessions; set when the SPE is first seen, restored on exit
    /// (see [`crate::session`]). Absent: left alone.
    #[serde(default)]
    pub autogroup_nice: Option<i32>,
}

/// What the Flink driver reports as an operator's queue (`queue_len`, hence QS's `queue_size`).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum FlinkQueue {
    /// Network buffers queued in the subtask's input channels (Flink's `inputQueueLength`); 0
    /// for a source. Coarse, but read from Flink itself; measured to serve QS better (docs/schedule.md).
    #[default]
    Buffers,
    /// Records: what the upstream subtasks sent minus what the subtask took in, minus one buffer
    /// in flight per channel; a source's `pendingRecords`.
    Records,
}

impl std::str::FromStr for FlinkQueue {
    type Err = String;

    fn from_str(s: &str) -> Result<FlinkQueue, String> {
        match s {
            "buffers" => Ok(FlinkQueue::Buffers),
            "records" => Ok(FlinkQueue::Records),
            other => Err(format!("unknown Flink queue '{other}': use buffers or records")),
        }
    }
}

/// What a source's `queue_len` (hence QS's `queue_size`) counts where the SPE reports the
/// source's backlog (`pendingRecords`: Flink's and Storm's drivers).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum SourceQueue {
    /// The backlog, but at most as much as the fullest input queue of the other operators of the
    /// source's query, when one holds at least 1: backpressure lets a source hand its consumers
    /// no more than their queues take, so a deeper backlog does not make its thread more urgent
    /// than theirs. Measured on Linear Road on Flink past saturation (docs/schedule.md).
    #[default]
    Capped,
    /// The whole backlog: a source that fell behind outranks every operator by the backlog's
    /// size.
    Backlog,
}

impl std::str::FromStr for SourceQueue {
    type Err = String;

    fn from_str(s: &str) -> Result<SourceQueue, String> {
        match s {
            "capped" => Ok(SourceQueue::Capped),
            "backlog" => Ok(SourceQueue::Backlog),
            other => Err(format!("unknown source queue '{other}': use capped or backlog")),
        }
    }
}

/// How a policy's schedule reaches the OS.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum TranslatorKind {
    /// A nice value per thread.
    Nice,
    /// A cpu cgroup per group (or per operator for a single-priority policy), with a weight.
    Cgroup,
    /// Nice values per thread, and a real-time class for the highest ranked threads
    /// ([`crate::realtime`], Lachesis-RT).
    Realtime,
}

/// One policy and how it is run.
#[derive(Clone, Debug, PartialEq)]
pub struct PolicyConfig {
    /// Name in logs and metrics.
    pub name: String,
    /// The policy.
    pub spec: PolicySpec,
    /// How often it runs.
    pub period: Duration,
    /// How its schedule is enforced.
    pub translator: TranslatorKind,
    /// How priorities map to nice values / weights.
    pub normalization: Normalization,
    /// Nice range for the nice translator.
    pub nice: NiceRange,
    /// Weight range for the cgroup translator (`None`: the whole range of the host's cgroup
    /// version).
    pub weights: Option<(u64, u64)>,
    /// How the realtime translator chooses its threads.
    pub rt: RtSettings,
    /// The weight of the newest round in each thread's smoothed priority (1: none; nice
    /// translator only).
    pub smoothing: f64,
    /// The operators it governs.
    pub scope: Scope,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct FileConfig {
    state_file: Option<PathBuf>,
    metrics_addr: Option<SocketAddr>,
    ui: Option<SocketAddr>,
    #[serde(default)]
    ui_public: bool,
    #[serde(default)]
    spe: Vec<SpeConfig>,
    #[serde(default)]
    policy: Vec<toml::Table>,
    #[serde(default)]
    activation: ActivationMode,
    activation_threshold: Option<f64>,
    activation_lag: Option<String>,
    activation_startup: Option<String>,
    activation_quiet_period: Option<String>,
}

/// The keys of a policy table that are not the policy's own.
const RUN_KEYS: [&str; 15] = [
    "name",
    "period",
    "translator",
    "normalization",
    "nice_best",
    "nice_worst",
    "smoothing",
    "weight_min",
    "weight_max",
    "spes",
    "queries",
    "rt_threads",
    "rt_class",
    "rt_priority_min",
    "rt_priority_max",
];

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct RunKeys {
    name: Option<String>,
    period: Option<String>,
    translator: Option<TranslatorKind>,
    normalization: Option<Normalization>,
    nice_best: Option<i32>,
    nice_worst: Option<i32>,
    smoothing: Option<f64>,
    weight_min: Option<u64>,
    weight_max: Option<u64>,
    spes: Option<Vec<String>>,
    queries: Option<Vec<String>>,
    rt_threads: Option<usize>,
    rt_class: Option<RtClass>,
    rt_priority_min: Option<u8>,
    rt_priority_max: Option<u8>,
}

/// The nice range a policy maps priorities into when none is given: from 0 (an SPE thread is
/// never raised above the machine's other threads, its own JVM's helpers and timers included)
/// to 19. Measured on moirai's engine (Lachesis SYN, docs/schedule.md "Defaults"): at 1.25× the
/// saturation point `nice_best = 0` and the whole range −20..19 gave about the same p99, below
/// it 0..19 gave a lower one, and on Storm −20 starved the workers' own timers.
pub const DEFAULT_NICE: NiceRange = NiceRange { best: 0, worst: 19 };

/// The weight of the newest round in a thread's smoothed priority when none is given: 0.5, so
/// that one round's queue (a burst, or a queue just drained) moves a thread halfway. Measured on
/// moirai's engine at a 200 ms period: p99 0.87× Linux's at 80 % of its saturation point against
/// 1.32× without smoothing, 0.07× against 0.11× past it.
pub const DEFAULT_SMOOTHING: f64 = 0.5;

/// The period of a policy that names none: the longest [`DriverKind::default_period`] of the
/// SPEs it governs (1 s when it governs none).
pub fn default_period(kinds: impl IntoIterator<Item = DriverKind>) -> Duration {
    kinds.into_iter().map(DriverKind::default_period).max().unwrap_or(Duration::from_secs(1))
}

/// Parses the activation rule's lag (`25ms`); a clear error otherwise (its range is checked by
/// [`Config::validate`]).
pub fn parse_activation_lag(text: &str) -> Result<Duration, String> {
    humantime::parse_duration(text)
        .map_err(|e| format!("activation lag {text:?}: {e} (write e.g. \"100ms\"; --activation-lag or activation_lag)"))
}

/// Parses how long an SPE counts as starting (`20s`); a clear error otherwise (its range is
/// checked by [`Config::validate`]).
pub fn parse_activation_startup(text: &str) -> Result<Duration, String> {
    humantime::parse_duration(text).map_err(|e| {
        format!("activation start-up {text:?}: {e} (write e.g. \"20s\"; --activation-startup or activation_startup)")
    })
}

/// The default [`Config::activation_quiet_period`]: moirai's engine is scraped every 200 ms
/// while it is behind or acted on, once a second while it keeps up (Flink's and Storm's metrics
/// refresh about once a second, so their period is a second anyway). Measured on moirai's
/// engine with 105 operator threads at 83 % of its CPU bound: an idle round costs the
/// middleware 1.1 ms of CPU and the engine 0.5 ms answering it (`docs/schedule.md`, "The cost
/// of a round").
pub const DEFAULT_QUIET_PERIOD: Duration = Duration::from_secs(1);

/// The longest [`Config::activation_quiet_period`]: the rule reacts to an SPE falling behind
/// up to this much later.
pub const QUIET_PERIOD_MAX: Duration = Duration::from_secs(10);

/// Parses the quiet period (`1s`); a clear error otherwise (its range is checked by
/// [`Config::validate`]).
pub fn parse_quiet_period(text: &str) -> Result<Duration, String> {
    humantime::parse_duration(text).map_err(|e| {
        format!(
            "activation quiet period {text:?}: {e} (write e.g. \"1s\"; --activation-quiet-period or \
             activation_quiet_period)"
        )
    })
}

/// Parses a duration such as `1s`, `250ms`; a clear error otherwise.
pub fn parse_period(text: &str) -> Result<Duration, String> {
    humantime::parse_duration(text).map_err(|e| format!("period {text:?}: {e} (write e.g. \"1s\" or \"100ms\")"))
}

impl PolicyConfig {
    /// A policy of type `spec` with the defaults: 1 s (until [`default_period`] resolves it for
    /// the SPEs it governs), nice translator, ratio normalisation, [`DEFAULT_NICE`],
    /// [`DEFAULT_SMOOTHING`], every operator.
    pub fn new(name: &str, spec: PolicySpec) -> Self {
        PolicyConfig {
            name: name.to_string(),
            spec,
            period: Duration::from_secs(1),
            translator: TranslatorKind::Nice,
            normalization: Normalization::Ratio,
            nice: DEFAULT_NICE,
            weights: None,
            rt: RtSettings::default(),
            smoothing: DEFAULT_SMOOTHING,
            scope: Scope::all(),
        }
    }

    /// How the controller runs it: name, period and scope (the translator stays here).
    pub fn run(&self) -> PolicyRun {
        PolicyRun { name: self.name.clone(), period: self.period, scope: self.scope.clone() }
    }

    fn from_table(index: usize, mut table: toml::Table) -> Result<PolicyConfig, String> {
        let whose = |name: &Option<String>| match name {
            Some(n) => format!("policy '{n}'"),
            None => format!("policy #{}", index + 1),
        };
        let mut run = toml::Table::new();
        for key in RUN_KEYS {
            if let Some(v) = table.remove(key) {
                run.insert(key.to_string(), v);
            }
        }
        let run: RunKeys = toml::Value::Table(run)
            .try_into()
            .map_err(|e: toml::de::Error| format!("policy #{}: {}", index + 1, e.message()))?;
        let who = whose(&run.name);
        let spec: PolicySpec = toml::Value::Table(table.clone())
            .try_into()
            .map_err(|e: toml::de::Error| format!("{who}: {}", e.message()))?;
        // PolicySpec ignores unknown keys (so it can be embedded); reject them here by comparing
        // with what the parsed policy serialises back to.
        let known = toml::Value::try_from(&spec).map_err(|e| format!("{who}: {e}"))?;
        let known: BTreeSet<String> = known.as_table().map(|t| t.keys().cloned().collect()).unwrap_or_default();
        if let Some(unknown) = table.keys().find(|k| !known.contains(*k)) {
            return Err(format!(
                "{who}: unknown key '{unknown}'; this policy takes {:?} and the run keys {:?}",
                known, RUN_KEYS
            ));
        }
        let name = run.name.clone().unwrap_or_else(|| spec_name(&spec, index));
        let mut policy = PolicyConfig::new(&name, spec);
        if let Some(p) = run.period {
            policy.period = parse_period(&p).map_err(|e| format!("{who}: {e}"))?;
        }
        if let Some(t) = run.translator {
            policy.translator = t;
        }
        policy.normalization = run.normalization.unwrap_or(match policy.translator {
            TranslatorKind::Nice | TranslatorKind::Realtime => Normalization::Ratio,
            TranslatorKind::Cgroup => Normalization::Logarithmic,
        });
        let rt_keys = run.rt_threads.is_some()
            || run.rt_class.is_some()
            || run.rt_priority_min.is_some()
            || run.rt_priority_max.is_some();
        if rt_keys && policy.translator != TranslatorKind::Realtime {
            return Err(format!(
                "{who}: rt_threads, rt_class, rt_priority_min and rt_priority_max are for translator = \"realtime\""
            ));
        }
        let d = RtSettings::default();
        policy.rt = RtSettings {
            threads: run.rt_threads.unwrap_or(d.threads),
            class: run.rt_class.unwrap_or(d.class),
            priorities: (run.rt_priority_min.unwrap_or(d.priorities.0), run.rt_priority_max.unwrap_or(d.priorities.1)),
        };
        policy.rt.validate().map_err(|e| format!("{who}: {e}"))?;
        policy.nice = NiceRange {
            best: run.nice_best.unwrap_or(DEFAULT_NICE.best),
            worst: run.nice_worst.unwrap_or(DEFAULT_NICE.worst),
        };
        policy.nice.validate().map_err(|e| format!("{who}: {e}"))?;
        if let Some(s) = run.smoothing {
            policy.smoothing = s;
        }
        check_smoothing(policy.smoothing).map_err(|e| format!("{who}: {e}"))?;
        policy.weights = match (run.weight_min, run.weight_max) {
            (None, None) => None,
            (Some(a), Some(b)) if a >= 1 && a <= b => Some((a, b)),
            (a, b) => {
                return Err(format!(
                    "{who}: weight_min ({a:?}) and weight_max ({b:?}) must both be set, 1 <= min <= max"
                ))
            }
        };
        policy.scope = Scope { spes: run.spes, queries: run.queries };
        Ok(policy)
    }
}

/// Checks a smoothing weight: the share of the newest round, in (0, 1].
pub fn check_smoothing(s: f64) -> Result<(), String> {
    if s > 0.0 && s <= 1.0 {
        Ok(())
    } else {
        Err(format!(
            "smoothing {s} is out of range: give the weight of the newest round, above 0 and at most 1 (1 = none)"
        ))
    }
}

fn spec_name(spec: &PolicySpec, index: usize) -> String {
    let kind = toml::Value::try_from(spec)
        .ok()
        .and_then(|v| v.get("type").and_then(|t| t.as_str()).map(str::to_string))
        .unwrap_or_else(|| "policy".into());
    format!("{kind}{}", if index == 0 { String::new() } else { format!("-{}", index + 1) })
}

/// Refuses a dashboard address other machines can reach unless `public` says so: the middleware
/// runs as root and the dashboard shows process and thread ids of the machine's SPEs.
pub fn check_ui_addr(addr: SocketAddr, public: bool) -> Result<(), String> {
    if addr.ip().is_loopback() || public {
        return Ok(());
    }
    Err(format!(
        "the dashboard address {addr} is not a loopback address: anyone who can reach it sees the SPEs' \
         topologies, processes and threads. Use 127.0.0.1:{port} (and an SSH tunnel, e.g. `ssh -L \
         {port}:127.0.0.1:{port} host`), or add --ui-public (`ui_public = true` in the file) to serve it on \
         {addr} anyway",
        port = addr.port()
    ))
}

impl Config {
    /// Parses a TOML configuration; errors name the key and how to fix it.
    pub fn from_toml(text: &str) -> Result<Config, String> {
        let file: FileConfig = toml::from_str(text).map_err(|e| e.to_string())?;
        let periods_given: Vec<bool> = file.policy.iter().map(|t| t.contains_key("period")).collect();
        let mut policies: Vec<PolicyConfig> = file
            .policy
            .into_iter()
            .enumerate()
            .map(|(i, t)| PolicyConfig::from_table(i, t))
            .collect::<Result<_, _>>()?;
        for (policy, given) in policies.iter_mut().zip(periods_given) {
            if !given {
                let governed =
                    file.spe.iter().filter(|s| policy.scope.spes.as_ref().is_none_or(|n| n.contains(&s.name)));
                policy.period = default_period(governed.map(|s| s.driver));
            }
        }
        let config = Config {
            state_file: file.state_file.unwrap_or_else(|| DEFAULT_STATE_FILE.into()),
            metrics_addr: file.metrics_addr,
            ui_addr: file.ui,
            ui_public: file.ui_public,
            spes: file.spe,
            policies,
            activation: file.activation,
            activation_threshold: file.activation_threshold.unwrap_or(DEFAULT_ACTIVATION_THRESHOLD),
            activation_lag: file.activation_lag.as_deref().map(parse_activation_lag).transpose()?,
            activation_startup: file.activation_startup.as_deref().map(parse_activation_startup).transpose()?,
            activation_quiet_period: file
                .activation_quiet_period
                .as_deref()
                .map(parse_quiet_period)
                .transpose()?
                .unwrap_or(DEFAULT_QUIET_PERIOD),
        };
        config.validate()?;
        Ok(config)
    }

    /// Checks what the parser cannot: at least one SPE and policy, unique names, scopes that
    /// name configured SPEs, no SPE driven by two nice policies of overlapping scope.
    pub fn validate(&self) -> Result<(), String> {
        if self.spes.is_empty() {
            return Err("no SPE to schedule: add an [[spe]] table or --engine http://127.0.0.1:9464".into());
        }
        if self.policies.is_empty() {
            return Err("no policy: add a [[policy]] table or --policy qs".into());
        }
        if let Some(addr) = self.ui_addr {
            check_ui_addr(addr, self.ui_public)?;
        }
        let rule = ActivationConfig { cpu_threshold: self.activation_threshold, ..ActivationConfig::default() };
        rule.validate().map_err(|e| format!("{e} (--activation-threshold, or activation_threshold in the file)"))?;
        if let Some(lag) = self.activation_lag {
            let rule = ActivationConfig::default().with_lag(lag);
            rule.validate().map_err(|e| format!("{e} (--activation-lag, or activation_lag in the file)"))?;
        }
        if let Some(startup) = self.activation_startup {
            let rule = ActivationConfig { startup, ..ActivationConfig::default() };
            rule.validate().map_err(|e| format!("{e} (--activation-startup, or activation_startup in the file)"))?;
        }
        if self.activation_quiet_period > QUIET_PERIOD_MAX {
            return Err(format!(
                "activation quiet period {:?} is out of range: give how often to look at SPEs that keep up, at \
                 most {QUIET_PERIOD_MAX:?} (e.g. 1s; 0s looks every period) (--activation-quiet-period, or \
                 activation_quiet_period in the file)",
                self.activation_quiet_period
            ));
        }
        let mut names = BTreeSet::new();
        for s in &self.spes {
            if !names.insert(&s.name) {
                return Err(format!("two SPEs are named '{}'; give each its own name", s.name));
            }
            match (s.driver, &s.metrics_dir) {
                (DriverKind::Storm, None) => {
                    return Err(format!(
                        "SPE '{}': a storm SPE needs `metrics_dir`, the csv.log.dir of Storm's CsvStormReporter",
                        s.name
                    ))
                }
                (DriverKind::Storm, Some(_)) if !s.url.is_empty() => {
                    return Err(format!(
                        "SPE '{}': a storm SPE is read from its metrics_dir, not a url; remove `url`",
                        s.name
                    ))
                }
                (DriverKind::Storm, Some(_)) => {}
                (_, Some(_)) => {
                    return Err(format!("SPE '{}': `metrics_dir` is for the storm driver; remove it", s.name))
                }
                (_, None) if !(s.url.starts_with("http://") || s.url.starts_with("https://")) => {
                    return Err(format!("SPE '{}': url {:?} must start with http://", s.name, s.url));
                }
                (_, None) => {}
            }
            if s.driver != DriverKind::Moirai && (s.uid.is_some() || s.exe.is_some() || s.allow_owner_change) {
                return Err(format!(
                    "SPE '{}': `uid`, `exe` and `allow_owner_change` are for the moirai driver; remove them",
                    s.name
                ));
            }
            if s.driver != DriverKind::Flink && s.queue.is_some() {
                return Err(format!("SPE '{}': `queue` is for the flink driver; remove it", s.name));
            }
            if s.driver == DriverKind::Moirai && s.source_queue.is_some() {
                return Err(format!(
                    "SPE '{}': `source_queue` is for the flink and storm drivers (a moirai engine's sources report \
                     their own input queue); remove it",
                    s.name
                ));
            }
            match &s.prometheus {
                Some(_) if s.driver != DriverKind::Flink => {
                    return Err(format!("SPE '{}': `prometheus` is for the flink driver; remove it", s.name))
                }
                Some(url) if !url.starts_with("http://") => {
                    return Err(format!(
                        "SPE '{}': prometheus {url:?} must start with http://, e.g. \
                         prometheus = \"http://127.0.0.1:9249/metrics\" (the TaskManager's metrics.reporter.<name>.port)",
                        s.name
                    ))
                }
                _ => {}
            }
            match &s.taskmanager {
                Some(_) if s.driver != DriverKind::Flink => {
                    return Err(format!("SPE '{}': `taskmanager` is for the flink driver; remove it", s.name))
                }
                Some(tm) if tm.trim().is_empty() => {
                    return Err(format!(
                        "SPE '{}': `taskmanager` is empty; give this node's TaskManager id, host or host:dataPort",
                        s.name
                    ))
                }
                _ => {}
            }
            if let Some(n) = s.autogroup_nice {
                if !(-20..=19).contains(&n) {
                    return Err(format!(
                        "SPE '{}': autogroup_nice {n} is out of range: a session group's nice lies in [-20, 19]",
                        s.name
                    ));
                }
            }
        }
        if self.policies.iter().filter(|p| p.translator == TranslatorKind::Realtime).count() > 1 {
            return Err("more than one policy uses the realtime translator; keep one (its rt_threads bounds the \
                        real-time threads of the whole machine)"
                .into());
        }
        let mut policy_names = BTreeSet::new();
        for p in &self.policies {
            if !policy_names.insert(&p.name) {
                return Err(format!("two policies are named '{}'; give each its own name", p.name));
            }
            for spe in p.scope.spes.iter().flatten() {
                if !names.contains(spe) {
                    return Err(format!(
                        "policy '{}' names SPE '{spe}', which is not configured; SPEs: {names:?}",
                        p.name
                    ));
                }
            }
            if p.period.is_zero() {
                return Err(format!("policy '{}': period must be positive", p.name));
            }
            p.rt.validate().map_err(|e| format!("policy '{}': {e}", p.name))?;
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const FULL: &str = r#"
        state_file = "/tmp/x.json"
        metrics_addr = "127.0.0.1:9465"
        [[spe]]
        name = "engine"
        driver = "moirai"
        url = "http://127.0.0.1:9464"
        [[policy]]
        name = "shares"
        type = "groups"
        by = "query"
        priority = { constant = { values = { q1 = 4, q2 = 1 } } }
        translator = "cgroup"
        period = "5s"
        [[policy]]
        type = "qs"
        period = "250ms"
        queries = ["q1"]
        spes = ["engine"]
    "#;

    #[test]
    fn parses_a_full_file() {
        let c = Config::from_toml(FULL).unwrap();
        assert_eq!(c.state_file, PathBuf::from("/tmp/x.json"));
        assert_eq!(c.spes.len(), 1);
        assert_eq!(c.policies.len(), 2);
        assert_eq!(c.policies[0].translator, TranslatorKind::Cgroup);
        assert_eq!(c.policies[0].normalization, Normalization::Logarithmic);
        assert_eq!(c.policies[0].period, Duration::from_secs(5));
        assert_eq!(c.policies[1].name, "queue_size-2");
        assert_eq!(c.policies[1].period, Duration::from_millis(250));
        assert_eq!(c.policies[1].scope.queries, Some(vec!["q1".to_string()]));
        assert_eq!(c.policies[1].normalization, Normalization::Ratio);
    }

    /// A policy without a period runs at the longest default of the SPEs it governs; nice range
    /// and smoothing have their measured defaults.
    #[test]
    fn defaults_follow_the_kinds_of_spe_governed() {
        let two = FULL.replace("period = \"5s\"\n", "").replace("period = \"250ms\"\n", "").replace(
            "[[policy]]\n        name = \"shares\"",
            "[[spe]]\n        name = \"f\"\n        driver = \"flink\"\n        url = \"http://127.0.0.1:8081\"\n        [[policy]]\n        name = \"shares\"",
        );
        let c = Config::from_toml(&two).unwrap();
        assert_eq!(c.spes.len(), 2, "{two}");
        assert_eq!(c.policies[0].period, Duration::from_secs(1), "governs the engine and Flink: Flink's 1 s");
        assert_eq!(c.policies[1].period, Duration::from_millis(200), "scoped to the engine: the engine's 200 ms");
        assert_eq!(c.policies[1].nice, DEFAULT_NICE);
        assert_eq!(c.policies[1].smoothing, DEFAULT_SMOOTHING);
        assert_eq!(default_period([]), Duration::from_secs(1));
        assert_eq!(default_period([DriverKind::Moirai, DriverKind::Storm]), Duration::from_secs(1));
        let given = Config::from_toml(FULL).unwrap();
        assert_eq!(given.policies[1].period, Duration::from_millis(250), "a period given is kept");
    }

    #[test]
    fn a_flink_spe_may_name_its_taskmanagers_prometheus_reporter() {
        let flink = FULL.replace("driver = \"moirai\"", "driver = \"flink\"").replace("9464", "8081");
        assert_eq!(Config::from_toml(&flink).unwrap().spes[0].prometheus, None, "absent: the REST API");
        let url = "url = \"http://127.0.0.1:8081\"";
        let with = |line: &str| flink.replace(url, &format!("{url}\n{line}"));
        let c = Config::from_toml(&with("prometheus = \"http://127.0.0.1:9249/metrics\"")).unwrap();
        assert_eq!(c.spes[0].prometheus.as_deref(), Some("http://127.0.0.1:9249/metrics"));
        let e = Config::from_toml(&with("prometheus = \"127.0.0.1:9249\"")).unwrap_err();
        assert!(e.contains("must start with http://") && e.contains("metrics.reporter"), "{e}");
        let moirai = FULL
            .replace("url = \"http://127.0.0.1:9464\"", "url = \"http://127.0.0.1:9464\"\nprometheus = \"http://x/\"");
        assert!(Config::from_toml(&moirai).unwrap_err().contains("`prometheus` is for the flink driver"));
    }

    #[test]
    fn a_flink_spe_names_its_nodes_taskmanager() {
        let flink = FULL.replace("driver = \"moirai\"", "driver = \"flink\"").replace("9464", "8081");
        assert_eq!(Config::from_toml(&flink).unwrap().spes[0].taskmanager, None, "absent: every subtask here");
        let url = "url = \"http://127.0.0.1:8081\"";
        let tm = flink.replace(url, &format!("{url}\ntaskmanager = \"tm-node1\""));
        assert_eq!(Config::from_toml(&tm).unwrap().spes[0].taskmanager.as_deref(), Some("tm-node1"));
        let empty = flink.replace(url, &format!("{url}\ntaskmanager = \" \""));
        assert!(Config::from_toml(&empty).unwrap_err().contains("`taskmanager` is empty"));
        let moirai =
            FULL.replace("url = \"http://127.0.0.1:9464\"", "url = \"http://127.0.0.1:9464\"\ntaskmanager = \"x\"");
        assert!(Config::from_toml(&moirai).unwrap_err().contains("`taskmanager` is for the flink driver"));
    }

    #[test]
    fn a_flink_spe_chooses_what_its_queue_counts() {
        let flink = FULL.replace("driver = \"moirai\"", "driver = \"flink\"").replace("9464", "8081");
        assert_eq!(Config::from_toml(&flink).unwrap().spes[0].queue, None, "absent: the driver's default");
        let records =
            flink.replace("url = \"http://127.0.0.1:8081\"", "url = \"http://127.0.0.1:8081\"\nqueue = \"records\"");
        assert_eq!(Config::from_toml(&records).unwrap().spes[0].queue, Some(FlinkQueue::Records));
        assert_eq!(FlinkQueue::default(), FlinkQueue::Buffers);
        let e = Config::from_toml(&records.replace("\"records\"", "\"tuples\"")).unwrap_err();
        assert!(e.contains("tuples"), "{e}");
        let e = Config::from_toml(
            &FULL.replace("url = \"http://127.0.0.1:9464\"", "url = \"http://127.0.0.1:9464\"\nqueue = \"records\""),
        )
        .unwrap_err();
        assert!(e.contains("`queue` is for the flink driver"), "{e}");
        assert!("rows".parse::<FlinkQueue>().unwrap_err().contains("use buffers or records"));
    }

    #[test]
    fn a_flink_or_storm_spe_chooses_what_its_sources_queue_counts() {
        let flink = FULL.replace("driver = \"moirai\"", "driver = \"flink\"").replace("9464", "8081");
        assert_eq!(Config::from_toml(&flink).unwrap().spes[0].source_queue, None, "absent: the driver's default");
        assert_eq!(SourceQueue::default(), SourceQueue::Capped);
        let line = |q: &str| format!("url = \"http://127.0.0.1:8081\"\nsource_queue = \"{q}\"");
        let backlog = flink.replace("url = \"http://127.0.0.1:8081\"", &line("backlog"));
        assert_eq!(Config::from_toml(&backlog).unwrap().spes[0].source_queue, Some(SourceQueue::Backlog));
        let e = Config::from_toml(&flink.replace("url = \"http://127.0.0.1:8081\"", &line("all"))).unwrap_err();
        assert!(e.contains("all"), "{e}");
        let moirai = FULL
            .replace("url = \"http://127.0.0.1:9464\"", "url = \"http://127.0.0.1:9464\"\nsource_queue = \"capped\"");
        let e = Config::from_toml(&moirai).unwrap_err();
        assert!(e.contains("`source_queue` is for the flink and storm drivers"), "{e}");
        assert!("all".parse::<SourceQueue>().unwrap_err().contains("use capped or backlog"));
    }

    #[test]
    fn the_dashboard_is_loopback_unless_said_public() {
        let c = Config::from_toml(&FULL.replace("metrics_addr", "ui = \"127.0.0.1:9466\"\nmetrics_addr")).unwrap();
        assert_eq!(c.ui_addr, Some("127.0.0.1:9466".parse().unwrap()));
        assert!(!c.ui_public);
        assert_eq!(Config::from_toml(FULL).unwrap().ui_addr, None);
        let c = Config::from_toml(&FULL.replace("metrics_addr", "ui = \"[::1]:9466\"\nmetrics_addr")).unwrap();
        assert_eq!(c.ui_addr, Some("[::1]:9466".parse().unwrap()));
        let public = FULL.replace("metrics_addr", "ui = \"0.0.0.0:9466\"\nmetrics_addr");
        let e = Config::from_toml(&public).unwrap_err();
        assert!(e.contains("0.0.0.0:9466 is not a loopback address") && e.contains("--ui-public"), "{e}");
        let c = Config::from_toml(&public.replace("metrics_addr", "ui_public = true\nmetrics_addr")).unwrap();
        assert!(c.ui_public);
        let e = Config::from_toml(&FULL.replace("metrics_addr", "ui = \"localhost\"\nmetrics_addr")).unwrap_err();
        assert!(e.contains("ui"), "{e}");
        assert!(check_ui_addr("10.1.2.3:80".parse().unwrap(), false).is_err());
        assert!(check_ui_addr("10.1.2.3:80".parse().unwrap(), true).is_ok());
    }

    #[test]
    fn the_realtime_translator_takes_its_own_keys() {
        let rt = FULL
            .replace("type = \"qs\"", "type = \"qs\"\ntranslator = \"realtime\"\nrt_threads = 2\nrt_class = \"fifo\"");
        let c = Config::from_toml(&rt).unwrap();
        assert_eq!(c.policies[1].translator, TranslatorKind::Realtime);
        assert_eq!(c.policies[1].normalization, Normalization::Ratio, "nice values as the nice translator's");
        assert_eq!((c.policies[1].rt.threads, c.policies[1].rt.class), (2, RtClass::Fifo));
        assert_eq!(c.policies[1].rt.priorities, RtSettings::default().priorities);
        let e = Config::from_toml(&FULL.replace("type = \"qs\"", "type = \"qs\"\nrt_threads = 2")).unwrap_err();
        assert!(e.contains("are for translator = \"realtime\""), "{e}");
        let e = Config::from_toml(&rt.replace("rt_threads = 2", "rt_threads = 0")).unwrap_err();
        assert!(e.contains("rt_threads 0 is out of range"), "{e}");
        let e = Config::from_toml(&rt.replace("rt_threads = 2", "rt_priority_max = 99")).unwrap_err();
        assert!(e.contains("watchdog"), "{e}");
        let e = Config::from_toml(&rt.replace("\"fifo\"", "\"deadline\"")).unwrap_err();
        assert!(e.contains("deadline"), "{e}");
        let two = rt
            .replace("name = \"shares\"", "name = \"shares\"\nrt_threads = 1")
            .replace("translator = \"cgroup\"", "translator = \"realtime\"");
        let e = Config::from_toml(&two).unwrap_err();
        assert!(e.contains("more than one policy uses the realtime translator"), "{e}");
    }

    #[test]
    fn an_spe_may_set_its_session_groups_nice() {
        let c = Config::from_toml(
            &FULL.replace("url = \"http://127.0.0.1:9464\"", "url = \"http://127.0.0.1:9464\"\nautogroup_nice = -5"),
        )
        .unwrap();
        assert_eq!(c.spes[0].autogroup_nice, Some(-5));
        assert_eq!(Config::from_toml(FULL).unwrap().spes[0].autogroup_nice, None);
        let e = Config::from_toml(
            &FULL.replace("url = \"http://127.0.0.1:9464\"", "url = \"http://127.0.0.1:9464\"\nautogroup_nice = -21"),
        )
        .unwrap_err();
        assert!(e.contains("autogroup_nice -21 is out of range") && e.contains("[-20, 19]"), "{e}");
    }

    #[test]
    fn the_activation_rule_is_configured_and_its_threshold_checked() {
        let c = Config::from_toml(FULL).unwrap();
        assert_eq!((c.activation, c.activation_threshold), (ActivationMode::Auto, DEFAULT_ACTIVATION_THRESHOLD));
        let c = Config::from_toml(&format!("activation = \"always\"\nactivation_threshold = 0.75\n{FULL}")).unwrap();
        assert_eq!((c.activation, c.activation_threshold), (ActivationMode::Always, 0.75));
        for bad in ["0.2", "1.5", "-1.0"] {
            let e = Config::from_toml(&format!("activation_threshold = {bad}\n{FULL}")).unwrap_err();
            assert!(e.contains("from 0.5 to 1") && e.contains("activation_threshold"), "{e}");
        }
        let e = Config::from_toml(&format!("activation = \"never\"\n{FULL}")).unwrap_err();
        assert!(e.contains("never"), "{e}");
        // The lag: each SPE kind's unless given; out of range or unreadable, refused with the fix.
        assert_eq!(Config::from_toml(FULL).unwrap().activation_lag, None);
        let c = Config::from_toml(&format!("activation_lag = \"40ms\"\n{FULL}")).unwrap();
        assert_eq!(c.activation_lag, Some(Duration::from_millis(40)));
        for bad in ["5ms", "1min"] {
            let e = Config::from_toml(&format!("activation_lag = \"{bad}\"\n{FULL}")).unwrap_err();
            assert!(e.contains("from 10ms to 10s") && e.contains("activation_lag"), "{e}");
        }
        let e = Config::from_toml(&format!("activation_lag = \"soon\"\n{FULL}")).unwrap_err();
        assert!(e.contains("activation lag \"soon\"") && e.contains("100ms"), "{e}");
        // The start-up likewise, from none to 10 minutes.
        assert_eq!(Config::from_toml(FULL).unwrap().activation_startup, None);
        for (given, want) in
            [("0s", Duration::ZERO), ("45s", Duration::from_secs(45)), ("10min", Duration::from_secs(600))]
        {
            let c = Config::from_toml(&format!("activation_startup = \"{given}\"\n{FULL}")).unwrap();
            assert_eq!(c.activation_startup, Some(want), "{given}");
        }
        let e = Config::from_toml(&format!("activation_startup = \"11min\"\n{FULL}")).unwrap_err();
        assert!(e.contains("from 0s to 600s") && e.contains("activation_startup"), "{e}");
        // The quiet period: a second unless given, from 0s (every period) to 10s.
        assert_eq!(Config::from_toml(FULL).unwrap().activation_quiet_period, DEFAULT_QUIET_PERIOD);
        let c = Config::from_toml(&format!("activation_quiet_period = \"0s\"\n{FULL}")).unwrap();
        assert_eq!(c.activation_quiet_period, Duration::ZERO);
        let e = Config::from_toml(&format!("activation_quiet_period = \"1min\"\n{FULL}")).unwrap_err();
        assert!(e.contains("at most 10s") && e.contains("activation_quiet_period"), "{e}");
        let e = Config::from_toml(&format!("activation_quiet_period = \"rarely\"\n{FULL}")).unwrap_err();
        assert!(e.contains("activation quiet period \"rarely\"") && e.contains("1s"), "{e}");
        let e = Config::from_toml(&format!("activation_startup = \"later\"\n{FULL}")).unwrap_err();
        assert!(e.contains("activation start-up \"later\"") && e.contains("20s"), "{e}");
    }

    #[test]
    fn mistakes_are_named() {
        let e = Config::from_toml(&FULL.replace("type = \"qs\"", "type = \"qs\"\nlevle = \"logical\"")).unwrap_err();
        assert!(e.contains("unknown key 'levle'"), "{e}");
        let e = Config::from_toml(&FULL.replace("\"250ms\"", "\"fast\"")).unwrap_err();
        assert!(e.contains("period \"fast\""), "{e}");
        let e = Config::from_toml(&FULL.replace("spes = [\"engine\"]", "spes = [\"flink\"]")).unwrap_err();
        assert!(e.contains("SPE 'flink'"), "{e}");
        let e = Config::from_toml(&FULL.replace("driver = \"moirai\"", "driver = \"storm\"")).unwrap_err();
        assert!(e.contains("storm"), "{e}");
        let e = Config::from_toml(&FULL.replace("type = \"qs\"", "type = \"sjf\"")).unwrap_err();
        assert!(e.contains("sjf"), "{e}");
        let e = Config::from_toml("[[policy]]\ntype = \"qs\"\n").unwrap_err();
        assert!(e.contains("no SPE"), "{e}");
        let e = Config::from_toml(&FULL.replace("period = \"250ms\"", "nice_best = 5\nnice_worst = -3")).unwrap_err();
        assert!(e.contains("policy 'queue_size-2'") || e.contains("policy #2"), "{e}");
    }
}

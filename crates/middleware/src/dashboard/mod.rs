//! The live dashboard (`--ui 127.0.0.1:PORT`): what the last round saw and decided, as JSON
//! (`GET /api/state`, a [`State`]) and as one self-contained page (`GET /`, [`PAGE`]) that polls
//! it and draws each SPE's query graph and the middleware's own cost.
//!
//! The daemon feeds a [`Recorder`] one [`RoundRecord`] per round; the recorder turns it into a
//! [`State`] (rates from counter differences, a short [`HISTORY`]) that the daemon serialises
//! once and stores in the shared stats, so the HTTP thread only copies a string out.
//!
//! Only what drivers sample and policies compute is shown: no driver reports latency or
//! throughput, so the state has no such fields (rates are Δ`tuples_in` / Δ`tuples_out` over a
//! round, when the driver samples those counters).

use std::collections::{BTreeMap, HashMap, VecDeque};
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

use serde::Serialize;

use crate::activity::SpeActivity;
use crate::driver::Observation;
use moirai_sched::Metric;

/// The page: HTML, CSS and JavaScript in one file, nothing fetched from elsewhere.
pub const PAGE: &str = include_str!("index.html");

/// Rounds kept for the page's time series.
pub const HISTORY: usize = 120;

/// The JSON of `GET /api/state`: the latest round and a short history.
#[derive(Clone, Debug, Serialize)]
pub struct State {
    /// Rounds run so far, this one included (also those skipped as a whole, which
    /// `moirai_schedule_rounds_total` does not count).
    pub round: u64,
    /// When the round ended, milliseconds since the Unix epoch.
    pub time_ms: u64,
    /// Seconds since the middleware started.
    pub uptime_s: f64,
    /// The policy clock's tick (the GCD of the policies' periods), ms: how often rounds run.
    pub period_ms: u64,
    /// How long the round took (observe, policies, translation), ms.
    pub round_ms: f64,
    /// CPU time of the middleware process so far, seconds.
    pub cpu_s: f64,
    /// CPU of the middleware process since the previous round, % of one core; absent in the first
    /// round.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub cpu_percent: Option<f64>,
    /// OS calls that changed something, so far.
    pub changes: u64,
    /// Errors of drivers, policies and translators, so far.
    pub errors: u64,
    /// Why no policy ran this round (inconsistent topologies, metrics that could not be computed).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub skipped: Option<String>,
    /// The policies, in configuration order.
    pub policies: Vec<PolicyState>,
    /// When the middleware acts on an SPE: `auto` (only while scheduling can help) or `always`.
    pub activation: &'static str,
    /// The machine's busy CPU share over the last round (0..1), when the activation rule reads it.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub machine_busy: Option<f64>,
    /// The SPEs, in configuration order (also those that did not answer).
    pub spes: Vec<SpeState>,
    /// The last [`HISTORY`] rounds, oldest first (this one last).
    pub history: Vec<HistoryPoint>,
}

/// A policy in a [`State`].
#[derive(Clone, Debug, Serialize)]
pub struct PolicyState {
    /// Its name.
    pub name: String,
    /// `nice` or `cgroup`.
    pub translator: String,
    /// What the applied values are: `nice`, `cpu.shares` or `cpu.weight`.
    pub applies: String,
    /// How often it runs, ms.
    pub period_ms: u64,
    /// Whether it ran this round.
    pub ran: bool,
    /// Why it was skipped this round.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub error: Option<String>,
}

/// An SPE in a [`State`].
#[derive(Clone, Debug, Serialize)]
pub struct SpeState {
    /// Its configured name.
    pub name: String,
    /// The driver: `moirai` or `flink`.
    pub kind: String,
    /// Whether it answered this round.
    pub reachable: bool,
    /// Why it did not.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub error: Option<String>,
    /// Its process.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub pid: Option<u32>,
    /// Its queries.
    pub queries: Vec<String>,
    /// Its physical operators; `id` is the index `edges` use.
    pub operators: Vec<OperatorState>,
    /// Physical edges, `[from id, to id]`.
    pub edges: Vec<[usize; 2]>,
    /// Sums over its operators.
    pub totals: Totals,
    /// Whether the middleware acts on it now, and why.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub activity: Option<ActivityState>,
}

/// Whether the middleware acts on an SPE, in a [`State`].
#[derive(Clone, Debug, Serialize)]
pub struct ActivityState {
    /// `active` (its schedules are enforced) or `idle` (its threads have their original values).
    pub state: &'static str,
    /// Why, for people.
    pub reason: String,
    /// Why, as a code: `starting`, `cpu_room`, `keeping_up`, `rate_fell_back`, `probing`, `no_gain`,
    /// `comparing`, `behind`, `losing_ground`, `holding`, `always`.
    pub code: &'static str,
    /// Seconds since the middleware started at which this state began.
    pub since_s: f64,
    /// How many times it became active.
    pub activations: u64,
}

/// A physical operator in a [`State`].
#[derive(Clone, Debug, Serialize)]
pub struct OperatorState {
    /// Index in the SPE's physical operators.
    pub id: usize,
    /// Its name.
    pub name: String,
    /// Its query.
    pub query: String,
    /// `source` (no upstream), `sink` (no downstream) or `operator`.
    pub role: &'static str,
    /// Tuples queued at its inputs (`queue_len`), if sampled.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub queue_len: Option<f64>,
    /// Tuples in per second over the round, if `tuples_in` was sampled twice.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub rate_in: Option<f64>,
    /// Tuples out per second over the round, if `tuples_out` was sampled twice.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub rate_out: Option<f64>,
    /// The priority each policy that ran gave it, before translation (policy name → value).
    pub priority: BTreeMap<String, f64>,
    /// Its threads with the values applied to them.
    pub threads: Vec<ThreadState>,
}

/// A thread in a [`State`].
#[derive(Clone, Debug, Serialize)]
pub struct ThreadState {
    /// Linux thread id.
    pub tid: i32,
    /// The value each policy applied (policy name → nice value or weight; see
    /// [`PolicyState::applies`]).
    pub applied: BTreeMap<String, i64>,
}

/// Sums over an SPE's operators.
#[derive(Clone, Debug, Default, Serialize)]
pub struct Totals {
    /// Operators.
    pub operators: usize,
    /// Threads.
    pub threads: usize,
    /// Σ `queue_len`, if sampled.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub queue_len: Option<f64>,
    /// Σ `rate_in` of the sinks: tuples per second reaching them, if sampled.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub sink_rate_in: Option<f64>,
}

/// One round in the history.
#[derive(Clone, Debug, Serialize)]
pub struct HistoryPoint {
    /// Round number.
    pub round: u64,
    /// When it ended, ms since the Unix epoch.
    pub time_ms: u64,
    /// How long it took, ms.
    pub round_ms: f64,
    /// CPU since the previous round, % of one core.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub cpu_percent: Option<f64>,
    /// Per SPE name: its totals (absent when it did not answer).
    pub spes: BTreeMap<String, Totals>,
}

/// How a policy is shown: fixed at start-up.
#[derive(Clone, Debug)]
pub struct PolicyInfo {
    /// Name.
    pub name: String,
    /// `nice` or `cgroup`.
    pub translator: String,
    /// `nice`, `cpu.shares` or `cpu.weight`.
    pub applies: String,
    /// Period.
    pub period: Duration,
}

/// What the daemon collected in one round.
#[derive(Clone, Debug, Default)]
pub struct RoundRecord {
    /// When the SPEs were sampled, since the middleware started.
    pub at: Duration,
    /// How long the round took, ns.
    pub round_ns: u64,
    /// OS calls that changed something, so far.
    pub changes: u64,
    /// Errors so far.
    pub errors: u64,
    /// What the SPEs that answered reported.
    pub observed: Vec<Observation>,
    /// SPE name → why it did not answer.
    pub down: BTreeMap<String, String>,
    /// Why the round was skipped as a whole.
    pub skipped: Option<String>,
    /// (SPE name, physical operator index) → policy name → priority.
    pub priorities: BTreeMap<(String, usize), BTreeMap<String, f64>>,
    /// (SPE name, tid) → policy name → applied value.
    pub applied: BTreeMap<(String, i32), BTreeMap<String, i64>>,
    /// Policies that ran: name → `None`, or why they were skipped.
    pub ran: BTreeMap<String, Option<String>>,
    /// `auto` or `always` (see [`State::activation`]).
    pub activation: &'static str,
    /// The machine's busy share over the round.
    pub machine_busy: Option<f64>,
    /// SPE name → whether the middleware acts on it, and why.
    pub activity: BTreeMap<String, SpeActivity>,
}

/// Last counter values of an operator: (sampled at, tuples_in, tuples_out).
type Counters = (Duration, Option<f64>, Option<f64>);

/// Turns [`RoundRecord`]s into [`State`]s.
pub struct Recorder {
    spes: Vec<(String, String)>,
    policies: Vec<PolicyInfo>,
    tick: Duration,
    pid: u32,
    start: Instant,
    rounds: u64,
    cpu: Option<(Instant, u64)>,
    counters: HashMap<(String, String), Counters>,
    history: VecDeque<HistoryPoint>,
}

/// Counter difference per second; `None` without an earlier sample or when the counter went
/// backwards (a restart).
fn rate(now: (Duration, Option<f64>), before: Option<(Duration, Option<f64>)>) -> Option<f64> {
    let (at, value) = now;
    let (then, old) = before?;
    let (value, old) = (value?, old?);
    let dt = at.checked_sub(then)?.as_secs_f64();
    (dt > 0.0 && value >= old).then(|| (value - old) / dt)
}

impl Recorder {
    /// A recorder for `spes` (name, driver kind) and `policies`, rounds every `tick`, of process
    /// `pid` (for its CPU time).
    pub fn new(spes: Vec<(String, String)>, policies: Vec<PolicyInfo>, tick: Duration, pid: u32) -> Recorder {
        Recorder {
            spes,
            policies,
            tick,
            pid,
            start: Instant::now(),
            rounds: 0,
            cpu: None,
            counters: HashMap::new(),
            history: VecDeque::with_capacity(HISTORY),
        }
    }

    /// The metrics the dashboard samples on top of what the policies need (for the rates).
    pub const EXTRA_METRICS: [Metric; 3] = [Metric::QueueLen, Metric::TuplesIn, Metric::TuplesOut];

    /// The state after round `r`.
    pub fn record(&mut self, r: RoundRecord) -> State {
        self.rounds += 1;
        let now = Instant::now();
        let time_ms = SystemTime::now().duration_since(UNIX_EPOCH).map(|d| d.as_millis() as u64).unwrap_or(0);
        let cpu_ns = moirai_os::proc::process_cpu_ns(self.pid).ok();
        let cpu_percent = match (cpu_ns, self.cpu) {
            (Some(ns), Some((then, before))) => {
                let wall = now.duration_since(then).as_nanos() as f64;
                (wall > 0.0).then(|| ns.saturating_sub(before) as f64 / wall * 100.0)
            }
            _ => None,
        };
        if let Some(ns) = cpu_ns {
            self.cpu = Some((now, ns));
        }
        let mut spes = Vec::with_capacity(self.spes.len());
        for (name, kind) in &self.spes {
            let observed = r.observed.iter().find(|o| o.topology.name == *name);
            let mut spe = SpeState {
                name: name.clone(),
                kind: kind.clone(),
                reachable: observed.is_some(),
                error: if observed.is_some() { None } else { r.down.get(name).cloned() },
                pid: None,
                queries: Vec::new(),
                operators: Vec::new(),
                edges: Vec::new(),
                totals: Totals::default(),
                activity: r.activity.get(name).map(|a| ActivityState {
                    state: if a.active { "active" } else { "idle" },
                    reason: a.reason.clone(),
                    code: a.code,
                    since_s: a.since.as_secs_f64(),
                    activations: a.activations,
                }),
            };
            if let Some(o) = observed {
                fill(&mut self.counters, &mut spe, o, &r);
            }
            spes.push(spe);
        }
        let policies = self
            .policies
            .iter()
            .map(|p| PolicyState {
                name: p.name.clone(),
                translator: p.translator.clone(),
                applies: p.applies.clone(),
                period_ms: p.period.as_millis() as u64,
                ran: r.ran.contains_key(&p.name),
                error: r.ran.get(&p.name).cloned().flatten(),
            })
            .collect();
        let round_ms = r.round_ns as f64 / 1e6;
        if self.history.len() == HISTORY {
            self.history.pop_front();
        }
        self.history.push_back(HistoryPoint {
            round: self.rounds,
            time_ms,
            round_ms,
            cpu_percent,
            spes: spes.iter().filter(|s| s.reachable).map(|s| (s.name.clone(), s.totals.clone())).collect(),
        });
        State {
            round: self.rounds,
            time_ms,
            uptime_s: now.duration_since(self.start).as_secs_f64(),
            period_ms: self.tick.as_millis() as u64,
            round_ms,
            cpu_s: cpu_ns.unwrap_or(0) as f64 / 1e9,
            cpu_percent,
            changes: r.changes,
            errors: r.errors,
            skipped: r.skipped,
            policies,
            activation: if r.activation.is_empty() { "auto" } else { r.activation },
            machine_busy: r.machine_busy,
            spes,
            history: self.history.iter().cloned().collect(),
        }
    }
}

/// An SPE's graph and values from what its driver observed; `counters` keeps the last counter
/// values per (SPE, operator) for the rates.
fn fill(counters: &mut HashMap<(String, String), Counters>, spe: &mut SpeState, o: &Observation, r: &RoundRecord) {
    let t = &o.topology;
    let n = t.physical.len();
    spe.pid = Some(t.pid);
    spe.queries = t.queries.clone();
    spe.edges = t.physical_edges.iter().filter(|(a, b)| *a < n && *b < n).map(|&(a, b)| [a, b]).collect();
    // Several channels between two operators are one edge on the page.
    spe.edges.sort_unstable();
    spe.edges.dedup();
    let mut has_up = vec![false; n];
    let mut has_down = vec![false; n];
    for [a, b] in &spe.edges {
        has_down[*a] = true;
        has_up[*b] = true;
    }
    let mut sample: Vec<BTreeMap<Metric, f64>> = vec![BTreeMap::new(); n];
    for &(op, metric, value) in &o.samples {
        if op < n {
            sample[op].insert(metric, value);
        }
    }
    let mut totals = Totals { operators: n, ..Totals::default() };
    for (id, p) in t.physical.iter().enumerate() {
        let key = (spe.name.clone(), p.name.clone());
        let (tin, tout) = (sample[id].get(&Metric::TuplesIn).copied(), sample[id].get(&Metric::TuplesOut).copied());
        let before = counters.insert(key, (r.at, tin, tout));
        let rate_in = rate((r.at, tin), before.map(|b| (b.0, b.1)));
        let rate_out = rate((r.at, tout), before.map(|b| (b.0, b.2)));
        let role = match (has_up[id], has_down[id]) {
            (false, _) => "source",
            (true, false) => "sink",
            (true, true) => "operator",
        };
        let queue_len = sample[id].get(&Metric::QueueLen).copied();
        if let Some(q) = queue_len {
            *totals.queue_len.get_or_insert(0.0) += q;
        }
        if let (Some(v), "sink") = (rate_in, role) {
            *totals.sink_rate_in.get_or_insert(0.0) += v;
        }
        let threads: Vec<ThreadState> = p
            .threads
            .iter()
            .map(|th| ThreadState {
                tid: th.tid,
                applied: r.applied.get(&(spe.name.clone(), th.tid)).cloned().unwrap_or_default(),
            })
            .collect();
        totals.threads += threads.len();
        spe.operators.push(OperatorState {
            id,
            name: p.name.clone(),
            query: p.query.clone(),
            role,
            queue_len,
            rate_in,
            rate_out,
            priority: r.priorities.get(&(spe.name.clone(), id)).cloned().unwrap_or_default(),
            threads,
        });
    }
    spe.totals = totals;
    // Operators of this SPE that are gone keep no counters.
    let live: std::collections::HashSet<&str> = t.physical.iter().map(|p| p.name.as_str()).collect();
    counters.retain(|(s, op), _| *s != spe.name || live.contains(op.as_str()));
}

#[cfg(test)]
mod tests;

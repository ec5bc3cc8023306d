//! The user-level policy executor (`--threading policy:<name>[:N]`): a pool of N workers that
//! always run the runnable operator of highest priority, with priorities recomputed every period
//! by a scheduling policy — the design of Haren (and EdgeWise), and STAFiLOS' schedulers.
//!
//! The pool is the one of [`crate::executor`] with a ready queue of [`PRIORITY_LEVELS`] FIFO
//! levels. A controller thread (`moirai-policy`) asks a [`Prioritizer`] for one priority per
//! physical operator every period, ranks them into levels and publishes each operator's level
//! in its metrics (an atomic byte): workers read it when they queue an operator, so the hot path
//! takes no lock. A worker keeps an operator for a turn — a batch of steps, and at most a quantum
//! of time when one is set — then queues it again at its level and takes the highest queued one.
//!
//! The policies themselves are the middleware's, run in-process (see `adapter`, feature
//! `policies`): the same policy objects decide at the OS level (nice values through the
//! middleware) and here.

use std::fmt;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

use crate::channel::Signal;
use crate::engine::{Shared, Topology};
use crate::executor::{available_cores, MAX_POOL_THREADS};
use crate::metrics::OperatorSnapshot;

/// Priority levels of the policy executor's ready queue.
pub const PRIORITY_LEVELS: usize = 16;

/// Steps per turn unless configured: as many as the FIFO pools take.
pub const DEFAULT_BATCH: usize = 8;

/// How often priorities are recomputed unless configured.
pub const DEFAULT_PERIOD: Duration = Duration::from_millis(100);
/// QBS takes a source every this many turns of a worker (STAFiLOS' setting on Linear Road:
/// every 5 internal actor iterations).
pub const QBS_SOURCE_EVERY: u32 = 5;

/// The policies `policy:<name>` knows, besides `script:"<expression>"` and `metric:<name>`.
pub const POLICY_NAMES: [&str; 7] = ["qs", "hr", "fcfs", "random", "rr", "qbs", "rb"];

const HELP: &str =
    "policy:<name>[:N][:batch=B][:quantum=DURATION][:period=DURATION][:sources=K|off], with <name> one of \
qs, hr, fcfs, random, rr, qbs, rb, metric:<metric>, script:\"<expression>\"";

/// The settings of the policy threading model.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct PolicyThreading {
    /// The policy: `qs`, `rr`, `script:queue_size * cost` (the expression unquoted), ...
    pub policy: String,
    /// Worker threads.
    pub threads: usize,
    /// Most steps (input batches) per turn.
    pub batch: usize,
    /// Longest turn, when set.
    pub quantum: Option<Duration>,
    /// How often priorities are recomputed.
    pub period: Duration,
    /// Sources are taken every this many turns of a worker, whatever their priority (STAFiLOS'
    /// QBS: every 5 internal iterations), and otherwise only when nothing else is ready; `None`:
    /// sources queue at their priority like every operator.
    pub source_every: Option<u32>,
}

impl PolicyThreading {
    /// A policy with the defaults: as many workers as cores, [`DEFAULT_BATCH`], no quantum
    /// (`rr` and `qbs`: their own quanta), [`DEFAULT_PERIOD`].
    pub fn new(policy: &str) -> PolicyThreading {
        let quantum = match policy {
            // STAFiLOS' best settings on Linear Road: RR 20-40 ms, QBS a basic quantum of 500 µs.
            "rr" => Some(Duration::from_millis(20)),
            "qbs" => Some(Duration::from_micros(500)),
            _ => None,
        };
        let batch = if quantum.is_some() { usize::MAX } else { DEFAULT_BATCH };
        PolicyThreading {
            policy: policy.to_string(),
            threads: available_cores(),
            batch,
            quantum,
            period: DEFAULT_PERIOD,
            source_every: (policy == "qbs").then_some(QBS_SOURCE_EVERY),
        }
    }

    /// Parses what follows `policy:`; `whole` is the full text, for errors.
    pub fn parse(params: &str, whole: &str) -> Result<PolicyThreading, String> {
        let (policy, rest) = split_policy(params, whole)?;
        let mut c = PolicyThreading::new(&policy);
        let mut batch_given = false;
        for (i, part) in rest.split(':').map(str::trim).filter(|p| !p.is_empty()).enumerate() {
            let duration = |v: &str, what: &str| {
                humantime::parse_duration(v.trim())
                    .map_err(|e| format!("'{whole}': {what} '{v}': {e}; e.g. {what}=5ms"))
            };
            match part.split_once('=') {
                None if i == 0 => {
                    c.threads = match part.parse::<usize>() {
                        Ok(n) if (1..=MAX_POOL_THREADS).contains(&n) => n,
                        _ => {
                            return Err(format!(
                                "'{whole}': the thread count '{part}' must be a whole number from 1 to \
                                 {MAX_POOL_THREADS}; {HELP}"
                            ))
                        }
                    }
                }
                Some(("batch", v)) => {
                    c.batch = match v.trim().parse::<usize>() {
                        Ok(n) if n >= 1 => n,
                        _ => return Err(format!("'{whole}': batch '{v}' must be a whole number >= 1, e.g. batch=8")),
                    };
                    batch_given = true;
                }
                Some(("quantum", v)) => {
                    let q = duration(v, "quantum")?;
                    if q.is_zero() {
                        return Err(format!("'{whole}': quantum must be positive, e.g. quantum=5ms"));
                    }
                    c.quantum = Some(q);
                    if !batch_given {
                        c.batch = usize::MAX;
                    }
                }
                Some(("sources", v)) => {
                    c.source_every = match v.trim() {
                        "off" => None,
                        n => match n.parse::<u32>() {
                            Ok(k) if k >= 1 => Some(k),
                            _ => {
                                return Err(format!(
                                    "'{whole}': sources '{v}' must be a whole number of turns >= 1 (a source every \
                                     that many turns) or off, e.g. sources=5"
                                ))
                            }
                        },
                    };
                }
                Some(("period", v)) => {
                    c.period = duration(v, "period")?;
                    if c.period < Duration::from_millis(1) {
                        return Err(format!("'{whole}': period {v} is too short; use at least 1ms"));
                    }
                }
                _ => return Err(format!("'{whole}': unknown setting '{part}'; {HELP}")),
            }
        }
        Ok(c)
    }
}

/// Splits `<name>[:settings]`, where the name may be `script:"<expression>"` (quoted, so the
/// expression may hold colons) or `metric:<metric>`.
fn split_policy(params: &str, whole: &str) -> Result<(String, String), String> {
    if let Some(quoted) = params.strip_prefix("script:") {
        let body = quoted
            .strip_prefix('"')
            .ok_or_else(|| format!("'{whole}': quote the script, e.g. policy:script:\"queue_size * cost\":2"))?;
        // Up to the first quote not escaped by a backslash; `\"` inside stands for `"`.
        let mut expression = String::new();
        let mut chars = body.char_indices();
        let end = loop {
            match chars.next() {
                Some((_, '\\')) => match chars.next() {
                    Some((_, '"')) => expression.push('"'),
                    Some((_, c)) => expression.extend(['\\', c]),
                    None => expression.push('\\'),
                },
                Some((i, '"')) => break i,
                Some((_, c)) => expression.push(c),
                None => return Err(format!("'{whole}': the script's closing quote is missing")),
            }
        };
        let expression = expression.trim();
        if expression.is_empty() {
            return Err(format!("'{whole}': the script is empty"));
        }
        return Ok((format!("script:{expression}"), body[end + 1..].trim_start_matches(':').to_string()));
    }
    let (name, rest) = params.split_once(':').unwrap_or((params, ""));
    if name == "metric" {
        let (metric, rest) = rest.split_once(':').unwrap_or((rest, ""));
        if metric.trim().is_empty() {
            return Err(format!("'{whole}': name the metric, e.g. policy:metric:queue_size"));
        }
        return Ok((format!("metric:{}", metric.trim()), rest.to_string()));
    }
    if !POLICY_NAMES.contains(&name) {
        return Err(format!("'{whole}': unknown policy '{name}'; {HELP}"));
    }
    Ok((name.to_string(), rest.to_string()))
}

impl fmt::Display for PolicyThreading {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self.policy.strip_prefix("script:") {
            Some(expression) => write!(f, "script:\"{}\":{}", expression.replace('"', "\\\""), self.threads)?,
            None => write!(f, "{}:{}", self.policy, self.threads)?,
        }
        let default = PolicyThreading::new(&self.policy);
        // A turn with a quantum takes as many steps as fit unless a batch is given.
        let default_batch = if self.quantum.is_some() { usize::MAX } else { DEFAULT_BATCH };
        if self.batch != default_batch {
            write!(f, ":batch={}", self.batch)?;
        }
        if let Some(q) = self.quantum.filter(|q| Some(*q) != default.quantum) {
            write!(f, ":quantum={}", humantime::format_duration(q))?;
        }
        if self.period != DEFAULT_PERIOD {
            write!(f, ":period={}", humantime::format_duration(self.period))?;
        }
        if self.source_every != default.source_every {
            match self.source_every {
                Some(k) => write!(f, ":sources={k}")?,
                None => write!(f, ":sources=off")?,
            }
        }
        Ok(())
    }
}

/// Decides the priority of every physical operator, higher first. Called by the policy
/// controller every period with the engine's topology and a snapshot of its counters.
pub trait Prioritizer: Send {
    /// One priority per physical operator (indexed like `topology.physical`), or an error that
    /// leaves the previous priorities in place this period.
    fn priorities(&mut self, topology: &Topology, ops: &[OperatorSnapshot], at: Duration) -> Result<Vec<f64>, String>;
}

/// Ranks priorities into levels `0..PRIORITY_LEVELS`, the highest priority at the top level:
/// distinct values are ranked (equal values share a level) and the ranks spread evenly over the
/// levels. NaN counts as the lowest priority.
pub fn levels(priorities: &[f64]) -> Vec<u8> {
    let clean = |p: f64| if p.is_nan() { f64::NEG_INFINITY } else { p };
    let mut distinct: Vec<f64> = priorities.iter().map(|&p| clean(p)).collect();
    distinct.sort_by(|a, b| a.total_cmp(b));
    distinct.dedup();
    let top = PRIORITY_LEVELS - 1;
    let steps = distinct.len().saturating_sub(1).max(1);
    priorities
        .iter()
        .map(|&p| {
            let rank = distinct.partition_point(|&d| d < clean(p));
            if distinct.len() <= 1 {
                return 0;
            }
            u8::try_from(rank * top / steps).unwrap_or(u8::MAX)
        })
        .collect()
}

/// The prioritizer of policy `name`: the scheduling core's policy run in-process.
pub(crate) fn prioritizer(name: &str) -> Result<Box<dyn Prioritizer>, String> {
    #[cfg(feature = "policies")]
    {
        Ok(Box::new(crate::adapter::PolicyPrioritizer::new(name)?))
    }
    #[cfg(not(feature = "policies"))]
    {
        Err(format!("policy '{name}': this build of moirai-engine has no policies; enable its `policies` feature"))
    }
}

/// The policy controller, running until `done` is set: every period, the topology and a
/// snapshot of the counters → the prioritizer → each operator's level. A failing policy leaves
/// the previous priorities in place and is reported on stderr once until it works again.
pub(crate) struct Controller {
    done: Arc<AtomicBool>,
    wake: Arc<Signal>,
    thread: Option<JoinHandle<()>>,
}

impl Controller {
    pub(crate) fn start(
        shared: Arc<Shared>,
        mut prioritizer: Box<dyn Prioritizer>,
        config: &PolicyThreading,
    ) -> std::io::Result<Controller> {
        let (done, wake) = (Arc::new(AtomicBool::new(false)), Arc::new(Signal::default()));
        let (d, w, period, name) = (done.clone(), wake.clone(), config.period, config.policy.clone());
        let thread = std::thread::Builder::new().name("moirai-policy".into()).spawn(move || {
            let started = Instant::now();
            // The plan does not change while the engine runs: taken once (its thread ids, which
            // change, are no business of a prioritizer).
            let topology = shared.topology();
            let mut failing = false;
            while !d.load(Ordering::SeqCst) {
                w.wait_unless(Some(period), || d.load(Ordering::SeqCst));
                if d.load(Ordering::SeqCst) {
                    return;
                }
                let ops = shared.snapshot();
                let result = prioritizer.priorities(&topology, &ops, started.elapsed()).and_then(|p| {
                    if p.len() == ops.len() {
                        Ok(p)
                    } else {
                        Err(format!("{} priorities for {} operators", p.len(), ops.len()))
                    }
                });
                match result {
                    Ok(p) => {
                        publish(&shared.operators, &p);
                        if std::mem::take(&mut failing) {
                            eprintln!("moirai engine: policy '{name}' works again");
                        }
                    }
                    Err(e) if !failing => {
                        failing = true;
                        eprintln!("moirai engine: policy '{name}': {e}; priorities unchanged until it works again");
                    }
                    Err(_) => {}
                }
            }
        })?;
        Ok(Controller { done, wake, thread: Some(thread) })
    }

    /// Stops the controller and waits for it.
    pub(crate) fn stop(&mut self) {
        self.done.store(true, Ordering::SeqCst);
        self.wake.notify();
        if let Some(t) = self.thread.take() {
            let _ = t.join();
        }
    }
}

impl Drop for Controller {
    fn drop(&mut self) {
        self.stop();
    }
}

/// Publishes levels (and priorities, for the metrics endpoint) to the operators' metrics.
pub(crate) fn publish(metrics: &[std::sync::Arc<crate::metrics::OperatorMetrics>], priorities: &[f64]) {
    for ((m, &p), l) in metrics.iter().zip(priorities).zip(levels(priorities)) {
        m.priority_level.store(l, Ordering::Relaxed);
        m.priority.store(p.to_bits(), Ordering::Relaxed);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn settings_round_trip() {
        for text in [
            "qs:2",
            "rr:1",
            "rr:2:quantum=40ms",
            "qbs:2",
            "hr:4:batch=1",
            "fcfs:2:quantum=5ms:batch=4",
            "script:\"queue_size * cost\":2",
            "script:\"if query == \\\"q1\\\" { 1 } else { 2 }\":1",
            "metric:rate_in:2:period=1s",
        ] {
            let c = PolicyThreading::parse(text, text).unwrap_or_else(|e| panic!("{text}: {e}"));
            let again = PolicyThreading::parse(&c.to_string(), text).unwrap();
            assert_eq!(c, again, "{text} -> {c}");
        }
        let c = PolicyThreading::parse(r#"script:"if query == \"q1\" { 1 } else { 2 }":2"#, "x").unwrap();
        assert_eq!((c.policy.as_str(), c.threads), (r#"script:if query == "q1" { 1 } else { 2 }"#, 2));
        let c = PolicyThreading::parse("script:\"a:b\":3", "x").unwrap();
        assert_eq!((c.policy.as_str(), c.threads), ("script:a:b", 3));
        let rr = PolicyThreading::parse("rr", "rr").unwrap();
        assert_eq!((rr.quantum, rr.batch), (Some(Duration::from_millis(20)), usize::MAX));
    }

    #[test]
    fn bad_settings_are_explained() {
        for (text, expect) in [
            ("bogus:2", "unknown policy 'bogus'"),
            ("qs:0", "the thread count '0'"),
            ("qs:2:batch=0", "batch '0'"),
            ("qs:2:quantum=0ms", "quantum must be positive"),
            ("qs:2:quantum=fast", "quantum 'fast'"),
            ("qs:2:period=0s", "too short"),
            ("qs:2:speed=3", "unknown setting 'speed=3'"),
            ("script:queue_size", "quote the script"),
            ("script:\"queue_size", "closing quote"),
            ("script:\"\"", "the script is empty"),
            ("metric:", "name the metric"),
        ] {
            let e = PolicyThreading::parse(text, text).unwrap_err();
            assert!(e.contains(expect), "{text}: {e}");
        }
    }

    #[test]
    fn levels_rank_priorities_and_share_equal_ones() {
        assert_eq!(levels(&[5.0, 5.0, 5.0]), vec![0, 0, 0]);
        assert_eq!(levels(&[1.0, 3.0, 2.0]), vec![0, 15, 7]);
        assert_eq!(levels(&[0.0, 100.0, 0.0, f64::NAN]), vec![7, 15, 7, 0]);
        let many: Vec<f64> = (0..100).map(f64::from).collect();
        let l = levels(&many);
        assert_eq!((l[0], l[99]), (0, 15));
        assert!(l.windows(2).all(|w| w[0] <= w[1]), "monotone: {l:?}");
        assert!(levels(&[]).is_empty());
    }
}

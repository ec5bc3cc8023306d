//! Drivers: the bridge to one SPE each, through its public APIs only.
//!
//! Every round a driver reports the SPE's topology — rediscovered each time, since threads come
//! and go — and samples the primitive metrics it can provide.

pub mod cpu_clocks;
pub mod csv_tail;
pub mod flink;
pub mod flink_node;
pub mod flink_prometheus;
pub mod flink_rest;
pub mod flink_threads;
pub mod flink_topology;
pub mod hotspot_attach;
pub mod jvm;
pub mod moirai;
pub mod storm;
pub mod storm_files;
pub mod threads;

use std::collections::{BTreeMap, BTreeSet};
use std::sync::atomic::AtomicBool;
use std::sync::Arc;
use std::time::Duration;

/// What a driver saw in one round: the controller's input.
pub use moirai_sched::Observation;
use moirai_sched::{Metric, OpKind};

/// How an SPE's operator threads wait when they have nothing to do. It decides whether they may
/// run in a real-time class ([`crate::realtime`]): a real-time thread that polls takes its CPU
/// from every normal thread of the machine.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum IdleWait {
    /// They block (on a channel, a mailbox) until there is work.
    Blocks,
    /// They poll, parking for a fixed time between polls (Storm's `WaitStrategyPark`).
    Parks,
    /// They spin, or poll in naps too short to give the CPU away (Storm's default
    /// `WaitStrategyProgressive`); the text says what showed it.
    Spins(String),
    /// Not known (yet); the text says why.
    Unknown(String),
}

impl std::fmt::Display for IdleWait {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            IdleWait::Blocks => write!(f, "its threads block when idle"),
            IdleWait::Parks => write!(f, "its threads park when idle"),
            IdleWait::Spins(why) | IdleWait::Unknown(why) => f.write_str(why),
        }
    }
}

/// A driver.
pub trait Driver: Send {
    /// The SPE's configured name.
    fn spe(&self) -> &str;
    /// The driver's kind, e.g. `moirai`.
    fn kind(&self) -> &'static str;
    /// The primitive metrics it can sample.
    fn provides(&self) -> BTreeSet<Metric>;
    /// Reads topology and the `needed` metrics now. An error (the SPE is down, answers garbage,
    /// is not the process pinned) is reported and retried next round.
    fn observe(&mut self, needed: &[Metric]) -> Result<Observation, DriverError>;
    /// Errors of the last [`observe`](Driver::observe) that did not fail it: the driver went on
    /// with what it knew (the last thread mapping when `/proc` could not be read). Each is
    /// logged and counted once.
    fn take_errors(&mut self) -> Vec<String> {
        Vec::new()
    }
    /// How the SPE's operator threads wait when idle, as far as the driver knows.
    fn idle_wait(&self) -> IdleWait {
        IdleWait::Unknown(format!("the {} driver does not say how its threads wait", self.kind()))
    }
    /// The SPE's sources as the last [`Driver::observe`] that sampled `tuples_in` and
    /// `queue_len` saw them, for the activation rule; `None` when it has not, or the driver
    /// cannot tell.
    fn sources(&self) -> Option<SourceLoad> {
        None
    }
    /// Thread dumps of the SPE's JVM taken so far: each stops the JVM at a safepoint for a
    /// moment, so the middleware counts them (`moirai_schedule_thread_dumps_total`) and says so
    /// with `-v`. 0 for an SPE whose threads are mapped without one.
    fn thread_dumps(&self) -> u64 {
        0
    }
    /// What of a round can take long (a JVM's thread dump, seconds from a JVM starved of CPU; a
    /// series of requests to an SPE that no longer answers) gives up soon after `stop` is
    /// raised, so that a stopping middleware restores at once.
    fn give_up_on(&mut self, _stop: &Arc<AtomicBool>) {}
}

/// Why a driver could not attach to its SPE, or could not observe it this round.
#[derive(Clone, Debug, PartialEq, thiserror::Error)]
pub enum DriverError {
    /// The SPE's interface could not be read: its endpoint (moirai's `/topology` and `/metrics`,
    /// Flink's REST API) did not answer or answered what the driver cannot read, or Storm's metric
    /// files could not be listed.
    #[error("{0}")]
    Interface(String),
    /// What answered is not the SPE the configuration pins (another process, owner or
    /// executable): nothing of it is touched.
    #[error("{0}")]
    Identity(String),
    /// The SPE's process or its threads could not be found (`/proc`, a thread dump).
    #[error("{0}")]
    Process(String),
    /// The SPE's configuration is wrong (found when the driver is made).
    #[error("{0}")]
    Config(String),
}

/// What an SPE's sources showed in one observation (see [`Driver::sources`]), and how much
/// input waits inside the SPE: the activation rule's evidence that the SPE falls behind.
#[derive(Clone, Copy, Debug, Default, PartialEq)]
pub struct SourceLoad {
    /// Tuples waiting at the sources (their backlog, the external queue), summed over the
    /// sources, in tuples; `None` when no source reports one.
    pub backlog: Option<f64>,
    /// Tuples the sources have taken in so far, summed (a cumulative counter).
    pub ingested: f64,
    /// Tuples waiting in the input queues of the SPE's other operators, summed; `None` when no
    /// operator reports a queue. An engine whose queues are deep (moirai's) falls behind there
    /// long before its sources do: at 1.25× its saturation point on the Lachesis SYN its sources'
    /// backlog stayed 0 while the operators' queues held seconds of input.
    pub queued: Option<f64>,
    /// How often the SPE refreshes these counters, where the driver measured it (Storm's
    /// reporter period, from the times in its files; Flink's metric fetcher interval, or zero
    /// when a Prometheus reporter is read live); `None`: its kind's default
    /// ([`crate::activity::config_for`]).
    pub counter_period: Option<Duration>,
}

impl SourceLoad {
    /// Adds one source's backlog (if it reports one) and its cumulative input.
    pub fn add(&mut self, backlog: Option<f64>, ingested: f64) {
        if let Some(b) = backlog {
            self.backlog = Some(self.backlog.unwrap_or(0.0) + b.max(0.0));
        }
        self.ingested += ingested;
    }

    /// Adds the input queue of one operator that is not a source, in tuples.
    pub fn add_queued(&mut self, tuples: f64) {
        self.queued = Some(self.queued.unwrap_or(0.0) + tuples.max(0.0));
    }

    /// Everything waiting: at the sources and in the operators' queues; `None` when neither is
    /// reported.
    pub fn waiting(&self) -> Option<f64> {
        match (self.backlog, self.queued) {
            (None, None) => None,
            (b, q) => Some(b.unwrap_or(0.0) + q.unwrap_or(0.0)),
        }
    }
}

/// Caps every source's `queue_len` sample at the fullest `queue_len` of the other operators of
/// its query, when that holds at least 1 ([`crate::config::SourceQueue::Capped`], for drivers
/// whose sources report their backlog as their queue). Backpressure lets a source hand its consumers no more
/// than their queues take, so past that its backlog says how far behind the SPE is, not how much
/// CPU its thread can use. Ranked by its whole backlog, a Flink source that fell behind took the
/// top priority by a factor of hundreds and QS put every other operator at the bottom (Linear
/// Road past saturation: 6 250 buffers against 1–9, nice 0 against 19), and in each 10 s of
/// acting the sources took in 25–35 % less than in the seconds before, under Linux
/// (docs/schedule.md). Where every queue downstream is below 1 a source keeps its backlog, so
/// that an SPE whose operators keep up still ranks a source that falls behind.
pub fn cap_source_queues(observation: &mut Observation) {
    let topology = &observation.topology;
    let is_source = |op: usize| {
        let head = topology.physical.get(op).and_then(|p| p.logical.first());
        head.and_then(|&l| topology.logical.get(l)).map(|l| l.kind) == Some(OpKind::Source)
    };
    let mut fullest: BTreeMap<&str, f64> = BTreeMap::new();
    for &(op, metric, value) in &observation.samples {
        if metric == Metric::QueueLen && op < topology.physical.len() && !is_source(op) {
            let query = fullest.entry(topology.physical[op].query.as_str()).or_insert(0.0);
            *query = query.max(value);
        }
    }
    for (op, metric, value) in &mut observation.samples {
        if *metric == Metric::QueueLen && is_source(*op) {
            match fullest.get(topology.physical[*op].query.as_str()) {
                Some(&cap) if cap >= 1.0 => *value = value.min(cap),
                _ => {}
            }
        }
    }
}

/// The port of a loopback URL (`http://127.0.0.1:9464`, `http://localhost:8081/`, `http://[::1]:9464`);
/// `None` for any other host, or a URL without an explicit port.
pub fn loopback_port(url: &str) -> Option<u16> {
    let authority = url.split("://").nth(1)?.split('/').next()?;
    let (host, port) = authority.rsplit_once(':')?;
    if !matches!(host, "127.0.0.1" | "localhost" | "[::1]" | "0.0.0.0") {
        return None;
    }
    port.parse().ok()
}

#[cfg(test)]
mod tests {
    use moirai_sched::{LogicalOperator, PhysicalOperator, SpeTopology};

    use super::*;

    #[test]
    fn what_waits_is_the_sources_backlog_plus_the_operators_queues() {
        let mut load = SourceLoad::default();
        assert_eq!(load.waiting(), None, "nothing reported");
        load.add(None, 10.0);
        assert_eq!(load.waiting(), None, "a source without a backlog figure");
        load.add_queued(30.0);
        load.add_queued(-1.0);
        assert_eq!(load.waiting(), Some(30.0), "negative queues count as empty");
        load.add(Some(5.0), 20.0);
        assert_eq!((load.waiting(), load.ingested), (Some(35.0), 30.0));
    }

    /// Two queries: `a` (a source, two operators) and `b` (a source and one operator).
    fn two_queries(samples: Vec<(usize, Metric, f64)>) -> Observation {
        let kinds = [
            ("a", OpKind::Source),
            ("a", OpKind::Operator),
            ("a", OpKind::Sink),
            ("b", OpKind::Source),
            ("b", OpKind::Sink),
        ];
        let logical = kinds
            .iter()
            .enumerate()
            .map(|(i, &(query, kind))| LogicalOperator { name: format!("op{i}"), query: query.into(), kind })
            .collect();
        let physical = kinds
            .iter()
            .enumerate()
            .map(|(i, &(query, _))| PhysicalOperator {
                name: format!("op{i}"),
                query: query.into(),
                logical: vec![i],
                instance: 0,
                threads: Vec::new(),
            })
            .collect();
        let topology = SpeTopology {
            name: "spe".into(),
            pid: 1,
            queries: vec!["a".into(), "b".into()],
            logical,
            logical_edges: vec![(0, 1), (1, 2), (3, 4)],
            physical,
            physical_edges: vec![(0, 1), (1, 2), (3, 4)],
        };
        Observation { topology, samples }
    }

    #[test]
    fn a_sources_backlog_counts_at_most_as_much_as_the_fullest_queue_of_its_query() {
        let q = |op, v| (op, Metric::QueueLen, v);
        let mut o = two_queries(vec![
            q(0, 250_000.0),
            (0, Metric::TuplesIn, 9e6),
            q(1, 400.0),
            q(2, 9.0),
            q(3, 70_000.0),
            q(4, 0.5),
        ]);
        cap_source_queues(&mut o);
        // `a`'s source counts as its fullest operator; `b`'s keeps its backlog (every queue
        // downstream below 1); nothing else changes.
        assert_eq!(
            o.samples,
            vec![q(0, 400.0), (0, Metric::TuplesIn, 9e6), q(1, 400.0), q(2, 9.0), q(3, 70_000.0), q(4, 0.5)]
        );
        // A backlog below the cap, and one without any operator queue sampled, are kept.
        let mut o = two_queries(vec![q(0, 3.0), q(1, 400.0), q(3, 70_000.0)]);
        cap_source_queues(&mut o);
        assert_eq!(o.samples, vec![q(0, 3.0), q(1, 400.0), q(3, 70_000.0)]);
    }
}

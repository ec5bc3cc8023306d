//! Operators and sources: an operator's state and counters, and a source's schedule — which
//! tuples are due by its [`Rate`], its external queue (the backlog), its timer — and whether an
//! operator can run (a tuple to take and room for what it sends).

use std::collections::VecDeque;

use moirai_engine::graph::NodeKind;

use super::{Event, Simulation};
use crate::event::Nanos;
use crate::model::Rate;

/// What a source has of its own: its rate, what it has taken in, its timer.
pub(crate) struct SourceState {
    pub rate: Rate,
    /// A Poisson source's arrivals that are due and not taken in, and its generator with the
    /// time of its next arrival.
    pub poisson: Option<(VecDeque<Nanos>, fastrand::Rng, Nanos)>,
    /// Tuples taken in.
    pub taken: u64,
    /// A timer for the next due tuple is pending.
    pub timer: bool,
}

/// An operator's state: its costs and shape, its counters, and where it stands with its thread
/// or pool.
pub(crate) struct Op {
    pub kind: NodeKind,
    /// Mean CPU per tuple, overhead included (at least 1 ns).
    pub cost: Nanos,
    /// The operator's own mean CPU per tuple (what `cost_dist` draws around).
    pub work: Nanos,
    pub selectivity: f64,
    pub block: Option<(f64, Nanos)>,
    pub source: Option<SourceState>,
    /// Round-robin position per output group.
    pub next_out: Vec<usize>,
    pub tuples_in: u64,
    pub tuples_out: u64,
    pub cpu_ns: u64,
    /// A worker holds it (pools) — it is in a turn.
    pub busy: bool,
    /// It waits in the ready queue (pools).
    pub queued: bool,
    /// Its ready-queue level (policy executor).
    pub level: u8,
    /// Its thread (dedicated).
    pub thread: Option<usize>,
}

impl Simulation<'_> {
    /// A source's timer went off: a Poisson source draws its arrivals up to now and sets the
    /// timer for the next one.
    pub(super) fn arrive(&mut self, op: usize) {
        let (now, duration) = (self.now, self.config.duration_ns);
        let Some(s) = self.ops[op].source.as_mut() else { return };
        s.timer = false;
        let Rate::Poisson(rate) = s.rate else { return };
        let (arrived, rng, next) = s.poisson.as_mut().expect("a Poisson source has its generator");
        while *next <= now && *next < duration {
            arrived.push_back(*next);
            *next += exponential(rng, rate);
        }
        if *next < duration {
            let at = (*next).max(now + 1);
            s.timer = true;
            self.events.push(at, Event::SourceDue(op));
        }
    }

    /// Tuples a source may take in now (none once the run's duration is over).
    pub(crate) fn due(&self, op: usize) -> u64 {
        match &self.ops[op].source {
            Some(SourceState { poisson: Some((arrived, _, _)), .. }) if self.now < self.config.duration_ns => {
                arrived.len() as u64
            }
            Some(s) if self.now < self.config.duration_ns => s.rate.due(self.now).saturating_sub(s.taken),
            _ => 0,
        }
    }

    /// A source's external queue: the tuples due that it has not taken in (what the sources
    /// left behind once the run is over; 0 for an unlimited source, which has no schedule).
    pub(crate) fn backlog(&self, op: usize) -> u64 {
        match &self.ops[op].source {
            Some(SourceState { poisson: Some((arrived, _, _)), .. }) => arrived.len() as u64,
            Some(s) if s.rate != Rate::Unlimited => {
                let t = self.now.min(self.config.duration_ns.saturating_sub(1));
                s.rate.due(t).saturating_sub(s.taken)
            }
            _ => 0,
        }
    }

    /// Whether `op` has a tuple to take and room for what it sends.
    pub(super) fn can_run(&self, op: usize) -> bool {
        let has_input = match self.ops[op].source {
            Some(_) => self.due(op) > 0,
            None => self.model.inputs[op].iter().any(|&c| !self.channels[c].queue.is_empty()),
        };
        has_input && self.model.outputs[op].iter().all(|g| g.channels.iter().all(|&c| self.channels[c].free() > 0))
    }

    /// Arms a source's timer for its next due tuple when nothing is due now.
    pub(super) fn arm_source(&mut self, op: usize) {
        let duration = self.config.duration_ns;
        let Some(s) = self.ops[op].source.as_ref() else { return };
        if s.timer || s.poisson.is_some() || self.now >= duration || self.due(op) > 0 {
            return;
        }
        // The engine's source sleeps until its next tuple is due, at least `source_min_sleep_ns`,
        // and its timer fires `timer_slack_ns` late; then it takes all that is due.
        let at = s.rate.time_of(s.taken);
        if at < duration {
            self.ops[op].source.as_mut().expect("a source").timer = true;
            let at = at.max(self.now + self.config.source_min_sleep_ns.max(1)) + self.config.timer_slack_ns;
            self.events.push(at, Event::SourceDue(op));
        }
    }
}

/// An exponential gap of a Poisson process of `rate` per second, in ns (at least 1).
pub(super) fn exponential(rng: &mut fastrand::Rng, rate: f64) -> Nanos {
    ((-(1.0 - rng.f64()).ln() / rate * 1e9).round() as Nanos).max(1)
}

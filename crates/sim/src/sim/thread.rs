//! The simulated threads: a dedicated operator's thread or a pool worker, each a CFS entity that
//! sleeps when it has nothing to run and is woken when it has.

use super::Simulation;
use crate::cfs::Entity;
use crate::event::Nanos;

/// A thread's state under CFS.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum State {
    Running,
    Runnable,
    /// Sleeping; `waiting` says whether for work (woken by a notification) or a timer.
    Sleeping,
    /// Woken, runnable after the wake-up latency.
    Waking,
}

/// A pool worker's turn: the operator it holds, the steps it may still run, and until when.
#[derive(Clone, Copy, Debug)]
pub(crate) struct Turn {
    pub(super) op: usize,
    pub(super) steps_left: usize,
    pub(super) until: Nanos,
}

/// A simulated thread: a dedicated operator's or a pool worker, a CFS entity.
pub(crate) struct Thread {
    /// The operator it runs (dedicated), or `None` for a pool worker.
    pub op: Option<usize>,
    pub state: State,
    /// It sleeps until its operator (or, for a worker, any operator) can run.
    pub waiting: bool,
    pub slice_end: Nanos,
    pub turn: Option<Turn>,
    /// Turns this worker started (the ready queue's source interval counts them).
    pub turns: u64,
    pub cpu_ns: u64,
    /// It was woken and has not run since: it owes the wake-up's CPU (`wakeup_cpu_ns`).
    pub woken: bool,
}

impl Simulation<'_> {
    /// A thread, asleep until its work arrives.
    pub(super) fn spawn(&mut self, op: Option<usize>) -> usize {
        let mut e = Entity::new(0);
        self.rq.place_new(&mut e);
        self.entities.push(e);
        self.threads.push(Thread {
            op,
            state: State::Sleeping,
            waiting: true,
            slice_end: 0,
            turn: None,
            turns: 0,
            cpu_ns: 0,
            woken: false,
        });
        if op.is_none() {
            let t = self.threads.len() - 1;
            self.pool.as_mut().expect("workers belong to a pool").idle.push(t);
        }
        self.threads.len() - 1
    }

    /// A sleeping (or waking) thread becomes runnable: an idle core takes it, or the core
    /// whose step woke it is asked to preempt where CFS says so.
    pub(super) fn wake(&mut self, thread: usize, from: Option<usize>) {
        if !matches!(self.threads[thread].state, State::Sleeping | State::Waking) {
            return;
        }
        self.threads[thread].state = State::Runnable;
        self.threads[thread].woken = true;
        self.rq.wake(thread, &mut self.entities[thread]);
        self.rq.regroup(thread, &mut self.entities);
        if let Some(core) = self.idle_cores.pop() {
            self.dispatch(core);
        } else if let Some(c) = from {
            if let Some(current) = self.cores[c].current {
                if self.rq.should_preempt(&self.entities[thread], &self.entities[current]) {
                    self.cores[c].resched = true;
                }
            }
        }
    }
}

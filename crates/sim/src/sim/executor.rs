//! The executor models: how an operator that can run gets a thread. Under `dedicated` its own
//! thread is woken; under `dynamic:N` and `policy:NAME:N` it is queued in the pool's ready queue
//! (the engine's own, [`moirai_engine::ready`]) and a worker takes it for a turn.

use moirai_engine::ready::{wakes_a_worker, LocalFifo, ReadyQueue, Turn as EngineTurn};

use super::thread::{State, Turn};
use super::{Event, Simulation};
use crate::event::Nanos;

/// A pool: the engine's ready queue ([`moirai_engine::ready`], over single-threaded FIFOs), its
/// turn, and its idle workers.
pub(crate) struct Pool {
    pub(super) ready: ReadyQueue<LocalFifo>,
    pub(super) turn: EngineTurn,
    pub(super) idle: Vec<usize>,
}

impl Simulation<'_> {
    /// `op` may have become runnable: wake its thread, or queue it for the pool's workers.
    /// `from` is the core whose step caused it.
    pub(super) fn notify(&mut self, op: usize, from: Option<usize>) {
        if self.ops[op].busy || !self.can_run(op) {
            self.arm_source(op);
            return;
        }
        if let Some(t) = self.ops[op].thread {
            if self.threads[t].waiting {
                self.threads[t].waiting = false;
                self.threads[t].state = State::Waking;
                self.events.push(self.now + self.config.cfs.wakeup_ns, Event::Wake { thread: t, from });
                self.woke_one(from);
            }
            return;
        }
        if self.ops[op].queued {
            return;
        }
        // A worker that readies an operator in its own turn, with nothing else queued, takes it
        // after the turn itself: no other worker is woken for it (the engine's rule).
        let own_turn = from.and_then(|c| self.cores[c].current).is_some_and(|t| self.threads[t].op.is_none());
        let was_empty = self.pool.as_ref().expect("a pool operator").ready.is_empty();
        self.enqueue(op);
        if !wakes_a_worker(own_turn, was_empty) {
            return;
        }
        let pool = self.pool.as_mut().expect("a pool operator");
        if let Some(w) = pool.idle.pop() {
            self.threads[w].waiting = false;
            self.threads[w].state = State::Waking;
            self.events.push(self.now + self.config.cfs.wakeup_ns, Event::Wake { thread: w, from });
            self.woke_one(from);
        }
    }

    /// Counts a wake-up; the step running on `from` (if any) pays its notification.
    fn woke_one(&mut self, from: Option<usize>) {
        self.wakeups += 1;
        if let Some(c) = from {
            self.cores[c].notified += 1;
        }
    }

    fn enqueue(&mut self, op: usize) {
        self.pool.as_ref().expect("a pool operator").ready.push(op, self.ops[op].level);
        self.ops[op].queued = true;
    }

    /// Starts the thread's next step; false if it has nothing to run.
    pub(super) fn plan(&mut self, thread: usize, core: usize, start: Nanos) -> bool {
        if let Some(op) = self.threads[thread].op {
            if self.can_run(op) && self.start_step(core, thread, op, start) {
                return true;
            }
            self.arm_source(op);
            return false;
        }
        loop {
            if let Some(mut turn) = self.threads[thread].turn {
                if turn.steps_left > 0 && start < turn.until && self.can_run(turn.op) {
                    turn.steps_left -= 1;
                    self.threads[thread].turn = Some(turn);
                    if self.start_step(core, thread, turn.op, start) {
                        return true;
                    }
                }
                self.threads[thread].turn = None;
                self.ops[turn.op].busy = false;
                if self.can_run(turn.op) {
                    self.enqueue(turn.op);
                } else {
                    self.arm_source(turn.op);
                }
            }
            let pool = self.pool.as_mut().expect("a worker's pool");
            let turn = pool.turn;
            let Some(op) = pool.ready.pop(self.threads[thread].turns) else { return false };
            self.threads[thread].turns += 1;
            self.ops[op].queued = false;
            self.ops[op].busy = true;
            let until = turn.ends_at(start).unwrap_or(Nanos::MAX);
            self.threads[thread].turn = Some(Turn { op, steps_left: turn.steps, until });
        }
    }
}

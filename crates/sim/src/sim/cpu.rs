//! The simulated CPU: C cores, each running the thread CFS picks (paying a context switch and a
//! woken thread's wake-up CPU), one step at a time, until the thread has nothing to run.

use super::step::Step;
use super::thread::State;
use super::Simulation;
use crate::event::Nanos;

/// A simulated core: the thread it runs (and ran last), a pending preemption, the step in
/// progress.
#[derive(Default)]
pub(super) struct Core {
    pub(super) current: Option<usize>,
    pub(super) last: Option<usize>,
    pub(super) resched: bool,
    pub(super) step: Option<Step>,
    /// The core pays the notifications of its last step until then (`notify_ns` each).
    pub(super) busy_until: Nanos,
    /// Sleeping threads the core's current step woke (each costs `notify_ns`).
    pub(super) notified: u64,
}

impl Simulation<'_> {
    /// Gives `core` a thread with work, or leaves it idle.
    pub(super) fn dispatch(&mut self, core: usize) {
        loop {
            let base = self.now.max(self.cores[core].busy_until);
            let mut start = base;
            let thread = match self.cores[core].current {
                Some(t) => t,
                None => {
                    let Some(t) = self.rq.pick(&mut self.entities) else {
                        self.idle_cores.push(core);
                        return;
                    };
                    // A woken thread always switches in (from the idle task at least) and pays
                    // its wake-up's CPU.
                    let woken = std::mem::take(&mut self.threads[t].woken);
                    if self.cores[core].last != Some(t) || woken {
                        start += self.config.cfs.context_switch_ns;
                        self.context_switches += 1;
                    }
                    if woken && self.config.wakeup_cpu_ns > 0 {
                        let w = self.config.wakeup_cpu_ns;
                        start += w;
                        self.threads[t].cpu_ns += w;
                        if let Some(op) = self.threads[t].op {
                            self.ops[op].cpu_ns += w;
                        }
                        self.rq.charge(&mut self.entities[t], w);
                    }
                    self.measure.cpu(base, start);
                    self.cores[core].current = Some(t);
                    self.cores[core].last = Some(t);
                    self.threads[t].state = State::Running;
                    self.threads[t].slice_end = start + self.rq.slice(&self.entities[t]);
                    t
                }
            };
            if self.plan(thread, core, start) {
                return;
            }
            // Nothing to do: the thread sleeps until notified.
            self.threads[thread].state = State::Sleeping;
            self.threads[thread].waiting = true;
            self.rq.sleep(&mut self.entities[thread]);
            self.rq.regroup(thread, &mut self.entities);
            self.cores[core].current = None;
            if self.threads[thread].op.is_none() {
                self.pool.as_mut().expect("a worker's pool").idle.push(thread);
            }
        }
    }
}

//! Steps: a thread runs one step of an operator at a time, like the engine's non-blocking `step`
//! — up to `batch_size` tuples that fit in the thread's slice, each costing the operator's drawn
//! cost; the outputs become visible when the step ends.

use moirai_engine::graph::{NodeKind, Partitioning};

use super::channel::Stamp;
use super::thread::State;
use super::{Event, Simulation};
use crate::config::CostDist;
use crate::event::Nanos;
use crate::model::Rate;

/// A step in progress on a core.
pub(super) struct Step {
    thread: usize,
    op: usize,
    start: Nanos,
    tuples: usize,
    /// Output tuples (channel, intended time, ingress), pushed at the end.
    outputs: Vec<(usize, Nanos, Nanos)>,
    /// What a sink consumed: (intended time, ingress, egress) of its i-th tuple.
    consumed: Vec<(Nanos, Nanos, Nanos)>,
    /// CPU the step's tuples took.
    ran: Nanos,
    emitted: u64,
    sleep: Option<Nanos>,
}

impl Simulation<'_> {
    /// Starts a step of `op` on `core` by `thread` at `start`; false if not even one tuple fits.
    pub(super) fn start_step(&mut self, core: usize, thread: usize, op: usize, start: Nanos) -> bool {
        let cost = self.ops[op].cost;
        let budget = self.threads[thread].slice_end.saturating_sub(start) / cost;
        let mut limit = budget.clamp(1, self.config.batch_size as u64);
        if self.ops[op].source.is_some() {
            limit = limit.min(self.due(op));
        }
        let mut step = self.cores[core].step.take().unwrap_or_else(|| Step {
            thread,
            op,
            start,
            tuples: 0,
            outputs: Vec::new(),
            consumed: Vec::new(),
            ran: 0,
            emitted: 0,
            sleep: None,
        });
        let (work, overhead, dist) = (self.ops[op].work, cost - self.ops[op].work, self.config.cost_dist);
        step.thread = thread;
        step.op = op;
        step.start = start;
        step.tuples = 0;
        step.outputs.clear();
        step.consumed.clear();
        step.emitted = 0;
        step.ran = 0;
        step.sleep = None;
        let mut route: Vec<usize> = Vec::new();
        let model = self.model;
        let groups = &model.outputs[op];
        let mut popped_from: Vec<usize> = Vec::new();
        while (step.tuples as u64) < limit {
            let is_source = self.ops[op].source.is_some();
            if !is_source && model.inputs[op].iter().all(|&c| self.channels[c].queue.is_empty()) {
                break;
            }
            // Copies of this tuple and where each goes; committed only if all fit.
            let copies = {
                let s = self.ops[op].selectivity;
                let whole = s.floor() as u64;
                whole + u64::from(self.rng.f64() < s - whole as f64)
            };
            route.clear();
            for (g, group) in groups.iter().enumerate() {
                for k in 0..copies {
                    match group.partitioning {
                        Partitioning::Broadcast => route.extend(&group.channels),
                        Partitioning::Forward | Partitioning::Rebalance => {
                            let turn = self.ops[op].next_out[g] + k as usize;
                            route.push(group.channels[turn % group.channels.len()]);
                        }
                        Partitioning::Shuffle | Partitioning::KeyBy => {
                            route.push(group.channels[self.rng.usize(..group.channels.len())])
                        }
                    }
                }
            }
            // A slot per channel, not per copy: so the first tuple after `can_run` always goes
            // (two copies never fit a channel of one slot, and its thread would sleep for good).
            if !route.iter().all(|&c| self.channels[c].free() > 0) {
                break;
            }
            step.ran += match dist {
                CostDist::Const => cost,
                _ => (dist.draw(work, &mut self.rng) + overhead).max(1),
            };
            let done = start + step.ran;
            let (sent, ingress) = match self.ops[op].source.as_mut() {
                Some(s) => {
                    let ingress = done;
                    let sent = match (&mut s.poisson, s.rate) {
                        (Some((arrived, _, _)), _) => arrived.pop_front().expect("a due arrival"),
                        (None, Rate::Unlimited) => ingress,
                        (None, rate) => rate.time_of(s.taken),
                    };
                    s.taken += 1;
                    self.measure.ingress(ingress);
                    (sent, ingress)
                }
                None => {
                    let c = (model.inputs[op].iter().copied())
                        .filter(|&c| !self.channels[c].queue.is_empty())
                        .min_by_key(|&c| self.channels[c].queue.front().map(|t| t.queued))
                        .expect("an input is not empty");
                    let t = self.channels[c].queue.pop_front().expect("non-empty");
                    self.channels[c].popped += 1;
                    self.in_flight -= 1;
                    if popped_from.last() != Some(&c) {
                        popped_from.push(c);
                    }
                    (t.sent, t.ingress)
                }
            };
            for (g, group) in groups.iter().enumerate() {
                if matches!(group.partitioning, Partitioning::Forward | Partitioning::Rebalance) {
                    self.ops[op].next_out[g] += copies as usize;
                }
            }
            for &c in &route {
                self.channels[c].reserved += 1;
                self.in_flight += 1;
                step.outputs.push((c, sent, ingress));
            }
            step.emitted += copies;
            if self.ops[op].kind == NodeKind::Sink {
                step.consumed.push((sent, ingress, done));
            }
            step.tuples += 1;
            if let Some((p, max)) = self.ops[op].block {
                if self.rng.f64() < p {
                    step.sleep = Some(self.rng.u64(0..max.max(1)));
                    break;
                }
            }
        }
        if step.tuples == 0 {
            debug_assert!(!self.can_run(op), "operator {op} can run but took no tuple: a lost wake-up");
            self.cores[core].step = Some(step);
            return false;
        }
        let end = start + step.ran;
        self.cores[core].step = Some(step);
        self.steps_running += 1;
        self.events.push(end, Event::StepEnd(core));
        // Room freed upstream: a producer blocked on these channels may go on.
        popped_from.sort_unstable();
        popped_from.dedup();
        for c in popped_from {
            let producer = self.channels[c].from;
            self.notify(producer, Some(core));
        }
        true
    }

    /// The step on `core` ends: its outputs enter their channels, its consumers and producers
    /// are notified, its thread pays its notifications and sleeps, yields or goes on.
    pub(super) fn finish_step(&mut self, core: usize) {
        let now = self.now;
        let step = self.cores[core].step.take().expect("a step ends on its core");
        self.steps_running -= 1;
        let (op, thread) = (step.op, step.thread);
        let ran = step.ran;
        for &(c, sent, ingress) in &step.outputs {
            let ch = &mut self.channels[c];
            ch.reserved -= 1;
            ch.queue.push_back(Stamp { sent, ingress, queued: now });
            ch.pushed += 1;
        }
        for &(sent, ingress, egress) in &step.consumed {
            self.measure.egress(egress, sent, ingress);
        }
        let o = &mut self.ops[op];
        if o.kind != NodeKind::Source {
            o.tuples_in += step.tuples as u64;
        }
        o.tuples_out += if o.kind == NodeKind::Sink { step.tuples as u64 } else { step.emitted };
        o.cpu_ns += ran;
        self.threads[thread].cpu_ns += ran;
        self.measure.cpu(step.start, now);
        self.rq.charge(&mut self.entities[thread], ran);
        let mut touched: Vec<usize> = step.outputs.iter().map(|&(c, _, _)| self.channels[c].to).collect();
        let sleep = step.sleep;
        self.cores[core].step = Some(step);
        touched.sort_unstable();
        touched.dedup();
        for consumer in touched {
            self.notify(consumer, Some(core));
        }
        if self.ops[op].source.is_some() {
            self.arm_source(op);
        }
        // The step's thread pays for the sleeping threads it woke (at its start or its end)
        // before the core does anything else.
        let notified = std::mem::take(&mut self.cores[core].notified) * self.config.notify_ns;
        if notified > 0 {
            self.cores[core].busy_until = now + notified;
            self.threads[thread].cpu_ns += notified;
            self.ops[op].cpu_ns += notified;
            self.rq.charge(&mut self.entities[thread], notified);
            self.measure.cpu(now, now + notified);
        }
        if let Some(s) = sleep {
            // A blocking operator sleeps in its thread (a pool worker keeps its turn meanwhile).
            self.threads[thread].state = State::Sleeping;
            self.rq.sleep(&mut self.entities[thread]);
            self.rq.regroup(thread, &mut self.entities);
            self.cores[core].current = None;
            self.events.push(now + s + self.config.cfs.wakeup_ns, Event::Wake { thread, from: None });
        } else if now >= self.threads[thread].slice_end || self.cores[core].resched {
            self.cores[core].resched = false;
            if self.rq.has_waiting() {
                self.threads[thread].state = State::Runnable;
                self.rq.put_prev(thread, &mut self.entities[thread]);
                self.cores[core].current = None;
            } else {
                self.threads[thread].slice_end = now + self.rq.slice(&self.entities[thread]);
            }
        }
        self.dispatch(core);
    }
}

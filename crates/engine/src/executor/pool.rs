//! The pool threading models (`dynamic`, `elastic`, `fused`, `policy`): worker threads that take
//! ready tasks from a ready queue ([`crate::ready`]).
//!
//! Every task of a pool has a state word ([`crate::sync`]): idle, queued, running,
//! running-and-notified, or finished. Waking a task ([`Signal::notify`] through its hook: input
//! arrived, a full output drained, a timer fired, a stop was requested) moves it from idle to
//! queued and appends it to the pool's lock-free ready queue, or marks a running one as notified
//! so that its worker queues it again when it lets go of it. A worker pops the task that has
//! waited longest at the highest level (least-recently-run order: IBM's LRU free list), claims it
//! with a compare-and-swap from queued to running (the consumer try-lock: one operator instance
//! never runs on two threads at once, and its input channels are read in order by one thread at
//! a time, so per-channel FIFO order holds), steps it for a turn, and then lets go of it: queued
//! at the back if it still has work, idle on the timer heap if it waits for a time, idle if it
//! waits for input or for room. No wake-up is lost: a notification that arrives while the task
//! runs leaves it notified, and letting go of a notified task queues it again. Idle workers sleep
//! on one event count and cost no CPU: one of them keeps the timers (sleeps until the next one is
//! due), the others sleep until work arrives. A task that a worker readies during its own turn,
//! while nothing else is queued, is left for that worker to take after the turn instead of waking
//! another ([`crate::ready::wakes_a_worker`]; under `dynamic`, `elastic` and `fused` as the
//! worker's next, without going through the queue: [`super::affinity`]): at a low rate a tuple
//! then crosses a pipeline on one thread, with one wake-up (its source's timer) instead of one per
//! hop.
//!
//! A producer that finds a consumer's channel full does what IBM's producers do: instead of
//! waiting, its worker claims the queued consumer and runs it at once, draining the channel while
//! it is still in the cache.
//!
//! Under `dynamic:N` and `policy:…:N` the instances of parallel operators wait on their home
//! worker's ready queue instead of the shared one ([`super::affinity`]), so that one query's
//! instances run side by side, each on its own worker; under `dynamic:N` a graph without parallel
//! instances and with a long path is cut into one segment per worker, each segment's operators
//! homed on its worker.

use std::cmp::Reverse;
use std::collections::BinaryHeap;
use std::panic::{catch_unwind, AssertUnwindSafe};
use std::sync::atomic::{AtomicBool, AtomicI32, AtomicU64, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use spin::mutex::SpinMutex;

use super::affinity::{segments, set_worker, Ready};
use super::ahead::{boxed_lines, lines, one_per_line, Ahead};
use super::turn_cpu::{CpuSlot, TurnCpu, SETTLE_NS};
use super::{panic_message, Executor, ExecutorTask, Observed, OnPanic, Started, ThreadLevel};
use crate::metrics::OperatorMetrics;
use crate::ready::{ReadyDiscipline, Turn};
use crate::sync::{lock, AbortFlag, Signal, TaskState, Wake};
use crate::task::{Step, Task};
use crate::threading::Threading;
use crate::tuple::{now_ns, set_step_clock};

impl Ready {
    /// Makes task `id` runnable ([`TaskState::notify`]); queued at the priority level its
    /// metrics carry.
    fn schedule(&self, state: &TaskState, id: usize, metrics: &OperatorMetrics) {
        if state.notify() {
            self.push(id, metrics.priority_level.load(Ordering::Relaxed));
        }
    }
}

/// One operator of a pool. What a turn reads (the task's lock and the pointers to what it
/// shares) comes first and each slot starts a cache line, so that a turn touches one line of
/// the pool's slots (`TURN_BYTES`).
#[repr(C, align(64))]
struct Slot {
    /// Locked only by the worker that claimed the operator through its state word, so never
    /// waited for: a try-lock whose release is a plain store (a `std` mutex's is a locked
    /// instruction, one of a dozen in a hop at a low rate).
    task: SpinMutex<Box<dyn Task>>,
    metrics: Arc<OperatorMetrics>,
    /// Its task's signal, which also holds its state word ([`Signal::task_state`]).
    signal: Arc<Signal>,
    /// Operators of this pool it sends to (read when the operator ends a turn blocked).
    downstream: Vec<usize>,
    name: String,
}

// A turn's part fits one cache line.
const _: () = assert!(Slot::TURN_BYTES <= 64);

impl Slot {
    /// The bytes from the start of a slot that a turn reads (within its first cache line).
    const TURN_BYTES: usize = std::mem::offset_of!(Slot, downstream);

    /// The operator's state word.
    fn state(&self) -> &TaskState {
        self.signal.task_state()
    }
}

/// One pool: its operators, ready queue, timers and thread level.
struct Pool {
    name: String,
    slots: Vec<Slot>,
    ready: Arc<Ready>,
    /// (when, operator) of operators waiting for a time.
    timers: Mutex<BinaryHeap<Reverse<(u64, usize)>>>,
    /// The earliest timer, or `u64::MAX`: lets workers skip the heap's lock.
    next_timer: AtomicU64,
    /// The idle worker that sleeps until the next timer (the others sleep until work arrives, so
    /// a timer wakes one thread, not all), and the time it will wake (`u64::MAX`: none sleeps).
    keeper: AtomicBool,
    keeper_wakes_at: AtomicU64,
    /// Operators not finished yet.
    live: AtomicUsize,
    /// Workers with an index below the level run operators; the others wait.
    level: AtomicUsize,
    /// Its worker threads (the highest level).
    workers: usize,
    /// Where workers above the level (and the controller) wait.
    parked: Signal,
    /// How long a worker keeps an operator.
    turn: Turn,
    abort: Arc<AbortFlag>,
    on_panic: OnPanic,
}

impl Pool {
    fn done(&self) -> bool {
        self.live.load(Ordering::SeqCst) == 0 || self.abort.is_raised()
    }

    fn wake_all(&self) {
        self.ready.idle.notify();
        self.parked.notify();
    }

    fn add_timer(&self, at: u64, id: usize) {
        let mut timers = lock(&self.timers);
        timers.push(Reverse((at, id)));
        self.next_timer.fetch_min(at, Ordering::SeqCst);
        // Only a timer keeper that sleeps past it needs waking: with no keeper asleep, the worker
        // adding the timer (always a worker, in a turn) keeps it when it goes idle.
        if at < self.keeper_wakes_at.load(Ordering::SeqCst) && self.keeper_wakes_at.load(Ordering::SeqCst) != u64::MAX {
            self.ready.idle.notify();
        }
    }

    /// Queues every operator whose time has come, as the calling worker's own (taken by it next:
    /// no other is woken for them unless more than one waits); returns when the next one is due.
    fn fire_timers(&self, now: u64) -> Option<u64> {
        let next = self.next_timer.load(Ordering::SeqCst);
        if next > now {
            return (next != u64::MAX).then_some(next);
        }
        let mut timers = lock(&self.timers);
        self.ready.in_turn(true);
        while let Some(&Reverse((at, id))) = timers.peek() {
            if at > now {
                break;
            }
            timers.pop();
            let slot = &self.slots[id];
            self.ready.schedule(slot.state(), id, &slot.metrics);
        }
        self.ready.in_turn(false);
        let next = timers.peek().map_or(u64::MAX, |Reverse((at, _))| *at);
        self.next_timer.store(next, Ordering::SeqCst);
        (next != u64::MAX).then_some(next)
    }

    /// Puts queued operator `id` on the ready queue at its priority level.
    fn queue(&self, id: usize) {
        self.ready.push(id, self.slots[id].metrics.priority_level.load(Ordering::Relaxed));
    }

    /// Lets go of a running operator: idle, or queued again if it was notified meanwhile.
    fn release(&self, id: usize) {
        if self.slots[id].state().release() {
            // Notified while it ran: it has something to do.
            self.queue(id);
        }
    }

    /// Runs claimed operator `id` for a few steps, then lets go of it; its CPU time is charged
    /// through `cpu`. Returns true if it ended blocked on a full output.
    fn run(&self, id: usize, tid: i32, cpu: &mut TurnCpu) -> bool {
        let slot = &self.slots[id];
        let Some(mut task) = slot.task.try_lock() else {
            // Cannot happen while the state word is respected; never wait for it.
            self.release(id);
            return false;
        };
        slot.metrics.tid.store(tid, Ordering::Relaxed);
        let mut outcome = Step::Worked;
        // The clock is read only when a quantum bounds the turn.
        let quantum_end = self.turn.quantum.and_then(|_| self.turn.ends_at(now_ns()));
        self.ready.in_turn_of(id);
        // The first step begins where the worker last read the clock (its last turn's end, or
        // when it looked for work): the batches it sends carry that reading. Later steps (a
        // busy operator) read the clock per batch sent, as a dedicated thread does.
        set_step_clock(Some(cpu.last_reading()));
        for step in 0..self.turn.steps {
            if step == 1 {
                set_step_clock(None);
            }
            if slot.signal.is_blocked() {
                outcome = Step::Blocked;
                break;
            }
            outcome = match catch_unwind(AssertUnwindSafe(|| task.step())) {
                Ok(step) => step,
                Err(payload) => {
                    (self.on_panic)(&slot.name, panic_message(payload));
                    Step::Finished
                }
            };
            if outcome != Step::Worked || self.abort.is_raised() || quantum_end.is_some_and(|end| now_ns() >= end) {
                break;
            }
        }
        set_step_clock(None);
        self.ready.in_turn(false);
        cpu.end_turn(id, |op| &self.slots[op].metrics);
        drop(task);
        match outcome {
            Step::Finished => {
                slot.state().finish();
                if self.live.fetch_sub(1, Ordering::SeqCst) == 1 {
                    self.wake_all();
                }
                false
            }
            Step::Worked => {
                // Still has work: to the back of its level, behind those that waited longer.
                slot.state().requeue();
                self.queue(id);
                false
            }
            Step::Idle { until } => {
                if let Some(at) = until {
                    self.add_timer(at, id);
                }
                self.release(id);
                false
            }
            Step::Blocked => {
                self.release(id);
                true
            }
        }
    }

    /// Runs worker `index` (Linux thread `tid`) until the pool is done; with `HINTS`, issuing
    /// `ahead`'s prefetch hints as each turn starts. A pool without hints runs the loop compiled
    /// without them: on the raw 5-operator pipeline, a loop that merely checked for hints ran
    /// 0.78–0.91× as fast (the loop turns every few hundred nanoseconds there).
    fn worker<const HINTS: bool>(&self, index: usize, tid: i32, ahead: Option<&Ahead>) {
        // Turns this worker started (for a source interval).
        let mut turns: u64 = 0;
        let mut cpu = TurnCpu::new(CpuSlot::of(index, self.workers));
        // The clock as the last turn ended, when the worker goes straight on to the next: one
        // reading per turn.
        let mut turn_ended: Option<u64> = None;
        set_worker(index);
        loop {
            let ended = turn_ended.take();
            if self.done() {
                cpu.settle(now_ns(), |op| &self.slots[op].metrics);
                return;
            }
            if index >= self.level.load(Ordering::SeqCst) {
                // What this worker readied or queued during its last turn is for another one now,
                // and so are the timers if it kept them: a worker below the level that went to
                // sleep while this one was the keeper sleeps without a timeout, so all are woken
                // and one of them keeps the timers (else a timer due now was never fired: a
                // source waiting for its next tuple hung the run, once in ~30 under `elastic`).
                self.ready.give_up_next(index);
                if self.next_timer.load(Ordering::SeqCst) != u64::MAX {
                    self.ready.idle.notify();
                } else if !self.ready.is_empty() {
                    self.ready.idle.notify_one();
                }
                if cpu.is_pending() {
                    cpu.settle(now_ns(), |op| &self.slots[op].metrics);
                }
                self.parked.wait_unless(None, || index < self.level.load(Ordering::SeqCst) || self.done());
                continue;
            }
            let now = ended.unwrap_or_else(|| cpu.read_clock());
            cpu.mark(now);
            let next_timer = self.fire_timers(now);
            if let Some(id) = self.ready.take_next(index).or_else(|| self.ready.pop(index, turns)) {
                turns += 1;
                // A stale entry (the operator was claimed by a producer's drain, or already ran)
                // fails the claim and is dropped.
                if let Some(ahead) = ahead.filter(|_| HINTS) {
                    ahead.prefetch(id);
                }
                if self.slots[id].state().claim() && self.run(id, tid, &mut cpu) {
                    // Blocked on a full output: drain a queued consumer now (IBM's producer
                    // that executes its consumer instead of waiting).
                    for &d in &self.slots[id].downstream {
                        if self.slots[d].state().claim() {
                            self.run(d, tid, &mut cpu);
                        }
                    }
                }
                turn_ended = Some(cpu.last_reading());
                continue;
            }
            // One idle worker keeps the timers; the others sleep until work arrives.
            let keeper = next_timer.is_some()
                && self.keeper.compare_exchange(false, true, Ordering::SeqCst, Ordering::SeqCst).is_ok();
            let wakes_at = if keeper { self.next_timer.load(Ordering::SeqCst) } else { u64::MAX };
            if keeper {
                self.keeper_wakes_at.store(wakes_at, Ordering::SeqCst);
            }
            let now = now_ns();
            let timeout = keeper.then(|| Duration::from_nanos(wakes_at.saturating_sub(now).max(1)));
            // Turns not charged yet are charged before a sleep that may outlast the wall-time
            // bound, so that an idle pool's operators show all their CPU time; a short sleep (the
            // next timer is near) leaves them for the next settlement.
            if cpu.is_pending() && timeout.is_none_or(|t| t.as_nanos() as u64 >= SETTLE_NS) {
                cpu.settle(now, |op| &self.slots[op].metrics);
            }
            self.ready.idle.wait_unless(timeout, || {
                !self.ready.is_empty()
                    || self.done()
                    || index >= self.level.load(Ordering::SeqCst)
                    || (keeper && self.next_timer.load(Ordering::SeqCst) < wakes_at)
                    || self.next_timer.load(Ordering::SeqCst) <= now_ns()
            });
            if keeper {
                self.keeper_wakes_at.store(u64::MAX, Ordering::SeqCst);
                self.keeper.store(false, Ordering::SeqCst);
                // Woken for work while timers wait: another idle worker keeps them meanwhile.
                if !self.ready.is_empty() && self.next_timer.load(Ordering::SeqCst) != u64::MAX {
                    self.ready.idle.notify_one();
                }
            }
        }
    }
}

/// A core's L2 cache where the kernel does not say (1 MiB: this machine's, and the order of
/// today's server CPUs').
const L2_GUESS: usize = 1 << 20;

/// The least memory one operator's turn touches (14 cache lines: slot, signal with the state
/// word, counters, task, channel): a pool whose operators fit a core's L2 by this count gets no
/// hints, and spends nothing on working them out.
const MIN_TOUCHED: usize = 14 * 64;

/// The memory a turn of a slot's operator touches: its slot, signal (with its state word), its
/// entry in the pool's list of counters (which the wake hook reads), counters, task (and what the
/// task names: ports, chain, router) and input channels; of the slot, signal and counters, only
/// the line a turn reads.
fn touched(slot: &Slot, hook_entry: &Arc<OperatorMetrics>) -> Vec<usize> {
    let mut at = Vec::new();
    lines(&mut at, moirai_os::cache::address_of(slot), Slot::TURN_BYTES);
    lines(&mut at, moirai_os::cache::address_of(&*slot.metrics), OperatorMetrics::TURN_BYTES);
    lines(&mut at, moirai_os::cache::address_of(&*slot.signal), Signal::TURN_BYTES);
    lines(&mut at, moirai_os::cache::address_of(hook_entry), size_of::<Arc<OperatorMetrics>>());
    // No worker runs yet: the lock is free.
    if let Some(task) = slot.task.try_lock() {
        boxed_lines(&mut at, &**task);
        task.touched(&mut at);
    }
    for c in &slot.metrics.inputs {
        boxed_lines(&mut at, &**c);
    }
    one_per_line(&mut at);
    at
}

/// One or more pools: `dynamic`, `elastic` and `policy` have one; `fused` one per named thread.
pub struct Pools {
    names: Vec<String>,
    /// Worker threads per pool.
    workers: usize,
    /// Workers running tasks at the start (the rest park until a controller raises the level).
    start_level: usize,
    discipline: ReadyDiscipline,
    /// Whether instances of parallel operators wait for their home worker ([`super::affinity`]):
    /// for the pools whose thread level stays put (`dynamic`, `policy`).
    affinity: bool,
    /// Whether a graph without parallel instances is cut into one segment per worker, each
    /// segment's tasks homed on its worker ([`super::affinity::segments`]): `dynamic` (under
    /// `policy` a worker's own queue would come before a higher level elsewhere).
    segments: bool,
}

impl Pools {
    /// The pools of a threading model (none for `dedicated`).
    pub fn of(threading: &Threading) -> Option<Pools> {
        let discipline = ReadyDiscipline::of(threading)?;
        let one = |name: &str, workers: usize, start_level: usize| Pools {
            names: vec![name.to_string()],
            workers,
            start_level,
            discipline,
            affinity: false,
            segments: false,
        };
        Some(match threading {
            Threading::Dedicated => return None,
            Threading::Dynamic { threads } => {
                Pools { affinity: true, segments: true, ..one("dynamic", *threads, *threads) }
            }
            Threading::Elastic(c) => one("elastic", c.max, c.start),
            Threading::Fused { threads } => Pools { names: threads.clone(), ..one("fused", 1, 1) },
            Threading::Policy(c) => Pools { affinity: true, ..one("policy", c.threads, c.threads) },
        })
    }
}

/// A worker's thread name: `dynamic-0`, `elastic-3`, or a fused thread's own name (Linux keeps 15
/// bytes of it).
fn worker_name(pool: &str, index: usize, pools: usize) -> String {
    if pools == 1 && pool != "fused" {
        format!("{pool}-{index}")
    } else {
        pool.to_string()
    }
}

impl ThreadLevel for Pool {
    fn level(&self) -> usize {
        self.level.load(Ordering::SeqCst)
    }

    fn set_level(&self, level: usize) {
        if self.level.swap(level, Ordering::SeqCst) != level {
            self.wake_all();
        }
    }

    fn is_done(&self) -> bool {
        self.done()
    }

    fn set_levels_apply(&self, apply: bool) {
        self.ready.set_levels_apply(apply);
    }
}

impl Executor for Pools {
    fn start(
        &self,
        mut tasks: Vec<ExecutorTask>,
        abort: Arc<AbortFlag>,
        on_panic: OnPanic,
        observed: Arc<Observed>,
    ) -> std::io::Result<Started> {
        if self.segments && self.workers > 1 && tasks.iter().all(|t| t.affinity.is_none()) {
            let downstream: Vec<Vec<usize>> = tasks.iter().map(|t| t.downstream.clone()).collect();
            if let Some(cut) = segments(&downstream, self.workers) {
                for (t, segment) in tasks.iter_mut().zip(cut) {
                    t.affinity = Some(segment);
                }
            }
        }
        // Place each task on its pool: by thread hint for fused, else the one pool.
        let mut placed: Vec<Vec<ExecutorTask>> = self.names.iter().map(|_| Vec::new()).collect();
        let mut local = Vec::with_capacity(tasks.len());
        let mut pool_of = Vec::with_capacity(tasks.len());
        for t in tasks {
            let p = match (&t.thread_hint, self.names.len()) {
                (Some(hint), n) if n > 1 || self.names[0] == *hint => {
                    self.names.iter().position(|n| n == hint).unwrap_or(0)
                }
                _ => 0,
            };
            local.push(placed[p].len());
            pool_of.push(p);
            placed[p].push(t);
        }
        let mut pools = Vec::new();
        let mut aheads = Vec::new();
        for (p, tasks) in placed.into_iter().enumerate() {
            let placement: Vec<(Option<usize>, bool)> = tasks.iter().map(|t| (t.affinity, t.source)).collect();
            let ready = Arc::new(Ready::new(&self.discipline, self.workers, self.affinity, &placement));
            let live = tasks.len();
            // One wake hook for the pool's operators: it queues operator `i` at the priority level
            // of its counters, found through this list (eight operators to a cache line).
            let levels: Arc<[Arc<OperatorMetrics>]> = tasks.iter().map(|t| t.metrics.clone()).collect();
            let (q, m) = (ready.clone(), levels.clone());
            let hook: Wake = Arc::new(move |signal: &Signal, i| q.schedule(signal.task_state(), i, &m[i]));
            let slots = tasks
                .into_iter()
                .enumerate()
                .map(|(i, t)| {
                    t.signal.set_hook(hook.clone(), i);
                    t.metrics.pooled.store(true, Ordering::SeqCst);
                    let downstream = t.downstream.iter().filter(|&&d| pool_of[d] == p).map(|&d| local[d]).collect();
                    Slot {
                        name: t.name,
                        task: SpinMutex::new(t.task),
                        metrics: t.metrics,
                        signal: t.signal,
                        downstream,
                    }
                })
                .collect::<Vec<_>>();
            let cache = moirai_os::cache::l2_bytes().unwrap_or(L2_GUESS);
            let ahead = (slots.len() * MIN_TOUCHED > cache).then(|| {
                let touched: Vec<Vec<usize>> = slots.iter().zip(levels.iter()).map(|(s, m)| touched(s, m)).collect();
                // Their pages spread over more than the TLB covers: huge pages where the kernel
                // gives them ([`moirai_os::memory`]).
                let huge = moirai_os::memory::back_with_huge_pages(touched.iter().flatten().copied());
                tracing::debug!(
                    pool = %self.names[p], marked = huge.marked, collapsed = huge.collapsed, note = ?huge.note,
                    "operators' memory in huge pages"
                );
                let downstream: Vec<Vec<usize>> = slots.iter().map(|s| s.downstream.clone()).collect();
                // Which worker runs an operator is known only where the pool keeps operators on
                // their home worker, or has one worker.
                let one_worker =
                    |a: usize, b: usize| self.workers == 1 || ready.home(a).is_some_and(|h| ready.home(b) == Some(h));
                Ahead::plan(&downstream, &touched, one_worker, cache)
            });
            // Every task starts queued, in plan order.
            for (i, slot) in slots.iter().enumerate() {
                ready.enqueue(i, slot.metrics.priority_level.load(Ordering::Relaxed));
            }
            aheads.push(ahead.flatten().map(Arc::new));
            pools.push(Arc::new(Pool {
                name: self.names[p].clone(),
                slots,
                ready,
                timers: Mutex::new(BinaryHeap::new()),
                next_timer: AtomicU64::new(u64::MAX),
                keeper: AtomicBool::new(false),
                keeper_wakes_at: AtomicU64::new(u64::MAX),
                live: AtomicUsize::new(live),
                level: AtomicUsize::new(self.start_level),
                workers: self.workers,
                parked: Signal::default(),
                turn: self.discipline.turn,
                abort: abort.clone(),
                on_panic: on_panic.clone(),
            }));
        }
        let mut threads = Vec::new();
        let mut wake_on_abort = Vec::new();
        let npools = pools.len();
        let total_level: usize = pools.iter().map(|p| p.level.load(Ordering::SeqCst)).sum();
        observed.thread_level.store(total_level, Ordering::SeqCst);
        for (pool, ahead) in pools.iter().zip(&aheads) {
            // Workers above the level and the pool's ready queue must see an abort.
            let (ready, parked) = (pool.ready.clone(), pool.clone());
            let wake = Arc::new(Signal::default());
            wake.set_hook(
                Arc::new(move |_: &Signal, _| {
                    ready.idle.notify();
                    parked.parked.notify();
                }),
                0,
            );
            wake_on_abort.push(wake);
            for index in 0..self.workers {
                let name = worker_name(&pool.name, index, npools);
                let tid = Arc::new(AtomicI32::new(0));
                lock(&observed.threads).push((name.clone(), tid.clone()));
                let (pool, observed, ahead) = (pool.clone(), observed.clone(), ahead.clone());
                match std::thread::Builder::new().name(name).spawn(move || {
                    let me = moirai_os::current_tid();
                    tid.store(me, Ordering::SeqCst);
                    match ahead.as_deref() {
                        Some(ahead) => pool.worker::<true>(index, me, Some(ahead)),
                        None => pool.worker::<false>(index, me, None),
                    }
                    observed.ended.thread_ended();
                }) {
                    Ok(t) => threads.push(t),
                    Err(e) => {
                        abort.raise();
                        on_panic("executor", format!("cannot spawn a worker thread: {e}"));
                        for p in &pools {
                            p.wake_all();
                        }
                        for t in threads {
                            let _ = t.join();
                        }
                        return Err(e);
                    }
                }
            }
        }
        let pools = pools.into_iter().map(|p| p as Arc<dyn ThreadLevel>).collect();
        Ok(Started { threads, wake_on_abort, pools })
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::executor::executor;
    use crate::threading::PolicyThreading;

    /// A task with `steps` steps of work that logs its name at each.
    struct Scripted {
        name: &'static str,
        steps: usize,
        log: Arc<Mutex<Vec<&'static str>>>,
        signal: Arc<Signal>,
    }

    impl Task for Scripted {
        fn step(&mut self) -> Step {
            if self.steps == 0 {
                return Step::Finished;
            }
            self.steps -= 1;
            lock(&self.log).push(self.name);
            Step::Worked
        }
        fn has_input(&self) -> bool {
            self.steps > 0
        }
        fn signal(&self) -> &Arc<Signal> {
            &self.signal
        }
    }

    /// Runs tasks `(name, priority level, steps)` to their end on the policy executor with
    /// one worker and turns of `batch` steps; returns the order in which steps ran.
    fn run_policy_pool(tasks: &[(&'static str, u8, usize)], batch: usize) -> Vec<&'static str> {
        run_policy_pool_with(tasks, PolicyThreading { batch, threads: 1, ..PolicyThreading::new("qs") })
    }

    /// [`run_policy_pool`] with the executor's settings given; tasks named `src…` are sources.
    fn run_policy_pool_with(tasks: &[(&'static str, u8, usize)], config: PolicyThreading) -> Vec<&'static str> {
        let log = Arc::new(Mutex::new(Vec::new()));
        let tasks = tasks
            .iter()
            .map(|&(name, level, steps)| {
                let signal = Arc::new(Signal::default());
                let metrics = Arc::new(OperatorMetrics::default());
                metrics.priority_level.store(level, Ordering::SeqCst);
                let task = Scripted { name, steps, log: log.clone(), signal: signal.clone() };
                ExecutorTask {
                    name: name.into(),
                    task: Box::new(task),
                    metrics,
                    signal,
                    downstream: Vec::new(),
                    thread_hint: None,
                    affinity: None,
                    source: name.starts_with("src"),
                }
            })
            .collect();
        let on_panic: OnPanic = Arc::new(|op, msg| panic!("{op}: {msg}"));
        let started = executor(&Threading::Policy(config))
            .start(tasks, Arc::new(AbortFlag::default()), on_panic, Arc::new(Observed::default()))
            .unwrap();
        for t in started.threads {
            t.join().unwrap();
        }
        let order = lock(&log).clone();
        order
    }

    #[test]
    fn the_policy_executor_runs_the_highest_level_first() {
        let order = run_policy_pool(&[("low", 3, 4), ("high", 12, 4), ("mid", 7, 4)], 1);
        assert_eq!(order, ["high"; 4].iter().chain(&["mid"; 4]).chain(&["low"; 4]).copied().collect::<Vec<_>>());
    }

    #[test]
    fn round_robin_gives_each_operator_its_turn_in_order() {
        // Equal priorities (RR): turns of one step each, in turn; with turns of two steps, two.
        assert_eq!(run_policy_pool(&[("a", 0, 3), ("b", 0, 3), ("c", 0, 3)], 1), ["a", "b", "c"].repeat(3));
        assert_eq!(run_policy_pool(&[("a", 5, 4), ("b", 5, 4)], 2), ["a", "a", "b", "b", "a", "a", "b", "b"]);
    }

    #[test]
    fn a_source_interval_runs_the_source_every_kth_turn_whatever_its_level() {
        // QBS: the source is in the low class, the operators in the high one; every 3rd turn is
        // the source's while the others have work. Turns 0..=10: src a b | src a b | src a (b's
        // last turn finds it finished and logs nothing) | src a.
        let config = PolicyThreading { batch: 1, threads: 1, source_every: Some(3), ..PolicyThreading::new("qbs") };
        let order = run_policy_pool_with(&[("src", 1, 4), ("a", 10, 4), ("b", 10, 2)], config);
        assert_eq!(order, ["src", "a", "b", "src", "a", "b", "src", "a", "src", "a"]);
        // Without the interval the low source waits for the high class to finish.
        let config = PolicyThreading { batch: 1, threads: 1, source_every: None, ..PolicyThreading::new("qbs") };
        let order = run_policy_pool_with(&[("src", 1, 2), ("a", 10, 2)], config);
        assert_eq!(order, ["a", "a", "src", "src"]);
    }
}

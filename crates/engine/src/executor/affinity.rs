//! A pool's ready queues and worker affinity: where a readied task waits, and which worker is
//! woken for it.
//!
//! A task without a home waits on the pool's shared ready queue, which any worker takes from.
//! Under `dynamic:N` and `policy:…:N` the instances of a parallel operator have a home: instance
//! *i* waits on the ready queue of worker *i mod N* (timely-dataflow's workers with their
//! `Pipeline` pact). With a source of parallelism N and forward edges behind it, instance *i* of
//! every operator then shares worker *i*, so that a tuple goes down its instance's pipeline on
//! one worker without a hand-off per hop, and one query uses N cores. A worker in its own turn
//! that readies a task homed on it wakes nobody (it takes the task itself after the turn); any
//! other push wakes an idle worker.
//!
//! Where the discipline keeps a next ([`ReadyDiscipline::keeps_next`]: `dynamic`, `elastic`,
//! `fused`), an operator that a worker readies during its turn while nothing else waits is kept
//! as that worker's *next* instead of going through the queue: the worker takes it after the
//! turn, as it would have taken it from the queue, without the queue's traffic (a push and a pop
//! per hop at a low rate). A worker that finds nothing else to do takes another worker's next, so
//! a busy worker does not keep it from a free one: it counts as waiting, as a queued one does. A
//! second operator readied in the same turn goes to the queue, and an idle worker is woken for it.
//!
//! Under `dynamic:N` a graph without parallel instances whose longest path has at least
//! [`SEGMENT_TASKS_PER_WORKER`] tasks per worker is cut into N *segments* ([`segments`]):
//! contiguous pieces of a topological order, one pipeline after another, each homed on one
//! worker. A batch then goes down a segment on one core and crosses to another worker once per
//! cut, instead of at any hop where the other worker happened to take the next operator (with
//! the shared queue two workers on one long pipeline did no more than one). A worker that takes
//! a task of another's segment carries the batch on through that segment: what it readies there
//! while nothing else waits is its next, as for its own tasks, instead of a wake-up of the owner
//! per hop.
//!
//! Homes are a preference, not a prison, so that no task waits while a worker idles: a worker
//! takes from its own queue and the shared one (each first on alternate turns, so that a worker
//! busy with its own tasks still takes shared ones), and only when both are empty from another
//! worker's queue. Parallelism 1 in a graph without a long path gives no task a home: such a
//! pool behaves as one without affinity.

use std::cell::Cell;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};

use crate::ready::{wakes_a_worker, ReadyDiscipline, ReadyQueue};
use crate::sync::Signal;

thread_local! {
    /// While this thread is a pool worker in the middle of a turn: the address of its pool's
    /// ready queues (0 otherwise). A push to another pool's queue (`fused` has one per thread)
    /// always wakes that pool.
    static IN_TURN: Cell<usize> = const { Cell::new(0) };
    /// The index of the pool worker this thread is (`usize::MAX` for other threads).
    static WORKER: Cell<usize> = const { Cell::new(usize::MAX) };
    /// The home of the task this thread runs in its turn ([`NONE`]: none, or no home).
    static RUNNING_HOME: Cell<usize> = const { Cell::new(NONE) };
}

/// No operator.
const NONE: usize = usize::MAX;

/// The fewest tasks per worker on the graph's longest path for which `dynamic` cuts a graph
/// without parallel instances into segments ([`segments`]); below it, the shared queue. Measured
/// on 2 workers (`docs/threading.md`): the shared queue's cost is a long path's batches crossing
/// between the cores at every hop; many short queries do not suffer it, and cutting them into
/// halves of unequal cost hurt near saturation (the Lachesis SYN, 20 queries of 5 tasks, at 64 k
/// tuples/s: e2e p99 64 ms against 13 ms); with fewer tasks on a path a cut cannot split the cost
/// evenly (12 tasks, 10 × 200 ns at 0.7 M/s: p99 2–3× the shared queue's). From 16 tasks on a
/// path the cut kept or lowered p99 and at rate 0 ran 4–9× the tuples per second.
pub(super) const SEGMENT_TASKS_PER_WORKER: usize = 8;

/// Each task's segment when a graph (`downstream[i]`: the tasks task *i* sends to) is cut into
/// `workers` contiguous pieces of equal length in a topological order that goes down one
/// pipeline before it starts the next (a depth-first Kahn order from the sources): a pipeline's
/// operators stay together, and a batch crosses to another worker once per cut instead of at any
/// hop. `None` when the graph's longest path has fewer than [`SEGMENT_TASKS_PER_WORKER`] tasks
/// per worker. Tasks on a cycle (none in a moirai graph) come last, in index order.
pub(super) fn segments(downstream: &[Vec<usize>], workers: usize) -> Option<Vec<usize>> {
    let n = downstream.len();
    let mut upstream = vec![0usize; n];
    for d in downstream.iter().flatten() {
        upstream[*d] += 1;
    }
    let mut stack: Vec<usize> = (0..n).rev().filter(|&i| upstream[i] == 0).collect();
    let mut order = Vec::with_capacity(n);
    let mut placed = vec![false; n];
    // Tasks on the longest path that ends at each task.
    let mut path = vec![1usize; n];
    while let Some(u) = stack.pop() {
        order.push(u);
        placed[u] = true;
        for &d in downstream[u].iter().rev() {
            path[d] = path[d].max(path[u] + 1);
            upstream[d] -= 1;
            if upstream[d] == 0 {
                stack.push(d);
            }
        }
    }
    let longest = order.iter().map(|&u| path[u]).max().unwrap_or(0);
    if longest < SEGMENT_TASKS_PER_WORKER * workers {
        return None;
    }
    order.extend((0..n).filter(|&i| !placed[i]));
    let mut segment = vec![0; n];
    for (position, &task) in order.iter().enumerate() {
        segment[task] = position * workers.max(1) / n;
    }
    Some(segment)
}

/// Marks this thread as worker `index` of its pool, for good.
pub(super) fn set_worker(index: usize) {
    WORKER.with(|w| w.set(index));
}

/// The ready queues of a pool and the event count its idle workers sleep on.
pub(super) struct Ready {
    /// Tasks without a home.
    shared: ReadyQueue,
    /// Per worker, the tasks homed on it (empty without affinity).
    homes: Vec<ReadyQueue>,
    /// Each task's home worker, if it has one.
    home_of: Vec<Option<usize>>,
    /// Whether an operator a worker readies in its turn while nothing waits is that worker's next
    /// ([`ReadyDiscipline::keeps_next`]; under `policy`, while its levels do not apply:
    /// [`Ready::set_levels_apply`]).
    keep_next: AtomicBool,
    /// Whether it keeps a next whatever the levels (one level: the FIFO pools), and while they do
    /// not apply (no source interval).
    keep_next_always: bool,
    keep_next_when_flat: bool,
    /// Per worker, the operator it readied during its turn and takes next ([`Ready::take_next`]),
    /// or [`NONE`]; a worker with nothing else to do takes another's ([`Ready::pop`]).
    next: Vec<AtomicUsize>,
    /// Where idle workers sleep.
    pub(super) idle: Signal,
}

impl Ready {
    /// The queues of a pool of `workers` by `discipline`; `tasks` gives each task's affinity
    /// (its instance index, if it is an instance of a parallel operator) and whether it is a
    /// source. With `affinity` off (or one worker) no task has a home.
    pub(super) fn new(
        discipline: &ReadyDiscipline,
        workers: usize,
        affinity: bool,
        tasks: &[(Option<usize>, bool)],
    ) -> Ready {
        let is_source: Vec<bool> = tasks.iter().map(|&(_, source)| source).collect();
        let affinity = affinity && workers > 1 && tasks.iter().any(|(a, _)| a.is_some());
        let home_of = tasks.iter().map(|&(a, _)| a.filter(|_| affinity).map(|i| i % workers.max(1))).collect();
        let homes = if affinity {
            (0..workers).map(|_| ReadyQueue::new(discipline, is_source.clone())).collect()
        } else {
            Vec::new()
        };
        Ready {
            shared: ReadyQueue::new(discipline, is_source),
            homes,
            home_of,
            keep_next: AtomicBool::new(discipline.keeps_next()),
            keep_next_always: discipline.keeps_next(),
            keep_next_when_flat: discipline.source_every.is_none(),
            next: (0..workers.max(1)).map(|_| AtomicUsize::new(NONE)).collect(),
            idle: Signal::default(),
        }
    }

    /// Whether the tasks' priority levels order the queue (the policy executor while its
    /// activation rule is active). While they do not, every task waits at one level, and — unless
    /// sources are taken at an interval — a worker keeps the task it readies in its turn as its
    /// next, as the FIFO pools do; while they do, no task may come before a higher level.
    pub(super) fn set_levels_apply(&self, apply: bool) {
        self.keep_next.store(self.keep_next_always || (!apply && self.keep_next_when_flat), Ordering::Relaxed);
    }

    /// The task's home worker, if it has one.
    pub(super) fn home(&self, id: usize) -> Option<usize> {
        self.home_of[id]
    }

    /// Marks this thread as in a turn of a worker of this pool (`true`) or out of it.
    pub(super) fn in_turn(&self, yes: bool) {
        IN_TURN.with(|t| t.set(if yes { self as *const Ready as usize } else { 0 }));
        RUNNING_HOME.with(|h| h.set(NONE));
    }

    /// Marks this thread as in the turn of task `id`: what it readies that shares `id`'s home may
    /// be this worker's next, even where that home is another worker's ([`Ready::push`]).
    pub(super) fn in_turn_of(&self, id: usize) {
        self.in_turn(true);
        RUNNING_HOME.with(|h| h.set(self.home_of[id].unwrap_or(NONE)));
    }

    /// Queues `id` at `level` without waking anyone (the pool's start).
    pub(super) fn enqueue(&self, id: usize, level: u8) {
        match self.home_of[id] {
            Some(h) => self.homes[h].push(id, level),
            None => self.shared.push(id, level),
        }
    }

    /// Queues `id` at `level` and wakes an idle worker, unless the worker in its own turn takes
    /// it itself: a task homed on that worker, or a shared one while nothing else waits for it
    /// ([`wakes_a_worker`]). Where the discipline keeps a next, such a task waits as the worker's
    /// next instead of on the queue.
    pub(super) fn push(&self, id: usize, level: u8) {
        let own_turn = IN_TURN.with(Cell::get) == self as *const Ready as usize;
        let worker = WORKER.with(Cell::get);
        let nothing_waits =
            own_turn && self.homes.get(worker).is_none_or(ReadyQueue::is_empty) && self.shared.is_empty();
        // A task homed on another worker is this worker's next only when this one runs a task of
        // that home already (it took it while that worker was busy or not yet awake): it carries
        // the batch on through that segment instead of waking the other worker at each hop.
        let running_home = RUNNING_HOME.with(Cell::get);
        if nothing_waits
            && self.keep_next.load(Ordering::Relaxed)
            && self.home_of[id].is_none_or(|h| h == worker || h == running_home)
        {
            // One this worker readied earlier in the turn goes to the queue (the discipline has
            // one level), and an idle worker is woken for it, as for a push behind a queued task.
            // A load and a store, not a swap (a locked instruction, of a dozen in a low-rate hop):
            // only this worker puts a task in its own next, others only take one out (`pop`), so
            // the store overwrites nothing but its own earlier one or an empty slot; one taken
            // out in between is then also queued, and a task found twice is claimed once.
            let earlier = self.next[worker].load(Ordering::Relaxed);
            self.next[worker].store(id, Ordering::Release);
            if earlier != NONE {
                self.enqueue(earlier, 0);
                self.idle.notify_one();
            }
            return;
        }
        let wake = match self.home_of[id] {
            Some(h) => !(own_turn && worker == h),
            None => wakes_a_worker(own_turn, nothing_waits),
        };
        self.enqueue(id, level);
        if wake {
            self.idle.notify_one();
        }
    }

    /// The operator this worker readied during its last turn, to run next, if it readied one
    /// that another worker did not take meanwhile.
    pub(super) fn take_next(&self, worker: usize) -> Option<usize> {
        // A load and a store, as in `push`: another worker that takes the same task out in
        // between leaves the slot empty, and only one of the two claims the task.
        let id = self.next[worker].load(Ordering::Acquire);
        if id == NONE {
            return None;
        }
        self.next[worker].store(NONE, Ordering::Relaxed);
        Some(id)
    }

    /// Puts the operator this worker readied back on the queue, for another worker, and wakes
    /// one (the worker parks).
    pub(super) fn give_up_next(&self, worker: usize) {
        let id = self.next[worker].swap(NONE, Ordering::SeqCst);
        if id != NONE {
            self.enqueue(id, 0);
            self.idle.notify_one();
        }
    }

    /// The next task for worker `worker` in its turn number `turn`: from its own queue or the
    /// shared one (own first on even turns, shared first on odd ones), else one homed on another
    /// worker, else the one another worker readied to take next (that worker is busy with its
    /// turn; this one would idle).
    pub(super) fn pop(&self, worker: usize, turn: u64) -> Option<usize> {
        let mine = match self.homes.get(worker) {
            None => self.shared.pop(turn),
            Some(own) if turn % 2 == 0 => own.pop(turn).or_else(|| self.shared.pop(turn)),
            Some(own) => self.shared.pop(turn).or_else(|| own.pop(turn)),
        };
        let n = self.homes.len();
        mine.or_else(|| (1..n).find_map(|k| self.homes[(worker + k) % n].pop(turn))).or_else(|| {
            let n = self.next.len();
            (1..n).map(|k| self.next[(worker + k) % n].swap(NONE, Ordering::SeqCst)).find(|&id| id != NONE)
        })
    }

    /// True when no task waits on any queue, nor as a worker's next.
    pub(super) fn is_empty(&self) -> bool {
        self.shared.is_empty()
            && self.homes.iter().all(ReadyQueue::is_empty)
            && self.next.iter().all(|id| id.load(Ordering::SeqCst) == NONE)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn instances_wait_at_home_and_are_taken_elsewhere_only_when_a_worker_has_nothing() {
        // Tasks: two instances of a parallel chain (0, 1 and 2, 3) and one shared task (4).
        let tasks = [(Some(0), true), (Some(1), true), (Some(0), false), (Some(1), false), (None, false)];
        let ready = Ready::new(&ReadyDiscipline::FIFO, 2, true, &tasks);
        assert_eq!((0..5).map(|i| ready.home(i)).collect::<Vec<_>>(), [Some(0), Some(1), Some(0), Some(1), None]);
        for id in 0..5 {
            ready.enqueue(id, 0);
        }
        // Worker 0: its own first on an even turn, the shared one first on an odd turn.
        assert_eq!(ready.pop(0, 0), Some(0));
        assert_eq!(ready.pop(0, 1), Some(4));
        assert_eq!(ready.pop(0, 2), Some(2));
        // Worker 0 has nothing left: it takes worker 1's, oldest first.
        assert_eq!(ready.pop(0, 3), Some(1));
        assert_eq!(ready.pop(1, 0), Some(3));
        assert!(ready.is_empty() && ready.pop(1, 1).is_none());
        // Without affinity (or with one worker, or parallelism 1 everywhere) nothing has a home.
        assert_eq!(Ready::new(&ReadyDiscipline::FIFO, 2, false, &tasks).home(1), None);
        assert_eq!(Ready::new(&ReadyDiscipline::FIFO, 1, true, &tasks).home(1), None);
        // More instances than workers: instance i on worker i mod N.
        let four = [(Some(0), true), (Some(1), true), (Some(2), true), (Some(3), true)];
        let ready = Ready::new(&ReadyDiscipline::FIFO, 3, true, &four);
        assert_eq!((0..4).map(|i| ready.home(i)).collect::<Vec<_>>(), [Some(0), Some(1), Some(2), Some(0)]);
    }

    #[test]
    fn segments_cut_a_graph_with_a_long_path_into_equal_contiguous_pieces() {
        // A pipeline of `n` tasks, 0 → 1 → … → n − 1, and one in front of it: `offset` more tasks,
        // each a one-task query (a source with no consumer).
        let pipeline = |n: usize, offset: usize| -> Vec<Vec<usize>> {
            (0..offset)
                .map(|_| vec![])
                .chain((0..n).map(|i| if i + 1 < n { vec![offset + i + 1] } else { vec![] }))
                .collect()
        };
        // 16 tasks on 2 workers: halves in order; 24 on 3: thirds.
        let cut = segments(&pipeline(16, 0), 2).unwrap();
        assert_eq!(cut, [[0; 8], [1; 8]].concat());
        assert_eq!(segments(&pipeline(24, 0), 3).unwrap(), [[0; 8], [1; 8], [2; 8]].concat());
        // Fewer than 8 tasks per worker on the longest path: not cut, however many tasks.
        assert_eq!(segments(&pipeline(15, 0), 2), None);
        assert_eq!(segments(&pipeline(15, 100), 2), None);
        let many_short: Vec<Vec<usize>> = (0..100).map(|i| if i % 5 < 4 { vec![i + 1] } else { vec![] }).collect();
        assert_eq!(segments(&many_short, 2), None, "20 queries of 5 tasks");
        // Two pipelines of 16 whose tasks were declared interleaved (sources 0 and 1, then 2 and
        // 3, …): each pipeline is one piece.
        let two: Vec<Vec<usize>> = (0..32).map(|i| if i < 30 { vec![i + 2] } else { vec![] }).collect();
        let cut = segments(&two, 2).unwrap();
        assert!((0..32).all(|i| cut[i] == i % 2), "{cut:?}");
        // A join (a → j ← b) behind two 8-task chains, then 8 more: the inputs before it, its
        // output after it.
        let mut join: Vec<Vec<usize>> = (0..16).map(|i| if i % 8 < 7 { vec![i + 1] } else { vec![16] }).collect();
        join.extend((16..24).map(|i| if i < 23 { vec![i + 1] } else { vec![] }));
        let cut = segments(&join, 2).unwrap();
        assert_eq!(cut, [[0; 12], [1; 12]].concat());
        // One worker: one piece (a long path cut into one).
        assert_eq!(segments(&pipeline(16, 0), 1).unwrap(), [0; 16]);
    }

    #[test]
    fn a_worker_carries_a_batch_on_through_the_segment_of_the_task_it_runs() {
        // Two segments: tasks 0–2 homed on worker 0, 3–5 on worker 1.
        let tasks: Vec<(Option<usize>, bool)> = (0..6).map(|i| (Some(i / 3), i == 0)).collect();
        let ready = Ready::new(&ReadyDiscipline::FIFO, 2, true, &tasks);
        set_worker(0);
        // In the turn of its own task 2, worker 0 readies task 3 (worker 1's): to worker 1's
        // queue, not worker 0's next.
        ready.in_turn_of(2);
        ready.push(3, 0);
        ready.in_turn(false);
        assert_eq!(ready.take_next(0), None);
        assert!(!ready.homes[1].is_empty());
        // Worker 0, with nothing of its own, takes it; in its turn it readies task 4 (also worker
        // 1's): it carries on with it as its next instead of waking worker 1 for it.
        assert_eq!(ready.pop(0, 0), Some(3));
        ready.in_turn_of(3);
        ready.push(4, 0);
        ready.in_turn(false);
        assert!(ready.homes[1].is_empty());
        assert_eq!(ready.take_next(0), Some(4));
        // Outside any task's turn (firing timers), a task of another home goes to that home.
        ready.in_turn(true);
        ready.push(5, 0);
        ready.in_turn(false);
        assert_eq!((ready.take_next(0), ready.pop(1, 0)), (None, Some(5)));
        assert!(ready.is_empty());
    }

    #[test]
    fn an_operator_readied_in_a_turn_while_nothing_waits_is_the_workers_next() {
        let tasks = [(None, false); 4];
        let ready = Ready::new(&ReadyDiscipline::FIFO, 2, true, &tasks);
        set_worker(0);
        let readied_in_a_turn = |ids: &[usize]| {
            ready.in_turn(true);
            for &id in ids {
                ready.push(id, 0);
            }
            ready.in_turn(false);
        };
        readied_in_a_turn(&[1]);
        assert!(!ready.is_empty(), "a worker's next counts as waiting");
        assert!(ready.shared.is_empty(), "not through the queue");
        assert_eq!((ready.take_next(0), ready.take_next(0)), (Some(1), None));
        // Two in one turn: the newer next, the earlier on the queue.
        readied_in_a_turn(&[2, 3]);
        assert_eq!((ready.take_next(0), ready.pop(0, 0), ready.take_next(0)), (Some(3), Some(2), None));
        // With a task queued, the queue: its order holds.
        ready.enqueue(0, 0);
        readied_in_a_turn(&[1]);
        assert_eq!((ready.take_next(0), ready.pop(0, 1), ready.pop(0, 2)), (None, Some(0), Some(1)));
        // Readied outside a turn (another thread's notification): the queue.
        ready.push(2, 0);
        assert_eq!((ready.take_next(0), ready.pop(0, 3)), (None, Some(2)));
        // A worker that parks hands it back to the queue.
        readied_in_a_turn(&[3]);
        ready.give_up_next(0);
        assert_eq!((ready.take_next(0), ready.pop(1, 0)), (None, Some(3)));
        // Another worker with nothing else to do takes it; it is not taken twice.
        readied_in_a_turn(&[1]);
        assert_eq!((ready.pop(1, 1), ready.take_next(0)), (Some(1), None));
        assert!(ready.is_empty());
        // Under a priority discipline every task goes through the queue.
        let policy = ReadyDiscipline { levels: 16, ..ReadyDiscipline::FIFO };
        let ready = Ready::new(&policy, 2, true, &tasks);
        ready.in_turn(true);
        ready.push(0, 3);
        ready.in_turn(false);
        assert_eq!((ready.take_next(0), ready.pop(0, 0)), (None, Some(0)));
    }

    #[test]
    fn a_next_taken_by_its_worker_and_another_at_once_runs_once_at_a_time_and_is_never_lost() {
        // Worker 0 readies tasks in its turns and takes each as its next, while worker 1, idle,
        // takes whatever it finds (another's next included): a task runs on one worker at a time
        // (the claim of its state word), every readying leads to a run, and none is left queued
        // with no entry to find it by, however the two interleave.
        use crate::sync::TaskState;
        use std::sync::atomic::AtomicU64;
        const TASKS: usize = 8;
        const ROUNDS: usize = 200_000;
        let ready = Ready::new(&ReadyDiscipline::FIFO, 2, true, &[(None, false); TASKS]);
        let states: Vec<TaskState> = (0..TASKS).map(|_| TaskState::queued()).collect();
        for s in &states {
            assert!(s.claim() && !s.release(), "idle to begin with");
        }
        let running: Vec<AtomicBool> = (0..TASKS).map(|_| AtomicBool::new(false)).collect();
        let runs = AtomicU64::new(0);
        // As a pool worker runs a task it took: claimed, or dropped as a stale entry; queued
        // again when it was notified while it ran.
        let run = |id: usize| {
            if states[id].claim() {
                assert!(!running[id].swap(true, Ordering::SeqCst), "task {id} runs on two workers at once");
                runs.fetch_add(1, Ordering::SeqCst);
                running[id].store(false, Ordering::SeqCst);
                if states[id].release() {
                    ready.enqueue(id, 0);
                }
            }
        };
        let done = AtomicBool::new(false);
        let readied = std::thread::scope(|scope| {
            scope.spawn(|| {
                set_worker(1);
                let mut turn = 0;
                while !done.load(Ordering::SeqCst) {
                    if let Some(id) = ready.pop(1, turn) {
                        run(id);
                    }
                    turn += 1;
                }
            });
            set_worker(0);
            let mut readied = 0u64;
            for round in 0..ROUNDS {
                let id = round % TASKS;
                ready.in_turn(true);
                if states[id].notify() {
                    ready.push(id, 0);
                    readied += 1;
                }
                ready.in_turn(false);
                if round % 3 != 0 {
                    if let Some(next) = ready.take_next(0) {
                        run(next);
                    }
                }
            }
            done.store(true, Ordering::SeqCst);
            readied
        });
        // What is left waits on a queue or as a next.
        while let Some(id) = ready.take_next(0).or_else(|| ready.pop(0, 0)) {
            run(id);
        }
        assert!(runs.load(Ordering::SeqCst) >= readied, "every readying ran");
        for (id, s) in states.iter().enumerate() {
            assert!(s.notify(), "task {id} is left queued with no entry");
        }
    }
}

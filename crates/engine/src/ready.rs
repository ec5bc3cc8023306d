//! The ready queue of the pool threading models: which queued operator a worker takes next, and
//! how long it keeps it (its turn). Clock-free and thread-agnostic, so that the engine's pools
//! run it over lock-free FIFOs and the simulator (`moirai-sim`) over plain ones — one discipline,
//! not a copy.
//!
//! One FIFO per priority level (one level for `dynamic`, `elastic` and `fused`,
//! [`PRIORITY_LEVELS`] for `policy`); a worker takes from the highest level that has an operator,
//! the one that waited longest there (IBM's least-recently-run order). With a source interval K
//! (STAFiLOS' QBS), sources wait in a FIFO of their own: a worker takes a source first on every
//! K-th turn it starts, and otherwise only when no other operator is ready.
//!
//! ```
//! use moirai_engine::ready::{LocalFifo, ReadyDiscipline, ReadyQueue};
//! use moirai_engine::Threading;
//!
//! let discipline = ReadyDiscipline::of(&"policy:qs:1".parse::<Threading>().unwrap()).unwrap();
//! let ready: ReadyQueue<LocalFifo> = ReadyQueue::new(&discipline, vec![false; 3]);
//! ready.push(0, 3);
//! ready.push(1, 12);
//! ready.push(2, 3);
//! assert_eq!((ready.pop(0), ready.pop(1), ready.pop(2)), (Some(1), Some(0), Some(2)));
//! ```

use std::cell::RefCell;
use std::collections::VecDeque;
use std::time::Duration;

use crossbeam_queue::SegQueue;

use crate::threading::Threading;

/// Priority levels of the policy executor's ready queue.
pub const PRIORITY_LEVELS: usize = 16;

/// Steps a worker takes on an operator before it lets go of it under `dynamic`, `elastic` and
/// `fused` (fewer: fairer; more: warmer caches and less queueing).
pub const STEPS_PER_TURN: usize = 8;

/// How long a worker keeps an operator before it lets go of it: at most `steps` steps (a step
/// handles one input batch), and at most `quantum` of time when one is set.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Turn {
    /// Most steps per turn.
    pub steps: usize,
    /// Longest turn, when set.
    pub quantum: Option<Duration>,
}

impl Turn {
    /// When a turn that started at `start_ns` ends by its quantum (none: only by its steps), on
    /// the caller's clock.
    pub fn ends_at(&self, start_ns: u64) -> Option<u64> {
        self.quantum.map(|q| start_ns.saturating_add(q.as_nanos() as u64))
    }
}

/// The rules of a pool's ready queue and turns, as its threading model sets them (plain data).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct ReadyDiscipline {
    /// Priority levels (1: one FIFO).
    pub levels: usize,
    /// How long a worker keeps an operator.
    pub turn: Turn,
    /// Take a source every this many turns of a worker, if set (STAFiLOS' QBS).
    pub source_every: Option<u32>,
}

impl ReadyDiscipline {
    /// One FIFO, turns of [`STEPS_PER_TURN`] steps: `dynamic`, `elastic` and `fused`.
    pub const FIFO: ReadyDiscipline =
        ReadyDiscipline { levels: 1, turn: Turn { steps: STEPS_PER_TURN, quantum: None }, source_every: None };

    /// The discipline of a pool threading model (none for `dedicated`, which has no pool).
    pub fn of(threading: &Threading) -> Option<ReadyDiscipline> {
        match threading {
            Threading::Dedicated => None,
            Threading::Dynamic { .. } | Threading::Elastic(_) | Threading::Fused { .. } => Some(ReadyDiscipline::FIFO),
            Threading::Policy(p) => Some(ReadyDiscipline {
                levels: PRIORITY_LEVELS,
                turn: Turn { steps: p.batch, quantum: p.quantum },
                source_every: p.source_every,
            }),
        }
    }
}

/// A FIFO of operator ids that a ready queue is made of.
pub trait Fifo: Default {
    /// Appends `id`.
    fn push(&self, id: usize);
    /// Takes the oldest id.
    fn pop(&self) -> Option<usize>;
    /// True when empty.
    fn is_empty(&self) -> bool;
}

/// The engine's: lock-free, for workers on many threads.
impl Fifo for SegQueue<usize> {
    fn push(&self, id: usize) {
        SegQueue::push(self, id)
    }
    fn pop(&self) -> Option<usize> {
        SegQueue::pop(self)
    }
    fn is_empty(&self) -> bool {
        SegQueue::is_empty(self)
    }
}

/// A FIFO for one thread (the simulator's).
#[derive(Default)]
pub struct LocalFifo(RefCell<VecDeque<usize>>);

impl Fifo for LocalFifo {
    fn push(&self, id: usize) {
        self.0.borrow_mut().push_back(id)
    }
    fn pop(&self) -> Option<usize> {
        self.0.borrow_mut().pop_front()
    }
    fn is_empty(&self) -> bool {
        self.0.borrow().is_empty()
    }
}

/// A pool's ready queue (see the module docs).
pub struct ReadyQueue<F: Fifo = SegQueue<usize>> {
    levels: Vec<F>,
    /// With a source interval: K, the sources' own FIFO, and which operators are sources.
    sources: Option<(u64, F, Vec<bool>)>,
}

impl<F: Fifo> ReadyQueue<F> {
    /// An empty queue by `discipline`; `is_source` by operator id (used with a source interval).
    pub fn new(discipline: &ReadyDiscipline, is_source: Vec<bool>) -> ReadyQueue<F> {
        ReadyQueue {
            levels: (0..discipline.levels.max(1)).map(|_| F::default()).collect(),
            sources: discipline.source_every.map(|every| (u64::from(every.max(1)), F::default(), is_source)),
        }
    }

    /// Queues operator `id` at priority `level` (capped at the highest level), or in the
    /// sources' FIFO with a source interval.
    pub fn push(&self, id: usize, level: u8) {
        match &self.sources {
            Some((_, sources, is_source)) if is_source.get(id) == Some(&true) => sources.push(id),
            _ => self.levels[usize::from(level).min(self.levels.len() - 1)].push(id),
        }
    }

    /// The operator that waited longest at the highest non-empty level; with a source interval,
    /// a source first when `turn` (the worker's count of turns started) is a multiple of it.
    pub fn pop(&self, turn: u64) -> Option<usize> {
        let levels = || self.levels.iter().rev().find_map(Fifo::pop);
        match &self.sources {
            None => levels(),
            Some((every, sources, _)) if turn % every == 0 => sources.pop().or_else(levels),
            Some((_, sources, _)) => levels().or_else(|| sources.pop()),
        }
    }

    /// True when no operator waits.
    pub fn is_empty(&self) -> bool {
        self.levels.iter().all(Fifo::is_empty) && self.sources.as_ref().is_none_or(|(_, s, _)| s.is_empty())
    }
}

impl ReadyDiscipline {
    /// Whether an operator that a worker readies during its turn, while nothing else is queued,
    /// waits as that worker's next instead of on the queue ([`wakes_a_worker`]): only with one
    /// level and no source interval, where no operator may come before it by priority.
    pub fn keeps_next(&self) -> bool {
        self.levels == 1 && self.source_every.is_none()
    }
}

/// Whether queueing an operator must wake an idle worker: not when a worker readies it during
/// its own turn while nothing else waits — that worker takes it itself when its turn ends, so a
/// tuple passing down a pipeline at a low rate costs no wake-up and no context switch per hop (at
/// most one operator waits for the end of a turn without a worker woken for it).
pub fn wakes_a_worker(in_own_turn: bool, queue_was_empty: bool) -> bool {
    !in_own_turn || !queue_was_empty
}

#[cfg(test)]
mod tests {
    use super::*;

    fn queue(discipline: ReadyDiscipline, sources: &[bool]) -> ReadyQueue<LocalFifo> {
        ReadyQueue::new(&discipline, sources.to_vec())
    }

    #[test]
    fn fifo_within_a_level_highest_level_first() {
        let q = queue(ReadyDiscipline { levels: 4, ..ReadyDiscipline::FIFO }, &[]);
        for (id, level) in [(0, 1), (1, 3), (2, 1), (3, 200)] {
            q.push(id, level);
        }
        let order: Vec<_> = std::iter::from_fn(|| q.pop(0)).collect();
        assert_eq!(order, [1, 3, 0, 2], "level 200 is capped at the top level, after 1 which came first");
        assert!(q.is_empty());
    }

    #[test]
    fn a_source_interval_takes_a_source_every_kth_turn() {
        let q = queue(ReadyDiscipline { levels: 2, source_every: Some(3), ..ReadyDiscipline::FIFO }, &[true, false]);
        q.push(0, 0);
        q.push(1, 1);
        assert_eq!(q.pop(1), Some(1), "not a source's turn: the others first");
        q.push(1, 1);
        assert_eq!(q.pop(3), Some(0), "turn 3: the source first");
        assert_eq!(q.pop(4), Some(1));
        assert!(q.is_empty());
    }

    #[test]
    fn turns_end_by_their_quantum_on_the_callers_clock() {
        assert_eq!(Turn { steps: 8, quantum: None }.ends_at(100), None);
        assert_eq!(Turn { steps: 8, quantum: Some(Duration::from_micros(1)) }.ends_at(100), Some(1100));
        assert!(wakes_a_worker(false, true) && wakes_a_worker(true, false) && !wakes_a_worker(true, true));
    }
}

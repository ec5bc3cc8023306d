//! Prefetching ahead along a pipeline: a pool worker that starts a turn of an operator asks the
//! CPU to bring in the memory of the operator two hops downstream.
//!
//! At a low rate a tuple crosses a long pipeline on one worker, one operator a turn (the
//! worker's next, [`super::affinity`]), and every operator it reaches has been out of the caches
//! since the last tuple: with 10 000 operators each turn found ~25 cache lines of its operator's
//! separate allocations (slot, state word, wake hook, signal, counters, task, ports, chain,
//! router, channels) missing, one after another, each load waiting for the pointer the previous
//! one brought in. Their addresses do not change while the pool runs, so they are collected once
//! at its start ([`crate::task::Task::touched`]), and a turn issues the hints for the operator
//! that runs two turns later, whose lines then arrive while this turn and the next one run.
//! Measured on 10 000 operators at 100 tuples/s under `dynamic:2`, against the same build
//! without hints (`docs/results/2026-11-28/prefetch/`): two hops ahead 0.72× the CPU, one and two
//! hops 0.75× (the nearer hints come too late: their lines are needed within the same turn),
//! three hops 0.73–0.81×.
//!
//! Hints are only issued where they can help:
//! - where the operators' memory does not fit a core's L2 cache (otherwise it stays there between
//!   tuples and a hint only costs; no gain measured on 100 and 1 000 operators);
//! - along a straight pipeline: where an operator sends to several consumers, or its consumer
//!   does, which one runs next depends on the data;
//! - within one worker's operators: an operator that another worker runs has its memory written
//!   on the other core, whose next write would have to take each hinted line back.

use std::ops::Range;

/// Where each operator's hints are in one flat list.
pub(crate) struct Ahead {
    addresses: Vec<usize>,
    ranges: Vec<Range<usize>>,
}

impl Ahead {
    /// The hints of every operator: for operator `i` whose one consumer `d` has one consumer
    /// `dd`, all three run by one worker (`one_worker(i, d)` and `one_worker(d, dd)`), the
    /// addresses `dd`'s turn touches (`touched[dd]`); none otherwise. `None` when no operator
    /// gets hints, or the lines all operators touch fit in `cache` bytes (a core's L2: they stay
    /// in it between tuples). `downstream[i]` lists the operators of the pool that `i` sends to.
    pub(crate) fn plan(
        downstream: &[Vec<usize>],
        touched: &[Vec<usize>],
        one_worker: impl Fn(usize, usize) -> bool,
        cache: usize,
    ) -> Option<Ahead> {
        if 64 * touched.iter().map(Vec::len).sum::<usize>() <= cache {
            return None;
        }
        let mut addresses = Vec::new();
        let ranges = (0..downstream.len())
            .map(|i| {
                let start = addresses.len();
                if let [d] = downstream[i][..] {
                    if let [dd] = downstream[d][..] {
                        if one_worker(i, d) && one_worker(d, dd) {
                            addresses.extend(&touched[dd]);
                        }
                    }
                }
                start..addresses.len()
            })
            .collect();
        (!addresses.is_empty()).then_some(Ahead { addresses, ranges })
    }

    /// Asks the CPU to bring in what operator `i`'s hints name. Kept out of line: the worker's
    /// loop it is called from stays as small as it was without hints.
    #[inline(never)]
    pub(crate) fn prefetch(&self, i: usize) {
        for &a in &self.addresses[self.ranges[i].clone()] {
            moirai_os::cache::prefetch(a);
        }
    }

    #[cfg(test)]
    fn of(&self, i: usize) -> &[usize] {
        &self.addresses[self.ranges[i].clone()]
    }
}

/// Adds the cache lines that `size` bytes at `address` span to `at`.
pub(crate) fn lines(at: &mut Vec<usize>, address: usize, size: usize) {
    let (first, last) = (address / 64, (address + size.max(1) - 1) / 64);
    at.extend((first..=last).map(|line| line * 64));
}

/// Adds the cache lines of what `v` holds on the heap (nothing for a vector that holds no
/// allocation).
pub(crate) fn heap_lines<T>(at: &mut Vec<usize>, v: &Vec<T>) {
    if v.capacity() > 0 && size_of::<T>() > 0 {
        lines(at, v.as_ptr() as usize, v.len().max(1) * size_of::<T>());
    }
}

/// Adds the cache lines of what `v` holds on the heap once it spilled there (inline, its items
/// are part of what holds `v`).
pub(crate) fn spilled_lines<A: smallvec::Array>(at: &mut Vec<usize>, v: &smallvec::SmallVec<A>) {
    if v.spilled() && size_of::<A::Item>() > 0 {
        lines(at, v.as_ptr() as usize, v.len().max(1) * size_of::<A::Item>());
    }
}

/// Adds the cache lines of a boxed value.
pub(crate) fn boxed_lines<T: ?Sized>(at: &mut Vec<usize>, b: &T) {
    lines(at, moirai_os::cache::address_of(b), size_of_val(b));
}

/// Keeps one address per cache line, in first-seen order.
pub(crate) fn one_per_line(at: &mut Vec<usize>) {
    let mut seen = std::collections::HashSet::new();
    at.retain(|a| seen.insert(a / 64));
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn an_operator_is_hinted_the_memory_two_hops_down_a_straight_pipeline() {
        // 0 → 1 → 2 → 3, and 3 fans out to 4 and 5; 4 → 6.
        let downstream = vec![vec![1], vec![2], vec![3], vec![4, 5], vec![6], vec![], vec![]];
        let touched: Vec<Vec<usize>> = (0..7).map(|i| vec![1000 * i, 1000 * i + 64]).collect();
        let ahead = Ahead::plan(&downstream, &touched, |_, _| true, 0).unwrap();
        assert_eq!(ahead.of(0), &[2000, 2064]);
        assert_eq!(ahead.of(1), &[3000, 3064]);
        assert!(ahead.of(2).is_empty(), "its consumer sends to two: which runs next is not known");
        assert!(ahead.of(3).is_empty(), "it sends to two");
        assert!(ahead.of(4).is_empty() && ahead.of(5).is_empty() && ahead.of(6).is_empty(), "nothing two hops down");
        // Hints are only hints: any address, even one never mapped, is harmless.
        (0..7).for_each(|i| ahead.prefetch(i));
    }

    #[test]
    fn no_operator_is_hinted_memory_that_another_worker_runs() {
        // 0 → 1 → 2 → 3 → 4, cut in two segments: 0, 1, 2 on worker 0 and 3, 4 on worker 1.
        let downstream = vec![vec![1], vec![2], vec![3], vec![4], vec![]];
        let touched: Vec<Vec<usize>> = (0..5).map(|i| vec![1000 * i]).collect();
        let home = [0, 0, 0, 1, 1];
        let ahead = Ahead::plan(&downstream, &touched, |a, b| home[a] == home[b], 0).unwrap();
        assert_eq!(ahead.of(0), &[2000]);
        assert!(ahead.of(1).is_empty(), "3 is the other worker's");
        assert!(ahead.of(2).is_empty(), "so are 3 and 4");
    }

    #[test]
    fn operators_whose_memory_fits_the_cache_get_no_hints() {
        let downstream = vec![vec![1], vec![2], vec![]];
        let touched: Vec<Vec<usize>> = (0..3).map(|i| vec![1000 * i, 1000 * i + 64]).collect();
        // 6 lines: 384 bytes.
        assert!(Ahead::plan(&downstream, &touched, |_, _| true, 384).is_none());
        assert_eq!(Ahead::plan(&downstream, &touched, |_, _| true, 383).unwrap().of(0), &[2000, 2064]);
        assert!(Ahead::plan(&downstream, &touched, |_, _| false, 0).is_none(), "nobody is hinted");
    }

    #[test]
    fn lines_cover_the_bytes_once_each() {
        let mut at = Vec::new();
        lines(&mut at, 4096, 1);
        lines(&mut at, 8192, 129);
        assert_eq!(at, [4096, 8192, 8256, 8320]);
        // 16 bytes across a line's end: both lines.
        lines(&mut at, 12344, 16);
        assert_eq!(&at[4..], [12288, 12352]);
        at.extend([4100, 8200, 16384]);
        one_per_line(&mut at);
        assert_eq!(at, [4096, 8192, 8256, 8320, 12288, 12352, 16384]);
    }
}

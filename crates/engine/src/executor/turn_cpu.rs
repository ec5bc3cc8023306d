//! How a pool worker charges its CPU time to the operators it runs, without a system call per
//! turn.
//!
//! Linux answers a thread's CPU clock (`CLOCK_THREAD_CPUTIME_ID`) only through a system call,
//! never from the vDSO; reading it before and after every turn cost two system calls per
//! operator per tuple at low rates (14 per tuple for a 7-operator pipeline), about a fifth of the
//! engine's CPU at 1 000 tuples/s. A worker instead times each turn on its turn clock (the
//! monotonic clock, or the CPU's counter converted to it: [`super::turn_clock`]; no system call;
//! one reading per turn, at its end), and reads its CPU clock once per *settlement*: after
//! [`SETTLE_TURNS`] turns, after [`SETTLE_NS`] of wall time, before a sleep that may be long, and
//! when it ends. The CPU time since the last settlement is shared among the turns run since, in
//! proportion to their wall time. The total is exact — every nanosecond the worker spent, its
//! bookkeeping between turns and its wake-ups included, is charged to some operator — and an
//! operator's share is exact whenever the turns of a settlement ran uninterrupted.

use std::sync::atomic::Ordering;

use super::turn_clock::TurnClock;
use crate::metrics::{OperatorMetrics, POOL_CPU_SLOTS};

/// Most turns between two readings of the CPU clock. A reading is a system call (~530 ns here);
/// on 10 000 operators at 100 tuples/s, reading it every 256 turns instead of every 64 took
/// 0.89× the CPU (10 pairs), every 1 024 turns 0.98× of 256 (8 pairs), within the noise
/// (`docs/results/2026-11-29/fewer-lines/`).
pub(super) const SETTLE_TURNS: usize = 256;

/// Longest wall time between two readings while turns are pending, so that `/metrics` lags by at
/// most this much (10 ms).
pub(super) const SETTLE_NS: u64 = 10_000_000;

/// Where a worker charges CPU time in an operator's `pool_cpu` slots.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(super) struct CpuSlot {
    index: usize,
    /// No other worker charges this slot: a load and a store suffice.
    own: bool,
}

impl CpuSlot {
    /// Worker `worker` of a pool of `workers`.
    pub(super) fn of(worker: usize, workers: usize) -> CpuSlot {
        CpuSlot { index: worker % POOL_CPU_SLOTS, own: workers <= POOL_CPU_SLOTS }
    }

    fn charge(self, metrics: &OperatorMetrics, ns: u64) {
        let slot = &metrics.pool_cpu[self.index];
        if self.own {
            slot.store(slot.load(Ordering::Relaxed).wrapping_add(ns), Ordering::Relaxed);
        } else {
            slot.fetch_add(ns, Ordering::Relaxed);
        }
    }
}

/// A worker's turns not yet charged, and its CPU clock when it last charged them.
pub(super) struct TurnCpu {
    /// (operator, wall time of its turn in ns) since the last settlement.
    pending: Vec<(usize, u64)>,
    cpu_mark: u64,
    settled_at: u64,
    /// Where the next turn's wall time starts: the end of the last turn, or when the worker last
    /// looked for work ([`TurnCpu::mark`]), so that one clock reading per turn suffices.
    wall_mark: u64,
    read: fn() -> u64,
    /// What a turn's end is read from.
    clock: TurnClock,
    slot: CpuSlot,
}

impl TurnCpu {
    /// Starts metering the calling thread now, its turns timed on a [`TurnClock`] and charged
    /// in `slot`.
    pub(super) fn new(slot: CpuSlot) -> TurnCpu {
        let mut clock = TurnClock::new();
        let now = clock.exact();
        TurnCpu::with_clock(now, moirai_os::proc::current_thread_cpu_ns, clock, slot)
    }

    fn with_clock(now_ns: u64, read: fn() -> u64, clock: TurnClock, slot: CpuSlot) -> TurnCpu {
        TurnCpu {
            pending: Vec::with_capacity(SETTLE_TURNS),
            cpu_mark: read(),
            settled_at: now_ns,
            wall_mark: now_ns,
            read,
            clock,
            slot,
        }
    }

    /// Now, read exactly (from the monotonic clock): for a worker back from a sleep.
    pub(super) fn read_clock(&mut self) -> u64 {
        self.clock.exact()
    }

    /// Records a turn of `op` ending now, on the turn clock; see [`TurnCpu::record`].
    #[inline]
    pub(super) fn end_turn<'a>(&mut self, op: usize, metrics: impl Fn(usize) -> &'a OperatorMetrics) {
        let now = self.clock.now();
        self.record(op, now, metrics);
    }

    /// The worker looks for work at `now_ns` (after a sleep, or between turns): the next turn's
    /// wall time counts from here.
    pub(super) fn mark(&mut self, now_ns: u64) {
        self.wall_mark = now_ns;
    }

    /// The monotonic clock's last reading given: the end of the last turn or the last mark.
    pub(super) fn last_reading(&self) -> u64 {
        self.wall_mark
    }

    /// Records a turn of `op` ending at `now_ns` (its wall time counts from the last mark or turn
    /// end); settles when enough turns or time have gone by, charging through `metrics(op)`.
    pub(super) fn record<'a>(&mut self, op: usize, now_ns: u64, metrics: impl Fn(usize) -> &'a OperatorMetrics) {
        let wall_ns = now_ns.saturating_sub(self.wall_mark);
        self.wall_mark = now_ns;
        match self.pending.last_mut() {
            // The same operator again (a requeued turn taken at once): one entry.
            Some((last, wall)) if *last == op => *wall += wall_ns,
            _ => self.pending.push((op, wall_ns)),
        }
        if self.pending.len() >= SETTLE_TURNS || now_ns.saturating_sub(self.settled_at) >= SETTLE_NS {
            self.settle(now_ns, metrics);
        }
    }

    /// True when turns wait to be charged.
    pub(super) fn is_pending(&self) -> bool {
        !self.pending.is_empty()
    }

    /// Reads the CPU clock and charges the CPU time since the last settlement to the pending
    /// turns, in proportion to their wall time (evenly if the clock saw none).
    pub(super) fn settle<'a>(&mut self, now_ns: u64, metrics: impl Fn(usize) -> &'a OperatorMetrics) {
        let cpu = (self.read)();
        let spent = cpu.saturating_sub(self.cpu_mark);
        self.cpu_mark = cpu;
        self.settled_at = now_ns;
        for (op, share) in shares(spent, &self.pending) {
            self.slot.charge(metrics(op), share);
        }
        self.pending.clear();
    }
}

/// Splits `spent` among `turns` in proportion to their wall time (evenly when all are zero); the
/// shares add up to `spent` exactly (the last takes the rounding). Lazily: a settlement allocates
/// nothing. One division per settlement, not per turn: each share is its wall time times
/// `spent / total` in 32.32 fixed point (a 128-bit division, a library call, per turn cost ~12
/// instructions of every pool turn at a low rate); a share is then at most 1 ns below its exact
/// floor.
fn shares(spent: u64, turns: &[(usize, u64)]) -> impl Iterator<Item = (usize, u64)> + '_ {
    let total: u128 = turns.iter().map(|&(_, w)| u128::from(w)).sum();
    let ratio = (u128::from(spent) << 32).checked_div(total);
    let mut left = spent;
    let n = turns.len();
    turns.iter().enumerate().map(move |(i, &(op, wall))| {
        let share = match ratio {
            _ if i + 1 == n => left,
            Some(ratio) => ((u128::from(wall) * ratio) >> 32) as u64,
            None => spent / n as u64,
        };
        let share = share.min(left);
        left -= share;
        (op, share)
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::atomic::AtomicU64;

    #[test]
    fn shares_follow_wall_time_and_add_up() {
        let shares = |spent, turns| shares(spent, turns).collect::<Vec<_>>();
        assert_eq!(shares(1_000, &[(0, 100), (1, 300)]), [(0, 250), (1, 750)]);
        assert_eq!(shares(10, &[(0, 1), (1, 1), (2, 1)]), [(0, 3), (1, 3), (2, 4)]);
        assert_eq!(shares(9, &[(4, 0), (5, 0), (6, 0)]), [(4, 3), (5, 3), (6, 3)]);
        assert_eq!(shares(0, &[(0, 5)]), [(0, 0)]);
        assert!(shares(7, &[]).is_empty());
        // Uneven walls, a settlement of 10 ms over 256 turns: each share but the last is its
        // exact floor or 1 ns below, and they add up.
        let turns: Vec<(usize, u64)> = (0..256).map(|i| (i, 1 + (i as u64 * 7_919) % 90_001)).collect();
        let (spent, total) = (9_999_991_u64, turns.iter().map(|t| t.1).sum::<u64>());
        let got = shares(spent, &turns);
        for (&(_, wall), &(_, share)) in turns.iter().zip(&got).take(255) {
            let exact = (u128::from(spent) * u128::from(wall) / u128::from(total)) as u64;
            assert!(share == exact || share + 1 == exact, "{share} against {exact}");
        }
        assert_eq!(got.iter().map(|s| s.1).sum::<u64>(), spent);
    }

    static CLOCK: AtomicU64 = AtomicU64::new(0);

    fn fake_cpu() -> u64 {
        CLOCK.load(Ordering::SeqCst)
    }

    #[test]
    fn turns_are_charged_once_per_settlement_and_every_nanosecond_is_charged() {
        let ops: Vec<OperatorMetrics> = (0..3).map(|_| OperatorMetrics::default()).collect();
        let m = |i: usize| &ops[i];
        CLOCK.store(1_000, Ordering::SeqCst);
        let mut meter =
            TurnCpu::with_clock(0, fake_cpu, TurnClock::with(None, crate::tuple::now_ns), CpuSlot::of(0, 2));
        // Two turns of 0 (300 and 100 ns) and one of 1 (400 ns): nothing is read or charged yet.
        meter.mark(700);
        meter.record(0, 1_000, m);
        meter.mark(1_900);
        meter.record(0, 2_000, m);
        meter.record(1, 2_400, m);
        assert!(meter.is_pending());
        assert_eq!(ops[0].pool_cpu_ns(), 0);
        // 1 600 ns of CPU went by (including the worker's own time between turns): shared 1:1.
        CLOCK.store(2_600, Ordering::SeqCst);
        meter.settle(4_000, m);
        assert!(!meter.is_pending());
        assert_eq!(ops[0].pool_cpu_ns(), 800);
        assert_eq!(ops[1].pool_cpu_ns(), 800);
        // Past the wall-time bound, a turn settles at once.
        CLOCK.store(3_600, Ordering::SeqCst);
        meter.record(2, 4_000 + SETTLE_NS, m);
        assert!(!meter.is_pending());
        assert_eq!(ops[2].pool_cpu_ns(), 1_000);
        // Past the turn bound too.
        for i in 0..SETTLE_TURNS {
            meter.record(i % 2, 5_000 + SETTLE_NS + i as u64, m);
        }
        assert!(!meter.is_pending());
    }

    #[test]
    fn workers_of_a_small_pool_charge_slots_of_their_own_and_those_of_a_large_pool_share_them() {
        let m = OperatorMetrics::default();
        let (first, second) = (CpuSlot::of(0, 2), CpuSlot::of(1, 2));
        assert!(first.own && second.own && first.index != second.index);
        first.charge(&m, 5);
        second.charge(&m, 7);
        assert_eq!(m.pool_cpu_ns(), 12);
        // Four workers: two per slot, adding atomically, so that no charge is lost.
        let shared: Vec<CpuSlot> = (0..4).map(|w| CpuSlot::of(w, 4)).collect();
        assert!(shared.iter().all(|slot| !slot.own));
        std::thread::scope(|s| {
            for &slot in &shared {
                let m = &m;
                s.spawn(move || (0..10_000).for_each(|_| slot.charge(m, 1)));
            }
        });
        assert_eq!(m.pool_cpu_ns(), 12 + 40_000);
    }
}

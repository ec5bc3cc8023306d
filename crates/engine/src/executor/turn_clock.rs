//! The clock a pool worker reads at the end of every turn, from the CPU's time-stamp counter.
//!
//! A worker reads the engine clock once per turn: to share its CPU time among its turns
//! ([`super::turn_cpu`]), to stamp the batches of the next turn's first step, and to fire due
//! timers. At a low rate a turn is a few hundred nanoseconds, and the monotonic clock (~27 ns
//! here, from the vDSO) is a tenth of it; the time-stamp counter costs ~10 ns. Where the kernel
//! itself keeps time by the counter ([`moirai_os::ticks::reliable`]), a worker converts counter
//! readings into engine nanoseconds by a scale it measured against the monotonic clock over at
//! least [`SCALE_SPAN_NS`], from an *anchor*: a reading of both taken back to back (one whose two
//! counter readings lie apart, the thread interrupted between them, converts nothing). It reads the
//! monotonic clock again (a new anchor) every [`ANCHOR_READINGS`] readings and once
//! [`ANCHOR_SPAN_NS`] have passed since the anchor, so that a reading strays from the monotonic
//! clock by at most the scale's error over that span (well under a microsecond, even while NTP
//! slews the monotonic clock). Elsewhere, and until the scale is measured, every reading is the
//! monotonic clock's.

use crate::tuple::now_ns;

/// Readings between two anchors.
pub(super) const ANCHOR_READINGS: u32 = 64;

/// Longest span a reading is converted over before a new anchor is taken (1 ms).
pub(super) const ANCHOR_SPAN_NS: u64 = 1_000_000;

/// Shortest span the scale is measured over (1 ms: two anchors' own uncertainty, tens of
/// nanoseconds, is then a few parts in 10⁵ of it).
pub(super) const SCALE_SPAN_NS: u64 = 1_000_000;

/// Most counter ticks an anchor's two counter readings may lie apart (250 ns at 2 GHz; they lie
/// ~40 ns apart here): wider, the thread was interrupted between them and the pair is not trusted
/// to measure the scale.
const PAIR_TICKS: u64 = 500;

/// A worker's turn clock: engine nanoseconds ([`now_ns`]) from counter readings.
pub(super) struct TurnClock {
    /// The counter, where it can be trusted; `None`: every reading is the monotonic clock's.
    ticks: Option<fn() -> u64>,
    monotonic: fn() -> u64,
    /// (counter, engine ns) read back to back at the last anchor.
    anchor: (u64, u64),
    /// Readings converted since the anchor.
    readings: u32,
    /// Engine nanoseconds per tick, times 2³², once measured.
    scale: Option<u64>,
    /// The anchor the scale is measured from next.
    scale_from: Option<(u64, u64)>,
}

impl TurnClock {
    /// The calling worker's clock: the counter where the kernel keeps time by it.
    pub(super) fn new() -> TurnClock {
        let ticks = moirai_os::ticks::reliable().then_some(moirai_os::ticks::read as fn() -> u64);
        TurnClock::with(ticks, now_ns)
    }

    pub(super) fn with(ticks: Option<fn() -> u64>, monotonic: fn() -> u64) -> TurnClock {
        TurnClock { ticks, monotonic, anchor: (0, 0), readings: 0, scale: None, scale_from: None }
    }

    /// Now, read from the monotonic clock (a new anchor; the scale measured again when the last
    /// measurement is old enough): after a sleep, where a stale anchor would be far away.
    pub(super) fn exact(&mut self) -> u64 {
        let Some(ticks) = self.ticks else { return (self.monotonic)() };
        // Back to back; tried again (at most twice) when something came in between.
        let (mut at, mut ns, mut tight) = (0, 0, false);
        for _ in 0..3 {
            let before = ticks();
            ns = (self.monotonic)();
            let after = ticks();
            at = before + after.saturating_sub(before) / 2;
            tight = after.saturating_sub(before) <= PAIR_TICKS;
            if tight {
                break;
            }
        }
        self.anchor = (at, ns);
        if !tight {
            // Where between the two counter readings the clock was read is not known closely
            // enough: no reading is converted from this anchor (the next one anchors again).
            self.readings = ANCHOR_READINGS;
            return ns;
        }
        self.readings = 0;
        match self.scale_from {
            Some((from_at, from_ns)) if ns.saturating_sub(from_ns) >= SCALE_SPAN_NS && at > from_at => {
                self.scale = Some((((ns - from_ns) as u128) << 32).div_ceil((at - from_at) as u128) as u64);
                self.scale_from = Some((at, ns));
            }
            Some(_) => {}
            None => self.scale_from = Some((at, ns)),
        }
        ns
    }

    /// Now: converted from the counter, or read from the monotonic clock when an anchor is due
    /// (or the counter is not used).
    #[inline]
    pub(super) fn now(&mut self) -> u64 {
        let (Some(ticks), Some(scale)) = (self.ticks, self.scale) else { return self.exact() };
        let since = ((u128::from(ticks().saturating_sub(self.anchor.0)) * u128::from(scale)) >> 32) as u64;
        self.readings += 1;
        if self.readings >= ANCHOR_READINGS || since >= ANCHOR_SPAN_NS {
            return self.exact();
        }
        self.anchor.1 + since
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::cell::Cell;

    thread_local! {
        /// A fake engine clock, in ns; the fake counter runs 3 ticks a nanosecond from 1 000.
        static NS: Cell<u64> = const { Cell::new(0) };
        /// Ticks read per counter reading beyond the fake clock's (a thread interrupted).
        static LAG: Cell<u64> = const { Cell::new(0) };
    }

    fn ns() -> u64 {
        NS.get()
    }

    fn ticks() -> u64 {
        let t = 1_000 + 3 * NS.get() + LAG.get();
        LAG.set(LAG.get() * 2);
        t
    }

    #[test]
    fn readings_follow_the_counter_once_scaled_and_anchor_again_when_due() {
        NS.set(5_000);
        LAG.set(0);
        let mut clock = TurnClock::with(Some(ticks), ns);
        // Not scaled yet: every reading is the monotonic clock's, and anchors.
        assert_eq!(clock.now(), 5_000);
        NS.set(5_000 + SCALE_SPAN_NS);
        assert_eq!(clock.exact(), 5_000 + SCALE_SPAN_NS);
        assert!(clock.scale.is_some(), "scaled after {SCALE_SPAN_NS} ns");
        // Converted from the counter: the fake monotonic clock is not read (it stands still
        // while the counter is moved by hand).
        let base = 5_000 + SCALE_SPAN_NS;
        for k in 1..ANCHOR_READINGS as u64 {
            NS.set(base + 100 * k);
            let read = clock.now();
            assert!(read.abs_diff(base + 100 * k) <= 1, "{read} against {}", base + 100 * k);
            assert_eq!(clock.readings as u64, k);
        }
        // The 64th reading anchors again.
        NS.set(base + 7_000);
        assert_eq!(clock.now(), base + 7_000);
        assert_eq!((clock.readings, clock.anchor.1), (0, base + 7_000));
        // So does a reading a whole span after its anchor.
        NS.set(base + 7_000 + ANCHOR_SPAN_NS + 5);
        assert_eq!(clock.now(), base + 7_000 + ANCHOR_SPAN_NS + 5);
        assert_eq!(clock.anchor.1, base + 7_000 + ANCHOR_SPAN_NS + 5);
    }

    #[test]
    fn an_interrupted_anchor_neither_measures_the_scale_nor_converts() {
        NS.set(0);
        LAG.set(0);
        let mut clock = TurnClock::with(Some(ticks), ns);
        clock.exact();
        NS.set(2 * SCALE_SPAN_NS);
        // Each counter reading lags twice as much as the last: every pair lies more than
        // PAIR_TICKS apart, all three times.
        LAG.set(PAIR_TICKS + 1);
        assert_eq!(clock.exact(), 2 * SCALE_SPAN_NS);
        assert!(clock.scale.is_none());
        LAG.set(0);
        clock.exact();
        assert!(clock.scale.is_some());
        // Nor is a reading converted from it: the next reading is the monotonic clock's.
        LAG.set(PAIR_TICKS + 1);
        NS.set(3 * SCALE_SPAN_NS);
        clock.exact();
        LAG.set(0);
        NS.set(3 * SCALE_SPAN_NS + 500);
        let before = clock.anchor.1;
        assert_eq!(clock.now(), 3 * SCALE_SPAN_NS + 500);
        assert_ne!(clock.anchor.1, before, "anchored again");
    }

    #[test]
    fn without_the_counter_every_reading_is_the_monotonic_clock() {
        NS.set(42);
        let mut clock = TurnClock::with(None, ns);
        for k in 0..200 {
            NS.set(42 + k * SCALE_SPAN_NS);
            assert_eq!(clock.now(), 42 + k * SCALE_SPAN_NS);
        }
        assert!(clock.scale.is_none());
    }

    #[test]
    fn the_real_counter_keeps_to_the_engine_clock() {
        let mut clock = TurnClock::new();
        clock.exact();
        std::thread::sleep(std::time::Duration::from_millis(2));
        clock.exact();
        // A reading converted from the counter (where it is used) is never more than 2 µs ahead
        // of the monotonic clock read right after it, and most are within 2 µs behind (a
        // preemption between the two readings parts a few of them further).
        let mut behind: Vec<u64> = (0..10_000)
            .map(|_| {
                let read = clock.now();
                let exact = now_ns();
                assert!(read <= exact + 2_000, "{read} is ahead of {exact}");
                exact.saturating_sub(read)
            })
            .collect();
        behind.sort_unstable();
        assert!(behind[behind.len() / 2] < 2_000, "the median reading is {} ns behind", behind[behind.len() / 2]);
    }
}

//! The timer slack of rate-limited sources: when a source sleeps until its next tuple is due, it
//! may wake up to the *slack* later (as Linux lets a thread's timers fire up to its
//! `timerslack_ns` late), so that one wake-up carries every tuple that fell due meanwhile.
//!
//! At a low rate a source otherwise wakes once per tuple, and that wake-up — a sleep in the
//! kernel, a context switch, cold caches, and in the pool models a worker woken for it — is most
//! of what a tuple costs: at 1 000 tuples/s, a 1 ms slack halves the wake-ups. A tuple is never
//! sent before it is due, and it keeps its intended send time, so end-to-end latency shows every
//! nanosecond of the slack (at most the slack, on average about half of it at low rates).
//!
//! The slack is spent only where wake-ups are not already shared: a source never waits for more
//! than [`SLACK_TUPLES`] tuples to fall due, so at rates where that many are due within the
//! shortest sleep (50 µs; above 140 000 tuples/s per source instance) the slack changes nothing,
//! and in between it adds at most `(SLACK_TUPLES − 1)` gaps between tuples.

use std::time::Duration;

use crate::offered::Share;

/// The slack a source's timer gets unless the engine is configured otherwise
/// ([`crate::EngineConfig::source_slack`], `--source-slack`): none. A slack is opted into: at
/// 1 000 tuples/s, 1 ms of it cuts the 7-operator SYN's CPU under `dynamic:2` from ~0.022 to
/// ~0.014 cores but moves its e2e p50 from ~0.08 to ~1.07 ms (`docs/results/2026-11-26/idle2/`),
/// and an engine that adds a millisecond to every slow stream unasked is not what a user who
/// measures latency expects.
pub const DEFAULT_SOURCE_SLACK: Duration = Duration::ZERO;

/// The longest a source's timer slack may be (`--source-slack`): beyond a second it is no longer
/// slack but a different schedule.
pub const MAX_SOURCE_SLACK: Duration = Duration::from_secs(1);

/// A source does not wait for more than this many tuples to fall due before it wakes: enough to
/// share a wake-up's cost (several µs) among them, and few enough that the slack adds no latency
/// at the rates where the shortest sleep already carries this many.
pub const SLACK_TUPLES: u64 = 8;

/// When a source instance that has sent its tuples before `next` (of its [`Share`] of the
/// schedule started at `start_ns`) and found none due at `now` wakes again: when tuple `next` is
/// due, plus up to `slack_ns`, but not after tuple `next + SLACK_TUPLES − 1` is due, and not
/// before `min_sleep_ns` from now.
pub(crate) fn wake_at(share: &Share, start_ns: u64, next: u64, now: u64, slack_ns: u64, min_sleep_ns: u64) -> u64 {
    let at = |k: u64| start_ns.saturating_add(share.intended(k));
    let due = at(next);
    let late = if slack_ns == 0 {
        due
    } else {
        due.saturating_add(slack_ns).min(at(next.saturating_add(SLACK_TUPLES - 1))).max(due)
    };
    late.max(now.saturating_add(min_sleep_ns))
}

#[cfg(test)]
mod tests {
    use std::sync::{Arc, Mutex};

    use super::*;
    use crate::metrics::OperatorMetrics;
    use crate::offered::Offered;
    use crate::operator::{Control, Input};
    use crate::source::{Source, SourceTask};
    use crate::sync::Signal;
    use crate::task::{Step, StopFlag, Task};
    use crate::tuple::{now_ns, Tuple};

    const MS: u64 = 1_000_000;

    #[test]
    fn the_slack_delays_a_wake_up_by_at_most_itself_and_never_before_the_due_time() {
        let share = Offered::Constant(1000.0).share(0, 1);
        // Without slack: at the next tuple's due time (or the shortest sleep).
        assert_eq!(wake_at(&share, 10 * MS, 3, 11 * MS, 0, 50_000), 13 * MS);
        assert_eq!(wake_at(&share, 10 * MS, 3, 13 * MS, 0, 50_000), 13 * MS + 50_000);
        // 1 ms of slack at 1 000/s: tuple 3 is due at 13 ms; wake at 14 ms, when tuple 4 is due too.
        assert_eq!(wake_at(&share, 10 * MS, 3, 11 * MS, MS, 50_000), 14 * MS);
        // A long slack stops at the SLACK_TUPLES-th tuple's due time.
        assert_eq!(wake_at(&share, 10 * MS, 3, 11 * MS, 100 * MS, 50_000), (13 + SLACK_TUPLES - 1) * MS);
        // At a high rate the shortest sleep carries SLACK_TUPLES already: the slack changes nothing.
        let fast = Offered::Constant(500_000.0).share(0, 1);
        for now in [0, 7_000, 1_000_000] {
            let next = fast.due(now);
            assert_eq!(wake_at(&fast, 0, next, now, MS, 50_000), wake_at(&fast, 0, next, now, 0, 50_000));
        }
        // At the end of time nothing overflows.
        let slow = Offered::Constant(1e-300).share(0, 1);
        assert_eq!(wake_at(&slow, 5, 1, 5, MS, 50_000), u64::MAX);
    }

    /// A chain head that records each batch: (tuple k, intended ns, ingress ns).
    struct Recorder(Arc<Mutex<Vec<Vec<(u64, u64, u64)>>>>);

    impl Control for Recorder {
        fn watermark(&mut self, _watermark: u64) {}
        fn tick(&mut self, _now_ns: u64) {}
        fn next_timer(&self) -> Option<u64> {
            None
        }
        fn flush(&mut self) {}
        fn finish(&mut self) {}
    }

    impl Input<u64> for Recorder {
        fn push_batch(&mut self, batch: &mut Vec<Tuple<u64>>) {
            let b = batch.drain(..).map(|t| (t.data, t.intended_ns, t.ingress_ns)).collect();
            self.0.lock().unwrap().push(b);
        }
    }

    /// Runs a source of `rate` tuples/s with `slack` for `run`, sleeping as asked; returns its
    /// batches and the number of wake-ups.
    fn run_source(rate: f64, slack: Duration, run: Duration) -> (Vec<Vec<(u64, u64, u64)>>, usize) {
        let batches = Arc::new(Mutex::new(Vec::new()));
        let source = Source::new(|_, _| 0u64..).rate(rate);
        let stop = Arc::new(StopFlag::default());
        let mut task = SourceTask::new(
            &source,
            0,
            1,
            Box::new(Recorder(batches.clone())),
            512,
            None,
            slack.as_nanos() as u64,
            stop.clone(),
            Arc::new(Signal::default()),
            Arc::new(OperatorMetrics::default()),
        );
        let end = now_ns() + run.as_nanos() as u64;
        let mut wake_ups = 0;
        while now_ns() < end {
            match task.step() {
                Step::Worked => {}
                Step::Idle { until: Some(at) } => {
                    wake_ups += 1;
                    std::thread::sleep(Duration::from_nanos(at.saturating_sub(now_ns())));
                }
                other => panic!("a source with room to send: {other:?}"),
            }
        }
        stop.request();
        assert_eq!(task.step(), Step::Finished);
        let batches = batches.lock().unwrap().clone();
        (batches, wake_ups)
    }

    #[test]
    fn a_wake_up_carries_every_tuple_due_within_the_slack_none_early_none_lost() {
        // 1 000 tuples/s for 200 ms: without slack one wake-up per tuple (on a quiet machine); with
        // 3 ms, one per ~4 tuples. (A late wake-up only makes batches larger: nothing here fails
        // on a busy machine.)
        let (plain, _) = run_source(1000.0, Duration::ZERO, Duration::from_millis(200));
        let (slack, wake_ups) = run_source(1000.0, Duration::from_millis(3), Duration::from_millis(200));
        for batches in [&plain, &slack] {
            let tuples: Vec<_> = batches.iter().flatten().collect();
            // None lost or doubled: tuples 0, 1, 2, ... in order, each at its place on the schedule.
            assert!(tuples.len() >= 150, "{} tuples in 200 ms at 1 000/s", tuples.len());
            for (i, &&(k, intended, ingress)) in tuples.iter().enumerate() {
                assert_eq!(k, i as u64, "tuple {i}");
                assert!((intended - tuples[0].1).abs_diff(k * MS) <= 1, "tuple {k} keeps its intended time");
                // None sent before it is due.
                assert!(ingress >= intended, "tuple {k} sent {} ns early", intended - ingress);
            }
        }
        // With slack, a wake-up sends the tuples that fell due meanwhile, together: the batches
        // after the first hold ~4 tuples (1 due when the timer was set, 3 more within the slack).
        let sizes: Vec<usize> = slack.iter().skip(1).map(Vec::len).collect();
        let mean = sizes.iter().sum::<usize>() as f64 / sizes.len() as f64;
        assert!(mean >= 3.0, "batches of {mean:.1} tuples with 3 ms slack at 1 000/s: {sizes:?}");
        assert!(wake_ups <= 60, "{wake_ups} wake-ups in 200 ms");
    }
}

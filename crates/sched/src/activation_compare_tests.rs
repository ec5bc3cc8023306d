//! Tests of the comparison with Linux while behind.

use super::*;

/// A closed loop past saturation: `input` tuples/s arrive; the SPE can take in `capacity(t,
/// scheduled)` tuples/s; what it cannot take in waits at its sources. Fed from 0 to `until` (s).
fn past_saturation(
    r: &mut Activation,
    until: f64,
    input: f64,
    capacity: impl Fn(f64, bool) -> f64,
) -> Vec<(f64, bool, Reason)> {
    let waiting = std::cell::Cell::new(0.0_f64);
    let mut n = 0.0;
    feed_closed(r, &mut n, 0.0, until, |t, active| {
        let dt = PERIOD.as_secs_f64();
        let owed = waiting.get() + input * dt;
        let taken = owed.min(capacity(t, active) * dt);
        waiting.set(owed - taken);
        let backlog = waiting.get() + 2_000.0;
        Load { cpu: Some(0.97), backlog: Some(backlog), sources: Some(waiting.get()), rate: taken / dt }
    })
}

#[test]
fn a_scheduler_whose_gain_wears_off_is_compared_with_linux_and_handed_back() {
    // Linear Road on Flink past saturation: the cost per tuple grows as the run goes on (here
    // from 60 s), so the SPE falls further behind whatever runs it. Scheduled, it takes in 10 %
    // more than under Linux until then, 5 % less from then on.
    let mut r = rule();
    let capacity = |t: f64, scheduled: bool| {
        let linux = 400_000.0 - 1_500.0 * (t - 60.0).max(0.0);
        linux
            * if !scheduled {
                1.0
            } else if t < 60.0 {
                1.1
            } else {
                0.95
            }
    };
    let changes = past_saturation(&mut r, 170.0, 460_000.0, capacity);
    let codes: Vec<(bool, &str)> = changes.iter().map(|c| (c.1, c.2.code())).collect();
    // Acted on at once and kept (a gain in the first window of acting); compared with Linux only
    // once the intake fell 5 % below that window's (after 60 s): no gain, handed back and held
    // for 20 s; acted on again after the hold, with no gain over Linux's pace before: held for
    // 40 s, then 80 s.
    let expected = [
        (true, "behind"),
        (false, "comparing"),
        (true, "comparing"),
        (false, "no_gain"),
        (true, "behind"),
        (false, "no_gain"),
        (true, "behind"),
        (false, "no_gain"),
    ];
    assert_eq!(codes, expected, "{changes:?}");
    assert!((60.0..65.0).contains(&changes[1].0), "{changes:?}");
    let Reason::Comparing { scheduled, linux: Some(linux), .. } = changes[2].2 else { panic!("{changes:?}") };
    assert!(scheduled > linux, "the throughput before Linux's window is still the higher: {changes:?}");
    let Reason::NoGain { against_linux: true, through, through_before, hold, .. } = changes[3].2 else {
        panic!("not a verdict against Linux: {changes:?}")
    };
    assert!(through < through_before && hold == Duration::from_secs(20), "{changes:?}");
    assert!(changes[3].2.to_string().contains("no better than Linux"), "{}", changes[3].2);
    let holds: Vec<Duration> = changes[5..]
        .iter()
        .filter_map(|c| match c.2 {
            Reason::NoGain { against_linux: false, hold, .. } => Some(hold),
            _ => None,
        })
        .collect();
    assert_eq!(holds, [Duration::from_secs(40), Duration::from_secs(80)], "{changes:?}");
}

#[test]
fn a_scheduler_whose_intake_holds_is_never_compared() {
    // The heavy-operator pipeline on Flink past its CPU bound: scheduled, it takes in 8 % more
    // than under Linux, and still falls behind; its intake holds, so the gain found in the first
    // window of acting holds too, and no window of Linux is spent to find it again.
    let mut r = rule();
    let changes = past_saturation(&mut r, 300.0, 50_000.0, |_, scheduled| if scheduled { 45_000.0 } else { 41_600.0 });
    assert!(r.is_active(), "{changes:?}");
    assert_eq!(changes.iter().map(|c| c.2.code()).collect::<Vec<_>>(), ["behind"], "{changes:?}");
}

#[test]
fn a_scheduler_that_keeps_taking_in_more_than_linux_is_kept_and_compared_less_and_less_often() {
    // As above, but the cost per tuple grows for both (the intake falls 2 % of the first
    // minute's every 10 s): each comparison finds the scheduling ahead of Linux.
    let mut r = rule();
    let fall = |t: f64| 1.0 - 0.002 * t;
    let changes =
        past_saturation(&mut r, 300.0, 50_000.0, |t, scheduled| fall(t) * if scheduled { 45_000.0 } else { 41_600.0 });
    assert!(r.is_active(), "{changes:?}");
    assert!(changes[1..].iter().all(|c| c.2.code() == "comparing"), "{changes:?}");
    let handed: Vec<f64> = changes.iter().filter(|c| !c.1).map(|c| c.0).collect();
    let taken: Vec<f64> = changes[1..].iter().filter(|c| c.1).map(|c| c.0).collect();
    assert_eq!(handed.len(), 3, "{changes:?}");
    // The first once the intake fell 5 % below the first window's (the window's mean 25 s
    // later, 35 s after acting began); the waits between them double: 40 s, then 80 s after
    // the last comparison's end.
    let start = changes[0].0;
    assert!((handed[0] - start - 35.0).abs() < 1.5, "handed back at {handed:?}: {changes:?}");
    for (i, wait) in [(1, 40.0), (2, 80.0)] {
        let end = taken[i - 1] + 10.0;
        assert!((handed[i] - end - wait).abs() < 0.5, "handed back at {handed:?}, taken at {taken:?}: {changes:?}");
    }
    let Reason::Comparing { scheduled, linux: Some(linux), .. } = changes[2].2 else { panic!("{changes:?}") };
    assert!(scheduled > linux * 1.05, "{changes:?}");
}

/// Storm with Linear Road past saturation: the worker takes in 30k tuples/s while it warms up
/// (its first 6 s), 55k from then on, scheduled or not; 90k arrive. The rule with `startup`.
fn warming_up(startup: Duration) -> Vec<(f64, bool, Reason)> {
    let mut r = Activation::new(ActivationConfig { startup, ..ActivationConfig::default() });
    past_saturation(&mut r, 80.0, 90_000.0, |t, _| if t < 6.0 { 30_000.0 } else { 55_000.0 })
}

#[test]
fn a_gain_found_against_the_spes_start_up_does_not_hold_the_comparison_back() {
    // The first window of acting shows a "gain" against the warm-up; the first comparison, due
    // 20 s after acting began, finds none, and the SPE is left to Linux.
    let changes = warming_up(Duration::from_secs(20));
    let codes: Vec<(bool, &str)> = changes.iter().map(|c| (c.1, c.2.code())).collect();
    assert_eq!(
        codes[..4],
        [(true, "behind"), (false, "comparing"), (true, "comparing"), (false, "no_gain")],
        "{changes:?}"
    );
    assert!((changes[1].0 - changes[0].0 - 20.0).abs() < 0.5, "{changes:?}");
    assert!(matches!(changes[3].2, Reason::NoGain { against_linux: true, .. }), "{changes:?}");
    // Without a start-up, the same "gain" holds, and the intake never falls below it.
    let changes = warming_up(Duration::ZERO);
    assert_eq!(changes.iter().map(|c| c.2.code()).collect::<Vec<_>>(), ["behind"], "{changes:?}");
}

/// Storm with Linear Road past saturation: 120k tuples/s arrive and its bolts take 75k through,
/// scheduled or not (30k in its first `warm_up` seconds). Scheduled, the favoured spouts take in 6k more, which piles up in the
/// bolts' queues (up to 300k tuples); under Linux they take in 6k less while the bolts drain
/// their queues (down to 100k). The rule with `startup`.
fn filling_queues(warm_up: f64, startup: Duration) -> Vec<(f64, bool, Reason)> {
    let mut r = Activation::new(ActivationConfig { startup, ..ActivationConfig::default() });
    let (waiting, queued) = (std::cell::Cell::new(0.0_f64), std::cell::Cell::new(100_000.0_f64));
    let mut n = 0.0;
    feed_closed(&mut r, &mut n, 0.0, 120.0, |t, scheduled| {
        let dt = PERIOD.as_secs_f64();
        let fill = if scheduled {
            (300_000.0 - queued.get()).min(6_000.0 * dt)
        } else {
            -(queued.get() - 100_000.0).min(6_000.0 * dt)
        };
        let taken = if t < warm_up { 30_000.0 } else { 75_000.0 } * dt + fill;
        queued.set(queued.get() + fill);
        waiting.set(waiting.get() + 120_000.0 * dt - taken);
        Load {
            cpu: Some(0.98),
            backlog: Some(waiting.get() + queued.get()),
            sources: Some(waiting.get()),
            rate: taken / dt,
        }
    })
}

#[test]
fn sources_that_only_fill_the_operators_queues_show_no_gain() {
    // Judged on the intake, the first window of acting would show 8 % more taken in than the
    // window that activated the rule, and a comparison 8 % more than Linux's: a gain that is
    // only the bolts' queues filling. Judged on the throughput, the first verdict finds none.
    let changes = filling_queues(0.0, Duration::ZERO);
    let Some((_, false, Reason::NoGain { against_linux: false, through, through_before, .. })) = changes.get(1) else {
        panic!("no verdict of no gain after the first window of acting: {changes:?}")
    };
    assert!((through / through_before - 1.0).abs() < 0.01, "{through} against {through_before}: {changes:?}");
    // A worker that warms up for 6 s: judged against that, the first window of acting shows a
    // gain; with a start-up that gain does not hold the comparison back, and the comparison with
    // Linux, 20 s in, finds none: as much went through the SPE under Linux as scheduled.
    let changes = filling_queues(6.0, Duration::from_secs(20));
    let codes: Vec<(bool, &str)> = changes.iter().map(|c| (c.1, c.2.code())).collect();
    assert_eq!(
        codes[..4],
        [(true, "behind"), (false, "comparing"), (true, "comparing"), (false, "no_gain")],
        "{changes:?}"
    );
    let Reason::Comparing { scheduled, linux: Some(linux), .. } = changes[2].2 else { panic!("{changes:?}") };
    assert!(
        (scheduled / linux - 1.0).abs() < 0.01,
        "throughput scheduled {scheduled} against {linux} under Linux: {changes:?}"
    );
    assert!(matches!(changes[3].2, Reason::NoGain { against_linux: true, .. }), "{changes:?}");
}

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
    // Acted on at once and kept (a gain in the first window of acting); compared with Linux 20 s
    // later: a gain (the waits double: the next comparison 40 s after that one's end); the next
    // finds none: handed back, and held for 20 s; acted on again after the hold, with no gain
    // over Linux's pace before: held for 40 s.
    let comparison = [(false, "comparing"), (true, "comparing")];
    let expected = [
        &[(true, "behind")][..],
        &comparison,
        &comparison,
        &[(false, "no_gain"), (true, "behind"), (false, "no_gain")],
    ]
    .concat();
    assert_eq!(codes, expected, "{changes:?}");
    let at = |i: usize| changes[i].0;
    assert!((at(1) - at(0) - 20.0).abs() < 0.5 && (at(3) - at(2) - 50.0).abs() < 0.5, "{changes:?}");
    let Reason::Comparing { scheduled, linux: Some(linux), .. } = changes[4].2 else { panic!("{changes:?}") };
    assert!(scheduled < linux, "{changes:?}");
    let Reason::NoGain { against_linux: true, rate, rate_before, hold, .. } = changes[5].2 else {
        panic!("not a verdict against Linux: {changes:?}")
    };
    assert!(rate < rate_before && hold == Duration::from_secs(20), "{changes:?}");
    assert!(changes[5].2.to_string().contains("no better than Linux"), "{}", changes[5].2);
    assert!(
        matches!(changes[7].2, Reason::NoGain { against_linux: false, hold, .. } if hold == Duration::from_secs(40))
    );
}

#[test]
fn a_scheduler_that_keeps_taking_in_more_than_linux_is_kept_and_compared_less_and_less_often() {
    // The heavy-operator pipeline on Flink past its CPU bound: scheduled, it takes in 8 % more
    // than under Linux, and still falls behind.
    let mut r = rule();
    let changes = past_saturation(&mut r, 300.0, 50_000.0, |_, scheduled| if scheduled { 45_000.0 } else { 41_600.0 });
    assert!(r.is_active(), "{changes:?}");
    let handed: Vec<f64> = changes.iter().filter(|c| !c.1).map(|c| c.0).collect();
    assert!(changes[1..].iter().all(|c| c.2.code() == "comparing"), "{changes:?}");
    // Each comparison takes 20 s (Linux, then scheduled again); the waits between them double:
    // 20 s after acting, then 40 s, 80 s, 160 s after the last comparison's end.
    let start = changes[0].0;
    let expected = [start + 20.0, start + 20.0 + 20.0 + 40.0, start + 80.0 + 20.0 + 80.0];
    assert_eq!(handed.len(), 3, "{changes:?}");
    for (got, want) in handed.iter().zip(expected) {
        assert!((got - want).abs() < 0.5, "handed back at {handed:?}, expected {expected:?}: {changes:?}");
    }
    let Reason::Comparing { scheduled, linux: Some(linux), .. } = changes[2].2 else { panic!("{changes:?}") };
    assert!(scheduled > linux * 1.05, "{changes:?}");
}

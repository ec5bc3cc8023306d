//! Tests of the quiet rule ([`Activation::is_quiet`]) and of a caller that samples less often
//! while it is quiet.

use super::*;

/// How often the caller samples while the rule is quiet (the middleware's default).
const QUIET_PERIOD: f64 = 1.0;

/// A caller that samples every [`QUIET_PERIOD`] while the rule is quiet and every [`PERIOD`]
/// otherwise, from `from` to `to` (seconds); returns the sample times and the state changes.
fn sample_as_the_middleware(
    rule: &mut Activation,
    ingested: &mut f64,
    from: f64,
    to: f64,
    load: impl Fn(f64) -> Load,
) -> (Vec<f64>, Vec<(f64, bool, Reason)>) {
    let (mut times, mut changes) = (Vec::new(), Vec::new());
    let mut t = from;
    let mut last: Option<f64> = None;
    while t <= to + 1e-9 {
        let l = load(t);
        *ingested += l.rate * (t - last.unwrap_or(t - PERIOD.as_secs_f64()));
        if let Some(tr) = rule.update(l.sample(t, *ingested)) {
            changes.push((t, tr.active, tr.reason));
        }
        times.push(t);
        last = Some(t);
        t += if rule.is_quiet() { QUIET_PERIOD } else { PERIOD.as_secs_f64() };
    }
    (times, changes)
}

#[test]
fn an_spe_that_keeps_up_is_quiet_and_sampled_once_a_second() {
    let mut r = rule();
    let mut n = 0.0;
    // A busy machine (an SPE whose idle threads spin) whose sources keep up.
    let (times, changes) = sample_as_the_middleware(&mut r, &mut n, 0.0, 60.0, |_| load(0.99, 50.0, 30_000.0));
    assert!(changes.is_empty(), "{changes:?}");
    assert!(r.is_quiet(), "{}", r.reason());
    // Every 200 ms until the first window spans 1 s, then once a second: 6 + 59 samples.
    assert!((60..=70).contains(&times.len()), "{} samples: {times:?}", times.len());
}

#[test]
fn a_quiet_rule_acts_a_confirm_window_after_the_spe_is_first_seen_behind() {
    let mut r = rule();
    let mut n = 0.0;
    // From 20.5 s on, the input exceeds what the SPE takes in: its backlog grows by 8k
    // tuples/s and is 0.1 s of input (3 000 tuples) from 20.9 s on.
    let (times, changes) = sample_as_the_middleware(&mut r, &mut n, 0.0, 30.0, |t| {
        load(0.99, 50.0 + 8_000.0 * (t - 20.5).max(0.0), 30_000.0)
    });
    let first_behind = *times.iter().find(|&&t| t >= 20.9).expect("sampled after 20.9 s");
    // Quiet until then, so the round that first sees it behind is up to a quiet period late.
    assert!((20.9..=21.9 + 1e-9).contains(&first_behind), "first seen behind at {first_behind} s: {times:?}");
    assert_eq!(changes.len(), 1, "{changes:?}");
    let (at, active, _) = changes[0];
    assert!(active);
    // Behind from the window's start on: a confirm window (1 s) of rounds every 200 ms after
    // that round, not the one round alone (the sample before it, a second earlier, was not).
    let after = at - first_behind;
    assert!((0.99..=1.21).contains(&after), "acted {after} s after it was first seen behind: {changes:?}");
}

#[test]
fn a_burst_seen_by_one_sparse_round_does_not_activate_it() {
    let mut r = rule();
    let mut n = 0.0;
    // The backlog holds 0.5 s of input for 300 ms around 20 s (a burst drained at once).
    let (times, changes) = sample_as_the_middleware(&mut r, &mut n, 0.0, 40.0, |t| {
        let burst = (19.9..20.2).contains(&t);
        load(0.99, if burst { 15_000.0 } else { 50.0 }, 30_000.0)
    });
    assert!(times.iter().any(|t| (19.9..20.2).contains(t)), "a round sees the burst: {times:?}");
    assert!(changes.is_empty(), "{changes:?}");
    assert!(r.is_quiet(), "quiet again: {}", r.reason());
}

#[test]
fn it_is_not_quiet_while_active_starting_or_without_a_backlog_figure() {
    let mut r = rule();
    assert!(!r.is_quiet(), "no sample yet");
    let mut n = 0.0;
    feed(&mut r, &mut n, 0.0, 0.6, |_| load(0.99, 50.0, 30_000.0));
    assert!(!r.is_quiet(), "the samples do not span a confirm window yet");
    feed(&mut r, &mut n, 0.8, 5.0, |_| load(0.99, 50.0, 30_000.0));
    assert!(r.is_quiet());
    // Behind: not quiet at once, and not quiet while active.
    feed(&mut r, &mut n, 5.2, 5.2, |_| load(0.99, 20_000.0, 30_000.0));
    assert!(!r.is_quiet() && !r.is_active());
    feed(&mut r, &mut n, 5.4, 8.0, |t| load(0.99, 20_000.0 + 8_000.0 * (t - 5.2), 30_000.0));
    assert!(r.is_active());
    assert!(!r.is_quiet());
    // The CPU alone (no backlog): any round may change it.
    let mut cpu_only = rule();
    feed(&mut cpu_only, &mut n, 0.0, 5.0, |_| Load { cpu: Some(0.5), backlog: None, sources: None, rate: 30_000.0 });
    assert!(!cpu_only.is_active());
    assert!(!cpu_only.is_quiet());
}

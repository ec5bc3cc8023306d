//! Window aggregates against a naive computation.
//!
//! Event time: random keyed tuples whose disorder stays within the source's declared
//! out-of-orderness (so no tuple is late), tumbling and sliding windows, every built-in
//! aggregation, random parallelism, channel capacity and batch size; the engine's set of
//! `(key, start, end, value)` must equal a nested-loop computation over all windows. Late
//! tuples are dropped by design: one test shows exactly that, and that the same tuple counts when
//! the declared out-of-orderness covers it.
//!
//! Processing time: results depend on the clock, so the tests check what does not — every tuple
//! is counted exactly once per window it falls in.

mod common;

use std::collections::{BTreeMap, BTreeSet};
use std::sync::Arc;
use std::time::Duration;

use moirai_engine::{now_ns, Agg, Engine, Query, Source, Window, WindowResult};
use proptest::prelude::*;

/// Event times start here so that every window containing a tuple starts at or after 0.
const BASE: u64 = 1_000_000;

#[derive(Clone, Debug)]
struct Ev {
    key: u8,
    ts: u64,
    value: i32,
}

#[derive(Clone, Copy, Debug)]
enum Kind {
    Count,
    Sum,
    Avg,
    Min,
    Max,
}

const KINDS: [Kind; 5] = [Kind::Count, Kind::Sum, Kind::Avg, Kind::Min, Kind::Max];

fn agg(kind: Kind) -> Agg<Ev> {
    let v = |e: &Ev| e.value as f64;
    match kind {
        Kind::Count => Agg::count(),
        Kind::Sum => Agg::sum(v),
        Kind::Avg => Agg::avg(v),
        Kind::Min => Agg::min(v),
        Kind::Max => Agg::max(v),
    }
}

fn naive_value(kind: Kind, values: &[f64]) -> f64 {
    match kind {
        Kind::Count => values.len() as f64,
        Kind::Sum => values.iter().sum(),
        Kind::Avg => values.iter().sum::<f64>() / values.len() as f64,
        Kind::Min => values.iter().copied().fold(f64::INFINITY, f64::min),
        Kind::Max => values.iter().copied().fold(f64::NEG_INFINITY, f64::max),
    }
}

type Row = (u8, u64, u64, f64);

/// Every window `[s, s + size)`, `s` a multiple of `slide`, for every key that has a tuple in it:
/// nested loops over windows, keys and tuples.
fn naive(events: &[Ev], size: u64, slide: u64, kind: Kind) -> Vec<Row> {
    let keys: BTreeSet<u8> = events.iter().map(|e| e.key).collect();
    let (Some(min), Some(max)) = (events.iter().map(|e| e.ts).min(), events.iter().map(|e| e.ts).max()) else {
        return vec![];
    };
    let mut rows = Vec::new();
    let mut start = (min.saturating_sub(size) / slide) * slide;
    while start <= max {
        for &key in &keys {
            let values: Vec<f64> = events
                .iter()
                .filter(|e| e.key == key && start <= e.ts && e.ts < start + size)
                .map(|e| e.value as f64)
                .collect();
            if !values.is_empty() {
                rows.push((key, start, start + size, naive_value(kind, &values)));
            }
        }
        start += slide;
    }
    rows
}

fn close(a: f64, b: f64) -> bool {
    (a - b).abs() <= 1e-9 * a.abs().max(b.abs()).max(1.0)
}

/// Compares two result sets as sets of (key, start, end) with approximately equal values.
fn same_rows(mut got: Vec<Row>, mut want: Vec<Row>) -> Result<(), String> {
    let order = |a: &Row, b: &Row| (a.0, a.1, a.2).cmp(&(b.0, b.1, b.2));
    got.sort_by(order);
    want.sort_by(order);
    let got_keys: Vec<_> = got.iter().map(|r| (r.0, r.1, r.2)).collect();
    let want_keys: Vec<_> = want.iter().map(|r| (r.0, r.1, r.2)).collect();
    if got_keys != want_keys {
        let missing: Vec<_> = want_keys.iter().filter(|k| !got_keys.contains(k)).take(5).collect();
        let extra: Vec<_> = got_keys.iter().filter(|k| !want_keys.contains(k)).take(5).collect();
        return Err(format!(
            "{} windows, expected {}; missing {missing:?}, unexpected {extra:?} (or duplicates)",
            got.len(),
            want.len()
        ));
    }
    for (g, w) in got.iter().zip(&want) {
        if !close(g.3, w.3) {
            return Err(format!("window {:?}: value {}, expected {}", (g.0, g.1, g.2), g.3, w.3));
        }
    }
    Ok(())
}

#[derive(Clone, Debug)]
struct Case {
    events: Vec<Ev>,
    out_of_orderness: u64,
    size: u64,
    slide: u64,
    kind: Kind,
    source_parallelism: usize,
    window_parallelism: usize,
    capacity: usize,
    batch: usize,
}

/// Tuples whose event time is an increasing base plus a jitter of at most `out_of_orderness`:
/// each is at least the largest earlier one minus `out_of_orderness`, so none is ever late —
/// in the whole sequence and in every subsequence a source instance takes.
fn case() -> impl Strategy<Value = Case> {
    let raw_events = prop::collection::vec((0u8..4, 0u64..=20, 0u64..=1000, -100i32..=100), 1..250);
    let shape = (1u64..=150, any::<bool>(), 1u64..=150);
    (raw_events, 0u64..=60, shape, 0usize..5, 1usize..=3, 1usize..=4, 1usize..=64, 1usize..=32).prop_map(
        |(raw, ooo, (size, tumbling, slide), kind, sp, wp, capacity, batch)| {
            let mut base = BASE;
            let events = raw
                .into_iter()
                .map(|(key, step, jitter, value)| {
                    base += step;
                    Ev { key, ts: base + jitter * ooo / 1000, value }
                })
                .collect();
            Case {
                events,
                out_of_orderness: ooo,
                size,
                slide: if tumbling { size } else { 1 + (slide - 1) % size },
                kind: KINDS[kind],
                source_parallelism: sp,
                window_parallelism: wp,
                capacity,
                batch,
            }
        },
    )
}

/// Runs a keyed event-time window over `events` and returns its rows.
fn run_event_time(c: &Case) -> Vec<Row> {
    let events = Arc::new(c.events.clone());
    let source = Source::new(move |i, n| common::pausing(events.iter().skip(i).step_by(n).cloned().collect()))
        .event_time(|e: &Ev| e.ts, Duration::from_nanos(c.out_of_orderness));
    let window = if c.size == c.slide {
        Window::tumbling(Duration::from_nanos(c.size))
    } else {
        Window::sliding(Duration::from_nanos(c.size), Duration::from_nanos(c.slide))
    };
    let q = Query::new("windows");
    let out = q
        .source("events", source)
        .parallelism(c.source_parallelism)
        .key_by(|e: &Ev| e.key)
        .window("window", window, agg(c.kind))
        .parallelism(c.window_parallelism)
        .collect("out");
    let engine = Engine::start(common::config(c.capacity, c.batch, true), vec![q.build().unwrap()]).unwrap();
    let summary = common::wait_or_fail(engine, common::HANG).unwrap();
    assert_eq!(summary.tuples_in, c.events.len() as u64);
    let rows: Vec<Row> =
        out.take().into_iter().map(|t| (t.data.key, t.data.start_ns, t.data.end_ns, t.data.value)).collect();
    assert_eq!(summary.tuples_out, rows.len() as u64);
    rows
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 40, max_shrink_time: 60_000, ..ProptestConfig::default() })]

    #[test]
    fn event_time_windows_equal_a_naive_computation(c in case()) {
        let got = run_event_time(&c);
        let want = naive(&c.events, c.size, c.slide, c.kind);
        if let Err(e) = same_rows(got, want) {
            return Err(TestCaseError::fail(e));
        }
    }
}

/// A few fixed shapes, so every aggregation on tumbling and sliding windows is surely covered.
#[test]
fn every_aggregation_on_tumbling_and_sliding_windows() {
    let events: Vec<Ev> = (0..400u64)
        .map(|i| Ev { key: (i % 3) as u8, ts: BASE + i * 5 + (i * 7919) % 13, value: ((i * 31) % 50) as i32 - 20 })
        .collect();
    for kind in KINDS {
        for (size, slide) in [(50, 50), (50, 10), (45, 20), (7, 7)] {
            let c = Case {
                events: events.clone(),
                out_of_orderness: 13,
                size,
                slide,
                kind,
                source_parallelism: 2,
                window_parallelism: 3,
                capacity: 16,
                batch: 4,
            };
            let got = run_event_time(&c);
            assert!(!got.is_empty());
            same_rows(got, naive(&c.events, size, slide, kind))
                .unwrap_or_else(|e| panic!("{kind:?}, size {size}, slide {slide}: {e}"));
        }
    }
}

/// Runs one source instance, one tuple per batch, through a 10 ns tumbling count window.
fn count_windows(timestamps: &[u64], out_of_orderness: Duration) -> Vec<(u64, u64, f64)> {
    let ts = timestamps.to_vec();
    let q = Query::new("late");
    let out = q
        .source("events", Source::new(move |_, _| ts.clone()).event_time(|t: &u64| *t, out_of_orderness))
        .key_by(|_: &u64| 0u8)
        .window("count", Window::tumbling(Duration::from_nanos(10)), Agg::count())
        .collect("out");
    let engine = Engine::start(common::config(8, 1, true), vec![q.build().unwrap()]).unwrap();
    let summary = common::wait_or_fail(engine, common::HANG).unwrap();
    assert_eq!(summary.tuples_in, timestamps.len() as u64);
    let mut rows: Vec<_> = out.take().into_iter().map(|t| (t.data.start_ns, t.data.end_ns, t.data.value)).collect();
    rows.sort_by(|a, b| a.partial_cmp(b).unwrap());
    rows
}

/// The source sends a watermark right after its first batch; with one tuple per batch, the
/// watermark 1000 reaches the window before the tuple at 5 does, so window [0, 10) has already
/// fired (empty) and the tuple is late.
#[test]
fn a_late_tuple_is_dropped() {
    let stamps = [1000, 5, 1005];
    assert_eq!(count_windows(&stamps, Duration::ZERO), vec![(1000, 1010, 2.0)], "the tuple at 5 is late");
    // The same tuple is on time when the declared out-of-orderness covers it.
    assert_eq!(
        count_windows(&stamps, Duration::from_nanos(1000)),
        vec![(0, 10, 1.0), (1000, 1010, 2.0)],
        "out-of-orderness 1000 ns covers the tuple at 5"
    );
}

/// Processing-time windows over a rate-limited source: counts per key, summed over all emitted
/// windows, equal the tuples of that key times the windows each tuple falls in.
fn processing_time_counts(window: Window, copies: u64) {
    // The clock starts at the first reading: make sure every tuple's windows start at or after 0.
    while now_ns() < 2 * window.size_ns {
        std::thread::sleep(Duration::from_millis(1));
    }
    const N: u64 = 3000;
    let q = Query::new("processing");
    let out = q
        .source("events", Source::new(|_, _| 0..N).rate(30_000.0))
        .key_by(|i: &u64| i % 5)
        .window("count", window, Agg::count())
        .parallelism(2)
        .collect("out");
    let engine = Engine::start(common::config(64, 8, true), vec![q.build().unwrap()]).unwrap();
    common::wait_or_fail(engine, common::HANG).unwrap();
    let rows = out.take();
    let mut per_key: BTreeMap<u64, f64> = BTreeMap::new();
    let mut seen = BTreeSet::new();
    for t in &rows {
        let WindowResult { key, start_ns, end_ns, value } = t.data;
        assert_eq!(end_ns - start_ns, window.size_ns, "{:?}", t.data);
        assert_eq!(start_ns % window.slide_ns, 0, "{:?}", t.data);
        assert!(seen.insert((key, start_ns)), "window {:?} emitted twice", t.data);
        *per_key.entry(key).or_default() += value;
    }
    let want: BTreeMap<u64, f64> = (0..5).map(|k| (k, (N / 5 * copies) as f64)).collect();
    assert_eq!(per_key, want, "each tuple counted once in each of its {copies} windows");
    // The source cannot send the last tuple earlier than ~100 ms after the first, so the tuples
    // span more than one 10 ms window.
    let starts: BTreeSet<u64> = rows.iter().map(|t| t.data.start_ns).collect();
    assert!(starts.len() > 1, "{starts:?}");
}

#[test]
fn processing_time_tumbling_windows_count_every_tuple_once() {
    processing_time_counts(Window::tumbling(Duration::from_millis(10)).processing_time(), 1);
}

#[test]
fn processing_time_sliding_windows_count_every_tuple_in_each_of_its_windows() {
    processing_time_counts(Window::sliding(Duration::from_millis(20), Duration::from_millis(10)).processing_time(), 2);
}

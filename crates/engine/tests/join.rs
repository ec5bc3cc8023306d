//! The keyed interval join against a naive nested-loop join.
//!
//! Random keys and event times on both sides (disorder within each source's declared
//! out-of-orderness, so the join's state clean-up never discards a partner still to come), random
//! bounds including negative lower bounds, random parallelism, channel capacity and batch size.
//! The engine must emit exactly the pairs `(l, r)` with equal keys and
//! `l + lower <= r <= l + upper`, each once, stamped with the later event time of the two.

mod common;

use std::sync::Arc;
use std::time::Duration;

use moirai_engine::{Engine, Query, Source};
use proptest::prelude::*;

const BASE: u64 = 1_000_000;

#[derive(Clone, Debug)]
struct Ev {
    key: u8,
    ts: u64,
    id: u32,
}

/// (key, left id, right id, event time of the result).
type Pair = (u8, u32, u32, u64);

fn naive(left: &[Ev], right: &[Ev], lower: i64, upper: i64) -> Vec<Pair> {
    let mut pairs = Vec::new();
    for l in left {
        for r in right {
            let d = r.ts as i64 - l.ts as i64;
            if l.key == r.key && lower <= d && d <= upper {
                pairs.push((l.key, l.id, r.id, l.ts.max(r.ts)));
            }
        }
    }
    pairs.sort();
    pairs
}

/// Event times: an increasing base plus a jitter of at most `ooo`, so none is late.
fn events(keys: u8, ooo: u64) -> impl Strategy<Value = Vec<Ev>> {
    prop::collection::vec((0..keys, 0u64..=15, 0u64..=1000), 0..120).prop_map(move |raw| {
        let mut base = BASE;
        raw.into_iter()
            .enumerate()
            .map(|(id, (key, step, jitter))| {
                base += step;
                Ev { key, ts: base + jitter * ooo / 1000, id: id as u32 }
            })
            .collect()
    })
}

#[derive(Clone, Debug)]
struct Case {
    left: Vec<Ev>,
    right: Vec<Ev>,
    ooo: u64,
    lower: i64,
    upper: i64,
    left_parallelism: usize,
    right_parallelism: usize,
    join_parallelism: usize,
    capacity: usize,
    batch: usize,
}

fn case() -> impl Strategy<Value = Case> {
    (1u8..6, 0u64..=40)
        .prop_flat_map(|(keys, ooo)| {
            (
                events(keys, ooo),
                events(keys, ooo),
                Just(ooo),
                -60i64..=40,
                0i64..=80,
                (1usize..=3, 1usize..=3, 1usize..=4),
                1usize..=64,
                1usize..=32,
            )
        })
        .prop_map(|(left, right, ooo, lower, width, (lp, rp, jp), capacity, batch)| Case {
            left,
            right,
            ooo,
            lower,
            upper: lower + width,
            left_parallelism: lp,
            right_parallelism: rp,
            join_parallelism: jp,
            capacity,
            batch,
        })
}

fn source(events: &[Ev], ooo: u64) -> Source<Ev> {
    let events = Arc::new(events.to_vec());
    Source::new(move |i, n| common::pausing(events.iter().skip(i).step_by(n).cloned().collect()))
        .event_time(|e: &Ev| e.ts, Duration::from_nanos(ooo))
}

fn run(c: &Case) -> Vec<Pair> {
    let q = Query::new("join");
    let left = q.source("left", source(&c.left, c.ooo)).parallelism(c.left_parallelism).key_by(|e: &Ev| e.key);
    let right = q.source("right", source(&c.right, c.ooo)).parallelism(c.right_parallelism).key_by(|e: &Ev| e.key);
    let out = left
        .interval_join("join", right, c.lower, c.upper, |k: &u8, l: &Ev, r: &Ev| (*k, l.id, r.id))
        .parallelism(c.join_parallelism)
        .collect("out");
    let engine = Engine::start(common::config(c.capacity, c.batch, true), vec![q.build().unwrap()]).unwrap();
    let summary = common::wait_or_fail(engine, common::HANG).unwrap();
    assert_eq!(summary.tuples_in, (c.left.len() + c.right.len()) as u64);
    let mut pairs: Vec<Pair> = out.take().into_iter().map(|t| (t.data.0, t.data.1, t.data.2, t.event_ns)).collect();
    assert_eq!(summary.tuples_out, pairs.len() as u64);
    pairs.sort();
    pairs
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 40, max_shrink_time: 60_000, ..ProptestConfig::default() })]

    #[test]
    fn interval_join_equals_a_nested_loop_join(c in case()) {
        let got = run(&c);
        let want = naive(&c.left, &c.right, c.lower, c.upper);
        prop_assert_eq!(got, want);
    }
}

/// Fixed data that surely has matches on both sides of zero, at the bounds and just outside.
#[test]
fn bounds_are_inclusive_and_may_be_negative() {
    let left: Vec<Ev> = (0..50u32).map(|i| Ev { key: (i % 2) as u8, ts: BASE + 10 * i as u64, id: i }).collect();
    let right: Vec<Ev> =
        (0..50u32).map(|i| Ev { key: (i % 2) as u8, ts: BASE + 10 * i as u64 + 3, id: 100 + i }).collect();
    for (lower, upper) in [(-17, 3), (-17, -17), (3, 3), (4, 23), (-40, 40)] {
        let c = Case {
            left: left.clone(),
            right: right.clone(),
            ooo: 0,
            lower,
            upper,
            left_parallelism: 2,
            right_parallelism: 1,
            join_parallelism: 3,
            capacity: 8,
            batch: 3,
        };
        let want = naive(&left, &right, lower, upper);
        assert!(!want.is_empty(), "bounds ({lower}, {upper}) should match something");
        assert_eq!(run(&c), want, "bounds ({lower}, {upper})");
    }
}

//! A source replaying its data at the data's own clock (`Source::replay`): tuples are intended at
//! `start + (clock − first clock) / speed`, sent when due, under every threading model.

mod common;

use std::time::Instant;

use moirai_engine::{Engine, Query, Source};

use common::{wait_or_fail, HANG};

const MS: u64 = 1_000_000;

#[test]
fn replay_follows_the_clock_in_the_data() {
    for model in common::MODELS {
        // Clock values 5 s, 5 s, 6 s, 8 s at 10x: due at 0, 0, 100 and 300 ms after the start.
        let q = Query::new("replay");
        let source = Source::new(|_, _| [5_000u64, 5_000, 6_000, 8_000]).replay(|ms: &u64| ms * MS, 10.0);
        let out = q.source("records", source).map("id", |x| x).collect("out");
        let started = Instant::now();
        let engine = Engine::start(common::config_in(model, 4, 2, false), vec![q.build().unwrap()]).unwrap();
        let summary = wait_or_fail(engine, HANG).unwrap();
        let took = started.elapsed();
        assert_eq!((summary.tuples_in, summary.tuples_out), (4, 4), "{model}");
        assert!(took.as_millis() >= 300, "{model}: the last tuple is due 300 ms in, the run took {took:?}");
        let tuples = out.take();
        let first = tuples[0].intended_ns;
        let offsets: Vec<u64> = tuples.iter().map(|t| (t.intended_ns - first) / MS).collect();
        assert_eq!(offsets, vec![0, 0, 100, 300], "{model}: intended times follow the clock");
        for t in &tuples {
            assert!(t.ingress_ns >= t.intended_ns, "{model}: no tuple is sent before it is due");
        }
    }
}

#[test]
fn a_replay_speed_that_is_not_positive_sends_as_fast_as_possible() {
    let q = Query::new("replay");
    let source = Source::new(|_, _| [0u64, 1_000_000]).replay(|s: &u64| s * 1_000 * MS, 0.0);
    let out = q.source("records", source).collect("out");
    let started = Instant::now();
    wait_or_fail(Engine::start(common::config(4, 2, false), vec![q.build().unwrap()]).unwrap(), HANG).unwrap();
    assert_eq!(out.take().len(), 2);
    assert!(started.elapsed().as_secs() < 30);
}

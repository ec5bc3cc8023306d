//! Data parallelism of one query: a source of parallelism N, N instances of every operator
//! joined by forward edges, N sinks.
//!
//! - every tuple arrives exactly once, and only through its own instance's pipeline, under every
//!   threading model (and with chaining, where each instance's pipeline is one task);
//! - the instances of a rate-limited source share one schedule: together they send exactly the
//!   tuples of the rate asked, at exactly its intended times, from one start.
//!
//! Correctness only: that N instances use N cores is a benchmark
//! (`docs/results/2026-11-26/parallelism/`).

mod common;

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;

use moirai_engine::source::Offered;
use moirai_engine::{Engine, Operator, Output, Query, Source, Tuple};

use common::{wait_or_fail, HANG};

/// Passes tuples on, counting those that did not come from its own source instance (instance i
/// of the source sends the numbers ≡ i modulo the parallelism).
struct OwnLane {
    instance: u64,
    parallelism: u64,
    strangers: Arc<AtomicU64>,
}

impl Operator<u64, u64> for OwnLane {
    fn process(&mut self, t: Tuple<u64>, out: &mut Output<'_, u64>) {
        if t.data % self.parallelism != self.instance {
            self.strangers.fetch_add(1, Ordering::Relaxed);
        }
        out.emit(t);
    }
}

/// Source (parallelism `p`, `total` numbers in all) → three `OwnLane` operators → collect, under
/// `threading`; returns the numbers collected, sorted, and how many crossed into another lane.
fn run_parallel(threading: &str, chaining: bool, p: usize, total: u64) -> (Vec<u64>, u64) {
    let strangers = Arc::new(AtomicU64::new(0));
    let q = Query::new("parallel");
    let mut stream = q.source("numbers", Source::new(move |i, n| (i as u64..total).step_by(n))).parallelism(p);
    for k in 1..=3 {
        let s = strangers.clone();
        stream = stream
            .process(&format!("op{k}"), move |instance| OwnLane {
                instance: instance as u64,
                parallelism: p as u64,
                strangers: s.clone(),
            })
            .parallelism(p);
    }
    let out = stream.collect("out");
    let engine = Engine::start(common::config_in(threading, 64, 8, chaining), vec![q.build().unwrap()]).unwrap();
    let summary = wait_or_fail(engine, HANG).unwrap();
    assert_eq!(summary.tuples_in, total, "{threading}");
    assert_eq!(summary.tuples_out, total, "{threading}");
    let mut got: Vec<u64> = out.take().into_iter().map(|t| t.data).collect();
    got.sort_unstable();
    (got, strangers.load(Ordering::SeqCst))
}

#[test]
fn every_tuple_arrives_once_through_its_own_instance_under_every_threading_model() {
    let total = 30_000;
    let want: Vec<u64> = (0..total).collect();
    let runs = [
        ("dedicated", false, 2),
        ("dedicated", true, 2),
        ("dynamic:2", false, 2),
        ("dynamic:2", true, 2),
        ("policy:qs:2:period=5ms", false, 2),
        ("elastic:1-2:period=20ms", false, 2),
        ("fused", false, 2),
        // More instances than workers: instance i shares worker i mod 2.
        ("dynamic:2", false, 3),
        ("policy:rr:2:quantum=1ms", false, 3),
    ];
    for (threading, chaining, p) in runs {
        let (got, strangers) = run_parallel(threading, chaining, p, total);
        assert!(
            got == want,
            "{threading} chaining {chaining} parallelism {p}: {} tuples, not 0..{total} once each",
            got.len()
        );
        assert_eq!(strangers, 0, "{threading} chaining {chaining} parallelism {p}: tuples crossed lanes");
    }
}

#[test]
fn the_instances_of_a_source_offer_exactly_its_schedule_together() {
    // 2 000 tuples at 8 000 tuples/s over 3 instances (0.25 s): their intended times, merged,
    // are the schedule's, tuple for tuple, from one start.
    let (rate, total, p) = (8_000.0, 2_000u64, 3usize);
    for threading in ["dedicated", "dynamic:2"] {
        let q = Query::new("paced");
        let out = q
            .source("numbers", Source::new(move |i, n| (i as u64..total).step_by(n)).rate(rate))
            .parallelism(p)
            .map("id", |x| x)
            .parallelism(p)
            .collect("out");
        let engine = Engine::start(common::config_in(threading, 1024, 64, false), vec![q.build().unwrap()]).unwrap();
        wait_or_fail(engine, HANG).unwrap();
        let tuples = out.take();
        assert_eq!(tuples.len() as u64, total, "{threading}");
        let start = tuples.iter().map(|t| t.intended_ns).min().unwrap();
        let mut intended: Vec<(u64, u64)> = tuples.iter().map(|t| (t.intended_ns - start, t.data)).collect();
        intended.sort_unstable();
        let schedule = Offered::Constant(rate);
        for (k, &(at, data)) in intended.iter().enumerate() {
            assert_eq!(at, schedule.intended(k as u64), "{threading}: tuple {k} of the schedule");
            // Instance i's j-th tuple (data i + j·p) is tuple j·p + i of the schedule.
            assert_eq!(data, k as u64, "{threading}: tuple {k} of the schedule came from the wrong instance or turn");
        }
    }
}

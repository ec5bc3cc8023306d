//! Stopping, aborting and failing: the engine always comes to an end, and says why.
//!
//! - `stop` with full queues drains every tuple in flight (out = in, nothing lost or doubled);
//! - `stop` wakes a rate-limited source sleeping until its next tuple;
//! - `abort` and dropping a running engine end every thread;
//! - a panicking operator — mid-pipeline with its producers blocked on full channels, chained,
//!   a sink, a source, a window, a join — is reported by name and the engine shuts down;
//! - the counts a run's timeline reads each second
//!   ([`moirai_engine::view::EngineView::counts`]) add up every source and every sink, as the
//!   totals do, and show a source's backlog.
//!
//! Each runs under every threading model ([`common::MODELS`]) where the model matters. Every wait
//! is guarded by a timeout that only turns a hang into a failure.

mod common;

use std::collections::BTreeMap;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use moirai_engine::{Agg, Engine, EngineError, Operator, Output, Query, Source, Tuple, Window};

use common::{wait_or_fail, wait_until, within, HANG};

fn slow<T>(x: T) -> T {
    std::thread::sleep(Duration::from_micros(50));
    x
}

/// Physical operators whose name contains `name`.
fn operators<'a>(
    engine: &'a Engine,
    name: &'a str,
) -> impl Iterator<Item = moirai_engine::metrics::OperatorSnapshot> + 'a {
    engine.snapshot().into_iter().filter(move |o| o.name.contains(name))
}

#[test]
fn stop_drains_every_tuple_in_flight() {
    for model in common::MODELS {
        stop_drains_in(model);
    }
}

fn stop_drains_in(model: &str) {
    let got: Arc<Mutex<Vec<(usize, u64)>>> = Arc::default();
    let sink = got.clone();
    let q = Query::new("drain");
    q.source("numbers", Source::new(|i, _| (0u64..).map(move |seq| (i, seq))))
        .parallelism(2)
        .map("slow", slow)
        .parallelism(3)
        .map("slower", slow)
        .parallelism(2)
        .sink("out", move |t| sink.lock().unwrap().push(t.data));
    let engine = Engine::start(common::config_in(model, 4, 2, false), vec![q.build().unwrap()]).unwrap();

    // Full queues before the stop: the sources are blocked and tuples wait in every channel.
    wait_until("full queues", HANG, || {
        operators(&engine, "numbers").all(|o| o.blocked_ns > 0)
            && operators(&engine, "slow").all(|o| o.queue_len > 0)
            && got.lock().unwrap().len() > 100
    });
    engine.stop();
    let summary = wait_or_fail(engine, HANG).expect("a stopped engine ends cleanly");
    assert!(summary.tuples_in > 0);
    assert_eq!(summary.tuples_out, summary.tuples_in, "{model}: every tuple in flight was drained");

    // Each source instance's sequence arrived whole: 0..n, each once.
    let mut per_instance: BTreeMap<usize, Vec<u64>> = BTreeMap::new();
    for (i, seq) in got.lock().unwrap().drain(..) {
        per_instance.entry(i).or_default().push(seq);
    }
    let mut total = 0;
    for (i, mut seqs) in per_instance {
        seqs.sort_unstable();
        let n = seqs.len() as u64;
        assert!(seqs.iter().copied().eq(0..n), "{model}: instance {i}: not 0..{n} exactly once");
        total += n;
    }
    assert_eq!(total, summary.tuples_in);
}

#[test]
fn stop_wakes_a_sleeping_source() {
    for model in common::MODELS {
        stop_wakes_in(model);
    }
}

fn stop_wakes_in(model: &str) {
    // One tuple every 1000 s: after the first, the source sleeps far longer than the timeout.
    let q = Query::new("sleepy");
    let out = q.source("ticks", Source::new(|_, _| 0u64..).rate(0.001)).map("id", |x| x).collect("out");
    let engine = Engine::start(common::config_in(model, 4, 1, false), vec![q.build().unwrap()]).unwrap();
    wait_until("the first tuple", HANG, || engine.totals().tuples_out == 1);
    engine.stop();
    let summary = wait_or_fail(engine, HANG).unwrap();
    assert_eq!((summary.tuples_in, summary.tuples_out), (1, 1));
    assert_eq!(out.take().into_iter().map(|t| t.data).collect::<Vec<_>>(), vec![0]);
}

#[test]
fn counts_add_up_the_sources_and_sinks_and_show_a_source_s_backlog() {
    for model in common::MODELS {
        counts_in(model);
    }
}

fn counts_in(model: &str) {
    // A finite query of two source instances and two sinks, and a query whose source offers
    // 2 000 tuples/s into an operator that takes 2 ms a tuple: with channels of 4 its source
    // falls behind its rate by ~1 000 tuples a second.
    let finite = Query::new("finite");
    finite
        .source("numbers", Source::new(|_, _| 0u64..300))
        .parallelism(2)
        .map("id", |x| x)
        .parallelism(2)
        .discard("out");
    let behind = Query::new("behind");
    let slow = |x: u64| {
        std::thread::sleep(Duration::from_millis(2));
        x
    };
    behind.source("ticks", Source::new(|_, _| 0u64..).rate(2000.0)).map("slow", slow).discard("out");
    let engine =
        Engine::start(common::config_in(model, 4, 1, false), vec![finite.build().unwrap(), behind.build().unwrap()])
            .unwrap();
    wait_until("a backlog of 200 tuples at the source behind", HANG, || engine.view().counts().backlog >= 200);
    engine.stop();
    wait_until("the engine to drain and end", HANG, || engine.is_finished());
    // Ended: nothing moves, so the counts, the totals and the operators' own counters agree.
    let (counts, totals) = (engine.view().counts(), engine.totals());
    assert_eq!((counts.tuples_in, counts.tuples_out), (totals.tuples_in, totals.tuples_out), "{model}");
    let sent: u64 = engine
        .snapshot()
        .iter()
        .filter(|o| o.name.contains("numbers") || o.name.contains("ticks"))
        .map(|o| o.tuples_in)
        .sum();
    assert_eq!(counts.tuples_in, sent, "{model}: every source instance of both queries");
    assert!(counts.tuples_in > 0 && counts.tuples_out == counts.tuples_in, "{model}: drained: {counts:?}");
    wait_or_fail(engine, HANG).unwrap();
}

/// An endless query with slow operators and tiny channels, so producers block.
fn endless(name: &str) -> Query {
    let q = Query::new(name);
    q.source("numbers", Source::new(|_, _| 0u64..))
        .parallelism(2)
        .map("slow", slow)
        .parallelism(2)
        .rebalance()
        .map("slower", slow)
        .discard("out");
    q
}

#[test]
fn abort_ends_an_endless_query() {
    for model in common::MODELS {
        let config = common::config_in(model, 2, 1, false);
        let engine = Engine::start(config, vec![endless("abort").build().unwrap()]).unwrap();
        wait_until("blocked sources", HANG, || operators(&engine, "numbers").all(|o| o.blocked_ns > 0));
        engine.abort();
        let summary = wait_or_fail(engine, HANG).expect("an abort is not a failure");
        assert!(summary.tuples_out <= summary.tuples_in, "{model}");
    }
}

#[test]
fn dropping_a_running_engine_ends_its_threads() {
    let engine = Engine::start(common::config(2, 1, false), vec![endless("drop").build().unwrap()]).unwrap();
    wait_until("thread ids", HANG, || engine.topology().physical.iter().all(|o| o.tid != 0));
    let threads: Vec<(i32, String)> = engine.topology().physical.iter().map(|o| (o.tid, o.name.clone())).collect();
    within(HANG, "dropping the engine", move || drop(engine));
    let pid = std::process::id();
    for (tid, name) in threads {
        // Gone, or (if the kernel already reused the id) someone else's.
        let comm = std::fs::read_to_string(format!("/proc/{pid}/task/{tid}/comm")).unwrap_or_default();
        assert!(!name.starts_with(comm.trim_end()) || comm.is_empty(), "thread {tid} of '{name}' still runs");
    }
}

// ---------------------------------------------------------------------------------------------
// Panics.

/// Runs `q` and expects it to fail with a panic of an operator whose physical name contains
/// `operator`, with a message containing "boom"; returns the physical name reported.
fn expect_panic(q: Query, config: moirai_engine::EngineConfig, operator: &str) -> String {
    expect_panic_of(Engine::start(config, vec![q.build().unwrap()]).unwrap(), operator)
}

fn expect_panic_of(engine: Engine, operator: &str) -> String {
    match wait_or_fail(engine, HANG) {
        Err(e @ EngineError::OperatorPanicked { .. }) => {
            let text = e.to_string();
            let EngineError::OperatorPanicked { operator: name, message } = e else { unreachable!() };
            assert!(name.contains(operator), "reported operator '{name}' is not '{operator}'");
            assert!(message.contains("boom"), "message: {message}");
            assert!(text.contains(&name) && text.contains("boom"), "{text}");
            name
        }
        other => panic!("expected a panic of '{operator}', got {other:?}"),
    }
}

/// Panics on its first tuple after `armed` is set; slow, so its input channel fills up.
struct Exploder {
    armed: Arc<AtomicBool>,
}

impl Operator<u64, u64> for Exploder {
    fn process(&mut self, t: Tuple<u64>, out: &mut Output<'_, u64>) {
        assert!(!self.armed.load(Ordering::SeqCst), "boom");
        std::thread::sleep(Duration::from_micros(200));
        out.emit(t);
    }
}

#[test]
fn a_panic_with_blocked_producers_and_waiting_consumers_is_reported() {
    for model in common::MODELS {
        panic_with_blocked_producers_in(model);
    }
}

fn panic_with_blocked_producers_in(model: &str) {
    let armed = Arc::new(AtomicBool::new(false));
    let a = armed.clone();
    let q = Query::new("explode");
    q.source("numbers", Source::new(|_, _| 0u64..))
        .parallelism(2)
        .map("fast", |x| x)
        .parallelism(2)
        .rebalance()
        .process("exploder", move |_| Exploder { armed: a.clone() })
        .parallelism(2)
        .map("after", |x| x)
        .discard("out");
    let engine = Engine::start(common::config_in(model, 4, 2, false), vec![q.build().unwrap()]).unwrap();
    // Arm only once the producers have blocked on the exploder's full channels.
    wait_until("blocked producers", HANG, || {
        operators(&engine, "fast").all(|o| o.blocked_ns > 0) && operators(&engine, "exploder").all(|o| o.queue_len > 0)
    });
    armed.store(true, Ordering::SeqCst);
    let name = expect_panic_of(engine, "exploder");
    assert!(name.starts_with("exploder ("), "{name}");
}

#[test]
fn a_panic_in_a_chained_operator_names_it() {
    let q = Query::new("chained");
    q.source("numbers", Source::new(|_, _| 0u64..))
        .map("exploder", |x| if x == 5000 { panic!("boom at {x}") } else { x })
        .discard("out");
    let name = expect_panic(q, common::config(4, 2, true), "exploder");
    assert_eq!(name, "numbers -> exploder -> out (1/1)");
}

#[test]
fn a_panic_in_a_sink_is_reported() {
    let q = Query::new("sink");
    let seen = Arc::new(AtomicU64::new(0));
    q.source("numbers", Source::new(|_, _| 0u64..)).parallelism(2).map("slow", slow).parallelism(2).sink(
        "exploding_sink",
        move |_| {
            assert!(seen.fetch_add(1, Ordering::SeqCst) < 300, "boom");
        },
    );
    expect_panic(q, common::config(4, 2, false), "exploding_sink");
}

#[test]
fn a_panic_in_a_source_is_reported() {
    for model in common::MODELS {
        let q = Query::new("source");
        q.source("exploding_source", Source::new(|_, _| (0u64..).inspect(|&i| assert!(i < 2000, "boom"))))
            .map("slow", slow)
            .discard("out");
        expect_panic(q, common::config_in(model, 4, 2, false), "exploding_source");
    }
}

#[test]
fn a_panic_in_a_window_aggregate_is_reported() {
    let q = Query::new("window");
    q.source("numbers", Source::new(|_, _| 0u64..))
        .key_by(|x: &u64| x % 7)
        .window(
            "exploding_window",
            Window::tumbling(Duration::from_millis(1)),
            Agg::sum(|x: &u64| if *x == 3000 { panic!("boom") } else { *x as f64 }),
        )
        .parallelism(3)
        .discard("out");
    expect_panic(q, common::config(4, 2, true), "exploding_window");
}

#[test]
fn a_panic_in_a_join_is_reported() {
    let q = Query::new("join");
    let left = q.source("left", Source::new(|_, _| 0u64..)).key_by(|x: &u64| x % 3);
    let right = q.source("right", Source::new(|_, _| 0u64..)).key_by(|x: &u64| x % 3);
    left.interval_join("exploding_join", right, -1_000_000, 1_000_000, |_, l: &u64, _: &u64| {
        assert!(*l < 500, "boom");
        *l
    })
    .parallelism(2)
    .discard("out");
    expect_panic(q, common::config(4, 2, true), "exploding_join");
}

//! Bad queries and settings get a clear error through the public API, never a panic or a hang.
//! Each message names the operator (or query) at fault and says how to fix it.
//!
//! A cycle cannot be written with the typed API; `LogicalGraph::validate` catches it and has its
//! own unit tests in `graph.rs`.

use std::net::TcpListener;
use std::time::Duration;

use moirai_engine::{Agg, BuildError, BuiltQuery, Engine, EngineConfig, EngineError, Query, Source, Window};

fn numbers(q: &Query, name: &str) -> moirai_engine::Stream<u64> {
    q.source(name, Source::new(|_, _| 0..10u64))
}

fn build_error(q: Query) -> BuildError {
    match q.build() {
        Ok(_) => panic!("the query should not build"),
        Err(e) => e,
    }
}

/// The message contains each of `parts`.
fn says(e: &impl std::fmt::Display, parts: &[&str]) {
    let text = e.to_string();
    for p in parts {
        assert!(text.contains(p), "message '{text}' lacks '{p}'");
    }
}

#[test]
fn zero_parallelism() {
    let q = Query::new("q");
    numbers(&q, "src").map("doubler", |x| 2 * x).parallelism(0).discard("out");
    let e = build_error(q);
    assert!(matches!(&e, BuildError::ZeroParallelism { query, name } if query == "q" && name == "doubler"), "{e:?}");
    says(&e, &["'doubler'", "parallelism 0", "at least 1"]);
}

#[test]
fn duplicate_operator_names() {
    let q = Query::new("q");
    numbers(&q, "src").map("twice", |x| x).map("twice", |x| x).discard("out");
    let e = build_error(q);
    assert!(matches!(&e, BuildError::DuplicateName { name, .. } if name == "twice"), "{e:?}");
    says(&e, &["'twice'", "unique"]);
}

#[test]
fn a_stream_never_consumed() {
    let q = Query::new("q");
    let s = numbers(&q, "src");
    s.clone().discard("out");
    let _forgotten = s.map("lonely", |x| x + 1);
    let e = build_error(q);
    assert!(matches!(&e, BuildError::DanglingStream { name, .. } if name == "lonely"), "{e:?}");
    says(&e, &["'lonely'", "never consumed", "sink"]);
}

#[test]
fn a_source_alone_dangles() {
    let q = Query::new("q");
    let _ = numbers(&q, "src");
    let e = build_error(q);
    assert!(matches!(&e, BuildError::DanglingStream { name, .. } if name == "src"), "{e:?}");
}

#[test]
fn forward_between_unequal_parallelisms() {
    let q = Query::new("q");
    numbers(&q, "src").parallelism(2).forward().map("wide", |x| x).parallelism(3).discard("out");
    let e = build_error(q);
    assert!(
        matches!(&e, BuildError::ForwardParallelism { from, to, from_par: 2, to_par: 3, .. } if from == "src" && to == "wide"),
        "{e:?}"
    );
    says(&e, &["'src'", "'wide'", "rebalance()"]);

    // Without the explicit forward, unequal parallelisms are rebalanced and the query builds.
    let q = Query::new("q");
    numbers(&q, "src").parallelism(2).map("wide", |x| x).parallelism(3).discard("out");
    q.build().expect("default partitioning adapts to parallelism");
}

#[test]
fn empty_query_and_empty_names() {
    let e = build_error(Query::new("nothing"));
    assert_eq!(e, BuildError::EmptyQuery { query: "nothing".into() });
    says(&e, &["'nothing'", "add a source"]);

    let e = build_error(Query::new("  "));
    says(&e, &["name"]);

    let q = Query::new("q");
    numbers(&q, "src").map("", |x| x).discard("out");
    let e = build_error(q);
    assert!(matches!(e, BuildError::EmptyName { .. }), "{e:?}");
    says(&e, &["'q'", "needs a name"]);
}

#[test]
fn a_query_builds_once() {
    let q = Query::new("q");
    numbers(&q, "src").discard("out");
    q.clone().build().unwrap();
    says(&build_error(q), &["already built"]);
}

fn ok_query(name: &str) -> BuiltQuery {
    let q = Query::new(name);
    numbers(&q, "src").discard("out");
    q.build().unwrap()
}

fn start_error(config: EngineConfig, queries: Vec<BuiltQuery>) -> EngineError {
    match Engine::start(config, queries) {
        Ok(engine) => {
            engine.abort();
            panic!("the engine should not start")
        }
        Err(e) => e,
    }
}

#[test]
fn duplicate_query_names_in_one_engine() {
    let e = start_error(EngineConfig::default(), vec![ok_query("twin"), ok_query("twin")]);
    assert!(matches!(&e, EngineError::Build(BuildError::DuplicateQuery { query }) if query == "twin"), "{e:?}");
    says(&e, &["'twin'", "own name"]);

    // Distinct names run side by side, each query with its own "src" and "out".
    let engine = Engine::start(EngineConfig::default(), vec![ok_query("a"), ok_query("b")]).unwrap();
    let summary = engine.wait().unwrap();
    assert_eq!((summary.tuples_in, summary.tuples_out), (20, 20));
}

#[test]
fn bad_engine_settings() {
    let e = start_error(EngineConfig::default(), vec![]);
    says(&e, &["no query"]);
    let e = start_error(EngineConfig { channel_capacity: 0, ..EngineConfig::default() }, vec![ok_query("q")]);
    says(&e, &["capacity", "at least 1"]);
    let e = start_error(EngineConfig { batch_size: 0, ..EngineConfig::default() }, vec![ok_query("q")]);
    says(&e, &["batch size", "at least 1"]);
    let e = start_error(EngineConfig { channel_capacity: usize::MAX, ..EngineConfig::default() }, vec![ok_query("q")]);
    says(&e, &["channel capacity", "at most 16777216"]);
    let e = start_error(EngineConfig { batch_size: 100_000_000, ..EngineConfig::default() }, vec![ok_query("q")]);
    says(&e, &["batch size 100000000", "at most", "65536"]);

    let taken = TcpListener::bind("127.0.0.1:0").unwrap();
    let addr = taken.local_addr().unwrap();
    let e = start_error(EngineConfig { metrics_addr: Some(addr), ..EngineConfig::default() }, vec![ok_query("q")]);
    assert!(matches!(&e, EngineError::Listen { addr: a, .. } if *a == addr), "{e:?}");
    says(&e, &[&addr.to_string(), "another address"]);
}

#[test]
fn bad_window_shapes() {
    for (window, hint) in [
        (Window::sliding(Duration::from_millis(10), Duration::from_millis(20)), "slide <= size"),
        (Window::tumbling(Duration::ZERO), "positive"),
        (Window::sliding(Duration::from_millis(10), Duration::ZERO), "positive"),
    ] {
        let q = Query::new("q");
        numbers(&q, "src").key_by(|x: &u64| x % 2).window("my_window", window, Agg::count()).discard("out");
        let e = build_error(q);
        assert!(matches!(e, BuildError::Config(_)), "{e:?}");
        says(&e, &["'my_window'", hint]);
    }
}

#[test]
fn join_bounds_reversed() {
    let q = Query::new("q");
    let left = numbers(&q, "left").key_by(|x: &u64| *x);
    let right = numbers(&q, "right").key_by(|x: &u64| *x);
    left.interval_join("my_join", right, 10, -10, |_, l: &u64, _: &u64| *l).discard("out");
    let e = build_error(q);
    assert!(matches!(e, BuildError::Config(_)), "{e:?}");
    says(&e, &["'my_join'", "lower bound 10", "upper bound -10", "swap the bounds"]);
}

#[test]
fn streams_of_another_query() {
    let (a, b) = (Query::new("a"), Query::new("b"));
    let sa = numbers(&a, "src");
    let sb = numbers(&b, "src");
    sa.union("merge", vec![sb]).discard("out");
    let e = build_error(a);
    assert!(matches!(e, BuildError::InvalidEdge { .. }), "{e:?}");
    says(&e, &["'merge'", "another query"]);

    let (a, b) = (Query::new("a"), Query::new("b"));
    let left = numbers(&a, "left").key_by(|x: &u64| *x);
    let right = numbers(&b, "right").key_by(|x: &u64| *x);
    left.interval_join("my_join", right, 0, 1, |_, l: &u64, _: &u64| *l).discard("out");
    let e = build_error(a);
    says(&e, &["'my_join'", "another query"]);
}

#[test]
fn unschedulable_rates_are_refused() {
    // A source paces tuples in whole nanoseconds: above 1e9 tuples/s (or NaN, infinite, negative)
    // its schedule means nothing. It used to overflow in the source thread.
    for (rate, hint) in [(1e25, "at most 1000000000 tuples/s"), (f64::NAN, "positive"), (-5.0, "positive")] {
        let q = Query::new("q");
        q.source("src", Source::new(|_, _| 0..10u64).rate(rate)).discard("out");
        says(&build_error(q), &["'q'", "'src'", hint]);
    }
    let q = Query::new("q");
    q.source("src", Source::new(|_, _| 0..10u64).ramp(10.0, f64::INFINITY, Duration::from_secs(1))).discard("out");
    says(&build_error(q), &["'src'", "finite"]);
    // The most a source schedules is fine.
    let q = Query::new("q");
    q.source("src", Source::new(|_, _| 0..10u64).rate(moirai_engine::source::MAX_RATE)).discard("out");
    assert!(q.build().is_ok());
    // A ramp (EngineConfig::ramp) must not lift a schedulable rate beyond it either.
    let q = Query::new("q");
    q.source("src", Source::new(|_, _| 0..10u64).rate(1e6)).discard("out");
    let config = EngineConfig { ramp: Some((1e6, Duration::from_secs(1))), ..EngineConfig::default() };
    let e = start_error(config, vec![q.build().unwrap()]);
    says(&e, &["'src'", "ramp target", "at most 1000000000 tuples/s"]);
}

//! The threading models' own promises, beyond what every model shares (the property tests):
//!
//! - a pool of one worker finishes a query where a blocking design deadlocks: a producer whose
//!   channel is full while the only thread that could drain it is the producer's own;
//! - under a pool of several workers one operator instance never runs on two threads at once;
//! - a query of 10 000 operators builds, starts and runs to its end, every tuple in order, also
//!   with the prefetch hints a pool of that size issues (correctness only: how fast is a
//!   benchmark);
//! - fused placement puts operators on the named threads their hints name, and refuses a hint
//!   that names no declared thread;
//! - `/topology` lists a pool's worker threads, each operator's last thread, the thread level.

mod common;

use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::Arc;

use moirai_engine::{Engine, EngineConfig, EngineError, Operator, Output, Query, Source, Threading, Tuple};

use common::{wait_or_fail, HANG};

fn config(threading: &str, capacity: usize, batch: usize) -> EngineConfig {
    common::config_in(threading, capacity, batch, false)
}

#[test]
fn one_worker_finishes_where_a_blocking_design_deadlocks() {
    // Source -> broadcast to two operators -> their union -> sink, channels of one tuple, batches
    // of one. The source fills its channel to `a` at once; with one thread, a blocking send would
    // wait for `a`, which only that thread could run.
    let q = Query::new("diamond");
    let src = q.source("numbers", Source::new(|_, _| 0u64..5_000));
    let a = src.clone().broadcast().map("a", |x| x);
    let b = src.broadcast().map("b", |x| x + 1_000_000);
    let out = a.union("both", vec![b]).collect("out");
    let engine = Engine::start(config("dynamic:1", 1, 1), vec![q.build().unwrap()]).unwrap();
    let summary = wait_or_fail(engine, HANG).unwrap();
    assert_eq!(summary.tuples_out, 10_000);
    let mut got: Vec<u64> = out.take().into_iter().map(|t| t.data).collect();
    got.sort_unstable();
    let mut want: Vec<u64> = (0..5_000).chain(1_000_000..1_005_000).collect();
    want.sort_unstable();
    assert_eq!(got, want);
}

/// Fails if it is ever entered while another thread is inside it.
struct Exclusive {
    inside: Arc<AtomicBool>,
    overlaps: Arc<AtomicU64>,
}

impl Operator<u64, u64> for Exclusive {
    fn process(&mut self, t: Tuple<u64>, out: &mut Output<'_, u64>) {
        if self.inside.swap(true, Ordering::SeqCst) {
            self.overlaps.fetch_add(1, Ordering::SeqCst);
        }
        // Stay inside a moment, so that an overlap would be seen.
        let until = std::time::Instant::now() + std::time::Duration::from_micros(2);
        while std::time::Instant::now() < until {
            std::hint::spin_loop();
        }
        self.inside.store(false, Ordering::SeqCst);
        out.emit(t);
    }
}

#[test]
fn an_operator_instance_never_runs_on_two_workers_at_once() {
    let overlaps = Arc::new(AtomicU64::new(0));
    let q = Query::new("exclusive");
    let o = overlaps.clone();
    // Four source instances feed one instance (one flag per instance: parallelism 1).
    q.source("numbers", Source::new(|_, _| 0u64..20_000))
        .parallelism(4)
        .rebalance()
        .process("exclusive", move |_| Exclusive { inside: Arc::default(), overlaps: o.clone() })
        .discard("out");
    let engine = Engine::start(config("dynamic:4", 16, 4), vec![q.build().unwrap()]).unwrap();
    let summary = wait_or_fail(engine, HANG).unwrap();
    assert_eq!(summary.tuples_out, 80_000);
    assert_eq!(overlaps.load(Ordering::SeqCst), 0);
}

#[test]
fn ten_thousand_operators_build_start_and_finish() {
    // Pools this large prefetch along the pipeline: with one worker (`dynamic:1`, `fused`)
    // everywhere, with two within each worker's segment.
    for model in ["dynamic:2", "dynamic:1", "fused"] {
        let q = Query::new("long");
        let mut s = q.source("numbers", Source::new(|_, _| 0u64..200));
        for i in 0..9_998 {
            s = s.map(&format!("op{i}"), |x| x + 1);
        }
        let out = s.collect("out");
        let query = q.build().unwrap();
        assert_eq!(query.graph().nodes.len(), 10_000);
        let engine = Engine::start(config(model, 64, 16), vec![query]).unwrap();
        assert_eq!(engine.topology().physical.len(), 10_000);
        let summary = wait_or_fail(engine, HANG).unwrap();
        assert_eq!(summary.tuples_out, 200, "{model}");
        let got: Vec<u64> = out.take().into_iter().map(|t| t.data).collect();
        assert_eq!(got, (9_998..10_198).collect::<Vec<u64>>(), "{model}: order and values");
    }
}

#[test]
fn fused_threads_run_the_operators_placed_on_them() {
    let q = Query::new("placed");
    q.source("numbers", Source::new(|_, _| 0u64..).rate(2_000.0))
        .thread("io")
        .map("work", |x| x)
        .thread("work")
        .map("more", |x| x)
        .discard("out");
    let engine = Engine::start(config("fused:io+work", 64, 8), vec![q.build().unwrap()]).unwrap();
    common::wait_until("every operator ran", HANG, || engine.topology().physical.iter().all(|o| o.tid != 0));
    let topo = engine.topology();
    let names: Vec<&str> = topo.threads.iter().map(|t| t.name.as_str()).collect();
    assert_eq!(names, ["io", "work"]);
    let tid_of = |name: &str| topo.threads.iter().find(|t| t.name == name).unwrap().tid;
    for o in &topo.physical {
        // Hinted operators on their thread; the others on the first.
        let want = if o.name.starts_with("work") { "work" } else { "io" };
        assert_eq!(o.tid, tid_of(want), "{} on the wrong thread", o.name);
    }
    engine.stop();
    wait_or_fail(engine, HANG).unwrap();

    let q = Query::new("misplaced");
    q.source("numbers", Source::new(|_, _| 0u64..10)).thread("gpu").discard("out");
    match Engine::start(config("fused:io+work", 64, 8), vec![q.build().unwrap()]) {
        Err(EngineError::Build(e)) => {
            let msg = e.to_string();
            assert!(msg.contains("'numbers'") && msg.contains("'gpu'") && msg.contains("fused:io+work+gpu"), "{msg}");
        }
        Err(e) => panic!("wrong error: {e}"),
        Ok(_) => panic!("a hint naming no declared thread was accepted"),
    }
}

#[test]
fn topology_shows_the_pool() {
    let q = Query::new("pool");
    q.source("numbers", Source::new(|_, _| 0u64..).rate(5_000.0)).map("id", |x| x).discard("out");
    let config =
        EngineConfig { threading: "elastic:1-2:start=2".parse::<Threading>().unwrap(), ..config("dedicated", 64, 8) };
    let engine = Engine::start(config, vec![q.build().unwrap()]).unwrap();
    common::wait_until("worker tids", HANG, || engine.topology().threads.iter().all(|t| t.tid != 0));
    let topo = engine.topology();
    assert_eq!(topo.threads.len(), 2, "the pool spawns its maximum");
    assert_eq!(topo.thread_level, 2, "and runs at its start level");
    let pid = std::process::id();
    for t in &topo.threads {
        let comm = std::fs::read_to_string(format!("/proc/{pid}/task/{}/comm", t.tid)).unwrap();
        assert_eq!(comm.trim_end(), t.name);
        assert!(t.name.starts_with("elastic-"), "{}", t.name);
    }
    common::wait_until("every operator ran", HANG, || engine.topology().physical.iter().all(|o| o.tid != 0));
    for o in engine.topology().physical {
        assert!(topo.threads.iter().any(|t| t.tid == o.tid), "{} ran on a thread outside the pool", o.name);
    }
    let json = serde_json::to_value(engine.topology()).unwrap();
    assert_eq!(json["threading"], "elastic:1-2:start=2:period=1s");
    engine.stop();
    let summary = wait_or_fail(engine, HANG).unwrap();
    assert!(summary.operators.iter().all(|o| o.cpu_ns > 0), "CPU time is measured per run on the workers");
}

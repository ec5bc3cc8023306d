//! The user-level policy executor's policies are the middleware's, run in-process: on the
//! engine's own topology and counters, QS ranks the operator with the longer queue higher, a
//! source by its backlog, and the ranks become the executor's priority levels (which run first
//! is the executor's unit tests: `the_policy_executor_runs_the_highest_level_first`). With
//! activation `auto` (the default) the levels apply only while the activation rule says
//! scheduling can help: well below saturation every operator stays at one level, past it the
//! policy's levels apply, and when the rate falls back every operator returns to one level.

mod common;

use std::sync::atomic::Ordering;
use std::time::{Duration, Instant};

use moirai_engine::adapter::PolicyPrioritizer;
use moirai_engine::user_level::{levels, Prioritizer};
use moirai_engine::{Engine, Query, Source};

use common::{config_in, wait_or_fail, HANG};

#[test]
fn qs_ranks_the_operator_with_the_longer_queue_higher() {
    let queries: Vec<_> = ["long", "short"]
        .into_iter()
        .map(|name| {
            let q = Query::new(name);
            q.source("numbers", Source::new(|_, _| 0u64..).rate(100.0)).map(name, |x| x).collect("out");
            q.build().unwrap()
        })
        .collect();
    let engine = Engine::start(config_in("policy:qs:1:period=1s", 64, 8, false), queries).unwrap();
    let topology = engine.topology();
    let mut ops = engine.snapshot();
    let index = |name: &str| ops.iter().position(|o| o.name.starts_with(name)).unwrap();
    let (long, short) = (index("long (1/1)"), index("short (1/1)"));
    ops.iter_mut().for_each(|o| (o.queue_len, o.backlog) = (0, 0));
    ops[long].queue_len = 5_000;
    ops[short].queue_len = 10;
    let source = ops.iter().position(|o| o.query == "short" && o.name.starts_with("numbers")).unwrap();
    ops[source].backlog = 200;
    let mut qs = PolicyPrioritizer::new("qs").unwrap();
    let priorities = qs.priorities(&topology, &ops, std::time::Duration::from_secs(1)).unwrap();
    assert_eq!(priorities[long], 5_000.0, "{priorities:?}");
    assert_eq!(priorities[short], 10.0, "{priorities:?}");
    assert_eq!(priorities[source], 200.0, "a source's queue is its backlog: {priorities:?}");
    let l = levels(&priorities);
    assert!(l[long] > l[source] && l[source] > l[short], "{l:?}");
    engine.stop();
    wait_or_fail(engine, HANG).unwrap();
}

#[test]
fn every_policy_name_builds_and_ranks_a_running_engine() {
    let q = Query::new("q");
    q.source("numbers", Source::new(|_, _| 0u64..).rate(1000.0)).map("m", |x| x + 1).collect("out");
    let engine = Engine::start(config_in("policy:rr:1", 64, 8, false), vec![q.build().unwrap()]).unwrap();
    std::thread::sleep(std::time::Duration::from_millis(100));
    let topology = engine.topology();
    for name in ["qs", "hr", "fcfs", "random", "rr", "qbs", "rb", "script:queue_size + 1", "metric:rate_in"] {
        let mut p = PolicyPrioritizer::new(name).unwrap_or_else(|e| panic!("{name}: {e}"));
        // Two rounds: rates and costs are differences.
        for at in [1, 2] {
            let priorities = p.priorities(&topology, &engine.snapshot(), std::time::Duration::from_secs(at));
            let priorities = priorities.unwrap_or_else(|e| panic!("{name}: {e}"));
            assert_eq!(priorities.len(), topology.physical.len(), "{name}");
        }
    }
    let qbs = PolicyPrioritizer::new("qbs").unwrap().priorities(&topology, &engine.snapshot(), Default::default());
    let classes: Vec<f64> = qbs.unwrap();
    assert_eq!(classes, vec![5.0, 10.0, 10.0], "the output side is QBS' high class");
    assert!(PolicyPrioritizer::new("script:queue_size +").is_err_and(|e| e.to_string().contains("script")));
    engine.stop();
    wait_or_fail(engine, HANG).unwrap();
}

/// A query whose map spins `cost` of CPU per tuple, fed by `source`.
fn spinning(name: &str, source: Source<u64>, cost: Duration) -> moirai_engine::BuiltQuery {
    let q = Query::new(name);
    q.source("numbers", source)
        .map("spin", move |x| {
            let t = Instant::now();
            while t.elapsed() < cost {}
            x
        })
        .discard("out");
    q.build().unwrap()
}

/// A policy that ranks every operator above the source whatever the load: its levels differ
/// from the first round it applies.
const SOURCE_LAST: &str = r#"policy:script:"if kind == \"source\" { 1.0 } else { 2.0 }":period=20ms"#;

fn levels_now(engine: &Engine) -> Vec<u8> {
    engine.view().operators().iter().map(|m| m.priority_level.load(Ordering::Relaxed)).collect()
}

/// Whether every source waits below every other operator (what [`SOURCE_LAST`] asks).
fn sources_last(engine: &Engine) -> bool {
    let levels = levels_now(engine);
    let source = |i: usize| engine.view().head_kind(i) == moirai_engine::graph::NodeKind::Source;
    let top_source = (0..levels.len()).filter(|&i| source(i)).map(|i| levels[i]).max();
    let low_other = (0..levels.len()).filter(|&i| !source(i)).map(|i| levels[i]).min();
    matches!((top_source, low_other), (Some(s), Some(o)) if s < o)
}

#[test]
fn below_saturation_the_policy_stays_idle_unless_told_always() {
    // 200 tuples/s at 200 µs each: 4 % of a core.
    let low = || spinning("q", Source::new(|_, _| 0u64..).rate(200.0), Duration::from_micros(200));
    let auto = Engine::start(config_in(SOURCE_LAST, 64, 8, false), vec![low()]).unwrap();
    let until = Instant::now() + Duration::from_millis(2500);
    while Instant::now() < until {
        assert!(levels_now(&auto).iter().all(|&l| l == 0), "idle: one level for all, {:?}", levels_now(&auto));
        std::thread::sleep(Duration::from_millis(20));
    }
    assert_eq!(auto.view().policy_active(), Some(false));
    assert!(auto.view().activation_changes().is_empty(), "{:?}", auto.view().activation_changes());
    auto.stop();
    let totals = wait_or_fail(auto, HANG).unwrap();
    assert!(totals.tuples_out > 0 && totals.activation_changes.is_empty());

    let always_config = SOURCE_LAST.replace("period=20ms", "period=20ms:activation=always");
    let always = Engine::start(config_in(&always_config, 64, 8, false), vec![low()]).unwrap();
    let deadline = Instant::now() + Duration::from_secs(5);
    while levels_now(&always).iter().all(|&l| l == 0) && Instant::now() < deadline {
        std::thread::sleep(Duration::from_millis(10));
    }
    assert!(sources_last(&always), "always: the source below the rest from the start, {:?}", levels_now(&always));
    assert_eq!(always.view().policy_active(), Some(true));
    let changes = always.view().activation_changes();
    assert_eq!(changes.len(), 1, "{changes:?}");
    assert!(changes[0].active && changes[0].reason.contains("always") && changes[0].code == "always", "{changes:?}");
    always.stop();
    wait_or_fail(always, HANG).unwrap();
}

#[test]
fn past_saturation_the_policy_acts_and_when_the_rate_falls_back_every_operator_returns_to_one_level() {
    // Twice what the machine's cores can do (200 µs a tuple), falling to 100 tuples/s over 6 s,
    // over twice as many queries as cores (one operator uses one core at most); as many workers
    // as cores (the policy's default), so that the machine is saturated.
    let cores = std::thread::available_parallelism().map_or(2, |n| n.get());
    let queries = (0..2 * cores)
        .map(|q| {
            let source = Source::new(|_, _| 0u64..).ramp(5_000.0, 50.0 / cores as f64, Duration::from_secs(6));
            spinning(&format!("q{q}"), source, Duration::from_micros(200))
        })
        .collect();
    let engine = Engine::start(config_in(SOURCE_LAST, 64, 8, false), queries).unwrap();
    let wait_for = |active: bool, within: Duration| {
        let deadline = Instant::now() + within;
        while engine.view().policy_active() != Some(active) && Instant::now() < deadline {
            std::thread::sleep(Duration::from_millis(20));
        }
        engine.view().policy_active() == Some(active)
    };
    assert!(
        wait_for(true, Duration::from_secs(10)),
        "active past saturation: {:?}",
        engine.view().activation_changes()
    );
    assert!(sources_last(&engine), "active: the policy's levels, {:?}", levels_now(&engine));
    // The backlog drains, then the machine has room for the release window (10 s).
    assert!(wait_for(false, Duration::from_secs(45)), "idle again: {:?}", engine.view().activation_changes());
    assert!(levels_now(&engine).iter().all(|&l| l == 0), "handed back: {:?}", levels_now(&engine));
    let changes = engine.view().activation_changes();
    assert_eq!(changes.iter().map(|c| c.active).collect::<Vec<_>>(), [true, false], "no flapping: {changes:?}");
    assert!(["behind", "losing_ground"].contains(&changes[0].code), "{changes:?}");
    assert!(changes[0].reason.contains("behind") || changes[0].reason.contains("loses ground"), "{changes:?}");
    engine.stop();
    wait_or_fail(engine, HANG).unwrap();
}

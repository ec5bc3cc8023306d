//! The user-level policy executor's policies are the middleware's, run in-process: on the
//! engine's own topology and counters, QS ranks the operator with the longer queue higher, a
//! source by its backlog, and the ranks become the executor's priority levels (which run first
//! is the executor's unit tests: `the_policy_executor_runs_the_highest_level_first`).

mod common;

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

//! The cost model: what a wake-up, a notification, a source's timer and a drawn tuple cost, each
//! against its closed form on a pipeline where every tuple wakes every thread.

use std::time::Duration;

use moirai_engine::graph::{LogicalEdge, LogicalGraph, LogicalNode, NodeKind, Partitioning};
use moirai_sim::sim::CostDist;
use moirai_sim::{Model, NodeCost, Rate, SimConfig, Simulation};

/// `source → op1 → … → opN → sink`, a constant `rate`, every operator costing `cost_ns`.
fn pipeline(ops: usize, rate: f64, cost_ns: u64) -> Model {
    let node = |name: String, kind: NodeKind| {
        let ports = usize::from(kind != NodeKind::Source);
        LogicalNode { query: "q".into(), name, kind, ports, parallelism: 1, thread: None }
    };
    let mut nodes = vec![node("source".into(), NodeKind::Source)];
    nodes.extend((1..=ops).map(|i| node(format!("op{i}"), NodeKind::Operator)));
    nodes.push(node("sink".into(), NodeKind::Sink));
    let edges = (0..=ops)
        .map(|i| LogicalEdge { from: i, to: i + 1, port: 0, partitioning: Partitioning::Forward, exchange: None })
        .collect();
    Model::from_graph(vec!["q".into()], LogicalGraph { nodes, edges }, false, |_, name, _| {
        Ok(match name {
            "source" => NodeCost { rate: Rate::Constant(rate), ..NodeCost::cost(0) },
            _ => NodeCost::cost(cost_ns),
        })
    })
    .unwrap()
}

#[test]
fn at_a_low_rate_every_tuple_pays_a_wake_up_per_thread_and_a_notification_per_hop() {
    // 1000 tuples/s through 5 operators: each tuple wakes all 7 threads (the source by its
    // timer), and 6 of those wake-ups are notifications by the upstream thread.
    let (ops, rate) = (5, 1000.0);
    let model = pipeline(ops, rate, 0);
    let mut config = SimConfig::ideal(2, Duration::from_secs(2));
    config.cfs.context_switch_ns = 2_000;
    config.wakeup_cpu_ns = 3_000;
    config.notify_ns = 4_000;
    config.cfs.wakeup_ns = 10_000;
    let mut sim = Simulation::new(&model, config).unwrap();
    let events = sim.run();
    let s = sim.summary("pipeline", serde_json::Value::Null, events);
    let threads = (ops + 2) as f64;
    let per_tuple_ns = threads * (2_000.0 + 3_000.0) + (threads - 1.0) * 4_000.0;
    let cores = s.cpu_cores;
    assert!((cores / (rate * per_tuple_ns / 1e9) - 1.0).abs() < 0.01, "{cores} cores, {per_tuple_ns} ns per tuple");
    let wakeups = s.extra["wakeups"].as_u64().unwrap() as f64;
    let tuples = s.tuples_in as f64;
    assert!((wakeups / (tuples * threads) - 1.0).abs() < 0.01, "{wakeups} wake-ups for {tuples} tuples");
    // A hop: the wake-up latency, then the switch and the woken thread's own CPU, then its
    // notification of the next thread (which the next hop's latency starts after).
    let hop_ns = 10_000.0 + 2_000.0 + 3_000.0;
    let p50_ns = s.latency_ms.p50 * 1e6;
    let expect = (threads - 1.0) * hop_ns;
    assert!((p50_ns / expect - 1.0).abs() < 0.05, "p50 {p50_ns} ns, {expect} ns expected");
}

#[test]
fn notifications_are_charged_to_the_waker_and_delay_its_next_step() {
    // The same pipeline with only the notification's cost: the source and operators pay, the
    // sink (which wakes nobody) does not.
    let model = pipeline(2, 1000.0, 0);
    let mut config = SimConfig::ideal(2, Duration::from_secs(1));
    config.notify_ns = 7_000;
    let mut sim = Simulation::new(&model, config).unwrap();
    sim.run();
    let cpu = sim.thread_cpu();
    let tuples = 1000.0;
    for (i, &c) in cpu.iter().enumerate() {
        let per_tuple = c as f64 / tuples;
        if i + 1 == cpu.len() {
            assert!(per_tuple < 10.0, "the sink wakes nobody: {per_tuple} ns per tuple");
        } else {
            assert!((per_tuple / 7_000.0 - 1.0).abs() < 0.01, "thread {i}: {per_tuple} ns per tuple");
        }
    }
}

#[test]
fn a_source_sleeps_at_least_its_minimum_and_its_timer_fires_late() {
    // At 1M tuples/s a source that slept 50 µs + 50 µs of slack wakes about 10 000 times a
    // second and takes some 100 tuples each time: the wake-ups per second bound the source,
    // not the rate.
    let model = pipeline(1, 1_000_000.0, 0);
    let mut config = SimConfig::ideal(2, Duration::from_secs(1));
    config.source_min_sleep_ns = 50_000;
    config.timer_slack_ns = 50_000;
    let mut sim = Simulation::new(&model, config.clone()).unwrap();
    let events = sim.run();
    let s = sim.summary("pipeline", serde_json::Value::Null, events);
    let wakeups = s.extra["wakeups"].as_u64().unwrap() as f64;
    // Three threads, each woken once per source wake-up.
    let per_s = wakeups / 3.0;
    assert!((per_s / 10_000.0 - 1.0).abs() < 0.02, "the source woke {per_s} times in 1 s");
    assert!((s.ingress_tps / 1e6 - 1.0).abs() < 0.01, "ingress {}", s.ingress_tps);
    // Without them, the source wakes for every tuple.
    config.source_min_sleep_ns = 0;
    config.timer_slack_ns = 0;
    let model = pipeline(1, 10_000.0, 0);
    let mut sim = Simulation::new(&model, config).unwrap();
    let events = sim.run();
    let s = sim.summary("pipeline", serde_json::Value::Null, events);
    let wakeups = s.extra["wakeups"].as_u64().unwrap() as f64;
    assert!((wakeups / 3.0 / 10_000.0 - 1.0).abs() < 0.01, "{wakeups} wake-ups at 10k tuples/s");
}

#[test]
fn drawn_costs_keep_the_mean_and_have_the_asked_spread() {
    let mut rng = fastrand::Rng::with_seed(7);
    let n = 200_000;
    for (dist, cv) in [(CostDist::Const, 0.0), (CostDist::Exp, 1.0), (CostDist::LogNormal(0.5), 0.5)] {
        let draws: Vec<f64> = (0..n).map(|_| dist.draw(10_000, &mut rng) as f64).collect();
        let mean = draws.iter().sum::<f64>() / n as f64;
        let sd = (draws.iter().map(|d| (d - mean).powi(2)).sum::<f64>() / n as f64).sqrt();
        assert!((mean / 10_000.0 - 1.0).abs() < 0.01, "{dist}: mean {mean}");
        assert!((sd / mean - cv).abs() < 0.02, "{dist}: cv {} instead of {cv}", sd / mean);
    }
    assert_eq!("lognormal:0.5".parse::<CostDist>(), Ok(CostDist::LogNormal(0.5)));
    assert_eq!(CostDist::Exp.to_string().parse::<CostDist>(), Ok(CostDist::Exp));
    for bad in ["", "normal", "lognormal", "lognormal:-1", "exp:2"] {
        let e = bad.parse::<CostDist>().unwrap_err();
        assert!(e.contains("const, exp or lognormal:CV"), "{bad}: {e}");
    }
}

#[test]
fn a_cost_distribution_keeps_the_load_and_raises_the_queueing() {
    // An operator and a sink at 60 % load each: with exponential costs the mean CPU stays, the
    // waits grow (as M/M/1 against M/D/1 would say).
    let model = pipeline(1, 60_000.0, 10_000);
    let run = |dist| {
        let mut config = SimConfig::ideal(3, Duration::from_secs(2));
        config.batch_size = 1;
        config.cost_dist = dist;
        let mut sim = Simulation::new(&model, config).unwrap();
        let events = sim.run();
        sim.summary("pipeline", serde_json::Value::Null, events)
    };
    let (c, e) = (run(CostDist::Const), run(CostDist::Exp));
    // The operator and the sink each cost 10 µs a tuple (the source nothing): 2 × 0.6 cores.
    assert!((c.cpu_cores / 1.2 - 1.0).abs() < 0.02, "const: {} cores", c.cpu_cores);
    assert!((e.cpu_cores / 1.2 - 1.0).abs() < 0.03, "exp: {} cores", e.cpu_cores);
    assert!(
        e.latency_ms.p99 > 2.0 * c.latency_ms.p99,
        "p99 {} ms (exp) vs {} ms (const)",
        e.latency_ms.p99,
        c.latency_ms.p99
    );
}

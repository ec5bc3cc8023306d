//! A whole middleware round through the public API, as the middleware uses it: two SPEs with
//! different drivers, several policies with their own periods and scopes, metric provider,
//! schedules, normalisation to nice values and cgroup weights.

use std::collections::BTreeMap;
use std::time::Duration;

use moirai_sched::*;

fn logical(name: &str, query: &str, kind: OpKind) -> LogicalOperator {
    LogicalOperator { name: name.into(), query: query.into(), kind }
}

fn physical(name: &str, query: &str, logical: usize, tid: i32) -> PhysicalOperator {
    PhysicalOperator {
        name: name.into(),
        query: query.into(),
        logical: vec![logical],
        instance: 0,
        threads: vec![ThreadRef { tid, start_ticks: 1 }],
    }
}

/// An engine running a diamond `source -> {cheap, costly} -> sink` (query "fraud").
fn engine() -> SpeTopology {
    let q = "fraud";
    SpeTopology {
        name: "engine".into(),
        pid: 100,
        queries: vec![q.into()],
        logical: vec![
            logical("source", q, OpKind::Source),
            logical("cheap", q, OpKind::Operator),
            logical("costly", q, OpKind::Operator),
            logical("sink", q, OpKind::Sink),
        ],
        logical_edges: vec![(0, 1), (0, 2), (1, 3), (2, 3)],
        physical: vec![
            physical("source (1/1)", q, 0, 101),
            physical("cheap (1/1)", q, 1, 102),
            physical("costly (1/1)", q, 2, 103),
            physical("sink (1/1)", q, 3, 104),
        ],
        physical_edges: vec![(0, 1), (0, 2), (1, 3), (2, 3)],
    }
}

/// A Flink job `source -> map -> sink` (query "lr") whose driver has counters but no queue lengths.
fn flink() -> SpeTopology {
    let q = "lr";
    SpeTopology {
        name: "flink".into(),
        pid: 200,
        queries: vec![q.into()],
        logical: vec![
            logical("source", q, OpKind::Source),
            logical("map", q, OpKind::Operator),
            logical("sink", q, OpKind::Sink),
        ],
        logical_edges: vec![(0, 1), (1, 2)],
        physical: vec![
            physical("Source (1/1)", q, 0, 201),
            physical("Map (1/1)", q, 1, 202),
            physical("Sink (1/1)", q, 2, 203),
        ],
        physical_edges: vec![(0, 1), (1, 2)],
    }
}

struct Configured {
    policy: Box<dyn Policy>,
    period: Duration,
    scope: Scope,
}

fn configured(name: &str, json: &str, period_ms: u64, spes: &[&str]) -> Configured {
    let spec: PolicySpec = serde_json::from_str(json).unwrap();
    Configured {
        policy: spec.build(name).unwrap(),
        period: Duration::from_millis(period_ms),
        scope: Scope { spes: Some(spes.iter().map(|s| s.to_string()).collect()), queries: None },
    }
}

/// Cumulative counters of round `k` (1 s apart): the engine's source ingests 1000 t/s and sends
/// each tuple to both branches; `cheap` costs 10 µs per tuple and keeps all, `costly` 100 µs and
/// keeps a tenth. Flink's map is falling behind by 100 t/s.
fn samples(cluster: &Cluster, k: u64) -> Samples {
    let t = k as f64;
    let mut s = Samples::new(cluster, Duration::from_secs(k));
    let engine = [
        // tuples_in, tuples_out, cpu_ns, queue_len, head_wait
        (1000.0 * t, 2000.0 * t, 1e6 * t, 0.0, 0.0),
        (1000.0 * t, 1000.0 * t, 1e7 * t, 5.0, 0.001),
        (900.0 * t, 90.0 * t, 9e7 * t, 100.0 * t, 0.1 * t),
        (1090.0 * t, 1090.0 * t, 1e6 * t, 0.0, 0.0),
    ];
    for (op, (tin, tout, cpu, qlen, wait)) in engine.into_iter().enumerate() {
        let op = OpRef { spe: 0, op };
        for (m, v) in [
            (Metric::TuplesIn, tin),
            (Metric::TuplesOut, tout),
            (Metric::CpuNs, cpu),
            (Metric::QueueLen, qlen),
            (Metric::HeadWait, wait),
        ] {
            s.set(op, m, v);
        }
    }
    let flink = [(1000.0 * t, 1000.0 * t), (900.0 * t, 900.0 * t), (900.0 * t, 900.0 * t)];
    for (op, (tin, tout)) in flink.into_iter().enumerate() {
        s.set(OpRef { spe: 1, op }, Metric::TuplesIn, tin);
        s.set(OpRef { spe: 1, op }, Metric::TuplesOut, tout);
    }
    s
}

#[test]
fn a_middleware_round_from_samples_to_nice_and_weights() {
    let cluster = Cluster::new(vec![engine(), flink()]).unwrap();
    let mut policies = [
        configured("hr", r#"{"type": "hr", "level": "logical"}"#, 1000, &["engine"]),
        configured("qs", r#"{"type": "qs"}"#, 250, &["flink"]),
        configured("user", r#"{"type": "script", "script": "head_wait * 1000 + queue_size"}"#, 500, &["engine"]),
        configured(
            "shares",
            r#"{"type": "groups", "by": "query", "priority": {"constant": {"values": {"fraud": 4}, "default": 1}}}"#,
            1000,
            &["engine", "flink"],
        ),
    ];
    let requirements: Vec<Requirement> = policies
        .iter()
        .map(|p| Requirement { policy: p.policy.name().into(), metrics: p.policy.metrics(), spes: p.scope.spe_names() })
        .collect();
    let capabilities = [
        Capabilities { spe: "engine".into(), driver: "moirai".into(), provides: Metric::PRIMITIVES.into() },
        Capabilities {
            spe: "flink".into(),
            driver: "flink".into(),
            provides: [Metric::TuplesIn, Metric::TuplesOut].into(),
        },
    ];
    let mut provider = MetricProvider::new(&requirements, &capabilities).unwrap();
    assert_eq!(provider.needed("flink"), Some(vec![Metric::TuplesIn, Metric::TuplesOut, Metric::QueueSize]));

    let clock = Clock::new(&policies.iter().map(|p| p.period).collect::<Vec<_>>()).unwrap();
    assert_eq!(clock.tick(), Duration::from_millis(250));

    // Rounds at 1 s and 2 s: ticks 4 and 8, where every policy is due.
    let mut last = None;
    let mut schedules = BTreeMap::new();
    for k in 1..=2 {
        let tick = clock.tick_at(Duration::from_secs(k));
        let due = clock.due_between(last, tick);
        last = Some(tick);
        assert_eq!(due, vec![0, 1, 2, 3]);
        let values = provider.update(&cluster, &samples(&cluster, k)).unwrap();
        for i in due {
            let p = &mut policies[i];
            let scope = p.scope.resolve(&cluster);
            let ctx = PolicyContext { cluster: &cluster, metrics: &values, scope: &scope };
            schedules.insert(p.policy.name().to_string(), p.policy.schedule(&ctx).unwrap());
        }
    }

    let single = |name: &str| match &schedules[name] {
        Schedule::Single(m) => m.clone(),
        Schedule::Grouping(_) => panic!("{name}: single expected"),
    };
    let nice_of = |m: &BTreeMap<OpRef, f64>, how| -> BTreeMap<OpRef, i32> {
        let n = normalize::to_nice(&m.values().copied().collect::<Vec<_>>(), how, NiceRange::default());
        m.keys().copied().zip(n).collect()
    };
    let e = |op| OpRef { spe: 0, op };
    let f = |op| OpRef { spe: 1, op };

    // HR: the cheap branch delivers more tuples per CPU ns than the costly one.
    let hr = nice_of(&single("hr"), Normalization::Logarithmic);
    assert_eq!(hr.keys().copied().collect::<Vec<_>>(), (0..4).map(e).collect::<Vec<_>>());
    assert!(hr[&e(1)] < hr[&e(2)], "{hr:?}");

    // QS on Flink, from the counter fallback: the map's queue grows by 100 per second.
    let qs = single("qs");
    assert_eq!(qs.values().copied().collect::<Vec<_>>(), vec![0.0, 200.0, 0.0]);
    let qs = nice_of(&qs, Normalization::Linear);
    assert_eq!((qs[&f(0)], qs[&f(1)], qs[&f(2)]), (19, -20, 19));

    // The script favours the operator whose head tuple waited longest: costly.
    let user = single("user");
    assert_eq!(user[&e(2)], 0.2 * 1000.0 + 200.0);
    assert_eq!(nice_of(&user, Normalization::Ratio)[&e(2)], -20);

    // CPU shares per query: fraud gets 4x lr.
    let Schedule::Grouping(groups) = &schedules["shares"] else { panic!("grouping expected") };
    let weights = normalize::to_weights(
        &groups.iter().map(|g| g.priority).collect::<Vec<_>>(),
        Normalization::Ratio,
        WeightRange::CPU_WEIGHT,
    );
    let by_name: BTreeMap<_, _> = groups.iter().map(|g| g.name.as_str()).zip(weights).collect();
    assert_eq!(by_name, BTreeMap::from([("fraud", 10_000), ("lr", 2_500)]));
    assert_eq!(groups[0].threads(&cluster).iter().map(|t| t.tid).collect::<Vec<_>>(), vec![101, 102, 103, 104]);
}

#[test]
fn misconfigured_policies_fail_before_the_first_round() {
    let hr = configured("hr", r#"{"type": "hr"}"#, 1000, &["flink"]);
    let req = Requirement { policy: "hr".into(), metrics: hr.policy.metrics(), spes: hr.scope.spe_names() };
    let caps = Capabilities {
        spe: "flink".into(),
        driver: "flink".into(),
        provides: [Metric::TuplesIn, Metric::TuplesOut].into(),
    };
    let err = MetricProvider::new(&[req], &[caps]).unwrap_err();
    assert!(
        err.to_string().contains("which needs cost, which needs cpu_ns and tuples_in; the driver 'flink'"),
        "{err}"
    );
}

//! Tests of the metric provider: resolution and its errors, dependency order, memoisation, the
//! queue-size fallback, differencing across rounds and forgetting operators.

use super::*;
use crate::fixtures::*;

fn caps(spe: &str, driver: &str, provides: &[Metric]) -> Capabilities {
    Capabilities { spe: spe.into(), driver: driver.into(), provides: provides.iter().copied().collect() }
}

fn req(policy: &str, metrics: &[Metric]) -> Requirement {
    Requirement { policy: policy.into(), metrics: metrics.to_vec(), spes: None }
}

/// Samples at `secs` seconds with the given per-operator values for SPE 0.
fn samples(cluster: &Cluster, secs: u64, columns: &[(Metric, Vec<f64>)]) -> Samples {
    let mut s = Samples::new(cluster, Duration::from_secs(secs));
    for (m, values) in columns {
        for (op, &v) in values.iter().enumerate() {
            s.set(OpRef { spe: 0, op }, *m, v);
        }
    }
    s
}

const ALL_PRIMITIVES: [Metric; 9] = Metric::PRIMITIVES;

fn position(order: &[Metric], m: Metric) -> usize {
    order.iter().position(|&x| x == m).unwrap_or_else(|| panic!("{m} not computed: {order:?}"))
}

#[test]
fn computes_dependencies_first_each_once_and_nothing_else() {
    let c = Cluster::new(vec![pipeline("spe", "q")]).unwrap();
    let reqs = [
        req("hr", &[Metric::HighestRate]),
        req("hr-again", &[Metric::HighestRate, Metric::Selectivity]),
        req("qs", &[Metric::QueueSize]),
    ];
    let mut p = MetricProvider::new(&reqs, &[caps("spe", "moirai", &ALL_PRIMITIVES)]).unwrap();
    let s = samples(
        &c,
        1,
        &[
            (Metric::TuplesIn, vec![100.0, 100.0, 50.0]),
            (Metric::TuplesOut, vec![100.0, 50.0, 50.0]),
            (Metric::CpuNs, vec![1000.0, 4000.0, 500.0]),
            (Metric::QueueLen, vec![0.0, 3.0, 1.0]),
            (Metric::HeadWait, vec![0.0, 0.0, 0.0]),
        ],
    );
    let v = p.update(&c, &s).unwrap();
    let order = v.computed(0).to_vec();
    let mut unique = order.clone();
    unique.sort();
    unique.dedup();
    assert_eq!(unique.len(), order.len(), "a metric was computed twice: {order:?}");
    for m in &order {
        for deps in m.derivations().iter().take(1) {
            for d in *deps {
                if *m != Metric::QueueSize {
                    assert!(position(&order, *d) < position(&order, *m), "{d} after {m} in {order:?}");
                }
            }
        }
    }
    assert!(position(&order, Metric::QueueLen) < position(&order, Metric::QueueSize));
    // Only what is needed: no rates, no head wait, and queue_size from the gauge, not the counters.
    for m in [Metric::RateIn, Metric::RateOut, Metric::HeadWait] {
        assert!(!order.contains(&m), "{m} computed needlessly: {order:?}");
    }
    assert_eq!(order.len(), 10, "{order:?}");
    assert_eq!(p.needed("spe").unwrap().len(), 10);
    assert_eq!(v.get(Metric::QueueSize, OpRef { spe: 0, op: 1 }), Some(3.0));
    // map: selectivity 0.5, cost 40; sink: 1, 10. HR(map) = 0.5 / (40 + 0.5*10).
    assert_eq!(v.get(Metric::HighestRate, OpRef { spe: 0, op: 1 }), Some(0.5 / 45.0));
}

#[test]
fn queue_size_falls_back_to_counters_without_queue_len() {
    let c = Cluster::new(vec![pipeline("spe", "q")]).unwrap();
    let mut p = MetricProvider::new(
        &[req("qs", &[Metric::QueueSize])],
        &[caps("spe", "flink", &[Metric::TuplesIn, Metric::TuplesOut])],
    )
    .unwrap();
    let s =
        samples(&c, 1, &[(Metric::TuplesIn, vec![100.0, 80.0, 50.0]), (Metric::TuplesOut, vec![100.0, 70.0, 50.0])]);
    let v = p.update(&c, &s).unwrap();
    assert_eq!(v.computed(0), &[Metric::TuplesIn, Metric::TuplesOut, Metric::QueueSize]);
    assert_eq!(v.physical_values(Metric::QueueSize, 0), Some(&[0.0, 20.0, 20.0][..]));
}

#[test]
fn missing_primitive_names_policy_chain_and_driver() {
    let err = MetricProvider::new(&[req("qs", &[Metric::QueueSize])], &[caps("job", "flink", &[Metric::TuplesIn])])
        .unwrap_err();
    assert_eq!(
        err.to_string(),
        "policy 'qs' needs queue_size, which needs queue_len or (tuples_in and tuples_out); the driver 'flink' of \
         SPE 'job' provides tuples_in. Choose a policy whose metrics this driver can serve, or restrict the policy \
         to other SPEs"
    );

    let err = MetricProvider::new(
        &[req("hr", &[Metric::HighestRate])],
        &[caps("job", "storm", &[Metric::TuplesIn, Metric::TuplesOut])],
    )
    .unwrap_err();
    assert_eq!(err.chain, vec![Metric::HighestRate, Metric::GlobalAverageCost, Metric::Cost]);
    assert!(
        err.to_string().starts_with(
            "policy 'hr' needs highest_rate, which needs global_average_cost, which needs cost, which needs cpu_ns \
             and tuples_in; the driver 'storm' of SPE 'job' provides tuples_in, tuples_out."
        ),
        "{err}"
    );

    let err = MetricProvider::new(&[req("fcfs", &[Metric::HeadWait])], &[caps("job", "storm", &[])]).unwrap_err();
    assert!(err.to_string().starts_with("policy 'fcfs' needs head_wait, a primitive metric only a driver can sample"));
    assert!(err.to_string().contains("provides nothing"), "{err}");
}

#[test]
fn requirements_only_bind_the_spes_they_govern() {
    let mut fcfs = req("fcfs", &[Metric::HeadWait]);
    fcfs.spes = Some(["engine".to_string()].into());
    let spes = [caps("engine", "moirai", &ALL_PRIMITIVES), caps("job", "flink", &[Metric::TuplesIn])];
    let p = MetricProvider::new(&[fcfs], &spes).unwrap();
    assert_eq!(p.needed("engine"), Some(vec![Metric::HeadWait]));
    assert_eq!(p.needed("job"), Some(vec![]));
}

#[test]
fn a_driver_may_provide_a_derived_metric_directly() {
    let c = Cluster::new(vec![pipeline("spe", "q")]).unwrap();
    let mut p = MetricProvider::new(
        &[req("s", &[Metric::GlobalSelectivity])],
        &[caps("spe", "custom", &[Metric::Selectivity])],
    )
    .unwrap();
    let v = p.update(&c, &samples(&c, 1, &[(Metric::Selectivity, vec![2.0, 0.5, 1.0])])).unwrap();
    assert_eq!(v.computed(0), &[Metric::Selectivity, Metric::GlobalSelectivity]);
    assert_eq!(v.physical_values(Metric::GlobalSelectivity, 0), Some(&[1.0, 0.5, 1.0][..]));
}

fn rate_provider() -> MetricProvider {
    MetricProvider::new(
        &[req("r", &[Metric::RateIn, Metric::Selectivity])],
        &[caps("spe", "moirai", &[Metric::TuplesIn, Metric::TuplesOut])],
    )
    .unwrap()
}

fn counters(tin: [f64; 3], tout: [f64; 3]) -> Vec<(Metric, Vec<f64>)> {
    vec![(Metric::TuplesIn, tin.to_vec()), (Metric::TuplesOut, tout.to_vec())]
}

#[test]
fn rates_difference_consecutive_rounds_and_start_at_zero() {
    let c = Cluster::new(vec![pipeline("spe", "q")]).unwrap();
    let mut p = rate_provider();
    let v = p.update(&c, &samples(&c, 10, &counters([100.0, 100.0, 40.0], [100.0, 40.0, 40.0]))).unwrap();
    assert_eq!(v.physical_values(Metric::RateIn, 0), Some(&[0.0, 0.0, 0.0][..]));
    // First round: selectivity from the totals.
    assert_eq!(v.physical_values(Metric::Selectivity, 0), Some(&[1.0, 0.4, 1.0][..]));
    let v = p.update(&c, &samples(&c, 12, &counters([300.0, 300.0, 40.0], [300.0, 140.0, 40.0]))).unwrap();
    assert_eq!(v.physical_values(Metric::RateIn, 0), Some(&[100.0, 100.0, 0.0][..]));
    // map: 100 out per 200 in this round; sink got nothing new, keeps its selectivity.
    assert_eq!(v.physical_values(Metric::Selectivity, 0), Some(&[1.0, 0.5, 1.0][..]));
}

#[test]
fn restarted_or_vanished_operators_start_over() {
    let c = Cluster::new(vec![pipeline("spe", "q")]).unwrap();
    let mut p = rate_provider();
    p.update(&c, &samples(&c, 1, &counters([100.0; 3], [100.0; 3]))).unwrap();

    // The map's thread changed (a restart): no rate for it; the sink's counter went backwards: none either.
    let mut t = pipeline("spe", "q");
    t.physical[1].threads[0].start_ticks += 1;
    let restarted = Cluster::new(vec![t]).unwrap();
    let v = p.update(&restarted, &samples(&restarted, 2, &counters([200.0, 200.0, 10.0], [200.0; 3]))).unwrap();
    assert_eq!(v.physical_values(Metric::RateIn, 0), Some(&[100.0, 0.0, 0.0][..]));

    // A round without the map forgets it; when it comes back it has no history.
    let mut t = pipeline("spe", "q");
    t.physical.truncate(1);
    t.logical.truncate(1);
    t.logical_edges.clear();
    t.physical_edges.clear();
    let shrunk = Cluster::new(vec![t]).unwrap();
    let mut s = Samples::new(&shrunk, Duration::from_secs(3));
    s.set(OpRef { spe: 0, op: 0 }, Metric::TuplesIn, 300.0);
    s.set(OpRef { spe: 0, op: 0 }, Metric::TuplesOut, 300.0);
    p.update(&shrunk, &s).unwrap();
    let v = p.update(&restarted, &samples(&restarted, 4, &counters([400.0, 400.0, 20.0], [400.0; 3]))).unwrap();
    assert_eq!(v.physical_values(Metric::RateIn, 0), Some(&[100.0, 0.0, 0.0][..]));
}

#[test]
fn bad_rounds_are_rejected_and_leave_history_untouched() {
    let c = Cluster::new(vec![pipeline("spe", "q")]).unwrap();
    let mut p = rate_provider();
    p.update(&c, &samples(&c, 10, &counters([100.0; 3], [100.0; 3]))).unwrap();

    let mut s = samples(&c, 11, &counters([150.0; 3], [150.0; 3]));
    s.set(OpRef { spe: 0, op: 2 }, Metric::TuplesOut, f64::NAN);
    let err = p.update(&c, &s).unwrap_err();
    assert!(
        matches!(err, RoundError::BadSample { metric: Metric::TuplesOut, ref op, .. } if op == "sink (1/1)"),
        "{err}"
    );

    let mut s = Samples::new(&c, Duration::from_secs(11));
    s.set(OpRef { spe: 0, op: 0 }, Metric::TuplesIn, 1.0);
    let err = p.update(&c, &s).unwrap_err();
    assert!(err.to_string().contains("gave no value for operator 'map (1/1)'"), "{err}");

    let err = p.update(&c, &samples(&c, 10, &counters([150.0; 3], [150.0; 3]))).unwrap_err();
    assert!(matches!(err, RoundError::TimeNotAdvancing { .. }), "{err}");

    // The failed rounds did not replace the round at t = 10.
    let v = p.update(&c, &samples(&c, 12, &counters([300.0; 3], [300.0; 3]))).unwrap();
    assert_eq!(v.physical_values(Metric::RateIn, 0), Some(&[100.0; 3][..]));
}

#[test]
fn unknown_spes_and_foreign_samples_are_errors() {
    let c = Cluster::new(vec![pipeline("other", "q")]).unwrap();
    let mut p = rate_provider();
    let err = p.update(&c, &samples(&c, 1, &counters([1.0; 3], [1.0; 3]))).unwrap_err();
    assert_eq!(err, RoundError::UnknownSpe("other".into()));

    let c = Cluster::new(vec![pipeline("spe", "q")]).unwrap();
    let diamond = Cluster::new(vec![diamond("spe", "q")]).unwrap();
    let err = p.update(&c, &Samples::new(&diamond, Duration::ZERO)).unwrap_err();
    assert!(matches!(err, RoundError::SamplesMismatch { want: 3, got: 4, .. }), "{err}");
}

#[test]
fn each_spe_uses_its_own_drivers_capabilities() {
    let c = two_spes();
    let mut p = MetricProvider::new(
        &[req("qs", &[Metric::QueueSize])],
        &[caps("flink", "flink", &[Metric::TuplesIn, Metric::TuplesOut]), caps("storm", "storm", &[Metric::QueueLen])],
    )
    .unwrap();
    let mut s = Samples::new(&c, Duration::from_secs(1));
    for (op, (tin, tout)) in [(10.0, 10.0), (4.0, 4.0), (4.0, 4.0)].into_iter().enumerate() {
        s.set(OpRef { spe: 0, op }, Metric::TuplesIn, tin);
        s.set(OpRef { spe: 0, op }, Metric::TuplesOut, tout);
    }
    for op in 0..4 {
        s.set(OpRef { spe: 1, op }, Metric::QueueLen, op as f64);
    }
    let v = p.update(&c, &s).unwrap();
    assert_eq!(v.computed(0), &[Metric::TuplesIn, Metric::TuplesOut, Metric::QueueSize]);
    assert_eq!(v.computed(1), &[Metric::QueueLen, Metric::QueueSize]);
    assert_eq!(v.physical_values(Metric::QueueSize, 0), Some(&[0.0, 6.0, 0.0][..]));
    assert_eq!(v.physical_values(Metric::QueueSize, 1), Some(&[0.0, 1.0, 2.0, 3.0][..]));
}

#[test]
fn history_tells_apart_same_named_operators_of_two_queries() {
    // Both queries have "source (1/1)", "map (1/1)" and "sink (1/1)".
    let c = Cluster::new(vec![two_queries("spe")]).unwrap();
    assert_eq!(c.physical(OpRef { spe: 0, op: 0 }).name, c.physical(OpRef { spe: 0, op: 3 }).name);
    let mut p = rate_provider();
    let round = |secs, q1: f64, q2: f64| {
        let tin = vec![q1, q1, q1, q2, q2, q2];
        samples(&c, secs, &[(Metric::TuplesIn, tin.clone()), (Metric::TuplesOut, tin)])
    };
    p.update(&c, &round(1, 100.0, 1000.0)).unwrap();
    let v = p.update(&c, &round(2, 110.0, 3000.0)).unwrap();
    assert_eq!(v.physical_values(Metric::RateIn, 0), Some(&[10.0, 10.0, 10.0, 2000.0, 2000.0, 2000.0][..]));
}

//! The controller with hand-made topologies and samples and a fake clock (durations given by the
//! test): metric dependencies, periods, scopes, failing policies, skipped rounds, and a golden
//! comparison with the round as the middleware ran it before the controller existed.

use std::collections::BTreeMap;

use super::*;
use crate::fixtures::*;
use crate::policies::PolicySpec;

fn ms(v: u64) -> Duration {
    Duration::from_millis(v)
}

fn spec(json: &str) -> PolicySpec {
    serde_json::from_str(json).expect("valid policy spec")
}

fn scope(spes: Option<&[&str]>, queries: Option<&[&str]>) -> Scope {
    let names = |n: &[&str]| n.iter().map(|s| s.to_string()).collect();
    Scope { spes: spes.map(names), queries: queries.map(names) }
}

/// Policy `name` built from `json`, run every `period_ms` over `scope`.
fn policy(name: &str, json: &str, period_ms: u64, scope: Scope) -> (PolicyRun, Box<dyn Policy>) {
    let run = PolicyRun { name: name.into(), period: ms(period_ms), scope };
    (run, spec(json).build(name).expect("policy builds"))
}

fn caps(spe: &str, provides: &[Metric]) -> Capabilities {
    Capabilities { spe: spe.into(), driver: "test".into(), provides: provides.iter().copied().collect() }
}

/// An observation of `topology` where every operator has the values `per_op(op)` of `metrics`.
fn observe(topology: SpeTopology, metrics: &[Metric], per_op: impl Fn(usize) -> Vec<f64>) -> Observation {
    let samples = (0..topology.physical.len())
        .flat_map(|op| metrics.iter().copied().zip(per_op(op)).map(move |(m, v)| (op, m, v)))
        .collect();
    Observation { topology, samples }
}

/// What a round at `now` (sampled at `now`) gave: its warnings and decisions.
struct Outcome {
    warnings: Vec<(usize, String)>,
    decisions: Vec<Decision>,
}

/// Runs whatever is due at `now`, sampled at `now`.
fn round_at(c: &mut Controller, now: Duration, observations: Vec<Observation>) -> Outcome {
    let due = c.due(now);
    let round = c.round(&due, now, observations).expect("round runs");
    let decisions = c.decide_all(&round);
    Outcome { warnings: round.warnings, decisions }
}

fn single(d: &Decision) -> &BTreeMap<OpRef, f64> {
    match &d.schedule {
        Ok(Schedule::Single(m)) => m,
        other => panic!("policy {}: single schedule expected, got {other:?}", d.policy),
    }
}

#[test]
fn cost_is_derived_from_counters_over_two_rounds() {
    let cost = policy("cost", r#"{"type": "metric", "metric": "cost"}"#, 1000, Scope::all());
    let counters = [Metric::TuplesIn, Metric::CpuNs];
    let mut c = Controller::new(vec![cost], vec![caps("s", &counters)]).unwrap();
    assert_eq!(c.needed("s"), None, "before the first round, sample everything");

    // Round 1 (1 s): 10 tuples and 1000 ns so far: cost 100 ns/tuple from the totals.
    let r1 = round_at(&mut c, ms(1000), vec![observe(pipeline("s", "q"), &counters, |_| vec![10.0, 1000.0])]);
    assert!(single(&r1.decisions[0]).values().all(|&v| v == 100.0), "{:?}", r1.decisions);
    // Cost's dependencies are sampled, first in dependency order, then cost itself is derived.
    assert_eq!(c.needed("s"), Some(vec![Metric::TuplesIn, Metric::CpuNs, Metric::Cost]));

    // Round 2 (2 s): 10 more tuples for 3000 more ns: cost 300 from the differences (the totals
    // would give 200).
    let r2 = round_at(&mut c, ms(2000), vec![observe(pipeline("s", "q"), &counters, |_| vec![20.0, 4000.0])]);
    assert!(single(&r2.decisions[0]).values().all(|&v| v == 300.0), "{:?}", r2.decisions);
}

#[test]
fn a_missing_primitive_is_an_error_at_creation() {
    let cost = policy("cost", r#"{"type": "metric", "metric": "cost"}"#, 1000, Scope::all());
    let err = Controller::new(vec![cost], vec![caps("s", &[Metric::TuplesIn])]).err().expect("cpu_ns is missing");
    assert!(matches!(err, ControllerError::Metric(_)), "{err}");
    assert!(err.to_string().starts_with("policy 'cost' needs cost"), "{err}");
    let zero = policy("qs", r#"{"type": "qs"}"#, 0, Scope::all());
    let err = Controller::new(vec![zero], vec![caps("s", &[Metric::QueueLen])]).err().expect("zero period");
    assert!(matches!(err, ControllerError::Clock(ClockError::ZeroPeriod(0))), "{err}");
}

#[test]
fn policies_run_at_their_own_periods() {
    let fast = policy("fast", r#"{"type": "qs"}"#, 100, Scope::all());
    let slow = policy("slow", r#"{"type": "fcfs"}"#, 1000, Scope::all());
    let provides = [Metric::QueueLen, Metric::HeadWait];
    let mut c = Controller::new(vec![fast, slow], vec![caps("s", &provides)]).unwrap();
    assert_eq!(c.tick(), ms(100));
    assert_eq!((c.policy(0).name.as_str(), c.policy(1).period), ("fast", ms(1000)));

    // A caller that wakes at every deadline (a little late) for 2 s.
    let mut ran: Vec<(u64, Vec<usize>)> = Vec::new();
    let mut now = ms(0);
    while now <= ms(2010) {
        let due = c.due(now);
        assert_eq!(c.due(now), due, "asking does not consume");
        let outcome = round_at(&mut c, now, vec![observe(pipeline("s", "q"), &provides, |_| vec![1.0, 0.5])]);
        let policies: Vec<usize> = outcome.decisions.iter().map(|d| d.policy).collect();
        assert_eq!(policies, due.policies());
        ran.push((now.as_millis() as u64, policies));
        now = c.next_due(now) + ms(3);
    }
    let at = |t: u64| ran.iter().find(|(when, _)| (t..=t + 3).contains(when)).map(|(_, p)| p.clone());
    assert_eq!(ran.len(), 21, "{ran:?}");
    assert_eq!(at(0), Some(vec![0, 1]));
    assert_eq!(at(100), Some(vec![0]));
    assert_eq!(at(900), Some(vec![0]));
    assert_eq!(at(1000), Some(vec![0, 1]));
    assert_eq!(at(2000), Some(vec![0, 1]));
    assert_eq!(ran.iter().filter(|(_, p)| p.contains(&1)).count(), 3);

    // Nothing is due again within the tick of the last round; a caller that slept through several
    // ticks runs each missed policy once.
    assert!(c.due(ms(2050)).is_empty());
    assert_eq!(c.next_due(ms(2050)), ms(2100));
    assert_eq!(c.due(ms(3150)).policies(), &[0, 1]);
}

#[test]
fn a_scoped_policy_touches_only_its_query_or_spe() {
    let q2 = policy("q2", r#"{"type": "qs"}"#, 100, scope(None, Some(&["q2"])));
    let flink = policy("flink", r#"{"type": "qs"}"#, 100, scope(Some(&["flink"]), None));
    let qlen = [Metric::QueueLen];
    let spes = vec![caps("engine", &qlen), caps("flink", &qlen)];
    let mut c = Controller::new(vec![q2, flink], spes).unwrap();
    let engine = || observe(two_queries("engine"), &qlen, |op| vec![op as f64]);
    let flink = || observe(pipeline("flink", "lr"), &qlen, |op| vec![10.0 * op as f64]);

    let r = round_at(&mut c, ms(0), vec![engine(), flink()]);
    let ops = |d: &Decision| single(d).keys().copied().collect::<Vec<_>>();
    assert_eq!(ops(&r.decisions[0]), (3..6).map(|op| OpRef { spe: 0, op }).collect::<Vec<_>>());
    assert_eq!(ops(&r.decisions[1]), (0..3).map(|op| OpRef { spe: 1, op }).collect::<Vec<_>>());
    assert_eq!(single(&r.decisions[1])[&OpRef { spe: 1, op: 2 }], 20.0);

    // Flink does not answer: its policy is left out, the other goes on, and the provider is made
    // again for the engine alone (flink will be sampled in full when it is back).
    let r = round_at(&mut c, ms(100), vec![engine()]);
    assert_eq!(r.decisions.iter().map(|d| d.policy).collect::<Vec<_>>(), vec![0]);
    assert_eq!(ops(&r.decisions[0]), (3..6).map(|op| OpRef { spe: 0, op }).collect::<Vec<_>>());
    assert_eq!(c.needed("flink"), None);
    assert!(c.needed("engine").is_some());

    let r = round_at(&mut c, ms(200), vec![engine(), flink()]);
    assert_eq!(r.decisions.len(), 2);
}

#[test]
fn a_failing_policy_is_skipped_and_reported_while_others_run() {
    // 1 / queue_size is infinite while the queues are empty.
    let fragile = policy("fragile", r#"{"type": "script", "script": "1.0 / queue_size"}"#, 100, Scope::all());
    let qs = policy("qs", r#"{"type": "qs"}"#, 100, Scope::all());
    let typo =
        policy("typo", r#"{"type": "constant", "by": "operator", "values": {"mpa (1/1)": 1}}"#, 100, Scope::all());
    let qlen = [Metric::QueueLen];
    let mut c = Controller::new(vec![fragile, qs, typo], vec![caps("s", &qlen)]).unwrap();
    let queues = |len: f64| vec![observe(pipeline("s", "q"), &qlen, move |_| vec![len])];

    let mut seen = Vec::new();
    for (k, len) in [0.0, 0.0, 2.0, 2.0].into_iter().enumerate() {
        let r = round_at(&mut c, ms(100 * k as u64), queues(len));
        let fragile = &r.decisions[0];
        seen.push((fragile.schedule.is_ok(), fragile.changed));
        assert_eq!(single(&r.decisions[1]).len(), 3, "round {k}: the other policies still run");
        assert!(r.decisions[2].schedule.is_ok());
        if k == 0 {
            assert_eq!(r.warnings.len(), 1, "{:?}", r.warnings);
            assert_eq!(r.warnings[0].0, 2);
            assert!(r.warnings[0].1.contains("mpa (1/1)"), "{:?}", r.warnings);
            let err = fragile.schedule.as_ref().unwrap_err();
            assert!(err.to_string().contains("policy 'fragile'"), "{err}");
        } else {
            assert!(r.warnings.is_empty(), "warnings are given once");
        }
    }
    // Fails (new), fails (known), works again (new), works (known).
    assert_eq!(seen, vec![(false, true), (false, false), (true, true), (true, false)]);
}

#[test]
fn a_round_is_skipped_on_bad_topology_or_samples_and_the_next_one_works() {
    let qs = policy("qs", r#"{"type": "qs"}"#, 100, Scope::all());
    let qlen = [Metric::QueueLen];
    let mut c = Controller::new(vec![qs], vec![caps("s", &qlen)]).unwrap();

    let mut broken = pipeline("s", "q");
    broken.physical_edges.push((2, 0)); // a cycle
    let due = c.due(ms(0));
    let err = c.round(&due, ms(0), vec![observe(broken, &qlen, |_| vec![1.0])]).unwrap_err();
    assert!(matches!(err, SkippedRound::Topology(_)), "{err}");
    assert!(err.to_string().starts_with("inconsistent topology: "), "{err}");

    let due = c.due(ms(100));
    let missing = Observation { topology: pipeline("s", "q"), samples: vec![(0, Metric::QueueLen, 1.0)] };
    let err = c.round(&due, ms(100), vec![missing]).unwrap_err();
    assert!(matches!(err, SkippedRound::Metrics(RoundError::MissingSample { .. })), "{err}");
    assert!(err.to_string().starts_with("metrics: "), "{err}");
    assert!(c.due(ms(150)).is_empty(), "a skipped round counts as run");

    let r = round_at(&mut c, ms(200), vec![observe(pipeline("s", "q"), &qlen, |_| vec![1.0])]);
    assert_eq!(single(&r.decisions[0]).len(), 3);
}

/// The policies of the golden test, built afresh for each path (RANDOM is seeded).
fn golden_policies() -> Vec<(PolicyRun, Box<dyn Policy>)> {
    vec![
        policy("hr", r#"{"type": "hr", "level": "logical"}"#, 500, scope(Some(&["storm"]), None)),
        policy("qs", r#"{"type": "qs"}"#, 250, scope(Some(&["flink"]), None)),
        policy("user", r#"{"type": "script", "script": "head_wait * 1000 + queue_size"}"#, 250, Scope::all()),
        policy("random", r#"{"type": "random", "seed": 7}"#, 750, Scope::all()),
        policy(
            "shares",
            r#"{"type": "groups", "by": "query", "priority": {"metric": {"metric": "queue_size", "combine": "sum"}}}"#,
            500,
            Scope::all(),
        ),
    ]
}

fn golden_capabilities() -> Vec<Capabilities> {
    vec![caps("flink", &[Metric::TuplesIn, Metric::TuplesOut, Metric::HeadWait]), caps("storm", &Metric::PRIMITIVES)]
}

/// What the SPEs that answered at round `k` (250 ms apart) reported: storm is down in round 2.
fn golden_observations(k: u64) -> Vec<Observation> {
    let t = k as f64;
    let flink = observe(pipeline("flink", "lr"), &[Metric::TuplesIn, Metric::TuplesOut, Metric::HeadWait], |op| {
        // Each operator takes in 20 t/s less than its upstream sends: the queues grow.
        let tuples_in = 1000.0 * t - 30.0 * op as f64 * t;
        vec![tuples_in, tuples_in - 10.0 * t, 0.01 * (op as f64 + t)]
    });
    let storm = observe(diamond("storm", "vs"), &Metric::PRIMITIVES, |op| {
        let o = op as f64 + 1.0;
        Metric::PRIMITIVES
            .iter()
            .enumerate()
            .map(|(i, m)| match m {
                Metric::QueueLen => (o * t) % 7.0,
                Metric::HeadWait => 0.001 * o * t,
                _ => (i as f64 + 1.0) * 100.0 * o * t * t,
            })
            .collect()
    });
    if k == 2 {
        vec![flink]
    } else {
        vec![flink, storm]
    }
}

/// The round as `moirai_middleware::daemon` ran it before the controller (at commit 0ae3a79):
/// the clock's due policies, a provider rebuilt for the SPEs that answered, samples, metrics,
/// each due policy whose scope names a live SPE.
fn old_path(rounds: u64) -> Vec<Vec<(usize, Schedule)>> {
    let mut policies = golden_policies();
    let capabilities = golden_capabilities();
    let requirement = |(run, p): &(PolicyRun, Box<dyn Policy>)| Requirement {
        policy: run.name.clone(),
        metrics: p.metrics(),
        spes: run.scope.spe_names(),
    };
    let clock = Clock::new(&policies.iter().map(|(r, _)| r.period).collect::<Vec<_>>()).unwrap();
    let mut provider: Option<(Vec<String>, MetricProvider)> = None;
    let mut last = None;
    let mut out = Vec::new();
    for k in 0..rounds {
        let at = ms(250 * k);
        let now = clock.tick_at(at);
        let due = clock.due_between(last, now);
        last = Some(now);
        let observations = golden_observations(k);
        let topologies: Vec<SpeTopology> = observations.iter().map(|o| o.topology.clone()).collect();
        let live: Vec<String> = topologies.iter().map(|t| t.name.clone()).collect();
        let cluster = Cluster::new(topologies).unwrap();
        if provider.as_ref().is_none_or(|(names, _)| *names != live) {
            let caps: Vec<Capabilities> = capabilities.iter().filter(|c| live.contains(&c.spe)).cloned().collect();
            let reqs: Vec<Requirement> = policies
                .iter()
                .map(requirement)
                .map(|mut r| {
                    r.spes = Some(match r.spes.take() {
                        Some(s) => s.into_iter().filter(|n| live.contains(n)).collect(),
                        None => live.iter().cloned().collect(),
                    });
                    r
                })
                .collect();
            provider = Some((live.clone(), MetricProvider::new(&reqs, &caps).unwrap()));
        }
        let mut samples = Samples::new(&cluster, at);
        for (spe, o) in observations.iter().enumerate() {
            samples.set_time(spe, at);
            for &(op, metric, value) in &o.samples {
                if op < cluster.spe(spe).physical_len() {
                    samples.set(OpRef { spe, op }, metric, value);
                }
            }
        }
        let values = provider.as_mut().unwrap().1.update(&cluster, &samples).unwrap();
        let mut schedules = Vec::new();
        for i in due {
            let (run, policy) = &mut policies[i];
            if run.scope.spe_names().is_some_and(|s| !s.iter().any(|n| live.contains(n))) {
                continue;
            }
            let scope = run.scope.resolve(&cluster);
            let ctx = PolicyContext { cluster: &cluster, metrics: &values, scope: &scope };
            schedules.push((i, policy.schedule(&ctx).unwrap()));
        }
        out.push(schedules);
    }
    out
}

#[test]
fn golden_the_controller_schedules_as_the_middleware_did() {
    let rounds = 8;
    let expected = old_path(rounds);
    let mut c = Controller::new(golden_policies(), golden_capabilities()).unwrap();
    let mut got = Vec::new();
    for k in 0..rounds {
        let r = round_at(&mut c, ms(250 * k), golden_observations(k));
        got.push(r.decisions.into_iter().map(|d| (d.policy, d.schedule.unwrap())).collect::<Vec<_>>());
    }
    assert_eq!(got, expected);
    // The comparison is not vacuous: every policy ran, hr was left out while storm was down, and
    // the schedules vary from round to round.
    let ran = |i: usize| got.iter().filter(|r| r.iter().any(|(p, _)| *p == i)).count();
    assert_eq!((ran(0), ran(1), ran(2), ran(3), ran(4)), (3, 8, 8, 3, 4));
    assert_ne!(got[1][0], got[2][0]);
}

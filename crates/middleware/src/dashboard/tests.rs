use super::*;
use moirai_sched::{LogicalOperator, OpKind, PhysicalOperator, SpeTopology, ThreadRef};
use serde_json::Value;

const ODD: &str = "map \"<b>\" </script> \\ é\n\u{1}";

fn topology(name: &str) -> SpeTopology {
    let op = |n: &str, tid: i32| PhysicalOperator {
        name: n.to_string(),
        query: "q0".into(),
        logical: vec![0],
        instance: 0,
        threads: vec![ThreadRef { tid, start_ticks: 1 }],
    };
    SpeTopology {
        name: name.to_string(),
        pid: 4711,
        queries: vec!["q0".into()],
        logical: vec![LogicalOperator { name: "l".into(), query: "q0".into(), kind: OpKind::Operator }],
        logical_edges: vec![],
        physical: vec![op("src", 11), op(ODD, 12), op("sink", 13)],
        // A duplicate channel and an index out of range are dropped.
        physical_edges: vec![(0, 1), (0, 1), (1, 2), (2, 9)],
    }
}

fn record(at_ms: u64, tuples: f64) -> RoundRecord {
    let samples = (0..3)
        .flat_map(|op| {
            [(op, Metric::QueueLen, op as f64), (op, Metric::TuplesIn, tuples), (op, Metric::TuplesOut, tuples)]
        })
        .collect();
    let mut r = RoundRecord {
        at: Duration::from_millis(at_ms),
        round_ns: 1_500_000,
        observed: vec![Observation { topology: topology("engine"), samples }],
        ..RoundRecord::default()
    };
    r.down.insert("flink".into(), "http://127.0.0.1:8081: connection refused".into());
    r.priorities.insert(("engine".into(), 1), [("qs".to_string(), 7.5)].into());
    r.applied.insert(("engine".into(), 12), [("qs".to_string(), -20)].into());
    r.ran.insert("qs".into(), None);
    r
}

fn recorder() -> Recorder {
    let spes = vec![("engine".to_string(), "moirai".to_string()), ("flink".to_string(), "flink".to_string())];
    let policies = vec![PolicyInfo {
        name: "qs".into(),
        translator: "nice".into(),
        applies: "nice".into(),
        period: Duration::from_millis(500),
    }];
    Recorder::new(spes, policies, Duration::from_millis(500), std::process::id())
}

#[test]
fn the_state_has_the_documented_shape() {
    let mut rec = recorder();
    let first = serde_json::to_value(rec.record(record(1000, 100.0))).unwrap();
    assert_eq!(first["round"], 1);
    assert_eq!(first["period_ms"], 500);
    assert_eq!(first["round_ms"], 1.5);
    assert!(first["time_ms"].as_u64().unwrap() > 1_600_000_000_000);
    assert!(first["cpu_s"].as_f64().unwrap() >= 0.0);
    assert!(first.get("cpu_percent").is_none(), "no CPU share before a second round: {first}");
    assert_eq!(first["policies"][0]["name"], "qs");
    assert_eq!(first["policies"][0]["applies"], "nice");
    assert_eq!(first["policies"][0]["ran"], true);

    let engine = &first["spes"][0];
    assert_eq!(engine["name"], "engine");
    assert_eq!(engine["kind"], "moirai");
    assert_eq!(engine["reachable"], true);
    assert_eq!(engine["pid"], 4711);
    assert!(engine.get("error").is_none());
    assert_eq!(engine["edges"], serde_json::json!([[0, 1], [1, 2]]));
    let ops = engine["operators"].as_array().unwrap();
    assert_eq!(ops.len(), 3);
    assert_eq!(ops[0]["role"], "source");
    assert_eq!(ops[1]["role"], "operator");
    assert_eq!(ops[2]["role"], "sink");
    assert_eq!(ops[1]["id"], 1);
    assert_eq!(ops[1]["queue_len"], 1.0);
    assert_eq!(ops[1]["priority"]["qs"], 7.5);
    assert_eq!(ops[1]["threads"], serde_json::json!([{ "tid": 12, "applied": { "qs": -20 } }]));
    assert_eq!(ops[0]["threads"][0]["applied"], serde_json::json!({}));
    assert!(ops[1].get("rate_in").is_none(), "no rate from one sample: {}", ops[1]);
    // Nothing reports latency or throughput: no such fields.
    let text = first.to_string();
    assert!(!text.contains("latency") && !text.contains("throughput"), "{text}");
    assert_eq!(engine["totals"]["queue_len"], 3.0);
    assert_eq!(engine["totals"]["threads"], 3);

    let flink = &first["spes"][1];
    assert_eq!(flink["reachable"], false);
    assert_eq!(flink["error"], "http://127.0.0.1:8081: connection refused");
    assert_eq!(flink["operators"], serde_json::json!([]));

    // The second round has rates (Δ 50 tuples over 0.5 s) and a CPU share.
    let second = serde_json::to_value(rec.record(record(1500, 150.0))).unwrap();
    let op = &second["spes"][0]["operators"][1];
    assert_eq!(op["rate_in"], 100.0);
    assert_eq!(op["rate_out"], 100.0);
    assert_eq!(second["spes"][0]["totals"]["sink_rate_in"], 100.0);
    assert!(second["cpu_percent"].as_f64().unwrap() >= 0.0);
    let history = second["history"].as_array().unwrap();
    assert_eq!(history.len(), 2);
    assert_eq!(history[1]["round"], 2);
    assert_eq!(history[1]["spes"]["engine"]["queue_len"], 3.0);
    assert!(history[1]["spes"].get("flink").is_none());

    // A counter that went backwards (a restart) gives no rate.
    let third = serde_json::to_value(rec.record(record(2000, 10.0))).unwrap();
    assert!(third["spes"][0]["operators"][1].get("rate_in").is_none());
}

#[test]
fn odd_operator_names_survive_as_json() {
    let mut rec = recorder();
    let text = serde_json::to_string(&rec.record(record(0, 0.0))).unwrap();
    // Control characters and quotes are escaped; the text parses back to the same name.
    assert!(!text.contains('\n') && !text.contains('\u{1}'), "{text}");
    let v: Value = serde_json::from_str(&text).unwrap();
    assert_eq!(v["spes"][0]["operators"][1]["name"], ODD);
}

#[test]
fn the_history_keeps_the_last_rounds() {
    let mut rec = recorder();
    let mut last = None;
    for i in 1..=(HISTORY as u64 + 5) {
        last = Some(rec.record(record(i * 500, i as f64)));
    }
    let last = last.unwrap();
    assert_eq!(last.history.len(), HISTORY);
    assert_eq!(last.history[0].round, 6);
    assert_eq!(last.history[HISTORY - 1].round, HISTORY as u64 + 5);
}

#[test]
fn a_skipped_round_and_a_failing_policy_are_shown() {
    let mut rec = recorder();
    let mut r = record(0, 0.0);
    r.skipped = Some("inconsistent topology: x".into());
    r.ran.insert("qs".into(), Some("script error".into()));
    let v = serde_json::to_value(rec.record(r)).unwrap();
    assert_eq!(v["skipped"], "inconsistent topology: x");
    assert_eq!(v["policies"][0]["error"], "script error");
}

#[test]
fn each_spe_says_whether_the_middleware_acts_on_it() {
    let mut rec = recorder();
    let mut r = record(0, 0.0);
    r.activation = "auto";
    r.machine_busy = Some(0.97);
    r.activity.insert(
        "engine".into(),
        SpeActivity {
            active: true,
            reason: "the SPE falls behind".into(),
            code: "behind",
            since: Duration::from_millis(2500),
            activations: 1,
            releases: Default::default(),
            time: Default::default(),
            counter_period: Duration::ZERO,
        },
    );
    let v = serde_json::to_value(rec.record(r)).unwrap();
    assert_eq!(v["activation"], "auto");
    assert_eq!(v["machine_busy"], 0.97);
    let a = &v["spes"][0]["activity"];
    assert_eq!(
        *a,
        serde_json::json!({ "state": "active", "reason": "the SPE falls behind", "code": "behind",
                            "since_s": 2.5, "activations": 1 })
    );
    assert!(v["spes"][1].get("activity").is_none(), "no rule state for this SPE in the record");
    assert!(PAGE.contains("spe.activity.state"), "the page shows it");
}

#[test]
fn the_page_is_self_contained() {
    assert!(PAGE.starts_with("<!doctype html>"), "the page starts with a doctype");
    assert!(PAGE.contains("/api/state"));
    // Nothing is loaded from elsewhere: no external scripts, styles, fonts or images.
    for bad in ["http://", "https://", "src=", "@import", "url("] {
        let hits: Vec<&str> = PAGE.lines().filter(|l| l.contains(bad) && !l.contains("www.w3.org/2000/svg")).collect();
        assert!(hits.is_empty(), "the page refers to {bad}: {hits:?}");
    }
}

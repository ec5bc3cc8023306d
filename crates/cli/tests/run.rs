//! `moirai run` through the real binary: the JSON summary's contract, finite inputs, bad flags.

use std::process::Command;

const BIN: &str = env!("CARGO_BIN_EXE_moirai");

fn run(args: &[&str]) -> (Option<i32>, String, String) {
    let out = Command::new(BIN).arg("run").args(args).output().expect("run moirai");
    (
        out.status.code(),
        String::from_utf8_lossy(&out.stdout).into_owned(),
        String::from_utf8_lossy(&out.stderr).into_owned(),
    )
}

fn last_json(stdout: &str) -> serde_json::Value {
    serde_json::from_str(stdout.lines().last().expect("some output")).expect("the last line is JSON")
}

#[test]
fn syn_json_has_the_documented_fields() {
    let (code, out, err) = run(&["syn", "--ops", "2", "--rate", "20000", "--duration", "2s", "--json"]);
    assert_eq!(code, Some(0), "{err}");
    let v = last_json(&out);
    for field in ["offered_rate", "ingress_tps", "egress_tps", "tuples_in", "tuples_out", "timeline", "queue_len"] {
        assert!(!v[field].is_null(), "missing {field}: {v}");
    }
    for lat in ["latency_ms", "e2e_latency_ms"] {
        let l = &v[lat];
        let (p50, p99, p999) = (l["p50"].as_f64().unwrap(), l["p99"].as_f64().unwrap(), l["p999"].as_f64().unwrap());
        assert!(l["mean"].as_f64().unwrap() > 0.0 && p50 <= p99 && p99 <= p999, "{lat}: {l}");
    }
    assert_eq!(v["offered_rate"].as_f64(), Some(20000.0));
    // Nothing is lost: every tuple that entered left (the run drains at the end).
    assert_eq!(v["tuples_in"], v["tuples_out"]);
    let tuples_in = v["tuples_in"].as_f64().unwrap();
    // The sources stop a few ms after the 2 s (the stop request, then draining): allow 0.5 s.
    assert!(tuples_in > 0.0 && tuples_in <= 20000.0 * 2.5, "at most the offered rate over the run: {tuples_in}");
}

#[test]
fn a_finite_input_that_ends_in_the_warm_up_is_measured_whole() {
    let (code, out, err) =
        run(&["wordcount", "--sentences", "300", "--rate", "0", "--duration", "30s", "--warmup", "0.5", "--json"]);
    assert_eq!(code, Some(0), "{err}");
    let v = last_json(&out);
    assert_eq!(v["tuples_in"].as_u64(), Some(300), "{v}");
    assert!(v["measured_s"].as_f64().unwrap() < 30.0, "it ended early: {v}");
    assert_eq!(v["workload_stats"]["check"], "counts equal a naive count", "{v}");
}

#[test]
fn a_ramp_raises_the_rate() {
    let (code, out, err) =
        run(&["syn", "--ops", "1", "--rate", "2000", "--ramp-to", "20000", "--duration", "3s", "--json"]);
    assert_eq!(code, Some(0), "{err}");
    let v = last_json(&out);
    // Linear from 2k to 20k over 3 s: 33k tuples in all (not 6k at a constant 2k), plus up to
    // 0.5 s at 20k while the sources stop.
    let n = v["tuples_in"].as_f64().unwrap();
    assert!((25_000.0..=43_000.0).contains(&n), "{n}");
    let t = v["timeline"].as_array().unwrap();
    assert!(t.len() >= 2, "{v}");
    let first = t[0]["ingress_tps"].as_f64().unwrap();
    let last = t[t.len() - 1]["ingress_tps"].as_f64().unwrap();
    assert!(last > 2.0 * first, "ingress rises along the ramp: {first} -> {last}");
}

#[test]
fn bad_flags_are_usage_errors() {
    for (args, expect) in [
        (&["syn", "--rate=-5"][..], "--rate"),
        (&["syn", "--warmup", "0.95"][..], "--warmup"),
        (&["syn", "--ramp-to", "100"][..], "--ramp-to"),
        (&["syn", "--selectivity=-1"][..], "selectivity"),
        (&["linear-road", "--input", "/nonexistent/lr.csv"][..], "/nonexistent/lr.csv"),
    ] {
        let (code, _, err) = run(args);
        assert_eq!(code, Some(2), "{args:?}: {err}");
        assert!(err.contains(expect), "{args:?} should mention {expect}: {err}");
    }
}

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

/// A Linear Road file in the temp directory, removed when dropped.
struct LrFile(std::path::PathBuf);

impl LrFile {
    fn with(name: &str, text: &str) -> Self {
        let path = std::env::temp_dir().join(format!("moirai-run-{}-{name}", std::process::id()));
        std::fs::write(&path, text).unwrap();
        LrFile(path)
    }

    /// Generated traffic: `seconds` of one expressway at 2 cars/s; returns the file and how many
    /// records it holds.
    fn generated(name: &str, seconds: u32) -> (Self, u64) {
        use moirai_workloads::linear_road::{write_input, GeneratorConfig};
        let file = LrFile::with(name, "");
        let g = GeneratorConfig { seed: 1, cars_per_second: 2.0, duration_s: seconds, ..GeneratorConfig::default() };
        let n = write_input(&g, &file.0).unwrap();
        (file, n)
    }

    fn arg(&self) -> &str {
        self.0.to_str().unwrap()
    }
}

impl Drop for LrFile {
    fn drop(&mut self) {
        let _ = std::fs::remove_file(&self.0);
    }
}

#[test]
fn linear_road_replays_a_whole_file_by_default() {
    // More than the default 5 s at this rate: the run still reads every record.
    let (file, n) = LrFile::generated("whole.csv", 300);
    let rate = (n as f64 / 6.0).ceil().to_string();
    let (code, out, err) = run(&["linear-road", "--input", file.arg(), "--rate", &rate, "--json"]);
    assert_eq!(code, Some(0), "{err}");
    let s = &last_json(&out)["workload_stats"];
    assert_eq!((s["records_read"].as_u64(), s["records_total"].as_u64()), (Some(n), Some(n)), "{s}");
    assert_eq!(s["records"], format!("all {n} records read"), "{s}");
    assert!(!err.contains("stopped after"), "{err}");
    // The human summary says it too.
    let (code, out, _) = run(&["linear-road", "--input", file.arg(), "--rate", "0"]);
    assert_eq!(code, Some(0));
    assert!(out.contains(&format!("\"records\":\"all {n} records read\"")), "{out}");
}

#[test]
fn linear_road_says_when_duration_cuts_the_input_short() {
    let (file, n) = LrFile::generated("cut.csv", 300);
    let (code, out, err) = run(&["linear-road", "--input", file.arg(), "--rate", "1000", "--duration", "1s", "--json"]);
    assert_eq!(code, Some(0), "{err}");
    let s = &last_json(&out)["workload_stats"];
    let read = s["records_read"].as_u64().unwrap();
    assert!(read > 0 && read < n, "{s}");
    let note = format!("stopped after {read} of {n} records");
    assert!(s["records"].as_str().unwrap().starts_with(&note), "{s}");
    assert!(err.contains(&note) && err.contains("--duration 1s"), "{err}");
}

#[test]
fn an_empty_linear_road_input_is_a_warning() {
    let file = LrFile::with("empty.csv", "type,time,carid,speed,xway,lane,dir,seg,pos,qid,sinit,send,dow,tod,day\n\n");
    let (code, out, err) = run(&["linear-road", "--input", file.arg(), "--json"]);
    assert_eq!(code, Some(0), "{err}");
    assert!(err.contains("warning") && err.contains("holds no Linear Road records"), "{err}");
    let s = &last_json(&out)["workload_stats"];
    assert_eq!(s["records_total"].as_u64(), Some(0), "{s}");
    assert!(s["records"].as_str().unwrap().contains("holds no records"), "{s}");
}

#[test]
fn linear_road_replays_at_the_records_clock() {
    // Records at 0, 1 and 4 s of LR time, and a balance query: 2 s at twice real time.
    let text = "0,0,1,50,0,1,0,1,5280,-1,-1,-1,-1,-1,-1\n\
                0,1,2,50,0,1,0,2,10560,-1,-1,-1,-1,-1,-1\n\
                2,1,1,-1,-1,-1,-1,-1,-1,7,-1,-1,-1,-1,-1\n\
                3,1,1,-1,0,-1,-1,-1,-1,8,-1,-1,-1,-1,2\n\
                0,4,3,50,0,1,0,3,15840,-1,-1,-1,-1,-1,-1\n";
    let file = LrFile::with("clock.csv", text);
    let started = std::time::Instant::now();
    let (code, out, err) = run(&["linear-road", "--input", file.arg(), "--replay-speed", "2", "--json"]);
    let took = started.elapsed();
    assert_eq!(code, Some(0), "{err}");
    assert!(took.as_millis() >= 2000, "the last record is due 2 s in: {took:?}");
    let v = last_json(&out);
    let s = &v["workload_stats"];
    assert_eq!(s["records_read"].as_u64(), Some(5), "{s}");
    assert_eq!((s["account_balances"].as_u64(), s["daily_expenditures"].as_u64()), (Some(1), Some(1)), "{s}");
    assert_eq!(s["deadline_misses"].as_u64(), Some(0), "{s}");
    assert_eq!(v["replay_speed"].as_f64(), Some(2.0), "{v}");

    for (args, expect) in [
        (&["--replay-speed", "1", "--rate", "100"][..], "exclude each other"),
        (&["--replay-speed", "0"][..], "--replay-speed 0 must be a positive, finite factor"),
        (&["--replay-speed=-2"][..], "--replay-speed -2 must be"),
        (&["--replay-speed", "NaN"][..], "--replay-speed NaN must be"),
        (&["--replay-speed", "inf"][..], "--replay-speed inf must be"),
    ] {
        let (code, _, err) = run(&[&["linear-road", "--input", file.arg()][..], args].concat());
        assert_eq!(code, Some(2), "{args:?}: {err}");
        assert!(err.contains(expect), "{args:?} should say {expect}: {err}");
    }
}

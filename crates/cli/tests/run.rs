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
        // A duration where a share is wanted is named as such.
        (&["syn", "--warmup", "10s"][..], "is not a share of the run"),
        (&["syn", "--ramp-to", "100"][..], "--ramp-to"),
        (&["syn", "--selectivity=-1"][..], "selectivity"),
        (&["linear-road", "--input", "/nonexistent/lr.csv"][..], "/nonexistent/lr.csv"),
    ] {
        let (code, _, err) = run(args);
        assert_eq!(code, Some(2), "{args:?}: {err}");
        assert!(err.contains(expect), "{args:?} should mention {expect}: {err}");
    }
}

#[test]
fn numbers_a_run_cannot_honour_are_usage_errors() {
    // Each refused with exit 2, a message naming the flag, the bound and how to fix it. `--rate
    // 1e25` used to be accepted and overflow the source's schedule (a panic, or 1 tuple in).
    for (args, expect) in [
        (&["syn", "--rate", "1e25"][..], &["--rate 1e25", "at most 1000000000 tuples/s"][..]),
        (&["syn", "--rate", "NaN"][..], &["'NaN' for '--rate", "positive number of tuples/s, or 0"][..]),
        (&["syn", "--rate", "inf"][..], &["'inf' for '--rate", "positive number of tuples/s, or 0"][..]),
        (&["syn", "--rate", "1000", "--ramp-to", "1e12"][..], &["--ramp-to", "at most 1000000000"][..]),
        (
            &["syn", "--rate", "1000", "--ramp-to", "NaN"][..],
            &["'NaN' for '--ramp-to", "positive number of tuples/s"][..],
        ),
        (&["syn", "--duration", "31days"][..], &["--duration", "30 days", "use at most 30days"][..]),
        (&["syn", "--cost-ns", "2000000000"][..], &["--cost-ns 2000000000", "1 s per tuple", "at most"][..]),
        (&["syn", "--batch-size", "100000000"][..], &["--batch-size 100000000", "1..=65536"][..]),
        (&["syn", "--channel-capacity", "1000000000"][..], &["--channel-capacity 1000000000", "1..=16777216"][..]),
        (&["syn", "--channel-capacity", "64", "--batch-size", "128"][..], &["--batch-size 128", "larger than"][..]),
        (&["syn", "--channel-capacity", "0"][..], &["--channel-capacity 0"][..]),
        (&["syn", "--parallelism", "0"][..], &["--parallelism 0", "1..=1024"][..]),
        (&["syn", "--parallelism", "5000"][..], &["--parallelism 5000", "1..=1024"][..]),
        (&["syn", "--parallelism", "-1"][..], &["'-1'"][..]),
        (&["syn", "--queries", "100", "--ops", "100", "--parallelism", "20"][..], &["parallelism 20", "bound"][..]),
        (&["wordcount", "--rate", "1e25"][..], &["--rate", "at most 1000000000 tuples/s"][..]),
        (&["ysb", "--rate", "1e25"][..], &["--rate", "at most 1000000000 tuples/s"][..]),
        (&["linear-road", "--rate", "1e25"][..], &["--rate", "at most 1000000000 tuples/s"][..]),
        (&["ysb", "--window-ms", "18446744073709551615"][..], &["window_ms 18446744073709551615", "30 days"][..]),
    ] {
        let (code, out, err) = run(args);
        assert_eq!(code, Some(2), "{args:?}: {err}");
        assert!(out.is_empty(), "{args:?} ran: {out}");
        for e in expect {
            assert!(err.contains(e), "{args:?} should mention {e}: {err}");
        }
    }
    // The bounds themselves are accepted: one tuple per ns, batches as large as the channel.
    let (code, _, err) = run(&["syn", "--ops", "1", "--rate", "1e9", "--duration", "300ms"]);
    assert_eq!(code, Some(0), "{err}");
    let (code, _, err) =
        run(&["syn", "--ops", "1", "--channel-capacity", "64", "--batch-size", "64", "--duration", "300ms"]);
    assert_eq!(code, Some(0), "{err}");
}

#[test]
fn syn_runs_as_parallel_instances_of_one_query() {
    // Two instances of the source, each operator and the sink; every tuple that entered left,
    // and the instances together offer the rate asked (not twice it).
    for threading in ["dedicated", "dynamic:2"] {
        let args = [
            "syn",
            "--ops",
            "2",
            "--rate",
            "20000",
            "--duration",
            "2s",
            "--parallelism",
            "2",
            "--threading",
            threading,
        ];
        let (code, out, err) = run(&[&args[..], &["--json"]].concat());
        assert_eq!(code, Some(0), "{threading}: {err}");
        let v = last_json(&out);
        assert_eq!(v["parallelism"], 2, "{v}");
        assert_eq!(v["tuples_in"], v["tuples_out"], "{threading}: {v}");
        let tuples_in = v["tuples_in"].as_f64().unwrap();
        assert!((20000.0 * 1.9..=20000.0 * 2.5).contains(&tuples_in), "{threading}: 2 s at 20k tuples/s: {tuples_in}");
        if threading == "dedicated" {
            assert_eq!(v["threads"], 8, "a thread per instance of source, 2 operators and sink: {v}");
        }
    }
}

#[test]
fn a_run_that_drains_past_its_end_reports_the_egress_it_measured() {
    // One operator at 1 ms per tuple takes one 4096-tuple batch in at once and sends nothing on
    // until its output batch is full, 4 s later: the 1 s run's measured window sees no tuple out,
    // then the run drains ~3 s. Egress used to be 0 tuples/s although every tuple came out.
    let (code, out, err) = run(&[
        "syn",
        "--ops",
        "1",
        "--cost-ns",
        "1000000",
        "--channel-capacity",
        "4096",
        "--batch-size",
        "4096",
        "--duration",
        "1s",
        "--json",
    ]);
    assert_eq!(code, Some(0), "{err}");
    let v = last_json(&out);
    let f = |k: &str| v[k].as_f64().unwrap_or_else(|| panic!("no {k}: {v}"));
    assert_eq!(v["tuples_in"], v["tuples_out"], "{v}");
    let (drained, egress_s, tuples_out) = (f("drained_s"), f("egress_s"), f("tuples_out"));
    assert!(drained > 1.0, "it drained for seconds: {v}");
    assert!((egress_s - f("measured_s") - drained).abs() < 1e-6, "egress is over the window and the drain: {v}");
    // All tuples came out after the warm-up, over egress_s.
    let egress = f("egress_tps");
    assert!(egress > 0.0 && (egress * egress_s - tuples_out).abs() <= 1.0, "egress {egress} over {egress_s} s: {v}");
    assert!(out.contains("drained ") && out.contains("after the end of the run"), "the summary says so: {out}");
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
    let (code, out, err) =
        run(&["linear-road", "--input", file.arg(), "--replay-speed", "2", "--historical-tolls", "seeded", "--json"]);
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

#[test]
fn wordcount_through_a_hone_exchange_reports_its_backlog() {
    let (code, out, err) = run(&[
        "wordcount",
        "--exchange",
        "lbf",
        "--link-capacity",
        "30000",
        "--tau",
        "10ms",
        "--straggler",
        "4",
        "--sentence-variance",
        "--parallelism",
        "3",
        "--grouping",
        "shuffle",
        "--rate",
        "2000",
        "--duration",
        "2s",
        "--json",
    ]);
    assert_eq!(code, Some(0), "{err}");
    assert!(out.contains("exchange          group -> count lbf"), "{out}");
    let v = last_json(&out);
    let x = &v["exchange"];
    assert_eq!(x["policy"], "lbf", "{v}");
    assert_eq!(x["queues"], 3);
    assert!(x["max_backlog"].as_u64().unwrap() > 0, "{x}");
    assert!(x["mean_backlog"].as_f64().is_some() && x["ticks"].as_u64().unwrap() > 50, "{x}");
    assert!(v["timeline"][0]["exchange_max_backlog"].is_u64(), "{v}");
    assert_eq!(v["hone"]["capacity"], 30000);
    assert_eq!(v["straggler"], 4.0);
    // Without --exchange there is no exchange in the report.
    let (code, out, err) = run(&["wordcount", "--rate", "1000", "--duration", "1s", "--json"]);
    assert_eq!(code, Some(0), "{err}");
    assert!(last_json(&out)["exchange"].is_null());
}

#[test]
fn bad_hone_flags_are_usage_errors() {
    for (args, expected) in [
        (&["--exchange", "lbf", "--link-capacity", "0"][..], "link capacity 0"),
        (&["--exchange", "rr", "--link-capacity", "100", "--tau", "0s"][..], "tau"),
        (&["--exchange", "lbf"][..], "needs --link-capacity"),
        (&["--link-capacity", "100"][..], "needs --exchange"),
        (&["--exchange", "edf", "--link-capacity", "100"][..], "unknown exchange policy 'edf'"),
        (&["--straggler", "0"][..], "straggler factor 0"),
    ] {
        let mut all = vec!["wordcount", "--duration", "1s"];
        all.extend_from_slice(args);
        let (code, _, err) = run(&all);
        assert_eq!(code, Some(2), "{args:?}: {err}");
        assert!(err.contains(expected), "{args:?}: {err}");
    }
}

#[test]
fn a_reader_that_goes_away_ends_the_run_quietly_with_141() {
    // `moirai run … | head -1`: the summary is printed after the reader has closed the pipe.
    let mut child = Command::new(BIN)
        .args(["run", "syn", "--ops", "1", "--rate", "1000", "--duration", "1s"])
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .expect("start moirai");
    drop(child.stdout.take());
    let out = child.wait_with_output().expect("wait for moirai");
    let err = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(141), "{err}");
    assert!(!err.contains("panicked"), "no panic report for a closed pipe: {err}");
}

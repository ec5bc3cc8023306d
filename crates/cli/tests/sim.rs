//! `moirai sim` through the real binary: a short simulated sweep writes the lab's files, the same
//! arguments give the same results, and bad input is refused with exit code 2 and the fix.

mod common;

use common::{moirai, OutDir};

#[test]
fn a_simulated_sweep_writes_the_labs_files_and_repeats_itself() {
    let out = OutDir::new("sim-sweep");
    let dir = out.0.to_str().unwrap();
    let args = [
        "sim",
        "syn",
        "--rates",
        "1k,3k",
        "--compare",
        "os,qs,qs@policy:2",
        "--duration",
        "2s",
        "--out",
        dir,
        "--",
        "--lachesis",
    ];
    let first = moirai(&args);
    assert!(first.status.success(), "{}", String::from_utf8_lossy(&first.stderr));
    let stdout = String::from_utf8_lossy(&first.stdout);
    assert!(stdout.contains("sustainable rate") && stdout.contains("qs@policy:2"), "{stdout}");
    let csv = std::fs::read_to_string(out.0.join("results.csv")).unwrap();
    assert_eq!(csv.lines().count(), 1 + 2 * 3, "a header and one row per point:\n{csv}");
    assert!(out.0.join("report.html").exists());
    let json: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(out.0.join("results.json")).unwrap()).unwrap();
    assert_eq!(json["machine"]["nproc"], 2);
    assert_eq!(json["points"][0]["run"]["simulated"], true);
    let again = moirai(&args);
    assert!(again.status.success());
    assert_eq!(
        std::fs::read_to_string(out.0.join("results.csv")).unwrap(),
        csv,
        "the same arguments, the same results"
    );
}

#[test]
fn wordcount_is_simulated_with_the_workloads_flags() {
    let out = OutDir::new("sim-wordcount");
    let dir = out.0.to_str().unwrap();
    let args = ["sim", "wordcount", "--rates", "20k", "--duration", "2s", "--out", dir, "--", "--grouping", "key"];
    let o = moirai(&args);
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    let json: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(out.0.join("results.json")).unwrap()).unwrap();
    let run = &json["points"][0]["run"];
    assert_eq!(run["grouping"], "key");
    assert_eq!(run["threads"], 12, "key grouping has no merge stage: 6 operators × 2 instances");
    let ingress = run["ingress_tps"].as_f64().unwrap();
    assert!((19_000.0..=21_000.0).contains(&ingress), "20k sentences/s taken in, not {ingress}");
}

#[test]
fn bad_input_is_refused_with_exit_code_2_and_the_fix() {
    let out = OutDir::new("sim-bad");
    let dir = out.0.to_str().unwrap();
    let exchange = ["--exchange", "lbf", "--link-capacity", "20000"];
    let wordcount = |extra: &[&'static str]| -> Vec<&str> {
        [&["sim", "wordcount", "--rates", "1k", "--out", dir, "--"][..], extra].concat()
    };
    let (with_exchange, straggler) = (wordcount(&exchange), wordcount(&["--straggler", "4"]));
    let cases: [(&[&str], &str); 15] = [
        (&["sim", "syn", "--rates", "1k", "--out", dir, "--nodes", "0"], "--nodes 0 must be from 1"),
        (&["sim", "syn", "--rates", "1k", "--out", dir, "--nodes", "21", "--", "--lachesis"], "number of queries (20)"),
        (
            &["sim", "linear-road", "--rates", "1k", "--out", dir, "--nodes", "2", "--", "--shape", "lachesis"],
            "--nodes 2",
        ),
        (&["sim", "syn", "--rates", "1k", "--out", dir, "--translator", "rt"], "use nice, cgroup"),
        (&["sim", "syn", "--compare", "os"], "needs --rates"),
        (&["sim", "syn", "--rates", "1k", "--out", dir, "--cores", "0"], "--cores 0"),
        (&["sim", "syn", "--rates", "1k", "--out", dir, "--compare", "flink:os"], "not Flink"),
        (&["sim", "syn", "--rates", "1k", "--out", dir, "--compare", "os@elastic"], "not simulated"),
        (&["sim", "syn", "--rates", "1k", "--out", dir, "--", "--rate", "5"], "--rate cannot be passed"),
        (&["sim", "ysb", "--rates", "1k", "--out", dir], "not simulated yet"),
        (&["sim", "linear-road", "--rates", "1k", "--out", dir], "use -- --shape lachesis"),
        (&["sim", "syn", "--rates", "1k", "--out", dir, "--scheduler", "bfs"], "use cfs (Linux before 6.6) or eevdf"),
        (&with_exchange, "wordcount --exchange is not simulated"),
        (&straggler, "wordcount --straggler is not simulated"),
        (
            &["sim", "--from-engine", "http://127.0.0.1:9", "--out", dir, "--", "--ops", "3"],
            "takes no workload arguments",
        ),
    ];
    for (args, needle) in cases {
        let o = moirai(args);
        let stderr = String::from_utf8_lossy(&o.stderr);
        assert_eq!(o.status.code(), Some(2), "{args:?}: {stderr}");
        assert!(stderr.contains(needle), "{args:?}: '{stderr}' should say '{needle}'");
        assert!(!stderr.contains("panicked"), "{stderr}");
    }
}

#[test]
fn a_cluster_sweep_writes_one_merged_point_per_configuration_and_repeats_itself() {
    let out = OutDir::new("sim-nodes");
    let dir = out.0.to_str().unwrap();
    let args = [
        "sim",
        "syn",
        "--rates",
        "4k",
        "--compare",
        "os,qs/translator=cgroup",
        "--duration",
        "1s",
        "--nodes",
        "4",
        "--out",
        dir,
        "--",
        "--lachesis",
    ];
    let first = moirai(&args);
    assert!(first.status.success(), "{}", String::from_utf8_lossy(&first.stderr));
    assert!(String::from_utf8_lossy(&first.stderr).contains("4 nodes of 2 cores"));
    let csv = std::fs::read_to_string(out.0.join("results.csv")).unwrap();
    assert_eq!(csv.lines().count(), 1 + 2, "{csv}");
    let json: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(out.0.join("results.json")).unwrap()).unwrap();
    assert_eq!(json["machine"]["nproc"], 8, "4 nodes × 2 cores");
    assert_eq!(json["points"][0]["run"]["nodes"], 4);
    assert_eq!(json["points"][1]["run"]["model"]["translator"], "cgroup");
    let again = moirai(&args);
    assert!(again.status.success());
    assert_eq!(std::fs::read_to_string(out.0.join("results.csv")).unwrap(), csv);
}

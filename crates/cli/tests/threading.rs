//! `moirai run --threading` through the real binary: every model runs the workloads and loses
//! nothing, elastic reports its decisions, `--ops 10000` starts, bad models exit 2.

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
fn every_model_runs_syn_and_loses_nothing() {
    for model in ["dedicated", "dynamic:2", "dynamic:1", "fused", "elastic:1-2:period=200ms"] {
        let (code, out, err) = run(&[
            "syn",
            "--queries",
            "3",
            "--ops",
            "4",
            "--cost-ns",
            "200",
            "--rate",
            "30000",
            "--duration",
            "2s",
            "--threading",
            model,
            "--json",
        ]);
        assert_eq!(code, Some(0), "{model}: {err}");
        let v = last_json(&out);
        assert_eq!(
            v["threading"].as_str().map(|t| t.split(':').next().unwrap()),
            Some(model.split(':').next().unwrap())
        );
        assert!(v["tuples_in"].as_u64().unwrap() > 0, "{model}: {v}");
        assert_eq!(v["tuples_in"], v["tuples_out"], "{model}: nothing lost");
        let threads = v["threads"].as_u64().unwrap();
        let want = match model {
            "dedicated" => 18,
            "dynamic:1" | "fused" => 1,
            _ => 2,
        };
        assert_eq!(threads, want, "{model}: operator threads");
    }
}

#[test]
fn elastic_prints_its_decisions_and_the_timeline_has_the_level() {
    let (code, out, err) = run(&[
        "syn",
        "--ops",
        "3",
        "--rate",
        "20000",
        "--duration",
        "3s",
        "--threading",
        "elastic:1-2:period=100ms",
        "-v",
        "--json",
    ]);
    assert_eq!(code, Some(0), "{err}");
    assert!(err.lines().filter(|l| l.starts_with("elastic: ")).count() >= 10, "one line per decision: {err}");
    let v = last_json(&out);
    let levels: Vec<u64> =
        v["timeline"].as_array().unwrap().iter().map(|p| p["thread_level"].as_u64().unwrap()).collect();
    assert!(!levels.is_empty() && levels.iter().all(|&l| (1..=2).contains(&l)), "{levels:?}");
    for change in v["level_changes"].as_array().unwrap() {
        assert_ne!(change["from"], change["to"], "{change}");
    }
}

#[test]
fn ten_thousand_operators_start() {
    let (code, out, err) =
        run(&["syn", "--ops", "10000", "--rate", "1000", "--duration", "2s", "--threading", "dynamic:2", "--json"]);
    assert_eq!(code, Some(0), "{err}");
    let v = last_json(&out);
    assert!(v["tuples_in"].as_u64().unwrap() > 0);
    assert_eq!(v["tuples_in"], v["tuples_out"]);
}

#[test]
fn bad_threading_and_too_many_operators_exit_2() {
    for (args, says) in [
        (vec!["--threading", "dynamic:0"], "out of range"),
        (vec!["--threading", "dynamic:abc"], "not a whole number"),
        (vec!["--threading", "elastic:4-2"], "min 4 > max 2"),
        (vec!["--threading", "elastic:1-2:start=5"], "start 5"),
        (vec!["--threading", "fused:a++b"], "empty thread name"),
        (vec!["--threading", "pool"], "unknown threading model 'pool'"),
        (vec!["--ops", "200000"], "exceed the engine's bound"),
    ] {
        let mut all = vec!["syn", "--duration", "1s"];
        all.extend(&args);
        let (code, _, err) = run(&all);
        assert_eq!(code, Some(2), "{args:?}: {err}");
        assert!(err.contains(says), "{args:?}: {err}");
    }
}

//! Linear Road through the real binary: the benchmark's files in (records and historical tolls),
//! the validator's lines out, bad files refused with their line, and `moirai l-rating`.

use std::path::PathBuf;
use std::process::Command;

const BIN: &str = env!("CARGO_BIN_EXE_moirai");

fn moirai(args: &[&str]) -> (Option<i32>, String, String) {
    let out = Command::new(BIN).args(args).output().expect("run moirai");
    (
        out.status.code(),
        String::from_utf8_lossy(&out.stdout).into_owned(),
        String::from_utf8_lossy(&out.stderr).into_owned(),
    )
}

/// A file (or directory) in the temp directory, removed when dropped.
struct Temp(PathBuf);

impl Temp {
    fn path(name: &str) -> Self {
        Temp(std::env::temp_dir().join(format!("moirai-lr-cli-{}-{name}", std::process::id())))
    }

    fn with(name: &str, text: &str) -> Self {
        let t = Temp::path(name);
        std::fs::write(&t.0, text).unwrap();
        t
    }

    fn arg(&self) -> &str {
        self.0.to_str().unwrap()
    }
}

impl Drop for Temp {
    fn drop(&mut self) {
        let _ = std::fs::remove_file(&self.0);
        let _ = std::fs::remove_dir_all(&self.0);
    }
}

/// Records as the benchmark's generator writes them: its queries repeat the car's position
/// fields. Car 7 asks about day 3 on expressway 0 (line 3), car 8 about day 5 (line 5).
const RECORDS: &str = "0,0,7,30,0,0,0,1,5280,-1,-1,-1,-1,-1,-1\n\
                       0,0,8,30,0,0,1,2,15839,-1,-1,-1,-1,-1,-1\n\
                       3,0,7,30,0,0,0,1,5280,0,-1,-1,-1,-1,3\n\
                       0,1,9,30,0,0,0,4,21120,-1,-1,-1,-1,-1,-1\n\
                       3,1,8,30,0,0,1,2,15839,1,-1,-1,-1,-1,5\n\
                       2,1,7,30,0,0,0,1,5280,2,-1,-1,-1,-1,-1\n";

#[test]
fn the_generators_tolls_file_answers_daily_expenditures() {
    let records = Temp::with("records.dat", RECORDS);
    let tolls = Temp::with("tolls.dat", "7,1,0,11\n7,3,0,42\n8,5,1,13\n8,6,0,99\n9,3,0,50\n");
    let out = Temp::path("answers.out");
    let (code, stdout, err) = moirai(&[
        "run",
        "linear-road",
        "--input",
        records.arg(),
        "--historical-tolls",
        tolls.arg(),
        "--output",
        out.arg(),
        "--json",
    ]);
    assert_eq!(code, Some(0), "{err}");
    let v: serde_json::Value = serde_json::from_str(stdout.lines().last().unwrap()).unwrap();
    let s = &v["workload_stats"];
    // Car 7's day 3 on expressway 0: 42. Car 8 drove on expressway 1 on day 5 but asks about 0:
    // the validator has no answer, and moirai counts it.
    assert_eq!((s["daily_expenditures"].as_u64(), s["expenditures_without_toll"].as_u64()), (Some(1), Some(1)), "{s}");
    assert_eq!(s["rules"], "validator");
    assert!(s["historical_tolls"].as_str().unwrap().contains("5 lines, 2 rows kept"), "{s}");
    let kinds = s["response_times"]["kinds"].as_array().unwrap();
    assert_eq!(kinds.len(), 4, "{s}");
    assert_eq!(kinds[3]["output"], "daily_expenditures");
    assert_eq!(kinds[3]["limit_s"].as_u64(), Some(10));
    let written = std::fs::read_to_string(&out.0).unwrap();
    let lines: Vec<Vec<&str>> = written.lines().map(|l| l.split(',').collect()).collect();
    let expenditure = lines.iter().find(|l| l[0] == "3").expect("a type-3 line");
    assert_eq!((expenditure[1], expenditure[3], expenditure[4]), ("0", "0", "42"), "3,time,emit,qid,bal: {written}");
    let balance = lines.iter().find(|l| l[0] == "2").expect("a type-2 line");
    assert_eq!((balance[1], balance[3], balance[4], balance[5]), ("1", "1", "2", "0"), "result time = query time");
    assert!(lines.iter().all(|l| l[0] != "5"), "no toll assessments in the validator's lines");
}

#[test]
fn tolls_files_that_are_wrong_are_refused_with_their_line() {
    let records = Temp::with("records2.dat", RECORDS);
    let run = |extra: &[&str]| {
        let mut args = vec!["run", "linear-road", "--input", records.arg()];
        args.extend_from_slice(extra);
        moirai(&args)
    };
    let bad = Temp::with("bad-tolls.dat", "7,3,0,42\n8,5,x,13\n");
    let (code, _, err) = run(&["--historical-tolls", bad.arg()]);
    assert_eq!(code, Some(2), "{err}");
    assert!(err.contains("line 2, column 3 (xway): 'x' is not an integer"), "{err}");
    // A tolls file without car 8's day 5: it was written for another input.
    let other = Temp::with("other-tolls.dat", "7,3,0,42\n8,6,1,13\n");
    let (code, _, err) = run(&["--historical-tolls", other.arg()]);
    assert_eq!(code, Some(2), "{err}");
    assert!(err.contains("line 5: the type-3 query asks about car 8 on day 5"), "{err}");
    let (code, _, err) = run(&["--historical-tolls", "/nonexistent/tolls.dat"]);
    assert_eq!(code, Some(2), "{err}");
    assert!(err.contains("cannot read the historical tolls file /nonexistent/tolls.dat"), "{err}");
    // Type-3 queries without a tolls file: their answers would be made up.
    let (code, _, err) = run(&[]);
    assert_eq!(code, Some(2), "{err}");
    assert!(err.contains("line 3: daily-expenditure queries") && err.contains("--historical-tolls"), "{err}");
    // Unless asked for: the seeded table, or moirai's rules (which default to it).
    assert_eq!(run(&["--historical-tolls", "seeded"]).0, Some(0));
    let (code, _, err) = run(&["--rules", "moirai"]);
    assert_eq!(code, Some(0), "{err}");
    let (code, _, err) = run(&["--rules", "spec"]);
    assert_eq!(code, Some(2));
    assert!(err.contains("'validator'"), "{err}");
    // An impossible record: a day beyond the 69 of the history.
    let late = Temp::with("late.dat", "3,0,7,30,0,0,0,1,5280,0,-1,-1,-1,-1,70\n");
    let (code, _, err) = moirai(&["run", "linear-road", "--input", late.arg(), "--historical-tolls", "seeded"]);
    assert_eq!(code, Some(2), "{err}");
    assert!(err.contains("line 1, column 15 (day): 70 is out of range 0..=69"), "{err}");
}

#[test]
fn l_rating_runs_trials_at_the_records_clock_and_writes_them() {
    let out = Temp::path("l-rating");
    let started = std::time::Instant::now();
    let (code, stdout, err) = moirai(&[
        "l-rating",
        "--at",
        "1,2",
        "--cars-per-second",
        "2",
        "--skip",
        "100s",
        "--fast-forward",
        "100s",
        "--lead-in",
        "2s",
        "--judged",
        "3s",
        "--out",
        out.arg(),
    ]);
    assert_eq!(code, Some(0), "{err}");
    // Each trial replays the records of seconds 200..=204 at their clock: the last is due 4 s
    // after the first.
    let took = started.elapsed().as_secs_f64();
    assert!(took >= 8.0, "two trials of 4 s at the records' clock each, took {took:.1} s");
    assert!(stdout.contains("100 s of traffic skipped, 100 s fast-forwarded"), "{stdout}");
    let trials: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(out.0.join("trials.json")).unwrap()).unwrap();
    let trials = trials["trials"].as_array().unwrap();
    assert_eq!(trials.len(), 2);
    for (t, l) in trials.iter().zip([1, 2]) {
        assert_eq!(t["xways"].as_u64(), Some(l));
        assert!(t["records"].as_u64().unwrap() > 1000, "{t}");
        assert!(t["judged_reports_per_s_per_xway"].as_f64().unwrap() > 0.0, "{t}");
        assert!(t["rss_peak_bytes"].as_u64().unwrap() > 0, "{t}");
        // Answers to the fast-forwarded records are not judged.
        assert!(t["responses"]["unjudged"].as_u64().unwrap() > 0, "{t}");
        assert!(t["responses"]["answers"].as_u64().unwrap() > 0, "{t}");
    }
    let csv = std::fs::read_to_string(out.0.join("trials.csv")).unwrap();
    assert_eq!(csv.lines().count(), 1 + 2 * 4, "a row per trial and output type: {csv}");
    // Bad settings are refused.
    for (args, expect) in [
        (&["l-rating", "--judged", "0s"][..], "judged"),
        (&["l-rating", "--at", "0"][..], "at least 1"),
        (&["l-rating", "--threading", "dynamic:0"][..], "dynamic"),
        (&["l-rating", "--cars-per-second", "0"][..], "cars per second"),
    ] {
        let (code, _, err) = moirai(args);
        assert_eq!(code, Some(2), "{args:?}: {err}");
        assert!(err.contains(expect), "{args:?}: {err}");
    }
}

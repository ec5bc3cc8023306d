//! `moirai demo`, the README's main command, through the real binary.

mod common;
#[path = "common/results.rs"]
mod results;

use common::{moirai, OutDir};
use results::{num, read_json};

/// The demo in short points: the three configurations side by side (two
/// without the privilege to renice), the table, the sustainable rates, the CPU bound, the files.
#[test]
fn the_demo_sweeps_around_the_saturation_point_and_writes_the_report() {
    let out = OutDir::new("demo");
    let dir = out.0.to_str().unwrap();
    let o = moirai(&["demo", "--duration", "1s", "--warmup", "0.3", "--out", dir]);
    let stdout = String::from_utf8_lossy(&o.stdout);
    let stderr = String::from_utf8_lossy(&o.stderr);
    assert_eq!(o.status.code(), Some(0), "stdout:\n{stdout}\nstderr:\n{stderr}");
    // SAFETY: geteuid has no preconditions.
    let root = unsafe { libc::geteuid() } == 0;
    let configurations: &[&str] = if root { &["os", "qs", "os@dynamic"] } else { &["os", "os@dynamic"] };
    assert!(stdout.contains("The operators' CPU costs allow"), "{stdout}");
    let json = read_json(&out.0.join("results.json"));
    assert_eq!(json["end"], "completed");
    assert_eq!(json["spec"]["warmup"], 0.3);
    assert_eq!(json["spec"]["extra_args"][0], "--lachesis");
    let points = json["points"].as_array().unwrap();
    assert_eq!(points.len(), 5 * configurations.len(), "five rates, one repetition");
    for p in points {
        assert!(p["failure"].is_null(), "a point failed: {p}");
        assert!(configurations.contains(&p["configuration"].as_str().unwrap()), "{p}");
        assert!(num(&p["run"]["ingress_tps"], "ingress_tps") > 0.0, "{p}");
    }
    for c in configurations {
        assert!(stdout.contains(&format!("  {c}: ")), "no sustainable rate of {c}: {stdout}");
    }
    assert!(stdout.contains("CPU bound (measured)"), "{stdout}");
    assert!(out.0.join("report.html").is_file() && out.0.join("results.csv").is_file());
    // Bad input is the lab's: the same message and exit code.
    let o = moirai(&["demo", "--warmup", "0.95", "--out", dir]);
    assert_eq!(o.status.code(), Some(2));
    assert!(String::from_utf8_lossy(&o.stderr).contains("--warmup 0.95 must be a share"), "{o:?}");
}

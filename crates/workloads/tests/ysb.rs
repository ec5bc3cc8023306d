//! YSB end to end: the window counts equal a naive count of the same events, per campaign and
//! window, and every window result has a latency.

use std::collections::BTreeMap;
use std::time::{Duration, Instant};

use moirai_engine::{Engine, EngineConfig};
use moirai_workloads::ysb::{self, CheckError, YsbConfig, YsbHandle};

/// Runs a finite YSB to its end. The timeout only turns a hang into a failure.
fn run(config: &YsbConfig) -> YsbHandle {
    let (queries, handle) = ysb::queries(config).expect("a valid configuration");
    let engine = Engine::start(EngineConfig::default(), queries).expect("the engine starts");
    let deadline = Instant::now() + Duration::from_secs(60);
    while !engine.is_finished() {
        if Instant::now() > deadline {
            engine.abort();
            panic!("YSB did not finish within 60 s: a hang");
        }
        std::thread::sleep(Duration::from_millis(5));
    }
    engine.wait().expect("the run succeeds");
    handle
}

/// Views per (campaign, window start), counted naively from the JSON of the same records.
fn naive_count(handle: &YsbHandle, window_ns: u64) -> BTreeMap<(String, u64), u64> {
    let campaign_of = handle.campaign_of_ad();
    let mut counts = BTreeMap::new();
    for record in handle.records().expect("a finite run at a fixed rate") {
        let event: serde_json::Value = serde_json::from_str(&record.json).unwrap();
        if event["event_type"] == "view" {
            let campaign = campaign_of[event["ad_id"].as_str().unwrap()].clone();
            let ns = event["event_time"].as_str().unwrap().parse::<u64>().unwrap() * 1_000_000;
            *counts.entry((campaign, ns - ns % window_ns)).or_insert(0) += 1;
        }
    }
    counts
}

#[test]
fn window_counts_equal_a_naive_count_per_campaign_and_window() {
    for parallelism in [1, 2] {
        // 20 000 events at 20 000 events/s: one second, about ten windows of 100 ms.
        let config =
            YsbConfig { rate: 20_000.0, seed: 3, parallelism, events: 20_000, window_ms: 100, ..YsbConfig::default() };
        let handle = run(&config);
        let naive = naive_count(&handle, 100_000_000);
        let got = handle.window_counts();
        let windows: std::collections::BTreeSet<u64> = naive.keys().map(|k| k.1).collect();
        assert!(windows.len() >= 8, "the run spans {} windows", windows.len());
        assert!(naive.keys().map(|k| &k.0).collect::<std::collections::HashSet<_>>().len() == 100);
        let views: u64 = naive.values().sum();
        assert!((6_000..7_400).contains(&views), "about a third of 20 000 events are views: {views}");
        assert_eq!(got, naive, "parallelism {parallelism}");
        handle.check().unwrap();
        assert_eq!((handle.malformed(), handle.unknown_ads()), (0, 0));
        // One latency per window result, but for the last windows, which the end of the input
        // closed before their end (at most one per campaign, per window the run was still in).
        let early = handle.early_windows();
        assert_eq!(handle.window_latency().len() + early, got.len() as u64);
        assert!(early <= 200, "{early} windows closed early");
        assert!(handle.window_latency().len() >= 500, "most windows close on a watermark and have a latency");
    }
}

#[test]
fn runs_that_cannot_be_regenerated_say_so() {
    let endless = run_briefly(&YsbConfig { window_ms: 50, ..YsbConfig::default() });
    assert!(matches!(endless.check(), Err(CheckError::Endless)));
    let flat_out = run(&YsbConfig { rate: 0.0, events: 5_000, window_ms: 50, ..YsbConfig::default() });
    assert!(matches!(flat_out.check(), Err(CheckError::Unrepeatable)));
    // The counts are there all the same: a third of the events, give or take.
    let views: u64 = flat_out.window_counts().values().sum();
    assert!((1_400..1_950).contains(&views), "{views} views of 5000 events");
}

/// Runs an endless YSB for a moment, then stops it.
fn run_briefly(config: &YsbConfig) -> YsbHandle {
    let (queries, handle) = ysb::queries(config).unwrap();
    let engine = Engine::start(EngineConfig::default(), queries).unwrap();
    std::thread::sleep(Duration::from_millis(200));
    engine.stop();
    engine.wait().unwrap();
    handle
}

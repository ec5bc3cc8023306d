//! Micro-batch execution with real executor processes of the `moirai` binary on loopback: its
//! WordCount counts and YSB window counts equal the continuous engine's, group scheduling takes
//! one decision per group, a `kill -9` of an executor changes nothing in the committed output,
//! bad input exits 2.

use std::collections::BTreeMap;
use std::process::Command;
use std::time::{Duration, Instant};

use moirai_engine::{Engine, EngineConfig};
use moirai_microbatch::{driver, DriverConfig, GroupSize, KillAt, QueryJob, RunReport, Scheduling, WordCountJob};
use moirai_workloads::wordcount::{self, WordCountConfig};
use moirai_workloads::ysb::{self, YsbConfig};

const BIN: &str = env!("CARGO_BIN_EXE_moirai");

/// The tests run one at a time: they count this process's children, and share 2 cores.
static SERIAL: std::sync::Mutex<()> = std::sync::Mutex::new(());

fn serial() -> std::sync::MutexGuard<'static, ()> {
    SERIAL.lock().unwrap_or_else(|e| e.into_inner())
}

/// 4000 sentences at 20000/s: 200 ms of input, 20 micro-batches of 10 ms, windows of 50 ms.
const JOB: [&str; 11] = [
    "wordcount",
    "--sentences",
    "4000",
    "--rate",
    "20000",
    "--parallelism",
    "2",
    "--window-ms",
    "50",
    "--batch-interval",
    "10ms",
];

fn config() -> WordCountConfig {
    WordCountConfig { sentences: 4000, rate: 20_000.0, parallelism: 2, window_ms: 50, ..WordCountConfig::default() }
}

fn job() -> WordCountJob {
    WordCountJob::new(config(), Duration::from_millis(10), None).expect("a valid job")
}

/// PIDs of this process's children (executors not reaped show up here).
fn child_pids() -> Vec<i32> {
    let tasks = std::fs::read_dir("/proc/self/task").expect("/proc");
    tasks
        .flatten()
        .flat_map(|t| {
            let children = std::fs::read_to_string(t.path().join("children")).unwrap_or_default();
            children.split_whitespace().filter_map(|p| p.parse().ok()).collect::<Vec<i32>>()
        })
        .collect()
}

fn children() -> usize {
    child_pids().len()
}

/// The committed outputs as the JSON texts the sink committed: equal maps mean the same
/// (micro-batch, partition) outputs, byte for byte.
fn committed(report: &RunReport) -> BTreeMap<(u64, usize), String> {
    report.outputs.iter().map(|(k, v)| (*k, v.get().to_string())).collect()
}

fn run(executors: usize, scheduling: Scheduling, kill: Option<KillAt>) -> RunReport {
    run_with(driver_config(executors, scheduling, kill))
}

fn driver_config(executors: usize, scheduling: Scheduling, kill: Option<KillAt>) -> DriverConfig {
    DriverConfig {
        executors,
        scheduling,
        program: BIN.into(),
        job_args: JOB.iter().map(|s| s.to_string()).collect(),
        paced: true,
        heartbeat_timeout: Duration::from_secs(2),
        checkpoint_every: 5,
        kill,
        verbose: true,
    }
}

fn run_with(config: DriverConfig) -> RunReport {
    let report = driver::run(&config, &job()).expect("the micro-batch run succeeds");
    assert_eq!(children(), 0, "every executor process is stopped and reaped");
    report
}

fn continuous_counts() -> BTreeMap<String, u64> {
    let (queries, handle) = wordcount::queries(&config()).unwrap();
    let engine = Engine::start(EngineConfig::default(), queries).unwrap();
    let deadline = Instant::now() + Duration::from_secs(60);
    while !engine.is_finished() {
        if Instant::now() > deadline {
            engine.abort();
            panic!("the continuous WordCount did not finish within 60 s");
        }
        std::thread::sleep(Duration::from_millis(5));
    }
    engine.wait().unwrap();
    handle.counts().into_iter().collect()
}

#[test]
fn counts_equal_the_continuous_engine_under_both_schedulings() {
    let _serial = serial();
    let expected = continuous_counts();
    assert!(expected.values().sum::<u64>() > 4000, "the input has words");
    let per_batch = run(2, Scheduling::PerBatch, None);
    let group = run(3, Scheduling::Group(GroupSize::Fixed(4)), None);
    assert_eq!(per_batch.batches, 20);
    assert_eq!(per_batch.counts(), expected, "per-batch scheduling counts what the continuous engine counts");
    assert_eq!(group.counts(), expected, "group scheduling counts what the continuous engine counts");
    assert_eq!(per_batch.window_counts(), group.window_counts(), "the same windows either way");
    let windows: std::collections::BTreeSet<u64> = per_batch.window_counts().keys().map(|(w, _)| *w).collect();
    assert_eq!(windows.into_iter().collect::<Vec<_>>(), vec![0, 50, 100, 150], "four windows of 50 ms");
    let closed_early = per_batch
        .output_values()
        .filter(|((b, _), out)| *b < 19 && out.as_array().is_some_and(|a| !a.is_empty()))
        .count();
    assert!(closed_early > 0, "windows are emitted as micro-batches close them, not only at the end");
    assert_eq!(per_batch.commit_ms.len(), 20, "every micro-batch committed");
}

#[test]
fn group_scheduling_takes_one_decision_per_group() {
    let _serial = serial();
    let g = run(2, Scheduling::Group(GroupSize::Fixed(6)), None);
    assert_eq!(g.decisions, 4, "20 micro-batches in groups of 6: 6 + 6 + 6 + 2");
    assert_eq!(g.group_sizes, vec![6, 6, 6, 2]);
    let b = run(2, Scheduling::PerBatch, None);
    assert_eq!(b.decisions, 40, "per-batch: a map and a reduce decision per micro-batch");
    assert_eq!(b.groups, 20);
}

#[test]
fn a_killed_executor_changes_nothing_in_the_committed_output() {
    let _serial = serial();
    let clean = run(3, Scheduling::Group(GroupSize::Fixed(4)), None);
    // Executor 1 dies (SIGKILL) after micro-batch 9: mid-group (8..12), after the checkpoint at 7
    // (the first group boundary 5 or more micro-batches after the start).
    let failed = run(3, Scheduling::Group(GroupSize::Fixed(4)), Some(KillAt { executor: 1, batch: 9 }));
    assert_eq!(failed.recoveries.len(), 1, "one recovery");
    let r = &failed.recoveries[0];
    assert_eq!((r.executor, r.from_batch), (1, 8), "replayed from the checkpoint after micro-batch 7");
    assert_eq!(
        committed(&failed),
        committed(&clean),
        "every (micro-batch, partition) output committed once, as without failure"
    );
    assert_eq!(failed.counts(), clean.counts());
    let per_batch = run(2, Scheduling::PerBatch, Some(KillAt { executor: 0, batch: 12 }));
    assert_eq!(per_batch.recoveries.len(), 1);
    assert_eq!(per_batch.recoveries[0].from_batch, 10, "per-batch checkpoints every 5 micro-batches");
    assert_eq!(committed(&per_batch), committed(&clean), "per-batch recovery too");
}

#[test]
fn a_silent_executor_is_found_by_its_heartbeats() {
    let _serial = serial();
    let clean = run(2, Scheduling::Group(GroupSize::Fixed(4)), None);
    // SIGSTOP one executor 100 ms into the run: its connection stays open, only its heartbeats
    // stop, so the driver must notice the silence. Into the run: once both executors have their
    // heartbeat thread (main, shuffle acceptor, driver reader, heartbeat), i.e. said hello, which
    // a loaded machine may take long to get to.
    let stopper = std::thread::spawn(|| {
        let deadline = Instant::now() + Duration::from_secs(30);
        let threads = |pid: i32| std::fs::read_dir(format!("/proc/{pid}/task")).map_or(0, |d| d.count());
        loop {
            let pids = child_pids();
            if pids.len() == 2 && pids.iter().all(|&p| threads(p) >= 4) {
                std::thread::sleep(Duration::from_millis(100));
                // SAFETY: kill(2) on a child of this process, which the driver reaps.
                unsafe { libc::kill(pids[0], libc::SIGSTOP) };
                return pids[0];
            }
            assert!(Instant::now() < deadline, "the executors did not start");
            std::thread::sleep(Duration::from_millis(2));
        }
    });
    let config = DriverConfig {
        heartbeat_timeout: Duration::from_millis(500),
        ..driver_config(2, Scheduling::Group(GroupSize::Fixed(4)), None)
    };
    let silent = run_with(config);
    let stopped = stopper.join().expect("the stopper thread");
    assert_eq!(silent.recoveries.len(), 1, "the stopped executor is lost once");
    assert!(silent.recoveries[0].at_ms >= 500.0, "noticed by its silence, not earlier: {:?}", silent.recoveries);
    assert!(!std::path::Path::new(&format!("/proc/{stopped}")).exists(), "the stopped executor is killed and reaped");
    assert_eq!(committed(&silent), committed(&clean), "the same output without the executor");
}

/// 3000 YSB events at 10000/s: 300 ms of input, 15 micro-batches of 20 ms, windows of 50 ms.
const YSB: [&str; 13] = [
    "ysb",
    "--events",
    "3000",
    "--rate",
    "10000",
    "--parallelism",
    "2",
    "--window-ms",
    "50",
    "--campaigns",
    "10",
    "--batch-interval",
    "20ms",
];

/// YSB as the executors build it: events scheduled from time 0.
fn ysb_config() -> YsbConfig {
    YsbConfig {
        events: 3000,
        rate: 10_000.0,
        parallelism: 2,
        window_ms: 50,
        campaigns: 10,
        origin_ns: Some(0),
        ..YsbConfig::default()
    }
}

type CampaignWindows = BTreeMap<(String, u64), u64>;

/// A YSB micro-batch run: its report, and the views per (campaign, window) its sink received.
fn run_ysb(executors: usize, scheduling: Scheduling, kill: Option<KillAt>) -> (RunReport, CampaignWindows) {
    let (mut queries, handle) = ysb::queries(&ysb_config()).unwrap();
    let job = QueryJob::new(queries.pop().unwrap(), Duration::from_millis(20), Some(3000), Duration::ZERO).unwrap();
    let config = DriverConfig {
        job_args: YSB.iter().map(|s| s.to_string()).collect(),
        ..driver_config(executors, scheduling, kill)
    };
    let report = driver::run(&config, &job).expect("the micro-batch run succeeds");
    assert_eq!(children(), 0, "every executor process is stopped and reaped");
    let mut sink = job.sink();
    for (_, output) in report.output_values() {
        sink.push(output.as_array().cloned().unwrap_or_default()).unwrap();
    }
    sink.finish();
    handle.check().expect("the window counts equal a naive count of the input");
    (report, handle.window_counts())
}

fn continuous_ysb() -> CampaignWindows {
    let (queries, handle) = ysb::queries(&ysb_config()).unwrap();
    let engine = Engine::start(EngineConfig::default(), queries).unwrap();
    let deadline = Instant::now() + Duration::from_secs(60);
    while !engine.is_finished() {
        if Instant::now() > deadline {
            engine.abort();
            panic!("the continuous YSB did not finish within 60 s");
        }
        std::thread::sleep(Duration::from_millis(5));
    }
    engine.wait().unwrap();
    handle.window_counts()
}

#[test]
fn ysb_window_counts_equal_the_continuous_engine_also_after_a_kill() {
    let _serial = serial();
    let expected = continuous_ysb();
    let windows: std::collections::BTreeSet<u64> = expected.keys().map(|(_, w)| *w).collect();
    assert_eq!(windows.len(), 6, "300 ms of events in windows of 50 ms: {windows:?}");
    assert!(expected.values().sum::<u64>() > 900, "about a third of 3000 events are views");
    let (per_batch, got) = run_ysb(2, Scheduling::PerBatch, None);
    assert_eq!(per_batch.batches, 15);
    assert_eq!(got, expected, "per-batch scheduling counts what the continuous engine counts");
    let (group, got) = run_ysb(3, Scheduling::Group(GroupSize::Fixed(4)), None);
    assert_eq!(group.decisions, 4, "15 micro-batches in groups of 4");
    assert_eq!(got, expected, "group scheduling counts what the continuous engine counts");
    let emitted_early =
        group.output_values().filter(|((b, _), v)| *b < 14 && v.as_array().is_some_and(|a| !a.is_empty()));
    assert!(emitted_early.count() > 0, "windows are emitted as watermarks close them, not only at the end");
    let (failed, got) = run_ysb(3, Scheduling::Group(GroupSize::Fixed(4)), Some(KillAt { executor: 2, batch: 9 }));
    assert_eq!(failed.recoveries.len(), 1, "one recovery");
    assert_eq!(failed.recoveries[0].from_batch, 8, "replayed from the checkpoint after micro-batch 7");
    assert_eq!(got, expected, "a kill -9 mid-run changes no window count");
    assert_eq!(committed(&failed), committed(&group), "every output committed once, as without failure");
}

#[test]
fn a_single_stage_job_has_no_reduce_tasks_and_counts_the_same() {
    let _serial = serial();
    let job = job().single_stage();
    let mut config = driver_config(2, Scheduling::Group(GroupSize::Fixed(5)), None);
    config.job_args.push("--single-stage".into());
    let report = driver::run(&config, &job).unwrap();
    assert_eq!(children(), 0);
    assert_eq!(report.decisions, 4);
    assert_eq!(report.counts(), continuous_counts(), "map-side counts summed equal the continuous engine's");
    assert!(report.compute_ms > 0.0 && report.coordination_ms >= 0.0, "{report:?}");
}

fn moirai(args: &[&str]) -> (Option<i32>, String, String) {
    let out = Command::new(BIN).arg("run").args(args).output().expect("run moirai");
    (
        out.status.code(),
        String::from_utf8_lossy(&out.stdout).into_owned(),
        String::from_utf8_lossy(&out.stderr).into_owned(),
    )
}

#[test]
fn the_command_line_runs_micro_batches_and_refuses_what_it_cannot_run() {
    let _serial = serial();
    let (code, out, err) = moirai(&[
        "wordcount",
        "--sentences",
        "2000",
        "--rate",
        "20000",
        "--threading",
        "micro-batch:group=5:executors=2",
        "--batch-interval",
        "20ms",
        "--json",
    ]);
    assert_eq!(code, Some(0), "{err}");
    let v: serde_json::Value = serde_json::from_str(out.lines().last().unwrap()).unwrap();
    assert_eq!(v["workload_stats"]["check"], "counts equal a naive count", "{v}");
    assert_eq!((v["batches"].as_u64(), v["decisions"].as_u64()), (Some(5), Some(1)), "{v}");

    let (code, out, err) = moirai(&[
        "ysb",
        "--events",
        "20000",
        "--rate",
        "20000",
        "--window-ms",
        "50",
        "--threading",
        "micro-batch:group=5:executors=2:interval=20ms",
        "--json",
    ]);
    assert_eq!(code, Some(0), "{err}");
    let v: serde_json::Value = serde_json::from_str(out.lines().last().unwrap()).unwrap();
    assert_eq!(v["workload_stats"]["check"], "window counts equal a naive count", "{v}");
    assert!(v["workload_stats"]["window_latency_ms"]["count"].as_u64() > Some(0), "{v}");
    // One second of YSB at 20k/s keeps the driver and two executors measurably busy, and no more
    // than the machine's cores (with a margin for /proc's 10 ms clock ticks).
    let cores = std::thread::available_parallelism().map_or(1, |n| n.get()) as f64;
    let cpu = v["cpu_cores"].as_f64().unwrap_or(-1.0);
    assert!(cpu > 0.01 && cpu < cores + 0.5, "the driver and executors' CPU: {cpu} cores of {cores}");

    let refused: [(&[&str], &str); 9] = [
        (&["ysb", "--events", "100", "--rate", "1000", "--ramp-to", "2000", "--threading", "micro-batch"], "--ramp-to"),
        (&["wordcount", "--rate", "100", "--ramp-to=-5", "--threading", "micro-batch"], "--ramp-to"),
        (
            &["linear-road", "--rate", "1000", "--duration", "1s", "--threading", "micro-batch"],
            "operator 'vehicles': a keyed process",
        ),
        (
            &["ysb", "--events", "100", "--rate", "1000", "--threading", "micro-batch", "--single-stage"],
            "--single-stage",
        ),
        (&["wordcount", "--sentences", "100", "--rate", "0", "--threading", "micro-batch"], "--rate"),
        (
            &["wordcount", "--sentences", "100", "--rate", "100", "--threading", "micro-batch", "--group", "0"],
            "group '0'",
        ),
        (
            &["wordcount", "--sentences", "100", "--rate", "100", "--threading", "micro-batch:groop=2"],
            "unknown setting",
        ),
        (
            &[
                "wordcount",
                "--sentences",
                "100",
                "--rate",
                "100",
                "--threading",
                "micro-batch",
                "--kill-executor",
                "5@1",
            ],
            "cannot kill executor 5",
        ),
        (
            &["wordcount", "--sentences", "100", "--rate", "100", "--threading", "micro-batch", "--straggler", "2"],
            "--straggler",
        ),
    ];
    for (args, says) in refused {
        let (code, _, err) = moirai(args);
        assert_eq!(code, Some(2), "{args:?}: {err}");
        assert!(err.contains(says), "{args:?} must say '{says}': {err}");
        assert!(!err.contains("panicked"), "{err}");
    }
}

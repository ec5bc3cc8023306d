//! "Do no harm": `moirai schedule` acts on an engine only while scheduling can help, on real
//! processes. Well below saturation every operator thread keeps its nice value for the whole run
//! and the middleware says it is idle; driven past saturation the threads get differentiated
//! values and it says it is active; when the rate falls back, every thread gets its original
//! value again, and so it does when an overload passes and the engine keeps up at the same rate
//! (the rule's check whether Linux alone keeps up). Every process is stopped by its PID when its
//! guard drops, also when a test fails. Timing depends on the machine's load: run again before
//! debugging a failure seen while a benchmark ran.

#[path = "common/spe.rs"]
#[allow(dead_code)]
mod spe;

use std::collections::BTreeMap;
use std::time::{Duration, Instant};

use spe::{free_port, is_root, nice, temp_dir, wait_until, Proc, BIN, PATIENCE};

/// The tests load the machine (one drives an engine past saturation) and watch what another
/// engine's threads get: one at a time.
static ONE_AT_A_TIME: std::sync::Mutex<()> = std::sync::Mutex::new(());

fn serial() -> std::sync::MutexGuard<'static, ()> {
    ONE_AT_A_TIME.lock().unwrap_or_else(|e| e.into_inner())
}

/// Waits until `ok`; on time-out stops the middleware and fails with its log.
fn wait_for_middleware(what: &str, mw: Proc, mut ok: impl FnMut() -> bool) -> Proc {
    let deadline = Instant::now() + PATIENCE;
    while !ok() {
        if Instant::now() > deadline {
            mw.signal(libc::SIGINT);
            let (code, err) = mw.wait();
            panic!("timed out waiting for {what}; the middleware exited with {code:?}:\n{err}");
        }
        std::thread::sleep(Duration::from_millis(50));
    }
    mw
}

/// An engine serving its metrics on `port`, running `moirai run syn ARGS`.
fn engine(port: u16, args: &[&str]) -> Proc {
    let addr = format!("127.0.0.1:{port}");
    let mut all = vec!["run", "syn", "--metrics-addr", &addr];
    all.extend(args);
    let p = Proc::spawn(&all);
    wait_until("the engine's threads", || !operator_threads(port).is_empty());
    p
}

/// (pid, tid) of the engine's operator threads, from its /topology; empty until all started.
fn operator_threads(port: u16) -> Vec<(u32, i32)> {
    let Ok(resp) = ureq::get(&format!("http://127.0.0.1:{port}/topology")).call() else { return Vec::new() };
    let Ok(topo) = resp.into_json::<serde_json::Value>() else { return Vec::new() };
    let pid = topo["pid"].as_u64().unwrap_or(0) as u32;
    let tids: Vec<i32> = topo["physical"]
        .as_array()
        .map(|ops| ops.iter().map(|o| o["tid"].as_i64().unwrap_or(0) as i32).collect())
        .unwrap_or_default();
    if tids.is_empty() || tids.contains(&0) {
        return Vec::new();
    }
    tids.into_iter().map(|t| (pid, t)).collect()
}

fn nices(threads: &[(u32, i32)]) -> Vec<i32> {
    threads.iter().map(|&(p, t)| nice(p, t)).collect()
}

/// The middleware's own /metrics.
fn metrics(port: u16) -> String {
    ureq::get(&format!("http://127.0.0.1:{port}/metrics"))
        .call()
        .ok()
        .and_then(|r| r.into_string().ok())
        .unwrap_or_default()
}

/// What the middleware says of SPE "engine": (active, reason code), once a round has run.
fn activity(port: u16) -> Option<(bool, String)> {
    let text = metrics(port);
    let line = text.lines().find(|l| l.starts_with("moirai_schedule_active{spe=\"engine\""))?;
    let reason = line.split("reason=\"").nth(1)?.split('"').next()?.to_string();
    Some((line.ends_with(" 1"), reason))
}

/// The value of one series (`name{labels}` as rendered) on the middleware's `/metrics`.
fn value(port: u16, series: &str) -> Option<f64> {
    metrics(port).lines().find_map(|l| l.strip_prefix(series)?.strip_prefix(' ')?.parse().ok())
}

/// The nice values the middleware says it applied, per tid.
fn applied(port: u16) -> BTreeMap<i32, i64> {
    metrics(port)
        .lines()
        .filter(|l| l.starts_with("moirai_schedule_applied{"))
        .filter_map(|l| {
            let tid = l.split("tid=\"").nth(1)?.split('"').next()?.parse().ok()?;
            Some((tid, l.rsplit(' ').next()?.parse::<f64>().ok()? as i64))
        })
        .collect()
}

/// `moirai schedule --engine … --policy qs --period 200ms` with its metrics on a port of its own
/// (`-v` only while it applies nothing: its stderr is read at the end, and a full pipe would
/// block it).
fn schedule(engine_port: u16, state: &std::path::Path, verbose: bool) -> (Proc, u16) {
    let port = free_port();
    let (url, state, addr) =
        (format!("http://127.0.0.1:{engine_port}"), state.display().to_string(), format!("127.0.0.1:{port}"));
    let mut args = vec!["schedule", "--engine", &url, "--policy", "qs", "--period", "200ms", "--state-file", &state];
    args.extend(["--metrics-addr", &addr, "--nice-best", "0"]);
    if verbose {
        args.push("-v");
    }
    let mw = Proc::spawn(&args);
    (mw, port)
}

/// How many times the thread named `comm` of process `pid` went to sleep (its voluntary context
/// switches since it started).
fn sleeps(pid: u32, comm: &str) -> u64 {
    let threads = moirai_os::proc::threads(pid).expect("the middleware's threads");
    let Some(thread) = threads.iter().find(|t| t.name == comm) else {
        panic!("process {pid} has no thread named {comm}");
    };
    moirai_os::proc::thread_voluntary_switches(pid, thread.tid).expect("its voluntary_ctxt_switches")
}

#[test]
fn well_below_saturation_every_thread_keeps_its_nice_and_the_middleware_says_idle() {
    let _one = serial();
    if !is_root() {
        eprintln!("SKIPPED well_below_saturation_…: needs root (CAP_SYS_NICE) for the middleware to start");
        return;
    }
    let port = free_port();
    // Two queries of 3 cheap operators at 1 000 tuples/s: a few per cent of one core.
    let _eng =
        engine(port, &["--queries", "2", "--ops", "3", "--cost-ns", "1000", "--rate", "1000", "--duration", "120s"]);
    let threads = operator_threads(port);
    let before = nices(&threads);
    let dir = temp_dir("activation-idle");
    let (mw, mw_port) = schedule(port, &dir.0.join("state.json"), true);
    wait_until("the first round", || activity(mw_port).is_some());
    // Quiet once its first window spans a second (the engine keeps up): a round a second then,
    // not every 200 ms.
    std::thread::sleep(Duration::from_secs(2));
    let rounds = || value(mw_port, "moirai_schedule_rounds_total").expect("its rounds on /metrics");
    let rounds_before = rounds();
    // Over 8 s (eight confirm windows): not one thread is touched.
    let end = Instant::now() + Duration::from_secs(8);
    while Instant::now() < end {
        assert_eq!(nices(&threads), before, "a thread of an engine far below saturation was reniced");
        std::thread::sleep(Duration::from_millis(100));
    }
    let quiet_rounds = rounds() - rounds_before;
    assert!((6.0..=12.0).contains(&quiet_rounds), "{quiet_rounds} rounds in 8 s while quiet (40 every 200 ms)");
    // Its stop watchdog sleeps until a signal comes: over the 10 s it has run it went to sleep
    // once (it woke every second before, ~10 times).
    let watchdog_sleeps = sleeps(mw.pid(), "stop-watchdog");
    assert!(watchdog_sleeps <= 2, "the stop watchdog slept {watchdog_sleeps} times while nothing was stopping");
    let (active, reason) = activity(mw_port).expect("its state on /metrics");
    assert!(!active, "the middleware says it acts: {reason}");
    assert!(reason == "cpu_room" || reason == "keeping_up", "idle, and why: {reason}");
    assert!(applied(mw_port).is_empty(), "nothing applied: {:?}", applied(mw_port));
    assert!(metrics(mw_port).contains("moirai_schedule_activations_total{spe=\"engine\"} 0"));
    // It never acted: no time acting, no first activation.
    assert_eq!(value(mw_port, "moirai_schedule_active_seconds_total{spe=\"engine\"}"), Some(0.0));
    assert_eq!(value(mw_port, "moirai_schedule_first_active_seconds{spe=\"engine\"}"), None);
    mw.signal(libc::SIGINT);
    let (code, err) = mw.wait();
    assert_eq!(code, Some(0), "{err}");
    // -v says it was idle, and why, and that it looked less often.
    assert!(err.contains("SPE 'engine': idle — "), "{err}");
    assert!(err.contains("quiet: every SPE keeps up and is left to Linux; a round every 1s"), "{err}");
    assert!(!err.contains("SPE 'engine': active"), "{err}");
    assert_eq!(nices(&threads), before);
}

#[test]
fn past_saturation_it_acts_and_when_the_rate_falls_back_every_thread_gets_its_value_back() {
    let _one = serial();
    if !is_root() {
        eprintln!("SKIPPED past_saturation_…: needs root (CAP_SYS_NICE) to lower nice values");
        return;
    }
    let port = free_port();
    // One query of 3 operators at 200 µs a tuple each: two cores carry at most ~3 300 tuples/s
    // (2 000–2 900 measured in a debug build). The rate falls from 6 000 to 200 tuples/s over
    // 15 s and stays there: past saturation for the first ~8–10 s (room for the rule's window on
    // a busy machine), far below it once the backlog has drained. (A slower fall kept the
    // backlog growing 20 s after the rule began acting, past the capacity of a loaded machine,
    // and the rule then rightly handed the engine to Linux to compare: a release for another
    // reason than the one tested here.)
    let _eng = engine(
        port,
        &[
            "--queries",
            "1",
            "--ops",
            "3",
            "--cost-ns",
            "200000",
            "--rate",
            "6000",
            "--ramp-to",
            "200",
            "--ramp-over",
            "15s",
            "--duration",
            "120s",
        ],
    );
    let threads = operator_threads(port);
    let before = nices(&threads);
    let dir = temp_dir("activation-past");
    let (mw, mw_port) = schedule(port, &dir.0.join("state.json"), false);

    // Past saturation: active, with differentiated values that /proc agrees with.
    let mw = wait_for_middleware("the middleware to act", mw, || activity(mw_port).is_some_and(|(a, _)| a));
    let mut differentiated = false;
    let deadline = Instant::now() + Duration::from_secs(30);
    while !differentiated && Instant::now() < deadline && activity(mw_port).is_some_and(|(a, _)| a) {
        let a = applied(mw_port);
        let now = nices(&threads);
        let distinct: std::collections::BTreeSet<i32> = now.iter().copied().collect();
        differentiated = distinct.len() > 1
            && threads.iter().zip(&now).all(|((_, tid), n)| a.get(tid).is_some_and(|v| *v == *n as i64));
        std::thread::sleep(Duration::from_millis(50));
    }
    assert!(differentiated, "while active, the operators got different nice values, as applied");

    // The rate fell back: idle again, every thread at its original value.
    let mw = wait_for_middleware("the middleware to let go", mw, || activity(mw_port).is_some_and(|(a, _)| !a));
    let (_, reason) = activity(mw_port).unwrap();
    assert!(["rate_fell_back", "cpu_room", "keeping_up"].contains(&reason.as_str()), "{reason}");
    assert_eq!(nices(&threads), before, "every thread is back to its original value");
    assert!(applied(mw_port).is_empty(), "{:?}", applied(mw_port));
    assert!(metrics(mw_port).contains("moirai_schedule_activations_total{spe=\"engine\"} 1"), "{}", metrics(mw_port));
    // How long it acted: at least the rule's 10 s release window, no longer than it has run,
    // and no more once idle; since when: a moment of its run.
    let acted = "moirai_schedule_active_seconds_total{spe=\"engine\"}";
    let (seconds, uptime) = (value(mw_port, acted).unwrap(), value(mw_port, "moirai_schedule_uptime_seconds").unwrap());
    assert!(seconds >= 10.0 && seconds < uptime, "acted {seconds} s of {uptime} s");
    let first = value(mw_port, "moirai_schedule_first_active_seconds{spe=\"engine\"}").expect("a first activation");
    assert!(first > 0.0 && first + seconds <= uptime, "first acted at {first} s, for {seconds} s, of {uptime} s");
    std::thread::sleep(Duration::from_millis(600));
    assert_eq!(value(mw_port, acted), Some(seconds), "idle: the time acting stands still");
    mw.signal(libc::SIGINT);
    let (code, err) = mw.wait();
    assert_eq!(code, Some(0), "{err}");
    // The log says when it started acting, and when it let go.
    assert!(err.contains("SPE 'engine': active — the SPE falls behind"), "{err}");
    assert!(err.contains("its threads are back to their original values"), "{err}");
    assert_eq!(nices(&threads), before);
}

/// Busy loops (`sh -c 'while :; do :; done'`) that take the CPU from the engine, each killed by
/// its PID when dropped.
struct Hogs(Vec<std::process::Child>);

impl Hogs {
    fn start(n: usize) -> Hogs {
        Hogs(
            (0..n)
                .map(|_| std::process::Command::new("sh").args(["-c", "while :; do :; done"]).spawn().unwrap())
                .collect(),
        )
    }
}

impl Drop for Hogs {
    fn drop(&mut self) {
        for c in &mut self.0 {
            let _ = c.kill();
            let _ = c.wait();
        }
    }
}

#[test]
fn after_a_passing_overload_that_it_acted_on_the_engine_is_handed_back_to_see() {
    let _one = serial();
    if !is_root() {
        eprintln!("SKIPPED after_a_passing_overload_…: needs root (CAP_SYS_NICE) to lower nice values");
        return;
    }
    // One query of 3 operators at 200 µs a tuple: at 2 600 tuples/s ~1.6 of the 2 cores, so the
    // machine stays ~80 % busy (above the rule's room level, 70 %) at a constant rate: neither
    // room nor a falling rate can end the scheduling, only the check whether Linux alone keeps
    // up. That window is narrow where the machine's speed moves (20–30 % within an hour here,
    // and the spins are calibrated once, at the engine's start): when the engine never keeps up
    // again after the overload, the scenario runs once more at 2 200 tuples/s (~1.3 cores).
    let Err(first) = overload_then_hand_back(2600) else { return };
    if let Err(second) = overload_then_hand_back(2200) {
        panic!("at 2 600 tuples/s: {first}\nat 2 200 tuples/s: {second}");
    }
}

/// The scenario at `rate`: Err(the middleware's log) when it did not hand the engine back within
/// the patience; any other failure panics.
fn overload_then_hand_back(rate: u32) -> Result<(), String> {
    let port = free_port();
    let rate = rate.to_string();
    let _eng =
        engine(port, &["--queries", "1", "--ops", "3", "--cost-ns", "200000", "--rate", &rate, "--duration", "180s"]);
    let threads = operator_threads(port);
    let before = nices(&threads);
    let dir = temp_dir("activation-overload");
    let (mw, mw_port) = schedule(port, &dir.0.join("state.json"), false);
    let mw = wait_for_middleware("a first round", mw, || activity(mw_port).is_some());
    // Two busy loops: the engine gets ~1.2 cores and falls behind; the rule acts. They stop 2 s
    // later, so that the backlog (a few thousand tuples, drained at ~700 a second by the 0.4
    // core the engine leaves) is gone well before the rule's no-gain verdict 10 s after it
    // acted: the verdict finds the backlog below where it was and keeps scheduling (it errs
    // towards acting); only the check whether Linux alone keeps up can end it then. (With the
    // busy loops on for 6 s the backlog could still be there at the verdict, and with the
    // operators at nice 0 and worse, against busy loops at nice 0, scheduling cannot help: a
    // no-gain verdict, rightly.)
    let hogs = Hogs::start(2);
    let mw = wait_for_middleware("the middleware to act", mw, || activity(mw_port).is_some_and(|(a, _)| a));
    std::thread::sleep(Duration::from_secs(2));
    drop(hogs);
    // The backlog drains, the engine keeps up at the same rate with the machine busy; after 10 s
    // of keeping up the middleware hands the engine back to Linux to see, and every thread
    // gets its original value.
    let deadline = Instant::now() + PATIENCE;
    let handed_back = || activity(mw_port).is_some_and(|(active, _)| !active);
    while !handed_back() {
        if Instant::now() > deadline {
            mw.signal(libc::SIGINT);
            let (code, err) = mw.wait();
            assert_eq!(nices(&threads), before, "restored on exit: {err}");
            return Err(format!("not handed back within {PATIENCE:?}; the middleware exited with {code:?}:\n{err}"));
        }
        std::thread::sleep(Duration::from_millis(50));
    }
    let (_, reason) = activity(mw_port).unwrap();
    if reason != "probing" {
        mw.signal(libc::SIGINT);
        let (_, err) = mw.wait();
        panic!("handed back as '{reason}', not to see whether Linux alone keeps up; the middleware said:\n{err}");
    }
    // The reason says the check ended it, not the machine's room ("cpu_room"); the busy gauge
    // read after the hand-back is one instant and proves nothing more (it read 0.63 once in CI,
    // with the reason "probing").
    assert_eq!(nices(&threads), before, "every thread is back to its original value");
    assert!(applied(mw_port).is_empty(), "{:?}", applied(mw_port));
    mw.signal(libc::SIGINT);
    let (code, err) = mw.wait();
    assert_eq!(code, Some(0), "{err}");
    assert!(err.contains("SPE 'engine': idle — the SPE kept up for"), "{err}");
    assert_eq!(nices(&threads), before);
    Ok(())
}

#[test]
fn an_activation_threshold_lag_or_start_up_out_of_range_is_refused_with_the_range() {
    let dir = temp_dir("activation-bad");
    let state = dir.0.join("state.json").display().to_string();
    for bad in ["1.5", "0.2", "-1", "nan"] {
        let out = std::process::Command::new(BIN)
            .args(["schedule", "--engine", "http://127.0.0.1:9", "--policy", "qs", "--state-file", &state])
            .arg(format!("--activation-threshold={bad}"))
            .output()
            .unwrap();
        let err = String::from_utf8_lossy(&out.stderr);
        assert_eq!(out.status.code(), Some(2), "{bad}: {err}");
        assert!(err.contains("from 0.5 to 1") && err.contains("--activation-threshold"), "{bad}: {err}");
        assert!(!dir.0.join("state.json").exists(), "nothing was created before the refusal");
    }
    for (flag, bad, says) in [
        ("--activation-lag", "5ms", "from 10ms to 10s"),
        ("--activation-lag", "soon", "e.g. \"100ms\""),
        ("--activation-startup", "11min", "from 0s to 600s"),
        ("--activation-startup", "later", "e.g. \"20s\""),
    ] {
        let out = std::process::Command::new(BIN)
            .args(["schedule", "--engine", "http://127.0.0.1:9", "--policy", "qs", "--state-file", &state])
            .arg(format!("{flag}={bad}"))
            .output()
            .unwrap();
        let err = String::from_utf8_lossy(&out.stderr);
        assert_eq!(out.status.code(), Some(2), "{flag}={bad}: {err}");
        assert!(err.contains(says) && err.contains(flag), "{flag}={bad}: {err}");
        assert!(!dir.0.join("state.json").exists(), "nothing was created before the refusal");
    }
    let out = std::process::Command::new(BIN)
        .args(["schedule", "--engine", "http://127.0.0.1:9", "--policy", "qs", "--activation", "sometimes"])
        .output()
        .unwrap();
    let err = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(2), "{err}");
    assert!(err.contains("auto or always"), "{err}");
}

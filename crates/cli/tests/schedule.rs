//! `moirai schedule` against real engines: separate processes, real nice values and cgroups,
//! checked in /proc and cgroupfs, and restored after a clean exit and after kill -9.
//!
//! Every process started here is stopped by its PID when its guard drops, also when a test
//! fails; every test uses its own port and state file.

use std::io::Read;
use std::net::TcpListener;
use std::path::PathBuf;
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use moirai_os::proc::thread_stat;

const BIN: &str = env!("CARGO_BIN_EXE_moirai");
/// Only turns a hang into a failure; nothing here asserts on speed.
const PATIENCE: Duration = Duration::from_secs(60);

/// A child process killed (by PID) when dropped.
struct Proc(Option<Child>);

impl Proc {
    fn spawn(args: &[&str]) -> Proc {
        let child = Command::new(BIN)
            .args(args)
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .unwrap_or_else(|e| panic!("cannot start moirai {args:?}: {e}"));
        Proc(Some(child))
    }

    fn pid(&self) -> u32 {
        self.0.as_ref().expect("running").id()
    }

    fn signal(&self, sig: i32) {
        // SAFETY: kill(2) on the pid of our own child, which we have not reaped yet.
        unsafe { libc::kill(self.pid() as i32, sig) };
    }

    /// Waits for the exit; returns the exit code and stderr.
    fn wait(mut self) -> (Option<i32>, String) {
        let mut child = self.0.take().expect("running");
        let deadline = Instant::now() + PATIENCE;
        loop {
            if let Some(status) = child.try_wait().expect("try_wait") {
                let mut err = String::new();
                child.stderr.take().map(|mut e| e.read_to_string(&mut err));
                return (status.code(), err);
            }
            if Instant::now() > deadline {
                let _ = child.kill();
                let _ = child.wait();
                panic!("moirai did not exit within {PATIENCE:?}");
            }
            std::thread::sleep(Duration::from_millis(20));
        }
    }
}

impl Drop for Proc {
    fn drop(&mut self) {
        if let Some(mut c) = self.0.take() {
            let _ = c.kill();
            let _ = c.wait();
        }
    }
}

fn free_port() -> u16 {
    TcpListener::bind("127.0.0.1:0").unwrap().local_addr().unwrap().port()
}

fn wait_until(what: &str, mut ok: impl FnMut() -> bool) {
    let deadline = Instant::now() + PATIENCE;
    while !ok() {
        assert!(Instant::now() < deadline, "timed out waiting for {what}");
        std::thread::sleep(Duration::from_millis(50));
    }
}

/// A state file in a directory of its own, removed with the guard.
struct StateFile(PathBuf);

impl std::ops::Deref for StateFile {
    type Target = PathBuf;
    fn deref(&self) -> &PathBuf {
        &self.0
    }
}

impl Drop for StateFile {
    fn drop(&mut self) {
        if let Some(dir) = self.0.parent() {
            let _ = std::fs::remove_dir_all(dir);
        }
    }
}

fn state_file(test: &str) -> StateFile {
    let dir = std::env::temp_dir().join(format!("moirai-schedule-test-{}-{test}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    StateFile(dir.join("state.json"))
}

/// An engine running SYN with a real cost, serving its metrics on `port`.
fn engine(port: u16) -> Proc {
    let addr = format!("127.0.0.1:{port}");
    let p = Proc::spawn(&[
        "run",
        "syn",
        "--ops",
        "3",
        "--cost-ns",
        "3000",
        "--rate",
        "50000",
        "--duration",
        "120s",
        "--metrics-addr",
        &addr,
    ]);
    wait_until("the engine's threads", || !engine_threads(port).is_empty());
    p
}

/// (pid, tids) of the engine's operator threads, from its /topology.
fn engine_threads(port: u16) -> Vec<(u32, i32)> {
    let Ok(resp) = ureq::get(&format!("http://127.0.0.1:{port}/topology")).call() else { return Vec::new() };
    let topo: serde_json::Value = resp.into_json().unwrap();
    let pid = topo["pid"].as_u64().unwrap() as u32;
    let tids: Vec<i32> =
        topo["physical"].as_array().unwrap().iter().map(|o| o["tid"].as_i64().unwrap() as i32).collect();
    if tids.contains(&0) {
        return Vec::new();
    }
    tids.into_iter().map(|t| (pid, t)).collect()
}

fn nice(pid: u32, tid: i32) -> i32 {
    thread_stat(pid, tid).unwrap().nice
}

fn nices(threads: &[(u32, i32)]) -> Vec<i32> {
    threads.iter().map(|&(p, t)| nice(p, t)).collect()
}

/// The values the middleware says it applied, per tid, from its own /metrics.
fn applied(port: u16) -> Vec<(i32, i64)> {
    let Ok(resp) = ureq::get(&format!("http://127.0.0.1:{port}/metrics")).call() else { return Vec::new() };
    let text = resp.into_string().unwrap();
    text.lines()
        .filter(|l| l.starts_with("moirai_schedule_applied{"))
        .map(|l| {
            let tid = l.split("tid=\"").nth(1).unwrap().split('"').next().unwrap().parse().unwrap();
            let v = l.rsplit(' ').next().unwrap().parse::<f64>().unwrap() as i64;
            (tid, v)
        })
        .collect()
}

fn metric(port: u16, name: &str) -> Option<f64> {
    let text = ureq::get(&format!("http://127.0.0.1:{port}/metrics")).call().ok()?.into_string().ok()?;
    text.lines().find(|l| l.starts_with(&format!("{name} "))).and_then(|l| l.rsplit(' ').next()?.parse().ok())
}

fn schedule(engine_port: u16, state: &std::path::Path, extra: &[&str]) -> (Proc, u16) {
    let port = free_port();
    let mut args = vec![
        "schedule".to_string(),
        "--engine".into(),
        format!("http://127.0.0.1:{engine_port}"),
        "--period".into(),
        "200ms".into(),
        "--state-file".into(),
        state.display().to_string(),
        "--metrics-addr".into(),
        format!("127.0.0.1:{port}"),
        // These tests are about what is applied and restored: act from the first round, not only
        // once the engine falls behind (schedule_activation.rs tests that rule).
        "--activation".into(),
        "always".into(),
    ];
    args.extend(extra.iter().map(|s| s.to_string()));
    (Proc::spawn(&args.iter().map(String::as_str).collect::<Vec<_>>()), port)
}

fn is_root() -> bool {
    // SAFETY: geteuid has no preconditions.
    unsafe { libc::geteuid() == 0 }
}

#[test]
fn qs_sets_nice_values_and_restores_them_on_sigint() {
    if !is_root() {
        eprintln!(
            "SKIPPED qs_sets_nice_values_and_restores_them_on_sigint: needs root (CAP_SYS_NICE) to lower nice values"
        );
        return;
    }
    let port = free_port();
    let eng = engine(port);
    let threads = engine_threads(port);
    let before = nices(&threads);
    let state = state_file("sigint");
    let (mw, mw_port) = schedule(port, &state, &["--policy", "qs"]);

    // Every engine thread gets a nice value, and /proc agrees with what the middleware applied.
    wait_until("nice values applied to every engine thread", || {
        let a = applied(mw_port);
        threads.iter().all(|&(_, tid)| a.iter().any(|&(t, _)| t == tid))
    });
    // The first rounds may find every queue empty (the engine just started; a slow CI host), and
    // QS then ranks every thread alike: wait for a round in which the queues differ.
    wait_until("/proc to show the applied nice values, some of them changed", || {
        let a = applied(mw_port);
        threads
            .iter()
            .all(|&(pid, tid)| a.iter().find(|&&(t, _)| t == tid).is_some_and(|&(_, v)| v == nice(pid, tid) as i64))
            && nices(&threads) != before
    });
    let during = nices(&threads);
    assert!(during.iter().all(|n| (-20..=19).contains(n)));
    assert!(state.exists(), "the state file records the originals while running");

    mw.signal(libc::SIGINT);
    let (code, err) = mw.wait();
    assert_eq!(code, Some(0), "clean exit after SIGINT; stderr:\n{err}");
    assert!(err.contains("restored"), "{err}");
    assert_eq!(nices(&threads), before, "every nice value is back");
    // A clean exit leaves nothing to undo for the next start.
    let leftover = moirai_os::RestoreLog::restore_from(&*state).unwrap();
    assert_eq!(leftover.nice_restored, 0, "{leftover}");
    drop(eng);
}

#[test]
fn a_log_reader_that_goes_away_ends_it_with_141_and_everything_restored() {
    if !is_root() {
        eprintln!(
            "SKIPPED a_log_reader_that_goes_away_ends_it_with_141_and_everything_restored: needs root (CAP_SYS_NICE)"
        );
        return;
    }
    let port = free_port();
    let eng = engine(port);
    let threads = engine_threads(port);
    let before = nices(&threads);
    let state = state_file("closed-log");
    let (mut mw, mw_port) = schedule(port, &state, &["--policy", "qs", "-v"]);
    wait_until("some nice value changed", || nices(&threads) != before && !applied(mw_port).is_empty());

    // `moirai schedule -v 2>&1 | head`: the reader of its output goes away; -v logs every round.
    let child = mw.0.as_mut().expect("running");
    drop(child.stderr.take());
    drop(child.stdout.take());
    let (code, _) = mw.wait();
    assert_eq!(code, Some(141), "ends as a tool that SIGPIPE ended");
    assert_eq!(nices(&threads), before, "every nice value is back");
    let leftover = moirai_os::RestoreLog::restore_from(&*state).unwrap();
    assert_eq!(leftover.nice_restored, 0, "nothing left to undo: {leftover}");
    drop(eng);
}

#[test]
fn a_crash_is_undone_by_the_next_start() {
    if !is_root() {
        eprintln!("SKIPPED a_crash_is_undone_by_the_next_start: needs root (CAP_SYS_NICE)");
        return;
    }
    let port = free_port();
    let eng = engine(port);
    let threads = engine_threads(port);
    let before = nices(&threads);
    let state = state_file("crash");
    let (mw, mw_port) = schedule(port, &state, &["--policy", "qs"]);
    wait_until("some nice value changed", || nices(&threads) != before && !applied(mw_port).is_empty());

    mw.signal(libc::SIGKILL);
    let (code, _) = mw.wait();
    assert_eq!(code, None, "killed by a signal");
    assert_ne!(nices(&threads), before, "after kill -9 nothing was restored yet");
    assert!(state.exists(), "the state file survives the crash");

    // The next start restores first (then schedules; --rounds 1 makes it stop and restore again).
    let (code, err) = Proc::spawn(&[
        "schedule",
        "--engine",
        &format!("http://127.0.0.1:{port}"),
        "--policy",
        "qs",
        "--rounds",
        "1",
        "--activation",
        "always",
        "--state-file",
        &state.display().to_string(),
    ])
    .wait();
    assert_eq!(code, Some(0), "{err}");
    assert!(err.contains("restored what a previous run left"), "{err}");
    assert_eq!(nices(&threads), before, "every nice value is back");
    drop(eng);
}

#[test]
fn restore_only_undoes_a_crashed_run() {
    if !is_root() {
        eprintln!("SKIPPED restore_only_undoes_a_crashed_run: needs root (CAP_SYS_NICE)");
        return;
    }
    let port = free_port();
    let eng = engine(port);
    let threads = engine_threads(port);
    let before = nices(&threads);
    let state = state_file("restore-only");
    let (mw, _) = schedule(port, &state, &["--policy", "random"]);
    wait_until("some nice value changed", || nices(&threads) != before);
    mw.signal(libc::SIGKILL);
    mw.wait();
    let (code, err) = Proc::spawn(&["schedule", "--restore-only", "--state-file", &state.display().to_string()]).wait();
    assert_eq!(code, Some(0), "{err}");
    assert_eq!(nices(&threads), before);
    drop(eng);
}

/// The cpu cgroup of a thread, as /proc shows it (v1 `cpu` line or v2 `0::` line).
fn cpu_cgroup(pid: u32, tid: i32) -> String {
    let text = std::fs::read_to_string(format!("/proc/{pid}/task/{tid}/cgroup")).unwrap();
    let line = text
        .lines()
        .find(|l| l.split(':').nth(1).is_some_and(|c| c.split(',').any(|c| c == "cpu")))
        .or_else(|| text.lines().find(|l| l.starts_with("0::")))
        .unwrap();
    line.splitn(3, ':').nth(2).unwrap().to_string()
}

#[test]
fn cgroup_translator_places_threads_with_weights_and_restores() {
    if !is_root() {
        eprintln!("SKIPPED cgroup_translator_places_threads_with_weights_and_restores: needs root to write cgroupfs");
        return;
    }
    let layout = moirai_os::CgroupLayout::detect().unwrap();
    let h = layout.cpu().clone();
    let port = free_port();
    let eng = engine(port);
    let threads = engine_threads(port);
    let before: Vec<String> = threads.iter().map(|&(p, t)| cpu_cgroup(p, t)).collect();
    let state = state_file("cgroup");
    let (mw, mw_port) = schedule(port, &state, &["--policy", "qs", "--translator", "cgroup"]);
    let instance = format!("/moirai/schedule-{}", mw.pid());
    wait_until("every thread in a group of this middleware", || {
        threads.iter().all(|&(p, t)| cpu_cgroup(p, t).starts_with(&instance))
    });
    // Each group's weight file holds the weight the middleware says it applied.
    wait_until("weights in cgroupfs equal the applied ones", || {
        let a = applied(mw_port);
        threads.iter().all(|&(p, t)| {
            let dir = h.dir_of(&cpu_cgroup(p, t));
            let Ok(w) = std::fs::read_to_string(dir.join(h.weight_file())) else { return false };
            a.iter().any(|&(tid, v)| tid == t && w.trim().parse::<i64>().ok() == Some(v))
        })
    });
    mw.signal(libc::SIGTERM);
    let (code, err) = mw.wait();
    assert_eq!(code, Some(0), "{err}");
    let after: Vec<String> = threads.iter().map(|&(p, t)| cpu_cgroup(p, t)).collect();
    assert_eq!(after, before, "threads are back in their cgroups");
    assert!(!h.dir_of(&instance).exists(), "the middleware's groups are removed");
    drop(eng);
}

#[test]
fn an_spe_that_is_down_is_retried_not_fatal() {
    if !is_root() {
        eprintln!("SKIPPED an_spe_that_is_down_is_retried_not_fatal: needs root (CAP_SYS_NICE)");
        return;
    }
    let port = free_port();
    let state = state_file("down");
    let (mw, mw_port) = schedule(port, &state, &["--policy", "qs"]);
    wait_until("a few rounds with the SPE down", || {
        metric(mw_port, "moirai_schedule_rounds_total").is_some_and(|r| r >= 3.0)
            && metric(mw_port, "moirai_schedule_spes_up") == Some(0.0)
    });
    // The engine comes up on that port: the middleware picks it up.
    let eng = engine(port);
    let threads = engine_threads(port);
    wait_until("the SPE up and its threads scheduled", || {
        metric(mw_port, "moirai_schedule_spes_up") == Some(1.0)
            && threads.iter().all(|&(_, tid)| applied(mw_port).iter().any(|&(t, _)| t == tid))
    });
    mw.signal(libc::SIGINT);
    let (code, err) = mw.wait();
    assert_eq!(code, Some(0), "{err}");
    assert!(err.contains("unavailable"), "the outage was logged: {err}");
    drop(eng);
}

#[test]
fn missing_privilege_is_a_clear_error() {
    if !is_root() || !std::path::Path::new("/usr/bin/setpriv").exists() {
        eprintln!("SKIPPED missing_privilege_is_a_clear_error: needs root and setpriv to drop privileges");
        return;
    }
    let state = state_file("noprivs");
    let out = Command::new("/usr/bin/setpriv")
        .args(["--reuid=65534", "--regid=65534", "--clear-groups", "--inh-caps=-all", "--bounding-set=-all", BIN])
        .args(["schedule", "--engine", "http://127.0.0.1:1", "--policy", "qs", "--state-file"])
        .arg(&*state)
        .output()
        .unwrap();
    let err = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(1), "{err}");
    assert!(err.contains("CAP_SYS_NICE"), "names the capability: {err}");
}

#[test]
fn bad_policies_are_usage_errors() {
    let state = state_file("bad");
    let s = state.display().to_string();
    let cases: [(&[&str], &str); 4] = [
        (&["--policy", "sjf"], "unknown policy"),
        (&["--script", "queue_size +"], "line"),
        (&["--script", "queue_sise * 2"], "queue_sise"),
        (&["--policy", "qs", "--period", "soon"], "period"),
    ];
    for (args, expect) in cases {
        let out = Command::new(BIN)
            .args(["schedule", "--engine", "http://127.0.0.1:1", "--state-file", &s])
            .args(args)
            .output()
            .unwrap();
        let err = String::from_utf8_lossy(&out.stderr);
        assert_eq!(out.status.code(), Some(2), "{args:?}: {err}");
        assert!(err.contains(expect), "{args:?} should mention {expect:?}: {err}");
    }
}

#[test]
fn shares_per_query_and_nice_inside_from_a_config_file() {
    if !is_root() {
        eprintln!("SKIPPED shares_per_query_and_nice_inside_from_a_config_file: needs root (cgroups, CAP_SYS_NICE)");
        return;
    }
    let layout = moirai_os::CgroupLayout::detect().unwrap();
    let h = layout.cpu().clone();
    let port = free_port();
    // Two queries: syn0 and syn1.
    let addr = format!("127.0.0.1:{port}");
    let eng = Proc::spawn(&[
        "run",
        "syn",
        "--queries",
        "2",
        "--ops",
        "2",
        "--cost-ns",
        "3000",
        "--rate",
        "40000",
        "--duration",
        "120s",
        "--metrics-addr",
        &addr,
    ]);
    wait_until("the engine's threads", || !engine_threads(port).is_empty());
    let threads = engine_threads(port);
    let nice_before = nices(&threads);
    let cgroups_before: Vec<String> = threads.iter().map(|&(p, t)| cpu_cgroup(p, t)).collect();
    let state = state_file("config");
    let mw_port = free_port();
    let config = state.with_file_name("schedule.toml");
    std::fs::write(
        &config,
        format!(
            r#"
state_file = "{}"
metrics_addr = "127.0.0.1:{mw_port}"
activation = "always"

[[spe]]
name = "engine"
driver = "moirai"
url = "http://127.0.0.1:{port}"

[[policy]]
name = "shares"
type = "groups"
by = "query"
priority = {{ constant = {{ values = {{ syn0 = 4, syn1 = 1 }} }} }}
translator = "cgroup"
normalization = "linear"
weight_min = 256
weight_max = 1024
period = "500ms"

[[policy]]
name = "qs"
type = "qs"
translator = "nice"
period = "200ms"
"#,
            state.display()
        ),
    )
    .unwrap();
    let mw = Proc::spawn(&["schedule", "--config", &config.display().to_string()]);
    let topo: serde_json::Value =
        ureq::get(&format!("http://127.0.0.1:{port}/topology")).call().unwrap().into_json().unwrap();
    let query_of = |tid: i32| -> String {
        let op = topo["physical"].as_array().unwrap().iter().find(|o| o["tid"].as_i64() == Some(tid as i64)).unwrap();
        op["query"].as_str().unwrap().to_string()
    };
    let instance = format!("/moirai/schedule-{}", mw.pid());
    // Every thread sits in its query's group, whose weight follows the configured shares (4:1
    // mapped linearly onto [256, 1024]) ...
    wait_until("threads grouped by query with their weights", || {
        threads.iter().all(|&(p, t)| {
            let group = cpu_cgroup(p, t);
            let want = if query_of(t) == "syn0" { "1024" } else { "256" };
            group.starts_with(&instance)
                && group.ends_with(&query_of(t))
                && std::fs::read_to_string(h.dir_of(&group).join(h.weight_file())).is_ok_and(|w| w.trim() == want)
        })
    });
    // ... while the nice policy runs inside: /proc agrees with what it applied.
    wait_until("nice values from the qs policy", || {
        let a = applied(mw_port);
        threads.iter().all(|&(pid, tid)| {
            a.iter().any(|&(t, v)| t == tid && (-20..=19).contains(&v) && v == nice(pid, tid) as i64)
        })
    });
    mw.signal(libc::SIGINT);
    let (code, err) = mw.wait();
    assert_eq!(code, Some(0), "{err}");
    assert_eq!(nices(&threads), nice_before, "nice values restored");
    let cgroups_after: Vec<String> = threads.iter().map(|&(p, t)| cpu_cgroup(p, t)).collect();
    assert_eq!(cgroups_after, cgroups_before, "cgroups restored");
    assert!(!h.dir_of(&instance).exists());
    drop(eng);
}

#[test]
fn a_pool_engine_is_observed_but_none_of_its_threads_is_changed() {
    if !is_root() {
        eprintln!("SKIPPED a_pool_engine_is_observed_but_none_of_its_threads_is_changed: needs root (CAP_SYS_NICE)");
        return;
    }
    // Under a pool a worker runs many operators: per-operator nice values would fight over it.
    let port = free_port();
    let addr = format!("127.0.0.1:{port}");
    let args = ["run", "syn", "--ops", "3", "--cost-ns", "3000", "--rate", "50000", "--duration", "120s"];
    let eng = Proc::spawn(&[&args[..], &["--threading", "dynamic:2", "--metrics-addr", &addr]].concat());
    let workers = || -> Vec<(u32, i32)> {
        let Ok(resp) = ureq::get(&format!("http://127.0.0.1:{port}/topology")).call() else { return Vec::new() };
        let topo: serde_json::Value = resp.into_json().unwrap();
        let pid = topo["pid"].as_u64().unwrap() as u32;
        let tids: Vec<(u32, i32)> =
            topo["threads"].as_array().unwrap().iter().map(|t| (pid, t["tid"].as_i64().unwrap() as i32)).collect();
        if tids.iter().any(|&(_, t)| t == 0) {
            Vec::new()
        } else {
            tids
        }
    };
    wait_until("the pool's workers", || !workers().is_empty());
    let threads = workers();
    assert_eq!(threads.len(), 2);
    let before = nices(&threads);
    let state = state_file("pool");
    let (mw, mw_port) = schedule(port, &state, &["--policy", "qs"]);
    wait_until("five rounds with the engine up", || {
        metric(mw_port, "moirai_schedule_rounds_total").is_some_and(|r| r >= 5.0)
            && metric(mw_port, "moirai_schedule_spes_up") == Some(1.0)
    });
    assert_eq!(nices(&threads), before, "no worker was reniced");
    assert!(applied(mw_port).is_empty(), "nothing applied: {:?}", applied(mw_port));
    mw.signal(libc::SIGINT);
    let (code, err) = mw.wait();
    assert_eq!(code, Some(0), "{err}");
    assert!(err.contains("pool threading model 'dynamic:2'"), "the user is told why: {err}");
    assert_eq!(err.matches("pool threading model").count(), 1, "once: {err}");
    drop(eng);
}

//! `moirai schedule` does not take an endpoint's word for which process to change: a fake
//! `/topology` served by an unprivileged user that names a root process, or an engine's port
//! taken over by another user after the engine ended, changes nothing; two middlewares never
//! schedule one engine.
//!
//! Real processes throughout (the fake endpoint is a Python HTTP server running as `nobody`);
//! every process is stopped by its PID when its guard drops, also when a test fails.

use std::io::Read;
use std::net::TcpListener;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

const BIN: &str = env!("CARGO_BIN_EXE_moirai");
/// Only turns a hang into a failure.
const PATIENCE: Duration = Duration::from_secs(60);

/// A child process killed (by PID) when dropped.
struct Proc(Option<Child>);

impl Proc {
    fn spawn(cmd: &mut Command) -> Proc {
        let child = cmd.stdout(Stdio::piped()).stderr(Stdio::piped()).spawn().expect("start a process");
        Proc(Some(child))
    }

    fn moirai(args: &[&str]) -> Proc {
        Proc::spawn(Command::new(BIN).args(args))
    }

    fn pid(&self) -> u32 {
        self.0.as_ref().expect("running").id()
    }

    fn signal(&self, sig: i32) {
        // SAFETY: kill(2) on the pid of our own child, not reaped yet.
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
                panic!("process did not exit within {PATIENCE:?}");
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

fn is_root() -> bool {
    // SAFETY: geteuid has no preconditions.
    unsafe { libc::geteuid() == 0 }
}

/// A directory of the test's own, removed with the guard.
struct TempDir(PathBuf);

impl TempDir {
    fn new(test: &str) -> TempDir {
        let dir = std::env::temp_dir().join(format!("moirai-hardening-{}-{test}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        // The fake endpoint runs as nobody and reads its script from here.
        std::fs::set_permissions(&dir, std::os::unix::fs::PermissionsExt::from_mode(0o755)).unwrap();
        TempDir(dir)
    }
}

impl Drop for TempDir {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.0);
    }
}

fn nice(pid: u32, tid: i32) -> i32 {
    moirai_os::proc::thread_stat(pid, tid).unwrap().nice
}

/// A fake engine endpoint: a Python HTTP server run as `nobody`, whose `/topology` names process
/// `claims` (its own pid when `None`) with one operator on thread `claims` (the main thread).
fn fake_endpoint(dir: &Path, port: u16, claims: Option<u32>) -> Proc {
    let script = dir.join("fake.py");
    std::fs::write(
        &script,
        r#"import http.server, json, os, sys
port, claims = int(sys.argv[1]), int(sys.argv[2]) or os.getpid()
topo = {"pid": claims, "threading": "dedicated", "queries": ["q"],
        "logical": {"nodes": [{"query": "q", "name": "op", "kind": "operator"}], "edges": []},
        "physical": [{"id": 0, "query": "q", "name": "op (1/1)", "logical": [0], "instance": 0, "tid": claims}],
        "channels": []}
metrics = ('moirai_operator_tuples_in_total{query="q",operator="op (1/1)",id="0",tid="%d"} 1\n'
           'moirai_operator_queue_len{query="q",operator="op (1/1)",id="0",tid="%d"} 5\n') % (claims, claims)
class H(http.server.BaseHTTPRequestHandler):
    def do_GET(self):
        body = (json.dumps(topo) if self.path.startswith("/topology") else metrics).encode()
        self.send_response(200); self.send_header("Content-Length", str(len(body))); self.end_headers()
        self.wfile.write(body)
    def log_message(self, *a): pass
http.server.HTTPServer(("127.0.0.1", port), H).serve_forever()
"#,
    )
    .unwrap();
    std::fs::set_permissions(&script, std::os::unix::fs::PermissionsExt::from_mode(0o644)).unwrap();
    let p = Proc::spawn(
        Command::new("setpriv")
            .args(["--reuid=65534", "--regid=65534", "--clear-groups", "/usr/bin/python3"])
            .arg(&script)
            .args([port.to_string(), claims.unwrap_or(0).to_string()]),
    );
    wait_until("the fake endpoint", || ureq::get(&format!("http://127.0.0.1:{port}/topology")).call().is_ok());
    p
}

fn schedule(port: u16, state: &Path, extra: &[&str]) -> Proc {
    let url = format!("http://127.0.0.1:{port}");
    let state = state.display().to_string();
    let mut args = vec![
        "schedule",
        "--engine",
        &url,
        "--policy",
        "qs",
        "--period",
        "100ms",
        "--activation",
        "always",
        "--state-file",
        &state,
    ];
    args.extend(extra);
    Proc::moirai(&args)
}

#[test]
fn a_fake_endpoint_of_another_user_cannot_get_a_root_process_reniced() {
    if !is_root() {
        eprintln!("SKIPPED a_fake_endpoint_of_another_user_cannot_get_a_root_process_reniced: needs root");
        return;
    }
    let dir = TempDir::new("fake");
    let victim = Proc::spawn(Command::new("sleep").arg("300"));
    let vpid = victim.pid();
    let before = nice(vpid, vpid as i32);
    let port = free_port();
    let _fake = fake_endpoint(&dir.0, port, Some(vpid));
    let (code, err) = schedule(port, &dir.0.join("state.json"), &["--rounds", "15"]).wait();
    assert_eq!(nice(vpid, vpid as i32), before, "the root process was not touched; stderr:\n{err}");
    assert!(
        err.contains(&format!("refusing to schedule the process http://127.0.0.1:{port} names (pid {vpid})")),
        "{err}"
    );
    assert!(err.contains("the port is served by process"), "{err}");
    assert_eq!(err.matches("refusing").count(), 1, "said once, not every round:\n{err}");
    assert_eq!(code, Some(0), "{err}");
}

#[test]
fn a_port_taken_over_by_another_user_after_the_engine_ended_is_refused() {
    if !is_root() {
        eprintln!("SKIPPED a_port_taken_over_by_another_user_after_the_engine_ended_is_refused: needs root");
        return;
    }
    let dir = TempDir::new("takeover");
    let port = free_port();
    let addr = format!("127.0.0.1:{port}");
    let engine = Proc::moirai(&[
        "run",
        "syn",
        "--ops",
        "2",
        "--cost-ns",
        "2000",
        "--rate",
        "20000",
        "--duration",
        "120s",
        "--metrics-addr",
        &addr,
    ]);
    let mw = schedule(port, &dir.0.join("state.json"), &["--metrics-addr", &format!("127.0.0.1:{}", free_port())]);
    let engine_pid = engine.pid();
    // The engine is scheduled: some thread of it got a nice value other than 0.
    wait_until("the engine reniced", || {
        moirai_os::proc::threads(engine_pid).is_ok_and(|ts| ts.iter().any(|t| t.nice != 0))
    });
    engine.signal(libc::SIGKILL);
    drop(engine);
    // Another user binds the port and serves a topology of its own process.
    let fake = fake_endpoint(&dir.0, port, None);
    let fpid = fake.pid();
    // setpriv execs python: the child's pid is the server's.
    std::thread::sleep(Duration::from_millis(1500));
    let python_nice = nice(fpid, fpid as i32);
    mw.signal(libc::SIGINT);
    let (code, err) = mw.wait();
    assert_eq!(code, Some(0), "{err}");
    assert_eq!(python_nice, 0, "the other user's process was not reniced:\n{err}");
    assert!(err.contains("allow_owner_change"), "the refusal says how to allow it:\n{err}");
    // The middleware started before the engine answered: attaching late is no error.
    assert!(!err.contains("gave no value"), "no spurious metric error on (re-)attach:\n{err}");
}

#[test]
fn a_second_middleware_refuses_an_engine_the_first_schedules() {
    if !is_root() {
        eprintln!("SKIPPED a_second_middleware_refuses_an_engine_the_first_schedules: needs root");
        return;
    }
    let dir = TempDir::new("two");
    let port = free_port();
    let addr = format!("127.0.0.1:{port}");
    let engine = Proc::moirai(&[
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
    let epid = engine.pid();
    wait_until("the engine's threads", || moirai_os::proc::threads(epid).is_ok_and(|t| t.len() > 5));
    let originals: Vec<(i32, i32)> = moirai_os::proc::threads(epid).unwrap().iter().map(|t| (t.tid, t.nice)).collect();
    let (first_state, second_state) = (dir.0.join("first.json"), dir.0.join("second.json"));
    let first = schedule(port, &first_state, &[]);
    wait_until("the first middleware renices", || {
        moirai_os::proc::threads(epid).is_ok_and(|ts| ts.iter().any(|t| t.nice != 0))
    });
    let (code, err) = schedule(port, &second_state, &["--rounds", "5"]).wait();
    assert_eq!(code, Some(0), "{err}");
    assert!(
        err.contains(&format!("middleware pid {} with state file {}", first.pid(), first_state.display())),
        "names the first middleware and its state file:\n{err}"
    );
    first.signal(libc::SIGINT);
    let (code, err) = first.wait();
    assert_eq!(code, Some(0), "{err}");
    for (tid, n) in originals {
        if let Ok(t) = moirai_os::proc::thread_stat(epid, tid) {
            assert_eq!(t.nice, n, "thread {tid} ({}) is back to its original", t.name);
        }
    }
    let lock = format!("/run/moirai/spe-{epid}.lock");
    assert!(!Path::new(&lock).exists(), "the first middleware removed its lock {lock} when it stopped");
    drop(engine);
}

// ---------------------------------------------------------------------------------------------
// A stuck or failing policy, restoring without privilege, a directory as state file, a zombie.

/// A real engine with a real cost, serving its metrics on a free port; (process, port).
fn engine() -> (Proc, u16) {
    let port = free_port();
    let addr = format!("127.0.0.1:{port}");
    let p = Proc::moirai(&[
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
    let pid = p.pid();
    wait_until("the engine's threads", || moirai_os::proc::threads(pid).is_ok_and(|t| t.len() > 5));
    wait_until("the engine's endpoint", || ureq::get(&format!("http://127.0.0.1:{port}/topology")).call().is_ok());
    (p, port)
}

fn nices(pid: u32) -> Vec<(i32, i32)> {
    moirai_os::proc::threads(pid).map(|ts| ts.iter().map(|t| (t.tid, t.nice)).collect()).unwrap_or_default()
}

/// A config with the engine at `port`, `state` as state file, and `policies` (TOML tables).
fn config_file(dir: &Path, port: u16, state: &Path, policies: &str) -> PathBuf {
    let path = dir.join("schedule.toml");
    let text = format!(
        "state_file = {state:?}\nactivation = \"always\"\n\n[[spe]]\nname = \"engine\"\ndriver = \"moirai\"\nurl = \
         \"http://127.0.0.1:{port}\"\n\n{policies}"
    );
    std::fs::write(&path, text).unwrap();
    path
}

const RUNAWAY: &str = "let x = 0; while true { x += 1; } x";

#[test]
fn sigterm_restores_and_exits_even_while_a_policy_is_stuck() {
    if !is_root() {
        eprintln!("SKIPPED sigterm_restores_and_exits_even_while_a_policy_is_stuck: needs root");
        return;
    }
    let dir = TempDir::new("stuck");
    let (eng, port) = engine();
    let before = nices(eng.pid());
    // A policy that always tells the source from the rest renices first (QS could find every
    // queue empty in its first round, give all one priority and change nothing, and the round
    // never ends); then a script with every limit raised out of reach hangs the round.
    let policies = format!(
        "[[policy]]\nname = \"first\"\ntype = \"script\"\nscript = \"if kind == \\\"source\\\" {{ 100 }} else {{ 1 }}\"\ntranslator = \"nice\"\nperiod = \"100ms\"\n\n\
         [[policy]]\nname = \"stuck\"\ntype = \"script\"\nscript = {RUNAWAY:?}\nmax_operations = 9000000000000000000\n\
         time_limit_ms = 3600000\ntranslator = \"nice\"\nperiod = \"100ms\"\n"
    );
    let config = config_file(&dir.0, port, &dir.0.join("state.json"), &policies);
    let mw = Proc::moirai(&["schedule", "--config", &config.display().to_string()]);
    wait_until("the first policy applied", || nices(eng.pid()).iter().any(|&(_, n)| n != 0));
    std::thread::sleep(Duration::from_millis(300));
    mw.signal(libc::SIGTERM);
    let (code, err) = mw.wait();
    assert_eq!(code, Some(1), "the watchdog ended it:\n{err}");
    assert!(err.contains("did not stop within"), "{err}");
    let after: std::collections::BTreeMap<i32, i32> = nices(eng.pid()).into_iter().collect();
    for (tid, n) in before {
        if let Some(&now) = after.get(&tid) {
            assert_eq!(now, n, "thread {tid} restored:\n{err}");
        }
    }
    drop(eng);
}

#[test]
fn a_script_over_its_time_limit_is_skipped_and_reported_once() {
    if !is_root() {
        eprintln!("SKIPPED a_script_over_its_time_limit_is_skipped_and_reported_once: needs root");
        return;
    }
    let dir = TempDir::new("overrun");
    let (eng, port) = engine();
    let policies = format!(
        "[[policy]]\nname = \"slow\"\ntype = \"script\"\nscript = {RUNAWAY:?}\nmax_operations = 9000000000000000000\n\
         time_limit_ms = 50\ntranslator = \"nice\"\nperiod = \"100ms\"\n"
    );
    let config = config_file(&dir.0, port, &dir.0.join("state.json"), &policies);
    let (code, err) = Proc::moirai(&["schedule", "--config", &config.display().to_string(), "--rounds", "8"]).wait();
    assert_eq!(code, Some(0), "{err}");
    assert_eq!(err.matches("ran over its time limit of 50ms").count(), 1, "reported once, skipped each round:\n{err}");
    drop(eng);
}

#[test]
fn restore_only_without_privilege_exits_1_and_keeps_the_state() {
    if !is_root() {
        eprintln!("SKIPPED restore_only_without_privilege_exits_1_and_keeps_the_state: needs root");
        return;
    }
    let dir = TempDir::new("restore-nobody");
    let state = dir.0.join("state.json");
    let (eng, port) = engine();
    let before = nices(eng.pid());
    let mw = schedule(port, &state, &[]);
    wait_until("the first policy applied", || nices(eng.pid()).iter().any(|&(_, n)| n != 0));
    mw.signal(libc::SIGKILL);
    let _ = mw.wait();
    std::fs::set_permissions(&state, std::os::unix::fs::PermissionsExt::from_mode(0o644)).unwrap();
    // As nobody: raising another user's threads' priority back is refused.
    let (code, err) = Proc::spawn(
        Command::new("setpriv")
            .args([
                "--reuid=65534",
                "--regid=65534",
                "--clear-groups",
                BIN,
                "schedule",
                "--restore-only",
                "--state-file",
            ])
            .arg(&state),
    )
    .wait();
    assert_eq!(code, Some(1), "every restore failed:\n{err}");
    assert!(err.contains("not everything could be restored"), "{err}");
    assert!(state.exists(), "what could not be undone stays recorded");
    // As root it works, and everything is back.
    let (code, err) =
        Proc::moirai(&["schedule", "--restore-only", "--state-file", &state.display().to_string()]).wait();
    assert_eq!(code, Some(0), "{err}");
    let after: std::collections::BTreeMap<i32, i32> = nices(eng.pid()).into_iter().collect();
    for (tid, n) in before {
        if let Some(&now) = after.get(&tid) {
            assert_eq!(now, n, "thread {tid}");
        }
    }
    drop(eng);
}

#[test]
fn restore_only_right_after_kill_9_treats_the_unreaped_middleware_as_gone() {
    if !is_root() {
        eprintln!("SKIPPED restore_only_right_after_kill_9_treats_the_unreaped_middleware_as_gone: needs root");
        return;
    }
    let dir = TempDir::new("zombie");
    let state = dir.0.join("state.json");
    let (eng, port) = engine();
    let mw = schedule(port, &state, &[]);
    wait_until("the first policy applied", || nices(eng.pid()).iter().any(|&(_, n)| n != 0));
    mw.signal(libc::SIGKILL);
    // Not reaped: a zombie until `mw` is waited for.
    let zombie = mw.pid();
    wait_until("the kill", || !moirai_os::identity::is_running(zombie));
    let (code, err) =
        Proc::moirai(&["schedule", "--restore-only", "--state-file", &state.display().to_string()]).wait();
    assert_eq!(code, Some(0), "{err}");
    assert!(!err.contains("still running"), "{err}");
    assert!(nices(eng.pid()).iter().all(|&(_, n)| n == 0), "restored");
    let _ = mw.wait();
    drop(eng);
}

#[test]
fn a_directory_as_state_file_is_refused_before_anything_is_created() {
    let dir = TempDir::new("statedir");
    let lock = dir.0.with_extension("lock");
    let (code, err) = Proc::moirai(&[
        "schedule",
        "--engine",
        "http://127.0.0.1:9",
        "--policy",
        "qs",
        "--state-file",
        &dir.0.display().to_string(),
    ])
    .wait();
    assert_eq!(code, Some(2), "{err}");
    assert!(err.contains("is a directory"), "{err}");
    assert!(!lock.exists(), "{} was created", lock.display());
    let (code, err) =
        Proc::moirai(&["schedule", "--restore-only", "--state-file", &dir.0.display().to_string()]).wait();
    assert_eq!(code, Some(2), "{err}");
}

//! The real-time translator (`--translator realtime`) and session groups (`autogroup_nice`)
//! against real moirai engines, checked in /proc: the thread a policy ranks highest goes
//! `SCHED_RR`, no thread outside the named engine ever does, and every class and session nice is
//! restored — on SIGINT, on SIGTERM, after kill -9 by `--restore-only`, and when the engine stops
//! answering. Refused with exit code 1 without CAP_SYS_NICE.
//!
//! The engines run light (a constant policy ranks one operator above the rest), so that a
//! real-time operator costs this shared machine nothing. Every process started here is stopped
//! by its PID when its guard drops, also when a test fails; the tests need root and skip (saying
//! so) without it.

use std::collections::BTreeSet;
use std::process::Command;
use std::time::Duration;

#[path = "common/spe.rs"]
#[allow(dead_code)]
mod spe;
use spe::*;

/// (rt_priority, policy) of a thread: fields 40 and 41 of /proc/<pid>/task/<tid>/stat.
fn sched(pid: u32, tid: i32) -> Option<(u32, u32)> {
    let text = std::fs::read_to_string(format!("/proc/{pid}/task/{tid}/stat")).ok()?;
    let rest: Vec<&str> = text[text.rfind(')')? + 1..].split_whitespace().collect();
    Some((rest.get(40 - 3)?.parse().ok()?, rest.get(41 - 3)?.parse().ok()?))
}

const SCHED_OTHER: u32 = 0;
const SCHED_RR: u32 = 2;

/// Every thread of the machine in a real-time class now: (pid, tid).
fn realtime_threads() -> BTreeSet<(u32, i32)> {
    let mut out = BTreeSet::new();
    for p in std::fs::read_dir("/proc").unwrap().flatten() {
        let Some(pid) = p.file_name().to_str().and_then(|s| s.parse::<u32>().ok()) else { continue };
        let Ok(tasks) = std::fs::read_dir(format!("/proc/{pid}/task")) else { continue };
        for t in tasks.flatten() {
            let Some(tid) = t.file_name().to_str().and_then(|s| s.parse::<i32>().ok()) else { continue };
            if sched(pid, tid).is_some_and(|(_, policy)| policy == 1 || policy == 2) {
                out.insert((pid, tid));
            }
        }
    }
    out
}

/// An engine started in a session of its own, killed (by PID) when dropped.
struct Session(std::process::Child);

impl Drop for Session {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

/// A running engine: one `moirai run` of this test, or one in a session of its own.
enum Engine {
    Child(#[allow(dead_code)] Proc),
    Session(#[allow(dead_code)] Session),
}

impl Engine {
    fn signal(&self, sig: i32) {
        match self {
            Engine::Child(p) => p.signal(sig),
            // SAFETY: kill(2) on the pid of our own child, which we have not reaped yet.
            Engine::Session(s) => unsafe {
                libc::kill(s.0.id() as i32, sig);
            },
        }
    }
}

/// A light SYN engine (two operators) serving its metrics on a free port, in a session of its
/// own when `own_session`; returns it, its port, its pid and the tid of each operator by name.
/// The engine that answers is checked to be the one started here (its pid): a port another test
/// took between `free_port` and the engine's bind makes this engine exit, and then it is started
/// again on another port.
fn engine(own_session: bool) -> (Engine, u16, u32, Vec<(String, i32)>) {
    for _attempt in 0..3 {
        let port = free_port();
        let addr = format!("127.0.0.1:{port}");
        let args = ["run", "syn", "--ops", "2", "--cost-ns", "1000", "--rate", "2000", "--duration", "300s"];
        let (proc, pid) = if own_session {
            let mut cmd = Command::new(BIN);
            cmd.args(args).args(["--metrics-addr", &addr]).stdout(std::process::Stdio::null());
            cmd.stderr(std::process::Stdio::null());
            // SAFETY: setsid is async-signal-safe; the closure allocates nothing.
            unsafe {
                use std::os::unix::process::CommandExt;
                cmd.pre_exec(|| if libc::setsid() < 0 { Err(std::io::Error::last_os_error()) } else { Ok(()) });
            }
            let child = cmd.spawn().expect("moirai run starts");
            let pid = child.id();
            (Engine::Session(Session(child)), pid)
        } else {
            let mut all: Vec<&str> = args.to_vec();
            all.extend(["--metrics-addr", &addr]);
            let proc = Proc::spawn(&all);
            let pid = proc.pid();
            (Engine::Child(proc), pid)
        };
        let mut ops = Vec::new();
        let mut exited = false;
        wait_until("the engine's topology", || {
            exited = !std::path::Path::new(&format!("/proc/{pid}/task")).exists() || is_zombie(pid);
            if exited {
                return true;
            }
            let Ok(resp) = ureq::get(&format!("http://127.0.0.1:{port}/topology")).call() else { return false };
            let topo: serde_json::Value = resp.into_json().unwrap();
            if topo["pid"].as_u64() != Some(pid as u64) {
                return false; // another test's engine on this port; ours exits
            }
            ops = topo["physical"]
                .as_array()
                .unwrap()
                .iter()
                .map(|o| (o["name"].as_str().unwrap().to_string(), o["tid"].as_i64().unwrap() as i32))
                .collect();
            !ops.is_empty() && ops.iter().all(|(_, t)| *t > 0)
        });
        if !exited {
            return (proc, port, pid, ops);
        }
    }
    panic!("the engine exited three times before serving its topology (port taken each time?)");
}

/// Whether process `pid` has ended but is not reaped yet (state `Z`).
fn is_zombie(pid: u32) -> bool {
    std::fs::read_to_string(format!("/proc/{pid}/stat"))
        .ok()
        .and_then(|t| t.get(t.rfind(')')? + 2..)?.chars().next())
        .is_some_and(|state| state == 'Z')
}

/// A configuration: engine `port`, a constant policy ranking `op2 (1/1)` above the rest through
/// the realtime translator (one thread), every 200 ms.
fn realtime_config(dir: &std::path::Path, port: u16, extra_spe: &str) -> std::path::PathBuf {
    let path = dir.join("rt.toml");
    std::fs::write(
        &path,
        format!(
            r#"
state_file = "{state}"
# Act from the first round: the engines of these tests are far below saturation.
activation = "always"

[[spe]]
name = "engine"
driver = "moirai"
url = "http://127.0.0.1:{port}"
{extra_spe}

[[policy]]
name = "pin"
type = "constant"
by = "operator"
values = {{ "op2 (1/1)" = 5 }}
default = 1
translator = "realtime"
rt_threads = 1
period = "200ms"
nice_best = 0
"#,
            state = dir.join("state.json").display()
        ),
    )
    .unwrap();
    path
}

/// Runs a closure on drop (also when the test fails).
struct Cleanup(Option<Box<dyn FnOnce()>>);

impl Drop for Cleanup {
    fn drop(&mut self) {
        if let Some(f) = self.0.take() {
            f();
        }
    }
}

fn tid_of(ops: &[(String, i32)], name: &str) -> i32 {
    ops.iter().find(|(n, _)| n == name).unwrap_or_else(|| panic!("no operator {name} in {ops:?}")).1
}

fn skip_unless_root(test: &str) -> bool {
    if is_root() && moirai_os::realtime::rt_throttling().is_ok_and(|t| t.is_some()) {
        return false;
    }
    eprintln!("SKIPPED {test}: needs root (CAP_SYS_NICE) and RT throttling on");
    true
}

#[test]
fn the_top_thread_goes_real_time_no_other_does_and_sigint_and_sigterm_restore_it() {
    if skip_unless_root("the_top_thread_goes_real_time_no_other_does_and_sigint_and_sigterm_restore_it") {
        return;
    }
    let dir = temp_dir("rt-signals");
    // Two engines of the same shape; the middleware is pointed at the first only.
    let (_a, port, pid, ops) = engine(false);
    let (_b, _, other_pid, other_ops) = engine(false);
    let op2 = tid_of(&ops, "op2 (1/1)");
    let config = realtime_config(&dir.0, port, "");
    for signal in [libc::SIGINT, libc::SIGTERM] {
        let before = realtime_threads();
        let mw = Proc::spawn(&["schedule", "--config", &config.display().to_string(), "-v"]);
        wait_until("op2 in SCHED_RR", || sched(pid, op2) == Some((49, SCHED_RR)));
        // Several rounds later: still only op2 of the named engine (and the middleware's own
        // watchdog) is real-time anywhere on the machine.
        std::thread::sleep(Duration::from_millis(1000));
        let new: BTreeSet<(u32, i32)> = realtime_threads().difference(&before).copied().collect();
        let outside: Vec<&(u32, i32)> =
            new.iter().filter(|(p, t)| !(*p == pid && *t == op2) && *p != mw.pid()).collect();
        assert!(outside.is_empty(), "real-time threads outside the named SPE's op2: {outside:?}");
        assert!(new.iter().any(|(p, _)| *p == mw.pid()), "the watchdog runs real-time: {new:?}");
        for (name, tid) in &ops {
            if *tid != op2 {
                assert_eq!(sched(pid, *tid).map(|s| s.1), Some(SCHED_OTHER), "{name} stays SCHED_OTHER");
            }
        }
        for (name, tid) in &other_ops {
            assert_eq!(sched(other_pid, *tid).map(|s| s.1), Some(SCHED_OTHER), "other engine's {name}");
        }
        mw.signal(signal);
        let (code, err) = mw.wait();
        assert_eq!(code, Some(0), "{err}");
        assert_eq!(sched(pid, op2), Some((0, SCHED_OTHER)), "restored after signal {signal}: {err}");
        assert!(err.contains("SCHED_RR priority 49"), "-v logs the real-time thread: {err}");
    }
    assert!(!dir.0.join("state.json").exists(), "a clean exit leaves no state file");
}

#[test]
fn a_killed_middleware_leaves_its_classes_to_restore_only() {
    if skip_unless_root("a_killed_middleware_leaves_its_classes_to_restore_only") {
        return;
    }
    let dir = temp_dir("rt-crash");
    let (_eng, port, pid, ops) = engine(false);
    let op2 = tid_of(&ops, "op2 (1/1)");
    let config = realtime_config(&dir.0, port, "");
    let mw = Proc::spawn(&["schedule", "--config", &config.display().to_string()]);
    wait_until("op2 in SCHED_RR", || sched(pid, op2).is_some_and(|s| s.1 == SCHED_RR));
    mw.signal(libc::SIGKILL);
    let _ = mw.wait();
    assert_eq!(sched(pid, op2).map(|s| s.1), Some(SCHED_RR), "a crash restores nothing by itself");
    let state = dir.0.join("state.json");
    let (code, err) = Proc::spawn(&["schedule", "--restore-only", "--state-file", &state.display().to_string()]).wait();
    assert_eq!(code, Some(0), "{err}");
    assert!(err.contains("1 classes"), "the report counts the class: {err}");
    assert_eq!(sched(pid, op2), Some((0, SCHED_OTHER)));
    assert!(!state.exists());
}

#[test]
fn an_engine_that_stops_answering_loses_its_real_time_thread() {
    if skip_unless_root("an_engine_that_stops_answering_loses_its_real_time_thread") {
        return;
    }
    let dir = temp_dir("rt-gone");
    let (eng, port, pid, ops) = engine(false);
    let op2 = tid_of(&ops, "op2 (1/1)");
    let config = realtime_config(&dir.0, port, "");
    let mw = Proc::spawn(&["schedule", "--config", &config.display().to_string()]);
    wait_until("op2 in SCHED_RR", || sched(pid, op2).is_some_and(|s| s.1 == SCHED_RR));
    // Stopped, the engine keeps its threads but answers nothing: nothing could correct a runaway.
    eng.signal(libc::SIGSTOP);
    let _cont = Cleanup(Some(Box::new(move || unsafe {
        // SAFETY: kill(2) on the pid of our own child.
        libc::kill(pid as i32, libc::SIGCONT);
    })));
    wait_until("op2 demoted while the engine does not answer", || sched(pid, op2) == Some((0, SCHED_OTHER)));
    // SAFETY: kill(2) on the pid of our own child.
    unsafe { libc::kill(pid as i32, libc::SIGCONT) };
    wait_until("op2 in SCHED_RR again once it answers", || sched(pid, op2).is_some_and(|s| s.1 == SCHED_RR));
    mw.signal(libc::SIGTERM);
    let (code, err) = mw.wait();
    assert_eq!(code, Some(0), "{err}");
    assert!(err.contains("real-time thread(s) demoted"), "the demotion is logged: {err}");
    assert_eq!(sched(pid, op2), Some((0, SCHED_OTHER)));
}

#[test]
fn real_time_without_cap_sys_nice_is_refused_with_exit_code_1() {
    if !is_root() || !std::path::Path::new("/usr/bin/setpriv").exists() {
        eprintln!("SKIPPED real_time_without_cap_sys_nice_is_refused_with_exit_code_1: needs root and setpriv");
        return;
    }
    let dir = temp_dir("rt-noprivs");
    // Still root, without CAP_SYS_NICE (dropped from the bounding set before exec).
    let out = Command::new("/usr/bin/setpriv")
        .args(["--inh-caps=-sys_nice", "--bounding-set=-sys_nice", BIN])
        .args(["schedule", "--engine", "http://127.0.0.1:1", "--policy", "qs", "--translator", "realtime"])
        .arg("--state-file")
        .arg(dir.0.join("state.json"))
        .output()
        .unwrap();
    let err = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(1), "{err}");
    assert!(err.contains("the real-time translator needs CAP_SYS_NICE"), "names what is missing: {err}");
    assert!(err.contains("setcap cap_sys_nice+ep"), "says what to do: {err}");
    // Bad flags are usage errors (2), not privilege errors.
    let out = Command::new(BIN)
        .args(["schedule", "--engine", "http://127.0.0.1:1", "--policy", "qs", "--rt-threads", "2"])
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(2));
    assert!(String::from_utf8_lossy(&out.stderr).contains("--rt-threads and --rt-class are for --translator realtime"));
}

/// (group id, nice) of process `pid`'s session group.
fn session(pid: u32) -> (u64, i32) {
    let g = moirai_os::autogroup::autogroup(pid).unwrap();
    (g.id, g.nice)
}

#[test]
fn an_spes_session_nice_is_set_said_and_restored_on_exit_and_after_a_crash() {
    if skip_unless_root("an_spes_session_nice_is_set_said_and_restored_on_exit_and_after_a_crash") {
        return;
    }
    if !moirai_os::autogroup::autogroup_enabled().unwrap() {
        eprintln!("SKIPPED an_spes_session_nice_is_set_said_and_restored: sched_autogroup is off here");
        return;
    }
    let dir = temp_dir("autogroup");
    let (_eng, port, pid, _) = engine(true);
    let (group, nice) = session(pid);
    assert_ne!(group, session(std::process::id()).0, "the engine has a session of its own");
    let state = dir.0.join("state.json").display().to_string();
    let url = format!("http://127.0.0.1:{port}");
    let args = ["schedule", "--engine", &url, "--policy", "qs", "--autogroup-nice", "-7", "--state-file", &state];
    // A clean exit.
    let mw = Proc::spawn(&args);
    wait_until("the session's nice", || session(pid) == (group, -7));
    mw.signal(libc::SIGTERM);
    let (code, err) = mw.wait();
    assert_eq!(code, Some(0), "{err}");
    assert!(err.contains("nice values rank its threads against each other only"), "says what nice cannot do: {err}");
    assert!(err.contains(&format!("session group /autogroup-{group} nice {nice} -> -7")), "{err}");
    assert_eq!(session(pid), (group, nice), "restored on exit");
    // A crash, then --restore-only.
    let mw = Proc::spawn(&args);
    wait_until("the session's nice", || session(pid) == (group, -7));
    mw.signal(libc::SIGKILL);
    let _ = mw.wait();
    assert_eq!(session(pid), (group, -7), "a crash restores nothing by itself");
    let (code, err) = Proc::spawn(&["schedule", "--restore-only", "--state-file", &state]).wait();
    assert_eq!(code, Some(0), "{err}");
    assert!(err.contains("1 session groups restored"), "{err}");
    assert_eq!(session(pid), (group, nice));
    // Out of range is a usage error.
    let out = Command::new(BIN)
        .args(["schedule", "--engine", &url, "--policy", "qs", "--autogroup-nice", "-30", "--state-file", &state])
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(2));
    assert!(String::from_utf8_lossy(&out.stderr).contains("autogroup_nice -30 is out of range"));
}

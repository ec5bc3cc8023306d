//! The crash the restore log exists for: a middleware process changes threads of *another*
//! process (nice values, cgroup membership), is killed with SIGKILL, and the next start
//! restores everything from the state file.
//!
//! The "middleware" is this test binary re-executed with [`CHILD_ENV`] set, running the
//! ignored helper test [`crash_child`]; the "SPE" is this process's own threads.

mod common;

use std::io::{BufRead, BufReader};
use std::os::unix::process::ExitStatusExt;
use std::process::{Command, Stdio};

use common::{skip, undo_v1, unique, v1_cpu_or_skip, Cleanup, Sleeper, TempDir};
use moirai_os::cgroup::{thread_cgroup, CgroupTree};
use moirai_os::{get_nice, set_nice, RestoreLog, Tid};

/// Set for the child: `<state file>;<pid>;<tid a>;<tid b>;<cgroup base name or ->`.
const CHILD_ENV: &str = "MOIRAI_OS_CRASH_CHILD";
/// What the child prints once its changes are made (and recorded).
const READY: &str = "MOIRAI_OS_CRASH_CHILD_READY";

/// The child half of [`kill_9_leaves_a_state_file_that_the_next_start_restores`]: changes the
/// parent's threads, prints [`READY`], and waits to be killed.
#[test]
#[ignore = "helper run as a child process by kill_9_leaves_a_state_file_that_the_next_start_restores"]
fn crash_child() {
    let Ok(spec) = std::env::var(CHILD_ENV) else {
        eprintln!("crash_child is only meaningful as the child of the crash test; nothing to do");
        return;
    };
    let parts: Vec<&str> = spec.split(';').collect();
    let (state, pid, a, b, base) = (parts[0], parts[1].parse::<u32>().unwrap(), parts[2], parts[3], parts[4]);
    let (a, b): (Tid, Tid) = (a.parse().unwrap(), b.parse().unwrap());
    let mut log = RestoreLog::create(state).unwrap();
    log.set_nice(pid, a, -6).unwrap();
    log.set_nice(pid, b, 8).unwrap();
    let mut tree = None;
    if base != "-" {
        let h = moirai_os::CgroupLayout::detect().unwrap().cpu().clone();
        let mut t = CgroupTree::create_under(&mut log, &h, base, "crashed").unwrap();
        t.ensure_group(&mut log, "g").unwrap();
        t.set_weight("g", 3000).unwrap();
        t.move_thread(&mut log, pid, a, "g").unwrap();
        tree = Some(t);
    }
    // libtest has printed "test crash_child ... " without a newline: the marker ends a line.
    println!("{READY}");
    // Wait for SIGKILL; the log is never dropped, so nothing is restored by this process.
    std::thread::sleep(std::time::Duration::from_secs(120));
    std::mem::forget((log, tree));
}

#[test]
fn kill_9_leaves_a_state_file_that_the_next_start_restores() {
    if !moirai_os::is_root() {
        skip("kill_9_leaves_a_state_file_that_the_next_start_restores: needs root");
        return;
    }
    let pid = std::process::id();
    let (a, b) = (Sleeper::spawn(), Sleeper::spawn());
    let (nice_a, nice_b) = (get_nice(a.tid).unwrap(), get_nice(b.tid).unwrap());
    let v1 = v1_cpu_or_skip("the cgroup half of kill_9_leaves_a_state_file_that_the_next_start_restores");
    let base = unique("moirai-test-crash");
    let home = v1.as_ref().map(|h| thread_cgroup(pid, a.tid, h).unwrap());
    let _undo = Cleanup::new({
        let (a, b, base, v1, home) = (a.tid, b.tid, base.clone(), v1.clone(), home.clone());
        move || {
            let _ = set_nice(a, nice_a);
            let _ = set_nice(b, nice_b);
            if let (Some(h), Some(home)) = (v1, home) {
                let d = h.mount.join(&base);
                undo_v1(&home, &[a], &[d.join("crashed/g"), d.join("crashed"), d]);
            }
        }
    });
    let state = TempDir::new("crash");
    let state_file = state.0.join("state.json");
    let spec = format!(
        "{};{pid};{};{};{}",
        state_file.display(),
        a.tid,
        b.tid,
        if v1.is_some() { base.as_str() } else { "-" }
    );
    let mut child = Command::new(std::env::current_exe().unwrap())
        .args(["--exact", "crash_child", "--ignored", "--nocapture", "--test-threads=1"])
        .env(CHILD_ENV, spec)
        .stdout(Stdio::piped())
        .spawn()
        .unwrap();
    let child_pid = child.id() as i32;
    // Hang guard only (not a timing assertion): a child that never says READY is killed,
    // which closes its stdout and fails the test below with a message.
    let (done_tx, done_rx) = std::sync::mpsc::channel::<()>();
    let watchdog = std::thread::spawn(move || {
        if done_rx.recv_timeout(std::time::Duration::from_secs(60)).is_err() {
            // SAFETY: kill only sends a signal to the child this test started.
            unsafe { libc::kill(child_pid, libc::SIGKILL) };
        }
    });
    let ready = BufReader::new(child.stdout.take().unwrap()).lines().map_while(Result::ok).any(|l| l.ends_with(READY));
    child.kill().unwrap();
    let status = child.wait().unwrap();
    drop(done_tx);
    watchdog.join().unwrap();
    assert!(ready, "the child never got ready (exit {status:?})");
    assert_eq!(status.signal(), Some(libc::SIGKILL));

    // The "middleware" is dead; its changes are not.
    assert_eq!(get_nice(a.tid).unwrap(), -6);
    assert_eq!(get_nice(b.tid).unwrap(), 8);
    if let Some(h) = &v1 {
        assert_eq!(thread_cgroup(pid, a.tid, h).unwrap(), h.mount.join(&base).join("crashed/g"));
    }
    assert!(state_file.exists(), "the state file survives the crash");

    // The next start.
    let report = RestoreLog::restore_from(&state_file).unwrap();
    assert!(report.is_clean(), "{report}");
    assert_eq!(report.nice_restored, 2, "{report}");
    assert_eq!(get_nice(a.tid).unwrap(), nice_a);
    assert_eq!(get_nice(b.tid).unwrap(), nice_b);
    if let (Some(h), Some(home)) = (&v1, &home) {
        assert_eq!(report.threads_moved_back, 1, "{report}");
        assert_eq!(report.groups_removed, 3, "{report}");
        assert_eq!(&thread_cgroup(pid, a.tid, h).unwrap(), home);
        assert!(!h.mount.join(&base).exists());
    }
    assert!(!state_file.exists());
    // And the middleware can start afresh on the same path.
    assert!(RestoreLog::create(&state_file).unwrap().is_empty());
}

//! Tests of the restore log: the state file, nice values on real threads, and the cgroup-v2
//! code — at file level against an emulated hierarchy, and on the real kernel's thread mode
//! with only the cpu controller files shimmed. Real cgroup-v1 tests and the `kill -9` test
//! live in `tests/` (they use only the public API, as the middleware does).

use std::fs;
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};

use super::*;
use crate::caps::is_root;
use crate::cgroup::fs::KernelFs;
use crate::cgroup::{thread_cgroup, CgroupLayout, CgroupTree, CgroupVersion, Hierarchy};
use crate::nice::get_nice;
use crate::testutil::{skip, unique, Cleanup, CpuShimFs, FakeCgroupFs, Sleeper, TempDir};

fn state_path(dir: &TempDir) -> PathBuf {
    dir.0.join("state.json")
}

fn read_state(path: &Path) -> State {
    serde_json::from_str(&fs::read_to_string(path).unwrap()).unwrap()
}

// ---- the state file ----

#[test]
fn create_writes_an_empty_state_file_and_restore_removes_it() {
    let dir = TempDir::new("state");
    let path = state_path(&dir);
    let mut log = RestoreLog::create(&path).unwrap();
    let on_disk = read_state(&path);
    assert!(on_disk.is_empty());
    assert_eq!(on_disk.writer_pid, std::process::id());
    assert!(log.restore().is_clean());
    assert!(!path.exists(), "a clean restore removes the state file");
    // Idempotent: nothing left, nothing done.
    assert_eq!(log.restore(), RestoreReport::default());
    assert_eq!(RestoreLog::restore_from(&path).unwrap(), RestoreReport::default());
}

#[test]
fn create_refuses_a_file_with_unrestored_changes() {
    let dir = TempDir::new("state");
    let path = state_path(&dir);
    let state = State {
        format: FORMAT,
        writer_pid: 1,
        nice: vec![NiceRecord { pid: 1, tid: 1, start_ticks: 0, nice: 0 }],
        ..State::default()
    };
    fs::write(&path, serde_json::to_string(&state).unwrap()).unwrap();
    let err = RestoreLog::create(&path).unwrap_err().to_string();
    assert!(err.contains("restore_from") && err.contains("state.json"), "{err}");
    // The file is left alone for restore_from.
    assert_eq!(read_state(&path), state);
}

#[test]
fn a_foreign_or_unwritable_state_file_is_a_clear_error() {
    let dir = TempDir::new("state");
    let path = state_path(&dir);
    fs::write(&path, "{\"not\": \"ours\"}").unwrap();
    let err = RestoreLog::restore_from(&path).unwrap_err().to_string();
    assert!(err.contains("not a moirai state file"), "{err}");
    let err = RestoreLog::create(dir.0.join("no-such-dir/state.json")).unwrap_err().to_string();
    assert!(err.contains("directory must exist"), "{err}");
}

#[test]
fn restore_from_refuses_while_the_writer_still_runs() {
    let dir = TempDir::new("state");
    let path = state_path(&dir);
    let mut child = std::process::Command::new("sleep").arg("60").spawn().unwrap();
    let _reap = Cleanup::new({
        let pid = child.id();
        move || {
            // SAFETY: kill only sends a signal to the child this test started.
            unsafe { libc::kill(pid as i32, libc::SIGKILL) };
        }
    });
    let pid = child.id();
    let start = thread_stat(pid, pid as Tid).unwrap().start_ticks;
    let state = State {
        format: FORMAT,
        writer_pid: pid,
        writer_start_ticks: start,
        nice: vec![NiceRecord { pid, tid: pid as Tid, start_ticks: start, nice: 0 }],
        ..State::default()
    };
    fs::write(&path, serde_json::to_string(&state).unwrap()).unwrap();
    let err = RestoreLog::restore_from(&path).unwrap_err().to_string();
    assert!(err.contains("still running"), "{err}");
    child.kill().unwrap();
    child.wait().unwrap();
    // With the writer gone, its records are undone (here: the process ended, so skipped).
    let report = RestoreLog::restore_from(&path).unwrap();
    assert_eq!(report.skipped_gone, 1, "{report}");
    assert!(!path.exists());
}

// ---- nice values of real threads ----

fn skip_unless_root(test: &str) -> bool {
    if is_root() {
        return false;
    }
    skip(&format!("{test}: needs root (CAP_SYS_NICE: restoring lowers nice values and real-time classes need it)"));
    true
}

#[test]
fn set_nice_records_the_first_original_and_restore_puts_it_back() {
    if skip_unless_root("set_nice_records_the_first_original_and_restore_puts_it_back") {
        return;
    }
    let dir = TempDir::new("nice");
    let pid = std::process::id();
    let (a, b) = (Sleeper::spawn(), Sleeper::spawn());
    let (orig_a, orig_b) = (get_nice(a.tid).unwrap(), get_nice(b.tid).unwrap());
    let mut log = RestoreLog::create(state_path(&dir)).unwrap();
    log.set_nice(pid, a.tid, -5).unwrap();
    log.set_nice(pid, b.tid, 7).unwrap();
    log.set_nice(pid, a.tid, 3).unwrap();
    assert_eq!(thread_stat(pid, a.tid).unwrap().nice, 3, "field 19 of /proc/<pid>/task/<tid>/stat");
    assert_eq!(thread_stat(pid, b.tid).unwrap().nice, 7);
    // The record keeps the value from before the *first* change, and it is on disk already.
    assert_eq!(log.original_nice(pid, a.tid), Some(orig_a));
    let on_disk = read_state(log.path());
    assert_eq!(on_disk.nice.len(), 2);
    assert!(on_disk.nice.iter().any(|r| r.tid == a.tid && r.nice == orig_a));

    let report = log.restore();
    assert_eq!(report.nice_restored, 2, "{report}");
    assert!(report.is_clean(), "{report}");
    assert_eq!(thread_stat(pid, a.tid).unwrap().nice, orig_a);
    assert_eq!(thread_stat(pid, b.tid).unwrap().nice, orig_b);
    assert!(!log.path().exists());
}

#[test]
fn set_nices_batches_and_reports_each_thread() {
    if skip_unless_root("set_nices_batches_and_reports_each_thread") {
        return;
    }
    let dir = TempDir::new("nice");
    let pid = std::process::id();
    let (a, b) = (Sleeper::spawn(), Sleeper::spawn());
    let gone = crate::testutil::ended_thread();
    let orig_a = get_nice(a.tid).unwrap();
    let mut log = RestoreLog::create(state_path(&dir)).unwrap();
    let results = log.set_nices(&[(pid, a.tid, 4), (pid, b.tid, -2), (pid, gone, 1), (pid, a.tid, 40)]);
    assert!(results[0].is_ok() && results[1].is_ok(), "{results:?}");
    assert!(results[2].as_ref().unwrap_err().is_thread_gone());
    assert!(matches!(results[3], Err(OsError::NiceOutOfRange { nice: 40 })));
    assert_eq!(get_nice(a.tid).unwrap(), 4, "the refused value must not have been applied");
    assert_eq!(read_state(log.path()).nice.len(), 2);
    // A thread of another process is refused: the log never touches what it was not pointed at.
    assert!(log.set_nice(1, a.tid, 0).unwrap_err().is_thread_gone());
    assert!(log.restore().is_clean());
    assert_eq!(get_nice(a.tid).unwrap(), orig_a);
}

#[test]
fn one_process_is_handed_back_its_values_while_the_others_stay_recorded() {
    if skip_unless_root("one_process_is_handed_back_its_values_while_the_others_stay_recorded") {
        return;
    }
    let dir = TempDir::new("nice");
    let me = std::process::id();
    let mine = Sleeper::spawn();
    let mut child = std::process::Command::new("sleep").arg("30").spawn().unwrap();
    let other = child.id();
    let (orig_mine, orig_other) = (get_nice(mine.tid).unwrap(), get_nice(other as Tid).unwrap());
    let mut log = RestoreLog::create(state_path(&dir)).unwrap();
    log.set_nice(me, mine.tid, 5).unwrap();
    log.set_nice(other, other as Tid, 9).unwrap();
    let report = log.restore_process(other);
    assert_eq!(report.nice_restored, 1, "{report}");
    assert!(report.is_clean(), "{report}");
    assert_eq!(get_nice(other as Tid).unwrap(), orig_other, "the other process is back");
    assert_eq!(get_nice(mine.tid).unwrap(), 5, "this one keeps its value");
    let on_disk = read_state(log.path());
    assert_eq!(on_disk.nice.iter().map(|r| r.pid).collect::<Vec<_>>(), [me], "only this one is still recorded");
    // Changed again later, its original is recorded again (the value it was handed back).
    log.set_nice(other, other as Tid, 11).unwrap();
    assert_eq!(log.original_nice(other, other as Tid), Some(orig_other));
    assert!(log.restore().is_clean());
    assert_eq!((get_nice(mine.tid).unwrap(), get_nice(other as Tid).unwrap()), (orig_mine, orig_other));
    let _ = child.kill();
    let _ = child.wait();
}

#[test]
fn after_a_crash_a_fresh_log_restores_from_the_file_skipping_reused_and_ended_threads() {
    if skip_unless_root("after_a_crash_a_fresh_log_restores_from_the_file_skipping_reused_and_ended_threads") {
        return;
    }
    let dir = TempDir::new("crash");
    let path = state_path(&dir);
    let pid = std::process::id();
    let (a, b) = (Sleeper::spawn(), Sleeper::spawn());
    let c = Sleeper::spawn();
    let (orig_a, _) = (get_nice(a.tid).unwrap(), get_nice(b.tid).unwrap());
    let mut log = RestoreLog::create(&path).unwrap();
    log.set_nice(pid, a.tid, -4).unwrap();
    log.set_nice(pid, b.tid, 6).unwrap();
    log.set_nice(pid, c.tid, 2).unwrap();
    // The crash: no restore, no Drop.
    std::mem::forget(log);
    assert_eq!(get_nice(a.tid).unwrap(), -4);

    // b's tid "was reused": its record now carries another start time.
    let mut state = read_state(&path);
    state.nice.iter_mut().find(|r| r.tid == b.tid).unwrap().start_ticks += 1;
    fs::write(&path, serde_json::to_string(&state).unwrap()).unwrap();
    // c ended meanwhile.
    drop(c);

    let report = RestoreLog::restore_from(&path).unwrap();
    assert_eq!((report.nice_restored, report.skipped_reused, report.skipped_gone), (1, 1, 1), "{report}");
    assert_eq!(get_nice(a.tid).unwrap(), orig_a);
    assert_eq!(get_nice(b.tid).unwrap(), 6, "a thread whose start time differs must not be touched");
    assert!(!path.exists());
    assert_eq!(RestoreLog::restore_from(&path).unwrap(), RestoreReport::default(), "idempotent");
}

#[test]
fn dropping_a_log_restores_it() {
    if skip_unless_root("dropping_a_log_restores_it") {
        return;
    }
    let dir = TempDir::new("drop");
    let pid = std::process::id();
    let a = Sleeper::spawn();
    let orig = get_nice(a.tid).unwrap();
    {
        let mut log = RestoreLog::create(state_path(&dir)).unwrap();
        log.set_nice(pid, a.tid, 9).unwrap();
    }
    assert_eq!(get_nice(a.tid).unwrap(), orig);
    assert!(!state_path(&dir).exists());
}

// ---- cgroup v2 ----

fn fake_v2(label: &str, controllers: &str) -> (TempDir, Arc<FakeCgroupFs>, Hierarchy) {
    let root = TempDir::new(label);
    let fake = Arc::new(FakeCgroupFs::new(&root.0, controllers));
    let h = Hierarchy { version: CgroupVersion::V2, mount: root.0.clone(), mount_root: "/".into(), read_only: false };
    (root, fake, h)
}

fn ids_in(file: &Path) -> Vec<Tid> {
    fs::read_to_string(file).unwrap().split_whitespace().map(|s| s.parse().unwrap()).collect()
}

/// FILE-LEVEL TEST: the v2 code against a temporary directory that mimics cgroupfs (see
/// `FakeCgroupFs`); it checks what moirai writes and in which order, not the kernel.
#[test]
fn v2_file_level_threaded_subtree_weights_and_restore() {
    // Membership is read from the real /proc, which the real-kernel v2 test changes.
    let _serial = V2_REAL.lock().unwrap_or_else(|e| e.into_inner());
    let (root, fake, h) = fake_v2("v2fake", "cpu io memory");
    let state = TempDir::new("v2state");
    let pid = std::process::id();
    let (a, b) = (Sleeper::spawn(), Sleeper::spawn());
    let mut log = RestoreLog::create_with_fs(state_path(&state), fake.clone()).unwrap();
    let mut tree = CgroupTree::create_under(&mut log, &h, "moirai", "inst").unwrap();
    let inst = root.0.join("moirai/inst");
    assert_eq!(tree.instance_dir(), inst);
    for d in [&root.0, &root.0.join("moirai"), &inst] {
        let enabled = fs::read_to_string(d.join("cgroup.subtree_control")).unwrap();
        assert!(enabled.split_whitespace().any(|c| c == "cpu"), "cpu not enabled in {}", d.display());
    }

    let g1 = tree.ensure_group(&mut log, "g1").unwrap();
    tree.ensure_group(&mut log, "g2").unwrap();
    assert_eq!(tree.ensure_group(&mut log, "g1").unwrap(), g1, "ensure_group is idempotent");
    assert_eq!(fs::read_to_string(g1.join("cgroup.type")).unwrap().trim(), "threaded");
    assert_eq!(fs::read_to_string(inst.join("cgroup.type")).unwrap().trim(), "domain threaded");

    tree.set_weight("g1", 400).unwrap();
    tree.set_weight("g2", 25).unwrap();
    assert_eq!(tree.weight("g1").unwrap(), 400);
    assert!(matches!(tree.set_weight("g1", 0), Err(OsError::WeightOutOfRange { min: 1, max: 10_000, .. })));
    assert!(matches!(tree.set_weight("nope", 5), Err(OsError::UnknownGroup { .. })));

    // A thread that runs when the process enters the domain and ends before it leaves (the
    // kernel drops it from the group; CI once saw a harness thread block the rmdir).
    let passing = Sleeper::spawn();
    tree.move_thread(&mut log, pid, a.tid, "g1").unwrap();
    tree.move_thread(&mut log, pid, b.tid, "g2").unwrap();
    assert_eq!(ids_in(&inst.join("cgroup.procs")), vec![pid as Tid]);
    assert!(ids_in(&g1.join("cgroup.threads")).contains(&a.tid));
    assert!(ids_in(&root.0.join("moirai/inst/g2/cgroup.threads")).contains(&b.tid));
    assert_eq!(tree.threads_in("g1").unwrap(), vec![a.tid]);

    // Order of writes: the process enters the domain once, before any thread moves; a group is
    // made threaded before anything enters it.
    let writes = fake.writes();
    let pos = |file: &Path, value: &str| writes.iter().position(|(f, v)| f == file && v == value).unwrap();
    let procs_writes = writes.iter().filter(|(f, _)| f.ends_with("cgroup.procs")).count();
    assert_eq!(procs_writes, 1, "{writes:?}");
    let entered = pos(&inst.join("cgroup.procs"), &pid.to_string());
    assert!(entered < pos(&g1.join("cgroup.threads"), &a.tid.to_string()));
    assert!(pos(&g1.join("cgroup.type"), "threaded") < entered);
    assert!(pos(&root.0.join("cgroup.subtree_control"), "+cpu") < pos(&inst.join("cgroup.subtree_control"), "+cpu"));

    // What was recorded: the process's home, the groups, and the controller enabled in a
    // directory moirai does not own (the root).
    let recorded = read_state(log.path());
    assert_eq!(recorded.processes.len(), 1);
    assert_eq!(recorded.processes[0].original.as_deref(), Some(root.0.as_path()));
    assert_eq!(recorded.groups.len(), 4, "moirai, inst, g1, g2: {:?}", recorded.groups);
    assert_eq!(recorded.controllers.len(), 1);
    assert_eq!(recorded.controllers[0].dir, root.0);

    // Removing a group releases its threads into the domain.
    tree.remove_group(&mut log, "g2").unwrap();
    assert!(!root.0.join("moirai/inst/g2").exists());
    assert!(ids_in(&inst.join("cgroup.threads")).contains(&b.tid));

    drop(passing);
    let report = log.restore();
    assert!(report.is_clean(), "{report}");
    assert_eq!((report.processes_moved_back, report.groups_removed, report.controllers_disabled), (1, 3, 1));
    assert_eq!(ids_in(&root.0.join("cgroup.procs")), vec![pid as Tid]);
    assert!(ids_in(&root.0.join("cgroup.threads")).contains(&a.tid));
    assert!(!root.0.join("moirai").exists());
    assert!(!fs::read_to_string(root.0.join("cgroup.subtree_control")).unwrap().contains("cpu"));
    assert!(!log.path().exists());
}

#[test]
fn v2_without_cpu_controller_is_refused_before_any_change() {
    let (root, fake, h) = fake_v2("v2nocpu", "io memory");
    let state = TempDir::new("v2state");
    let mut log = RestoreLog::create_with_fs(state_path(&state), fake.clone()).unwrap();
    let err = CgroupTree::create(&mut log, &h, "inst").unwrap_err();
    assert!(matches!(err, OsError::NoCpuController { .. }), "{err}");
    assert!(fake.writes().is_empty());
    assert!(!root.0.join("moirai").exists());
}

#[test]
fn a_second_instance_with_the_same_name_is_refused() {
    let (_root, fake, h) = fake_v2("v2twice", "cpu");
    let state = TempDir::new("v2state");
    let mut first = RestoreLog::create_with_fs(state_path(&state), fake.clone()).unwrap();
    let _tree = CgroupTree::create(&mut first, &h, "node1").unwrap();
    let mut second = RestoreLog::create_with_fs(state.0.join("other.json"), fake.clone()).unwrap();
    let err = CgroupTree::create(&mut second, &h, "node1").unwrap_err().to_string();
    assert!(err.contains("another moirai instance"), "{err}");
    assert!(first.restore().is_clean());
}

/// Serialises the tests that move this whole test process in the real unified hierarchy.
static V2_REAL: Mutex<()> = Mutex::new(());

/// The real kernel's cgroup-v2 thread mode on this host's cgroup2 mount, which has no cpu
/// controller: `CpuShimFs` pretends only the cpu files; the kernel checks every `cgroup.type`,
/// `cgroup.procs` and `cgroup.threads` write.
#[test]
fn v2_thread_mode_on_the_real_kernel_with_only_cpu_files_shimmed() {
    let _serial = V2_REAL.lock().unwrap_or_else(|e| e.into_inner());
    let unified = CgroupLayout::detect().ok().and_then(|l| l.unified().cloned());
    let Some(h) = unified.filter(|h| !h.read_only && is_root()) else {
        skip("v2_thread_mode_on_the_real_kernel: needs root and a writable cgroup2 mount");
        return;
    };
    let pid = std::process::id();
    let home = crate::cgroup::process_cgroup(pid, &h).unwrap();
    let base = unique("moirai-test-v2");
    let base_dir = h.mount.join(&base);
    let _undo = Cleanup::new({
        let (home, base_dir) = (home.clone(), base_dir.clone());
        move || {
            let _ = KernelFs.write(&home.join("cgroup.procs"), &std::process::id().to_string());
            for d in ["inst/g1", "inst/g2", "inst", ""] {
                let _ = fs::remove_dir(base_dir.join(d));
            }
        }
    });
    let state = TempDir::new("v2real");
    let (a, b) = (Sleeper::spawn(), Sleeper::spawn());
    let shim = Arc::new(CpuShimFs::default());
    let mut log = RestoreLog::create_with_fs(state_path(&state), shim.clone()).unwrap();
    let mut tree = CgroupTree::create_under(&mut log, &h, &base, "inst").unwrap();
    tree.ensure_group(&mut log, "g1").unwrap();
    tree.ensure_group(&mut log, "g2").unwrap();
    tree.set_weight("g1", 300).unwrap();
    assert_eq!(tree.weight("g1").unwrap(), 300);
    tree.move_thread(&mut log, pid, a.tid, "g1").unwrap();
    tree.move_thread(&mut log, pid, b.tid, "g2").unwrap();

    let inst = base_dir.join("inst");
    assert_eq!(thread_cgroup(pid, a.tid, &h).unwrap(), inst.join("g1"));
    assert_eq!(thread_cgroup(pid, b.tid, &h).unwrap(), inst.join("g2"));
    assert_eq!(tree.group_of(pid, a.tid).unwrap().as_deref(), Some("g1"));
    // The rest of the process moved into the threaded domain with the first thread.
    assert_eq!(crate::cgroup::process_cgroup(pid, &h).unwrap(), inst);
    assert_eq!(fs::read_to_string(inst.join("cgroup.type")).unwrap().trim(), "domain threaded");
    assert_eq!(fs::read_to_string(inst.join("g1/cgroup.type")).unwrap().trim(), "threaded");

    // Moving g2's thread back into the domain and dropping the group, for real.
    tree.remove_group(&mut log, "g2").unwrap();
    assert_eq!(thread_cgroup(pid, b.tid, &h).unwrap(), inst);
    assert!(!inst.join("g2").exists());

    let report = log.restore();
    assert!(report.is_clean(), "{report}");
    assert_eq!(report.processes_moved_back, 1, "{report}");
    assert_eq!(crate::cgroup::process_cgroup(pid, &h).unwrap(), home);
    assert_eq!(thread_cgroup(pid, a.tid, &h).unwrap(), home);
    assert!(!base_dir.exists(), "the groups moirai made are gone");
    let shimmed = shim.shimmed_writes.lock().unwrap().clone();
    assert!(shimmed.iter().any(|(f, v)| f.ends_with("g1/cpu.weight") && v == "300"), "{shimmed:?}");
}

#[test]
fn real_time_classes_are_recorded_and_restored_after_a_crash() {
    if skip_unless_root("real_time_classes_are_recorded_and_restored_after_a_crash") {
        return;
    }
    if crate::realtime::rt_throttling().unwrap().is_none() {
        skip("real_time_classes_are_recorded_and_restored_after_a_crash: RT throttling disabled");
        return;
    }
    use crate::realtime::{get_sched_class, SchedClass};
    let dir = TempDir::new("rt");
    let path = state_path(&dir);
    let pid = std::process::id();
    // Blocked on a channel: real-time costs the machine nothing.
    let a = Sleeper::spawn();
    let _undo = Cleanup::new({
        let tid = a.tid;
        move || {
            let _ = crate::realtime::set_sched_class(tid, SchedClass::Other);
        }
    });
    let mut log = RestoreLog::create(&path).unwrap();
    log.set_sched_class(pid, a.tid, SchedClass::RoundRobin(20)).unwrap();
    log.set_sched_class(pid, a.tid, SchedClass::Fifo(2)).unwrap();
    assert_eq!(get_sched_class(a.tid).unwrap(), SchedClass::Fifo(2));
    std::mem::forget(log);
    let report = RestoreLog::restore_from(&path).unwrap();
    assert_eq!(report.classes_restored, 1, "{report}");
    assert_eq!(get_sched_class(a.tid).unwrap(), SchedClass::Other, "the class from before the first change");
}

// ---- session groups ----

/// `sh -c 'sleep 60 & exec sleep 60'` in a session of its own: the process the test starts (the
/// session leader) and a second process of the same session group.
fn session_of_two() -> (std::process::Child, Cleanup) {
    let mut cmd = std::process::Command::new("sh");
    cmd.args(["-c", "sleep 60 & exec sleep 60"]);
    // SAFETY: setsid is async-signal-safe; the closure allocates nothing.
    unsafe {
        use std::os::unix::process::CommandExt;
        cmd.pre_exec(|| if libc::setsid() < 0 { Err(std::io::Error::last_os_error()) } else { Ok(()) });
    }
    let child = cmd.spawn().unwrap();
    let sid = child.id() as i32;
    // SAFETY: kill only signals the process group (= session) this test started.
    let guard = Cleanup::new(move || unsafe {
        libc::kill(-sid, libc::SIGKILL);
    });
    (child, guard)
}

#[test]
fn a_session_groups_nice_is_recorded_and_restored_after_a_crash_through_any_process_of_it() {
    if skip_unless_root("a_session_groups_nice_is_recorded_and_restored_after_a_crash_through_any_process_of_it") {
        return;
    }
    use crate::autogroup::{autogroup, process_in_autogroup};
    let dir = TempDir::new("autogroup");
    let path = state_path(&dir);
    let own = autogroup(std::process::id()).unwrap();
    let (mut leader, _guard) = session_of_two();
    let pid = leader.id();
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(10);
    let group = loop {
        // Once the shell has forked its background sleep, the group has two processes.
        let g = autogroup(pid).unwrap();
        let members = fs::read_dir("/proc")
            .unwrap()
            .flatten()
            .filter_map(|e| e.file_name().to_str()?.parse::<u32>().ok())
            .filter(|p| autogroup(*p).is_ok_and(|a| a.id == g.id))
            .count();
        if g.id != own.id && members >= 2 {
            break g;
        }
        assert!(std::time::Instant::now() < deadline, "the child's session never had two processes");
        std::thread::sleep(std::time::Duration::from_millis(10));
    };

    let mut log = RestoreLog::create(&path).unwrap();
    assert_eq!(log.set_autogroup_nice(pid, -4).unwrap(), group);
    log.set_autogroup_nice(pid, 5).unwrap();
    assert_eq!(autogroup(pid).unwrap().nice, 5);
    assert_eq!(log.original_autogroup_nice(group.id), Some(group.nice), "the first original is kept");
    assert_eq!(read_state(&path).autogroups.len(), 1, "on disk before the change");
    // The crash: no restore.
    std::mem::forget(log);
    // The process the change went through ends; another process of its session lives on.
    leader.kill().unwrap();
    leader.wait().unwrap();
    let other = process_in_autogroup(group.id).expect("the session's background sleep");
    assert_ne!(other, pid);

    let report = RestoreLog::restore_from(&path).unwrap();
    assert_eq!(report.autogroups_restored, 1, "{report}");
    assert_eq!(autogroup(other).unwrap(), group, "the session's nice is back");
    assert_eq!(autogroup(std::process::id()).unwrap(), own, "the test's own session was never touched");
    assert!(!path.exists());
}

#[test]
fn a_session_group_that_ended_is_skipped() {
    let dir = TempDir::new("autogroup-gone");
    let path = state_path(&dir);
    let state = State {
        format: FORMAT,
        writer_pid: 1,
        autogroups: vec![AutogroupRecord { pid: u32::MAX / 2, start_ticks: 1, group: u64::MAX, nice: 0 }],
        ..State::default()
    };
    fs::write(&path, serde_json::to_string(&state).unwrap()).unwrap();
    let report = RestoreLog::restore_from(&path).unwrap();
    assert_eq!((report.autogroups_restored, report.skipped_gone), (0, 1), "{report}");
    // A state file of an older moirai (no "autogroups") still loads.
    let mut old: serde_json::Value = serde_json::to_value(State { format: FORMAT, ..State::default() }).unwrap();
    old.as_object_mut().unwrap().remove("autogroups");
    fs::write(&path, old.to_string()).unwrap();
    assert_eq!(RestoreLog::restore_from(&path).unwrap(), RestoreReport::default());
}

/// A thread that starts threads on request: Linux starts each at its nice value.
struct Parent {
    tid: Tid,
    ask: Option<std::sync::mpsc::Sender<std::sync::mpsc::Sender<Sleeper>>>,
    handle: Option<std::thread::JoinHandle<()>>,
}

impl Parent {
    fn spawn() -> Parent {
        let (tid_tx, tid_rx) = std::sync::mpsc::channel();
        let (ask, asked) = std::sync::mpsc::channel::<std::sync::mpsc::Sender<Sleeper>>();
        let handle = std::thread::spawn(move || {
            tid_tx.send(crate::proc::current_tid()).unwrap();
            for reply in asked {
                reply.send(Sleeper::spawn()).unwrap();
            }
        });
        Parent { tid: tid_rx.recv().unwrap(), ask: Some(ask), handle: Some(handle) }
    }

    fn child(&self) -> Sleeper {
        let (tx, rx) = std::sync::mpsc::channel();
        self.ask.as_ref().unwrap().send(tx).unwrap();
        rx.recv().unwrap()
    }
}

impl Drop for Parent {
    fn drop(&mut self) {
        drop(self.ask.take());
        if let Some(h) = self.handle.take() {
            let _ = h.join();
        }
    }
}

#[test]
fn threads_born_of_a_reniced_thread_get_their_process_value_back_after_a_crash_too() {
    if skip_unless_root("threads_born_of_a_reniced_thread_get_their_process_value_back_after_a_crash_too") {
        return;
    }
    // Values no other test of this process sets through a log: the sweep looks at every thread
    // of the process.
    let (raised, lowered) = (-6, 8);
    let dir = TempDir::new("heirs");
    let pid = std::process::id();
    let baseline = thread_stat(pid, pid as Tid).unwrap().nice;
    let parent = Parent::spawn();
    let older = Sleeper::spawn();
    let older_nice = get_nice(older.tid).unwrap();
    // `older` starts at least a clock tick before the first change.
    std::thread::sleep(std::time::Duration::from_millis(30));
    let mut log = RestoreLog::create(state_path(&dir)).unwrap();
    log.set_nice(pid, parent.tid, raised).unwrap();
    let (changed, untouched) = (parent.child(), parent.child());
    assert_eq!(get_nice(untouched.tid).unwrap(), raised, "Linux starts a thread at its creator's value");
    // Someone else gives a thread older than moirai's first change moirai's value: no heir.
    crate::nice::set_nice(older.tid, raised).unwrap();
    log.set_nice(pid, changed.tid, lowered).unwrap();
    assert_eq!(log.original_nice(pid, changed.tid), Some(baseline), "an heir's original is its process's value");
    // A thread born after the first change, at a value of its own that moirai then sets for the
    // first time, inherited nothing: its original is its own.
    let (own, own_value) = (Sleeper::spawn(), 12);
    crate::nice::set_nice(own.tid, own_value).unwrap();
    log.set_nice(pid, own.tid, own_value).unwrap();
    assert_eq!(log.original_nice(pid, own.tid), Some(own_value));
    let on_disk = read_state(log.path());
    assert_eq!(on_disk.heirs.len(), 1);
    assert_eq!((on_disk.heirs[0].baseline, &on_disk.heirs[0].values), (baseline, &vec![raised, lowered, own_value]));

    // The middleware is killed: the next start restores from the file.
    let path = log.path().to_path_buf();
    std::mem::forget(log);
    let report = RestoreLog::restore_from(&path).unwrap();
    assert!(report.is_clean(), "{report}");
    assert_eq!((report.nice_restored, report.heirs_restored), (3, 1), "{report}");
    assert!(report.to_string().contains("4 nice values (1 of threads born at a value moirai set)"), "{report}");
    assert_eq!(get_nice(own.tid).unwrap(), own_value, "its own value back");
    for (what, tid) in
        [("the reniced thread", parent.tid), ("its changed heir", changed.tid), ("its untouched heir", untouched.tid)]
    {
        assert_eq!(get_nice(tid).unwrap(), baseline, "{what}");
    }
    assert_eq!(
        get_nice(older.tid).unwrap(),
        raised,
        "a thread moirai never touched and did not father keeps its value"
    );
    crate::nice::set_nice(older.tid, older_nice).unwrap();
    assert!(!path.exists());
}

#[test]
fn threads_born_of_a_reniced_thread_can_get_their_process_value_back_while_moirai_runs() {
    if skip_unless_root("threads_born_of_a_reniced_thread_can_get_their_process_value_back_while_moirai_runs") {
        return;
    }
    // A value no other test of this process sets through a log.
    let raised = -7;
    let dir = TempDir::new("heirs-live");
    let pid = std::process::id();
    let baseline = thread_stat(pid, pid as Tid).unwrap().nice;
    let parent = Parent::spawn();
    let mut log = RestoreLog::create(state_path(&dir)).unwrap();
    assert!(!log.follows_heirs(pid));
    log.set_nice(pid, parent.tid, raised).unwrap();
    assert!(log.follows_heirs(pid));
    let (heir, scheduled) = (parent.child(), parent.child());
    log.set_nice(pid, scheduled.tid, raised).unwrap();
    assert_eq!(get_nice(heir.tid).unwrap(), raised, "Linux starts a thread at its creator's value");
    // Every candidate: the reniced thread and the scheduled heir are moirai's, the other heir is
    // set back, a thread that ended is passed over.
    let gone = { Sleeper::spawn().tid };
    let (reset, failures) = log.reset_heirs(pid, &[parent.tid, heir.tid, scheduled.tid, gone]);
    assert_eq!((reset, failures), (1, Vec::<String>::new()));
    assert_eq!(get_nice(heir.tid).unwrap(), baseline, "the unscheduled heir has its process's value");
    assert_eq!(get_nice(parent.tid).unwrap(), raised);
    assert_eq!(get_nice(scheduled.tid).unwrap(), raised);
    assert_eq!(log.reset_heirs(pid, &[heir.tid]).0, 0, "done once");
    let report = log.restore();
    assert!(report.is_clean(), "{report}");
    for tid in [parent.tid, heir.tid, scheduled.tid] {
        assert_eq!(get_nice(tid).unwrap(), baseline);
    }
}

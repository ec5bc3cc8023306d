//! cgroup v1 on the real kernel, through the public API the middleware uses: groups under the
//! cpu mount, `cpu.shares`, moving threads, and restoring everything. Needs root and the cpu
//! controller on a v1 hierarchy (this project's machines are hybrid); skips with a printed
//! reason otherwise.

mod common;

use std::fs;

use common::{undo_v1, unique, v1_cpu_or_skip, Cleanup, Sleeper, TempDir};
use moirai_os::cgroup::{thread_cgroup, CgroupTree};
use moirai_os::{OsError, RestoreLog, Tid};

fn tids_in(file: &std::path::Path) -> Vec<Tid> {
    fs::read_to_string(file).unwrap().split_whitespace().map(|s| s.parse().unwrap()).collect()
}

#[test]
fn groups_weights_membership_and_restore() {
    let Some(h) = v1_cpu_or_skip("groups_weights_membership_and_restore") else { return };
    let pid = std::process::id();
    let (a, b, spawner) = (Sleeper::spawn(), Sleeper::spawn(), Sleeper::spawn());
    let home = thread_cgroup(pid, a.tid, &h).unwrap();
    let base = unique("moirai-test-v1");
    let base_dir = h.mount.join(&base);
    let inst = base_dir.join("node1");
    let (q1, q2) = (inst.join("q1"), inst.join("q2"));
    let _undo = Cleanup::new({
        let (home, tids) = (home.clone(), vec![a.tid, b.tid, spawner.tid]);
        let dirs = vec![q1.clone(), q2.clone(), inst.clone(), base_dir.clone()];
        move || undo_v1(&home, &tids, &dirs)
    });
    let state = TempDir::new("v1");
    let mut log = RestoreLog::create(state.0.join("state.json")).unwrap();
    let mut tree = CgroupTree::create_under(&mut log, &h, &base, "node1").unwrap();
    assert_eq!(tree.instance_dir(), inst);
    assert_eq!(tree.ensure_group(&mut log, "q1").unwrap(), q1);
    assert_eq!(tree.ensure_group(&mut log, "q2").unwrap(), q2);

    // Weights: cpu.shares, validated against the kernel's range before writing.
    tree.set_weight("q1", 4096).unwrap();
    tree.set_weight("q2", 512).unwrap();
    tree.set_instance_weight(40_000).unwrap();
    assert_eq!(fs::read_to_string(q1.join("cpu.shares")).unwrap().trim(), "4096");
    assert_eq!(tree.weight("q2").unwrap(), 512);
    assert_eq!(fs::read_to_string(inst.join("cpu.shares")).unwrap().trim(), "40000");
    let err = tree.set_weight("q1", 1).unwrap_err();
    assert!(matches!(err, OsError::WeightOutOfRange { min: 2, max: 262_144, .. }), "{err}");

    // Threads move one by one (here in one batch, one fsync); /proc and the group's tasks
    // file agree. A bad entry fails alone.
    let results =
        tree.move_threads(&mut log, &[(pid, a.tid, "q1"), (pid, b.tid, "q1"), (pid, spawner.tid, "no-such-group")]);
    assert!(results[0].is_ok() && results[1].is_ok(), "{results:?}");
    assert!(matches!(results[2], Err(OsError::UnknownGroup { .. })), "{results:?}");
    tree.move_thread(&mut log, pid, spawner.tid, "q2").unwrap();
    assert_eq!(thread_cgroup(pid, a.tid, &h).unwrap(), q1);
    let cgroup_file = fs::read_to_string(format!("/proc/{pid}/task/{}/cgroup", a.tid)).unwrap();
    assert!(cgroup_file.lines().any(|l| l.ends_with(&format!("cpu:/{base}/node1/q1"))), "{cgroup_file}");
    let in_q1 = tids_in(&q1.join("tasks"));
    assert!(in_q1.contains(&a.tid) && in_q1.contains(&b.tid), "{in_q1:?}");
    assert_eq!(tree.threads_in("q2").unwrap(), vec![spawner.tid]);
    assert_eq!(tree.group_of(pid, a.tid).unwrap().as_deref(), Some("q1"));
    // Other threads of the process stay where they were: v1 placement is per thread.
    assert_eq!(thread_cgroup(pid, moirai_os::current_tid(), &h).unwrap(), home);

    // A second move keeps the first original in the record.
    tree.move_thread(&mut log, pid, a.tid, "q2").unwrap();
    assert_eq!(thread_cgroup(pid, a.tid, &h).unwrap(), q2);
    let recorded: serde_json::Value = serde_json::from_str(&fs::read_to_string(log.path()).unwrap()).unwrap();
    let a_record = recorded["threads"].as_array().unwrap().iter().find(|r| r["tid"] == a.tid).unwrap();
    assert_eq!(a_record["original"].as_str().unwrap(), home.to_str().unwrap());

    // Releasing a thread sends it home.
    tree.release_thread(&mut log, pid, b.tid).unwrap();
    assert_eq!(thread_cgroup(pid, b.tid, &h).unwrap(), home);

    // A thread born inside a moirai group (its creator is in q2) is there without a record.
    let child = spawner.spawn_child();
    assert_eq!(thread_cgroup(pid, child.tid, &h).unwrap(), q2, "threads inherit their creator's group");

    // A thread that ended is reported as gone, not as a failure.
    let ended = common::ended_thread();
    assert!(tree.move_thread(&mut log, pid, ended, "q1").unwrap_err().is_thread_gone());

    let report = log.restore();
    assert!(report.is_clean(), "{report}");
    assert_eq!(report.groups_removed, 4, "base, instance, q1, q2: {report}");
    assert!(report.strays_moved >= 1, "the child born in q2 must be moved out: {report}");
    for tid in [a.tid, b.tid, spawner.tid, child.tid] {
        assert_eq!(thread_cgroup(pid, tid, &h).unwrap(), home, "thread {tid} must be back home");
    }
    assert!(!base_dir.exists(), "all groups moirai created are gone");
    assert!(!log.path().exists());
}

#[test]
fn removing_a_group_sends_its_threads_home_first() {
    let Some(h) = v1_cpu_or_skip("removing_a_group_sends_its_threads_home_first") else { return };
    let pid = std::process::id();
    let a = Sleeper::spawn();
    let home = thread_cgroup(pid, a.tid, &h).unwrap();
    let base = unique("moirai-test-v1");
    let base_dir = h.mount.join(&base);
    let _undo = Cleanup::new({
        let (home, tids) = (home.clone(), vec![a.tid]);
        let dirs = vec![base_dir.join("i/g"), base_dir.join("i"), base_dir.clone()];
        move || undo_v1(&home, &tids, &dirs)
    });
    let state = TempDir::new("v1rm");
    let mut log = RestoreLog::create(state.0.join("state.json")).unwrap();
    let mut tree = CgroupTree::create_under(&mut log, &h, &base, "i").unwrap();
    tree.ensure_group(&mut log, "g").unwrap();
    tree.move_thread(&mut log, pid, a.tid, "g").unwrap();
    tree.remove_group(&mut log, "g").unwrap();
    assert_eq!(thread_cgroup(pid, a.tid, &h).unwrap(), home);
    assert!(!base_dir.join("i/g").exists());
    assert_eq!(tree.groups().count(), 0);
    assert!(matches!(tree.move_thread(&mut log, pid, a.tid, "g"), Err(OsError::UnknownGroup { .. })));
    let report = log.restore();
    assert!(report.is_clean(), "{report}");
    assert_eq!(report.groups_removed, 2, "{report}");
    assert!(!base_dir.exists());
}

/// With `CONFIG_RT_GROUP_SCHED`, a new group has no real-time budget: a thread in it cannot be
/// made real-time until [`share_rt_runtime`] gives the instance's groups one. The thread only
/// blocks, so being real-time costs the machine nothing; everything is restored, class first.
#[test]
fn real_time_threads_in_moirai_groups_need_the_budget_share_rt_runtime_gives() {
    use moirai_os::cgroup::rt_budget::{rt_runtime_us, share_rt_runtime};
    use moirai_os::realtime::{get_sched_class, rt_throttling, set_sched_class, SchedClass};
    let Some(h) = v1_cpu_or_skip("real_time_threads_in_moirai_groups_need_the_budget_share_rt_runtime_gives") else {
        return;
    };
    if rt_runtime_us(&h.mount).unwrap().is_none() || rt_throttling().unwrap().is_none() {
        common::skip(
            "real_time_threads_in_moirai_groups_need_the_budget: no CONFIG_RT_GROUP_SCHED or no RT throttling",
        );
        return;
    }
    let pid = std::process::id();
    let a = Sleeper::spawn();
    let home = thread_cgroup(pid, a.tid, &h).unwrap();
    let base = unique("moirai-test-rt");
    let base_dir = h.mount.join(&base);
    let inst = base_dir.join("node1");
    let (g1, g2) = (inst.join("g1"), inst.join("g2"));
    let _undo = Cleanup::new({
        let (home, tid) = (home.clone(), a.tid);
        let dirs = vec![g1.clone(), g2.clone(), inst.clone(), base_dir.clone()];
        move || {
            let _ = set_sched_class(tid, SchedClass::Other);
            undo_v1(&home, &[tid], &dirs)
        }
    });
    let state = TempDir::new("v1-rt");
    let mut log = RestoreLog::create(state.0.join("state.json")).unwrap();
    let mut tree = CgroupTree::create_under(&mut log, &h, &base, "node1").unwrap();
    tree.ensure_group(&mut log, "g1").unwrap();
    tree.move_thread(&mut log, pid, a.tid, "g1").unwrap();
    assert_eq!(rt_runtime_us(&g1).unwrap(), Some(0), "a new group has no real-time budget");
    let refused = set_sched_class(a.tid, SchedClass::RoundRobin(5)).unwrap_err();
    assert!(matches!(refused, OsError::RealTimeRefused { .. }), "{refused}");
    assert!(refused.to_string().contains("cpu.rt_runtime_us"), "the error names the budget: {refused}");

    let share = share_rt_runtime(&tree, &log).unwrap().expect("v1 with RT group scheduling");
    assert!(share.instance_us > 0 && share.per_group_us == share.instance_us, "{share:?}");
    assert_eq!(rt_runtime_us(&g1).unwrap(), Some(share.per_group_us));
    log.set_sched_class(pid, a.tid, SchedClass::RoundRobin(5)).unwrap();
    assert_eq!(get_sched_class(a.tid).unwrap(), SchedClass::RoundRobin(5));

    // A second group halves the shares; the first shrinks before the second grows.
    tree.ensure_group(&mut log, "g2").unwrap();
    let share = share_rt_runtime(&tree, &log).unwrap().unwrap();
    assert_eq!(share.groups.len(), 2);
    assert_eq!(rt_runtime_us(&g1).unwrap(), Some(share.instance_us / 2));
    assert_eq!(rt_runtime_us(&g2).unwrap(), Some(share.instance_us / 2));

    // Restore: the class first (a real-time thread could not leave for a group without a
    // budget), then the thread home, then the groups.
    let report = log.restore();
    assert!(report.is_clean(), "{report}");
    assert_eq!(report.classes_restored, 1, "{report}");
    assert_eq!(get_sched_class(a.tid).unwrap(), SchedClass::Other);
    assert_eq!(thread_cgroup(pid, a.tid, &h).unwrap(), home);
    assert!(!base_dir.exists());
}

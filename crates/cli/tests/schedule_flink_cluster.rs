//! `moirai schedule` on a real standalone Flink cluster of two "nodes": a JobManager JVM in the
//! root network namespace and two TaskManager JVMs, each in a network namespace of its own with an
//! address of its own (`moirai_bench::flink_cluster`, `moirai_bench::netns`). A Linear Road job
//! at parallelism 2 spreads over both TaskManagers, its rebalance edges carrying tuples between
//! them over the network stack. One middleware per node, each told its node's TaskManager
//! (`--flink-taskmanager`), schedules exactly that TaskManager's subtask threads (checked against
//! thread dumps taken here) and never one of the other's; killing one TaskManager leaves the
//! other node's middleware scheduling the restarted job and the killed node's idle, saying so;
//! the TaskManager started again is attached again, and the JobManager's end is reported.
//!
//! One cluster for the whole binary (one test). Everything started here is stopped by its PID and
//! the namespaces removed when the guards drop, also when a test fails. Needs root (namespaces,
//! CAP_SYS_NICE) and a JDK with Maven; without them the test says so and skips.

use std::collections::{BTreeMap, BTreeSet};
use std::io::{Read, Write};
use std::net::TcpListener;

use moirai_bench::flink_cluster::{ClusterSpec, FlinkCluster};
use moirai_bench::process::file_tail;

#[path = "common/spe.rs"]
#[allow(dead_code)]
mod spe;
use spe::*;

/// Every thread of a JVM as a dump taken here with `jcmd` lists it: (name, Linux tid). Names
/// repeat: a task with several outputs has one `OutputFlusher for <task>` per output.
fn dump(pid: u32) -> Vec<(String, i32)> {
    let out = std::process::Command::new("jcmd").args([pid.to_string().as_str(), "Thread.print"]).output().unwrap();
    assert!(out.status.success(), "jcmd failed: {}", String::from_utf8_lossy(&out.stderr));
    String::from_utf8_lossy(&out.stdout)
        .lines()
        .filter_map(|l| {
            let name = l.strip_prefix('"')?.split('"').next()?;
            let nid = l.split(" nid=0x").nth(1)?.split_whitespace().next()?;
            Some((name.to_string(), i32::from_str_radix(nid, 16).ok()?))
        })
        .collect()
}

/// The subtask threads of the Linear Road job in a dump: tid → the subtask (`"Source:
/// linear_road_lachesis/source (1/2)"`), task threads and their helpers alike.
fn lr_threads(pid: u32) -> BTreeMap<i32, String> {
    let mut out = BTreeMap::new();
    for (name, tid) in dump(pid) {
        // `Time Trigger for …`: a FLIP-27 source's timer thread.
        let task = ["Legacy Source Thread - ", "OutputFlusher for ", "System Time Trigger for ", "Time Trigger for "]
            .iter()
            .find_map(|p| name.strip_prefix(p))
            .unwrap_or(&name);
        if let Some((subtask, attempt)) = task.rsplit_once(")#") {
            if subtask.contains("linear_road_lachesis/") && attempt.parse::<u32>().is_ok() {
                out.insert(tid, format!("{subtask})"));
            }
        }
    }
    out
}

fn middleware(url: &str, tm: &str, dir: &std::path::Path, port: u16) -> Proc {
    let state = dir.join(format!("state-{tm}.json")).display().to_string();
    Proc::spawn(&[
        "schedule",
        "--flink",
        url,
        "--flink-taskmanager",
        tm,
        "--policy",
        "qs",
        "--period",
        "500ms",
        "--nice-best",
        "-10",
        "--nice-worst",
        "10",
        "--activation",
        "always",
        "--state-file",
        &state,
        "--metrics-addr",
        &format!("127.0.0.1:{port}"),
    ])
}

/// Waits until the middleware at `port` applied a nice value, as /proc shows it, to every subtask
/// thread of TaskManager `pid` (from a dump taken here: tid → subtask) and to no other thread;
/// returns those threads.
fn wait_exactly(what: &str, port: u16, pid: u32) -> Result<BTreeMap<i32, String>, String> {
    let mut expected = BTreeMap::new();
    let deadline = std::time::Instant::now() + PATIENCE;
    let mut check = || {
        // Applied first: a thread the middleware found after this dump is in the next one.
        let a = applied(port, "qs");
        expected = lr_threads(pid);
        let foreign: Vec<_> = a.iter().filter(|(tid, _)| !expected.contains_key(tid)).collect();
        if !foreign.is_empty() {
            let owners: Vec<String> = foreign
                .iter()
                .map(|(tid, _)| {
                    let dump = dump(pid);
                    let named: Vec<&String> = dump.iter().filter(|(_, t)| *t == **tid).map(|(n, _)| n).collect();
                    let stat = moirai_os::proc::thread_stat(pid, **tid).map(|s| s.name);
                    format!("{tid}: in dump of {pid} as {named:?}, /proc/{pid}/task: {stat:?}")
                })
                .collect();
            return Err(format!(
                "applied to threads that are not this TaskManager's subtasks': {foreign:?} ({owners:?})"
            ));
        }
        let missing: Vec<_> = expected
            .iter()
            .filter(|(tid, subtask)| !a.get(tid).is_some_and(|(op, v)| op == *subtask && *v == nice(pid, **tid) as i64))
            .collect();
        if missing.is_empty() {
            Ok(())
        } else {
            Err(format!("not (yet) applied: {missing:?}"))
        }
    };
    while let Err(why) = check() {
        if std::time::Instant::now() > deadline {
            return Err(format!("timed out waiting for {what}: {why}"));
        }
        std::thread::sleep(std::time::Duration::from_millis(200));
    }
    Ok(expected)
}

/// Fails the test with `why` and what the middleware `mw` logged (it is stopped for that).
fn fail(mw: Proc, why: String) -> ! {
    mw.signal(libc::SIGTERM);
    let (_, err) = mw.wait();
    panic!("{why}\nthe middleware's log:\n{err}");
}

#[test]
fn one_middleware_per_node_schedules_its_own_taskmanager_and_survives_the_others_loss() {
    let test = "one_middleware_per_node_schedules_its_own_taskmanager_and_survives_the_others_loss";
    let Some(jobs) = flink_jobs(test) else { return };
    let Some(()) = moirai_bench::requires::or_skip(
        test,
        moirai_bench::requires::on_path("ip").map(|_| ()).ok_or("needs `ip` (apt-get install iproute2)".to_string()),
    ) else {
        return;
    };
    let spec = ClusterSpec { taskmanagers: 2, slots: 2, namespaces: true };
    let mut cluster = FlinkCluster::start(&jobs, &spec).unwrap_or_else(|e| panic!("the cluster did not start: {e}"));
    let url = cluster.rest_url();
    let tms: Vec<(String, u32)> =
        cluster.taskmanagers().iter().map(|t| (t.id.clone(), t.pid().expect("running"))).collect();
    let tms_hosts: Vec<String> = cluster.taskmanagers().iter().map(|t| t.host.clone()).collect();
    let netns: BTreeSet<_> = cluster.taskmanagers().iter().filter_map(|t| t.netns.clone()).collect();
    assert_eq!(netns.len(), 2, "each TaskManager in a namespace of its own");
    let dir = temp_dir("cluster");
    let args: Vec<String> =
        ["--rate", "3000", "--duration", "10m", "--parallelism", "2"].iter().map(|s| s.to_string()).collect();
    let _client = cluster
        .submit(&jobs, "linear-road", &args, &dir.0.join("client.log"))
        .unwrap_or_else(|e| panic!("cannot submit: {e}"));
    let client_log = dir.0.join("client.log");
    wait_for("the job running, every subtask deployed", || {
        cluster.running_job().map(|_| ()).map_err(|e| format!("{e}; the client's log: {}", file_tail(&client_log, 20)))
    });
    let job = cluster.running_job().unwrap();

    // Every vertex has one subtask on each TaskManager, and the edges are rebalances: tuples
    // cross from one node to the other.
    let placement = cluster.placement(&job).unwrap();
    let mut by_vertex: BTreeMap<&str, BTreeSet<&str>> = BTreeMap::new();
    for (vertex, _, _, tm) in &placement {
        by_vertex.entry(vertex).or_default().insert(tm);
    }
    assert_eq!(by_vertex.len(), 9, "{placement:?}");
    for (vertex, on) in &by_vertex {
        assert_eq!(on.len(), 2, "{vertex} runs on both TaskManagers: {placement:?}");
    }

    let befores: Vec<BTreeMap<i32, i32>> = tms.iter().map(|(_, pid)| thread_nices(*pid)).collect();
    let ports = [free_port(), free_port(), free_port()];
    let mut mws: Vec<Option<Proc>> = (0..2).map(|k| Some(middleware(&url, &tms[k].0, &dir.0, ports[k]))).collect();
    // A node without a TaskManager of the cluster: idle.
    let stray = middleware(&url, "moirai-tm9", &dir.0, ports[2]);
    for k in 0..2 {
        let e = wait_exactly(&format!("middleware {} on its own subtasks", tms[k].0), ports[k], tms[k].1)
            .unwrap_or_else(|e| fail(mws[k].take().unwrap(), e));
        // 9 subtasks per TaskManager, each with its task thread; the legacy source thread, and at
        // least one output flusher per subtask but the sink: 9 + 1 + 8.
        assert!(e.values().collect::<BTreeSet<_>>().len() == 9 && e.len() >= 18, "{}: {e:?}", tms[k].0);
        let a = applied(ports[k], "qs");
        assert_untouched(tms[k].1, &befores[k], &a);
    }
    assert!(applied(ports[2], "qs").is_empty(), "no TaskManager, nothing applied");

    // Node 1 fails: its TaskManager is killed outright. The job restarts on node 2's slots.
    cluster.kill_taskmanager(0);
    let (tm2, pid2) = (&tms[1].0, tms[1].1);
    wait_for("the job restarted with every subtask on the surviving TaskManager", || {
        let job = cluster.running_job()?;
        let p = cluster.placement(&job)?;
        if p.len() == 18 && p.iter().all(|(_, _, status, tm)| status == "RUNNING" && tm == tm2) {
            Ok(())
        } else {
            Err(format!("{p:?}"))
        }
    });
    let e = wait_exactly("the surviving node's middleware on the restarted job", ports[1], pid2)
        .unwrap_or_else(|e| fail(mws[1].take().unwrap(), e));
    assert_eq!(e.values().collect::<BTreeSet<_>>().len(), 18, "{e:?}");

    // Node 2's middleware restores everything it changed when it stops.
    let (mw1, mw2) = (mws[0].take().unwrap(), mws[1].take().unwrap());
    mw2.signal(libc::SIGTERM);
    let (code, err) = mw2.wait();
    assert_eq!(code, Some(0), "{err}");
    assert_restored(pid2, &befores[1]);
    for (tid, nice) in thread_nices(pid2) {
        assert_eq!(nice, 0, "thread {tid} of the surviving TaskManager restored (new threads start at 0): {err}");
    }

    // Node 1 comes back (a TaskManager joining late): its middleware, idle meanwhile, attaches
    // again. (The running job stays where it is: Flink does not move running subtasks.)
    cluster.restart_taskmanager(0, &jobs).unwrap_or_else(|e| panic!("{e}"));
    wait_for("the restarted TaskManager registered", || {
        let r = cluster.registered()?;
        if r.contains(&tms[0].0) {
            Ok(())
        } else {
            Err(format!("{r:?}"))
        }
    });
    std::thread::sleep(std::time::Duration::from_secs(2));

    // The JobManager goes: the middlewares left say so and keep running.
    cluster.stop_jobmanager();
    std::thread::sleep(std::time::Duration::from_secs(2));
    for (mw, tm) in [(mw1, "moirai-tm1"), (stray, "moirai-tm9")] {
        mw.signal(libc::SIGTERM);
        let (code, err) = mw.wait();
        assert_eq!(code, Some(0), "{tm}: {err}");
        let said = |what: &str| assert!(err.contains(what), "{tm}'s middleware says {what:?}: {err}");
        if tm == "moirai-tm1" {
            said(&format!("TaskManager moirai-tm1 ({}:", tms_hosts[0]));
            said("is this node's: scheduling its subtasks only");
            said("TaskManager moirai-tm1 left the cluster (registered: moirai-tm2); nothing to schedule on this node");
            let attached = err.matches("is this node's: scheduling its subtasks only").count();
            assert_eq!(attached, 2, "attached at the start and when its TaskManager joined again: {err}");
        } else {
            said("no TaskManager 'moirai-tm9' in the cluster (registered: moirai-tm1, moirai-tm2)");
        }
        said("unavailable: cannot reach Flink's REST API");
    }
    drop(cluster);
    let left: Vec<String> = std::process::Command::new("ip")
        .args(["netns", "list"])
        .output()
        .map(|o| String::from_utf8_lossy(&o.stdout).into_owned())
        .unwrap_or_default()
        .lines()
        .filter(|l| netns.iter().any(|n| l.starts_with(n.as_str())))
        .map(str::to_string)
        .collect();
    assert!(left.is_empty(), "namespaces left behind: {left:?}");
}

#[test]
fn a_url_that_is_no_flink_jobmanager_is_named_and_the_middleware_waits() {
    let test = "a_url_that_is_no_flink_jobmanager_is_named_and_the_middleware_waits";
    if moirai_bench::requires::or_skip(test, if is_root() { Ok(()) } else { Err("needs root".into()) }).is_none() {
        return;
    }
    // Some HTTP server, not Flink's: 404 for everything.
    let server = TcpListener::bind("127.0.0.1:0").unwrap();
    let port = server.local_addr().unwrap().port();
    std::thread::spawn(move || {
        for mut conn in server.incoming().flatten() {
            let mut buf = [0u8; 4096];
            let _ = conn.read(&mut buf);
            let _ = conn.write_all(b"HTTP/1.1 404 Not Found\r\nContent-Length: 0\r\nConnection: close\r\n\r\n");
        }
    });
    let dir = temp_dir("notflink");
    let mw = middleware(&format!("http://127.0.0.1:{port}"), "tm-a", &dir.0, free_port());
    std::thread::sleep(std::time::Duration::from_secs(3));
    mw.signal(libc::SIGTERM);
    let (code, err) = mw.wait();
    assert_eq!(code, Some(0), "it waited for the SPE, then stopped cleanly: {err}");
    assert!(err.contains("answered HTTP 404: is") && err.contains("the REST API of a Flink JobManager"), "{err}");
}

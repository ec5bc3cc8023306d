//! `moirai schedule` on a real standalone Flink cluster of two "nodes": a JobManager JVM in the
//! root network namespace and two TaskManager JVMs, each in a network namespace of its own with an
//! address of its own (`moirai_bench::flink_cluster`, `moirai_bench::netns`). A Linear Road job
//! at parallelism 2 spreads over both TaskManagers, its rebalance edges carrying tuples between
//! them over the network stack. One middleware per node, each told its node's TaskManager
//! (`--flink-taskmanager`), schedules exactly that TaskManager's subtask threads (checked against
//! thread dumps taken here) and never one of the other's; killing one TaskManager leaves the
//! other node's middleware scheduling the restarted job and the killed node's idle, saying so;
//! the TaskManager started again is attached again, and the JobManager's end is reported.
//! Node 2's TaskManager joins late: its middleware starts before it exists (idle, saying why),
//! a short SYN job runs on node 1 alone (its client's summary has the counts and latencies the
//! probes bring back), then node 2's TaskManager starts and the Linear Road job lands on both.
//!
//! One cluster per Flink version (1.20 and 2.3, one test each, one after the other). Everything
//! started here is stopped by its PID and the namespaces removed when the guards drop, also when a
//! test fails. Needs root (namespaces, CAP_SYS_NICE) and a JDK with Maven; without them the test
//! says so and skips.

use std::collections::{BTreeMap, BTreeSet};
use std::io::{Read, Write};
use std::net::TcpListener;
use std::sync::atomic::AtomicBool;
use std::sync::Mutex;
use std::time::Instant;

use moirai_bench::flink::{FLINK, FLINK2};
use moirai_bench::flink_cluster::{ClusterSpec, FlinkCluster, HEARTBEAT_TIMEOUT};
use moirai_bench::jvm::{JvmJobs, JvmSystem};
use moirai_bench::process::{file_tail, Outcome};

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
            let seen: Vec<_> = missing
                .iter()
                .filter_map(|(tid, _)| {
                    a.get(tid).map(|(op, v)| {
                        let now = moirai_os::proc::thread_stat(pid, **tid).map(|s| s.nice);
                        format!("{tid}: {op:?} at {v}, /proc says {now:?}")
                    })
                })
                .collect();
            Err(format!(
                "not (yet) applied: {missing:?}; of these, the middleware reports {seen:?}; all it reports: {a:?}"
            ))
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

/// One cluster at a time: the two versions' tests would otherwise start two clusters (six JVMs)
/// at once on a 2-core machine.
static ONE_CLUSTER: Mutex<()> = Mutex::new(());

#[test]
fn flink_1_20_one_middleware_per_node_schedules_its_own_taskmanager_and_survives_the_others_loss() {
    cluster_test(
        &FLINK,
        "flink_1_20_one_middleware_per_node_schedules_its_own_taskmanager_and_survives_the_others_loss",
    );
}

#[test]
fn flink_2_one_middleware_per_node_schedules_its_own_taskmanager_and_survives_the_others_loss() {
    cluster_test(&FLINK2, "flink_2_one_middleware_per_node_schedules_its_own_taskmanager_and_survives_the_others_loss");
}

/// A short SYN job on the cluster (node 1 alone): its client's summary has what the probes
/// counted and measured in the TaskManagers, and each probe shares the task of its source or sink.
fn cluster_results(cluster: &FlinkCluster, jobs: &JvmJobs, dir: &std::path::Path) {
    let args: Vec<String> = ["--ops", "2", "--rate", "2000", "--duration", "6s", "--parallelism", "2"]
        .iter()
        .map(|s| s.to_string())
        .collect();
    let log = dir.join("syn-client.log");
    let mut client = cluster.submit(jobs, "syn", &args, &log).unwrap_or_else(|e| panic!("cannot submit: {e}"));
    wait_for("the SYN job running", || {
        cluster.running_job().map(|_| ()).map_err(|e| format!("{e}; the client's log: {}", file_tail(&log, 20)))
    });
    let job = cluster.running_job().unwrap();
    let vertices: BTreeSet<String> = cluster.placement(&job).unwrap().into_iter().map(|p| p.0).collect();
    let expected: BTreeSet<String> = [
        "Source: syn0/source -> syn0/ingress-probe",
        "syn0/op1",
        "syn0/op2",
        "syn0/latency-probe -> syn0/sink: Writer",
    ]
    .iter()
    .map(|s| s.to_string())
    .collect();
    assert_eq!(vertices, expected, "the probes chained to the source and the sink, nothing else chained");
    let outcome = client.wait_until(Instant::now() + PATIENCE, &AtomicBool::new(false));
    let (stdout, _) = client.output();
    assert!(
        matches!(outcome, Outcome::Exited(s) if s.success()),
        "the client: {outcome:?}; its log: {}",
        file_tail(&log, 30)
    );
    let line = stdout.lines().last().unwrap_or("");
    let s: serde_json::Value =
        serde_json::from_str(line).unwrap_or_else(|e| panic!("no summary ({e}): {stdout}\n{}", file_tail(&log, 30)));
    let num = |k: &str| s[k].as_f64().unwrap_or_else(|| panic!("{k} is not a number: {s}"));
    let (tuples_in, tuples_out) = (num("tuples_in"), num("tuples_out"));
    // 2000 tuples/s for 6 s; the sources may lag a little behind schedule on a busy machine.
    assert!((10_000.0..=12_100.0).contains(&tuples_in), "tuples_in: {s}");
    assert_eq!(tuples_out, tuples_in, "selectivity 1, no failure: every tuple reaches a sink: {s}");
    let ingress = num("ingress_tps");
    assert!((1_600.0..=2_200.0).contains(&ingress), "ingress_tps near the offered 2000: {s}");
    assert!(num("egress_tps") > 1_000.0, "{s}");
    let e2e = &s["e2e_latency_ms"];
    let measured = e2e["count"].as_f64().unwrap_or(0.0);
    // The measured window is the last 80 % of the run (warm-up 0.2): about 9600 tuples.
    assert!(measured > 0.5 * tuples_out && measured < tuples_out, "e2e latency of the measured tuples: {s}");
    assert!(e2e["p99"].as_f64().is_some_and(|p| p > 0.0 && p < 5_000.0), "{s}");
    assert!(s["latency_ms"]["count"].as_f64() == Some(measured), "{s}");
    assert_eq!(num("threads"), 8.0, "4 tasks at parallelism 2: {s}");
}

fn cluster_test(system: &'static JvmSystem, test: &str) {
    let _one = ONE_CLUSTER.lock().unwrap_or_else(|e| e.into_inner());
    let Some(jobs) = flink_jobs_of(system, test) else { return };
    let Some(()) = moirai_bench::requires::or_skip(
        test,
        moirai_bench::requires::on_path("ip").map(|_| ()).ok_or("needs `ip` (apt-get install iproute2)".to_string()),
    ) else {
        return;
    };
    let started = Instant::now();
    // Node 2's TaskManager joins late.
    let spec = ClusterSpec {
        taskmanagers: 2,
        slots: 2,
        namespaces: true,
        heartbeat_timeout: HEARTBEAT_TIMEOUT,
        deferred: 1,
        reporter: true,
    };
    let mut cluster = FlinkCluster::start(&jobs, &spec).unwrap_or_else(|e| panic!("the cluster did not start: {e}"));
    let url = cluster.rest_url();
    let ids: Vec<String> = cluster.taskmanagers().iter().map(|t| t.id.clone()).collect();
    assert!(cluster.taskmanagers()[1].pid().is_none(), "node 2's TaskManager is not started yet");
    let tms_hosts: Vec<String> = cluster.taskmanagers().iter().map(|t| t.host.clone()).collect();
    let netns: BTreeSet<_> = cluster.taskmanagers().iter().filter_map(|t| t.netns.clone()).collect();
    assert_eq!(netns.len(), 2, "each TaskManager in a namespace of its own");
    let dir = temp_dir("cluster");
    let ports = [free_port(), free_port(), free_port()];
    // A middleware per node, node 2's before its TaskManager exists; and a node that never has one.
    let mut mws: Vec<Option<Proc>> = (0..2).map(|k| Some(middleware(&url, &ids[k], &dir.0, ports[k]))).collect();
    let stray = middleware(&url, "moirai-tm9", &dir.0, ports[2]);

    cluster_results(&cluster, &jobs, &dir.0);
    assert!(applied(ports[1], "qs").is_empty(), "node 2 has no TaskManager yet: nothing applied");

    // Node 2's TaskManager joins.
    cluster.start_taskmanager(1, &jobs).unwrap_or_else(|e| panic!("{e}"));
    wait_for("node 2's TaskManager registered", || {
        let r = cluster.registered()?;
        if r.len() == 2 {
            Ok(())
        } else {
            Err(format!("{r:?}"))
        }
    });
    let tms: Vec<(String, u32)> =
        cluster.taskmanagers().iter().map(|t| (t.id.clone(), t.pid().expect("running"))).collect();
    let args: Vec<String> =
        ["--rate", "3000", "--duration", "10m", "--parallelism", "2"].iter().map(|s| s.to_string()).collect();
    let _client = cluster
        .submit(&jobs, "linear-road", &args, &dir.0.join("client.log"))
        .unwrap_or_else(|e| panic!("cannot submit: {e}"));
    let client_log = dir.0.join("client.log");
    // The job's overview and its vertices' details are cached apart by the REST API (up to
    // `web.refresh-interval` each): both must show every subtask running on a TaskManager.
    wait_for("the job running, every subtask deployed", || {
        let job =
            cluster.running_job().map_err(|e| format!("{e}; the client's log: {}", file_tail(&client_log, 20)))?;
        let p = cluster.placement(&job)?;
        if p.len() == 18 && p.iter().all(|(_, _, status, _)| status == "RUNNING") {
            Ok(())
        } else {
            Err(format!("{p:?}"))
        }
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

    // Each TaskManager serves its own subtasks' counters by its Prometheus reporter, at its
    // node's address (what the lab's middlewares read).
    let mut reported = Vec::new();
    for tm in cluster.taskmanagers() {
        let url = tm.metrics_url.as_deref().expect("the cluster has reporters");
        // A reporter busy with the job may drop one connection mid-answer (seen once in CI:
        // "Unexpected EOF"): ask again for up to 10 s before calling it broken.
        let deadline = std::time::Instant::now() + std::time::Duration::from_secs(10);
        let text = loop {
            match ureq::get(url)
                .call()
                .map_err(|e| e.to_string())
                .and_then(|r| r.into_string().map_err(|e| e.to_string()))
            {
                Ok(text) => break text,
                Err(e) if std::time::Instant::now() >= deadline => panic!("{url}: {e}"),
                Err(_) => std::thread::sleep(std::time::Duration::from_millis(500)),
            }
        };
        let subtasks: BTreeSet<(String, String)> = text
            .lines()
            .filter(|l| {
                l.starts_with("flink_taskmanager_job_task_numRecordsIn{") && l.contains("linear_road_lachesis/")
            })
            .filter_map(|l| {
                let label = |k: &str| Some(l.split(&format!("{k}=\"")).nth(1)?.split('"').next()?.to_string());
                Some((label("task_name")?, label("subtask_index")?))
            })
            .collect();
        assert_eq!(subtasks.len(), 9, "{}: one subtask of each of the 9 vertices: {subtasks:?}", tm.id);
        reported.push(subtasks);
    }
    assert!(
        reported[0].is_disjoint(&reported[1]),
        "each reporter reports its own TaskManager's subtasks: {reported:?}"
    );

    // What the middlewares changed before this job (node 1's threads of the SYN job) is gone with
    // that job's threads: the befores are the TaskManagers' threads now.
    let befores: Vec<BTreeMap<i32, i32>> = tms.iter().map(|(_, pid)| thread_nices(*pid)).collect();
    for k in 0..2 {
        let e = wait_exactly(&format!("middleware {} on its own subtasks", tms[k].0), ports[k], tms[k].1)
            .unwrap_or_else(|e| fail(mws[k].take().unwrap(), e));
        // 9 subtasks per TaskManager, each with its task thread (the probes share their source's and
        // sink's), and at least one output flusher per subtask but the sink: 9 + 8.
        assert!(e.values().collect::<BTreeSet<_>>().len() == 9 && e.len() >= 17, "{}: {e:?}", tms[k].0);
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
    // It started before its TaskManager existed, idle, and attached when it joined.
    let idle = "no TaskManager 'moirai-tm2' in the cluster (registered: moirai-tm1); nothing to schedule on this node";
    let attached = format!("TaskManager moirai-tm2 ({}:", tms_hosts[1]);
    assert!(
        err.find(idle).zip(err.find(&attached)).is_some_and(|(i, a)| i < a),
        "node 2's middleware idle, then attached: {err}"
    );
    // Every thread back at the JVM's value, also those born during the run of a reniced task
    // thread (Linux starts a thread at its creator's value): the restarted job's threads, timers,
    // and threads that are no subtask's, such as a Netty client a task thread opened (found at
    // the middleware's value in `befores`, taken after the middleware's first rounds).
    for (tid, nice) in thread_nices(pid2) {
        assert_eq!(nice, 0, "thread {tid} of the surviving TaskManager restored (new threads start at 0): {err}");
    }

    // Node 1 comes back (a TaskManager joining late): its middleware, idle meanwhile, attaches
    // again. (The running job stays where it is: Flink does not move running subtasks.)
    cluster.start_taskmanager(0, &jobs).unwrap_or_else(|e| panic!("{e}"));
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
            // Said once, while node 1's TaskManager was the only one (said again only when it changes).
            said("no TaskManager 'moirai-tm9' in the cluster (registered: moirai-tm1)");
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
    eprintln!("{test}: {:.0} s", started.elapsed().as_secs_f64());
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

/// The lab's `flink:qs/cluster=standalone:2`: a point on a standalone cluster started for it, one
/// middleware per TaskManager (each node's CPU reported), the cluster's CPU as the engine's, the
/// client's counts in the results; nothing left behind.
#[test]
fn a_lab_point_on_a_standalone_cluster_runs_one_middleware_per_node() {
    let test = "a_lab_point_on_a_standalone_cluster_runs_one_middleware_per_node";
    let _one = ONE_CLUSTER.lock().unwrap_or_else(|e| e.into_inner());
    let Some(_jobs) = flink_jobs_of(&FLINK, test) else { return };
    let dir = temp_dir("lab-cluster");
    let out = dir.0.join("out");
    let lab = std::process::Command::new(env!("CARGO_BIN_EXE_moirai"))
        .args(["bench", "syn", "--rates", "2000", "--duration", "8s", "--reps", "1"])
        .args(["--compare", "flink:qs/cluster=standalone:2", "--out"])
        .arg(&out)
        .args(["--", "--ops", "2", "--parallelism", "2"])
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    let lab_pid = lab.id();
    let o = lab.wait_with_output().unwrap();
    let err = String::from_utf8_lossy(&o.stderr);
    assert!(o.status.success(), "{err}");
    let results: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(out.join("results.json")).unwrap()).unwrap();
    let p = &results["points"][0];
    assert!(p["failure"].is_null(), "{p}");
    let nodes: Vec<f64> = p["middleware_cpu_nodes"].as_array().unwrap().iter().filter_map(|v| v.as_f64()).collect();
    assert_eq!(nodes.len(), 2, "one middleware per TaskManager: {p}");
    // Each node's CPU is measured from its process's CPU clock (nanoseconds; in /proc's 10 ms
    // clock ticks an idle middleware's few ms over the point's window read 0): more than nothing,
    // less than half a core.
    assert!(nodes.iter().all(|&c| c > 0.0 && c < 0.5), "{p}");
    let sum = p["middleware_cpu"].as_f64().unwrap();
    assert!((sum - nodes.iter().sum::<f64>()).abs() < 1e-9, "{p}");
    let run = &p["run"];
    assert!(run["cpu_cores"].as_f64().is_some_and(|c| c > 0.05), "the cluster's CPU: {run}");
    assert!(run["ingress_tps"].as_f64().is_some_and(|r| (1_600.0..=2_200.0).contains(&r)), "{run}");
    assert!(run["e2e_latency_ms"]["count"].as_f64().is_some_and(|c| c > 0.0), "{run}");
    // What each node's middleware said is kept, one log per node.
    for tm in ["moirai-tm1", "moirai-tm2"] {
        let log = out.join("middleware-logs").join(format!("flink_qs_cluster_standalone_2-2k-rep1-{tm}.log"));
        let said = std::fs::read_to_string(&log).unwrap_or_else(|e| panic!("{}: {e}", log.display()));
        assert!(said.contains(&format!("TaskManager {tm} (")) && said.contains("is this node's"), "{said}");
    }
    // The lab's namespaces are named after it: moirai-<pid>x<n>-n<k>.
    let namespaces = std::process::Command::new("ip").args(["netns", "list"]).output().unwrap();
    let mine = format!("moirai-{lab_pid}x");
    let left = String::from_utf8_lossy(&namespaces.stdout).lines().filter(|l| l.starts_with(&mine)).count();
    assert_eq!(left, 0, "namespaces left behind: {}", String::from_utf8_lossy(&namespaces.stdout));
}

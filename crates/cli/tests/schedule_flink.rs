//! `moirai schedule` against real Apache Flink jobs (`integrations/flink`, built with Maven on first
//! use): the middleware finds the TaskManager's JVM, maps every subtask to its Linux threads through
//! a thread dump, sets their nice values (checked in /proc against an independent thread dump
//! taken here), leaves the JVM's other threads alone, and restores everything when it stops.
//! With a moirai engine beside the Flink job, one middleware gives each SPE its cpu cgroup and
//! share and runs queue-size nice values inside. The driver reads Flink's own buffer queues
//! (`input_buffers`), full in front of the job's one heavy operator (`--heavy-op`), low behind it.
//!
//! Every process started here is stopped by its PID when its guard drops, also when a test fails.
//! The tests need root (CAP_SYS_NICE, cgroupfs) and a JDK with Maven; without them they say so and
//! skip.

use std::collections::{BTreeMap, BTreeSet};
use std::io::Read;
use std::net::TcpListener;
use std::path::PathBuf;
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use moirai_bench::flink::{FlinkJob, FlinkJobs};
use moirai_os::proc::thread_stat;

const BIN: &str = env!("CARGO_BIN_EXE_moirai");
/// Only turns a hang into a failure; nothing here asserts on speed.
const PATIENCE: Duration = Duration::from_secs(90);

/// A child process killed (by PID) when dropped.
struct Proc(Option<Child>);

impl Proc {
    fn spawn(args: &[&str]) -> Proc {
        let child = Command::new(BIN)
            .args(args)
            .stdout(Stdio::null())
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
    /// SIGTERM first, so that a middleware left running by a failed test still restores the
    /// nice values and removes the cgroups it made; SIGKILL after 10 s.
    fn drop(&mut self) {
        if let Some(mut c) = self.0.take() {
            // SAFETY: kill(2) on the pid of our own child, which we have not reaped yet.
            unsafe { libc::kill(c.id() as i32, libc::SIGTERM) };
            let deadline = Instant::now() + Duration::from_secs(10);
            while c.try_wait().ok().flatten().is_none() && Instant::now() < deadline {
                std::thread::sleep(Duration::from_millis(20));
            }
            let _ = c.kill();
            let _ = c.wait();
        }
    }
}

fn free_port() -> u16 {
    TcpListener::bind("127.0.0.1:0").unwrap().local_addr().unwrap().port()
}

fn wait_until(what: &str, mut ok: impl FnMut() -> bool) {
    wait_for(what, || if ok() { Ok(()) } else { Err(String::new()) });
}

/// Waits until `check` passes; a timeout fails with what it said last.
fn wait_for(what: &str, mut check: impl FnMut() -> Result<(), String>) {
    let deadline = Instant::now() + PATIENCE;
    while let Err(why) = check() {
        assert!(Instant::now() < deadline, "timed out waiting for {what}: {why}");
        std::thread::sleep(Duration::from_millis(100));
    }
}

/// A directory of the test's own, removed with the guard.
struct TempDir(PathBuf);

impl Drop for TempDir {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.0);
    }
}

fn temp_dir(test: &str) -> TempDir {
    let dir = std::env::temp_dir().join(format!("moirai-flink-test-{}-{test}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    TempDir(dir)
}

fn is_root() -> bool {
    // SAFETY: geteuid has no preconditions.
    unsafe { libc::geteuid() == 0 }
}

/// The Flink jobs, built on first use; `None` (test skipped, with the reason) without root or a JDK.
fn flink_jobs(test: &str) -> Option<FlinkJobs> {
    if !is_root() {
        eprintln!("SKIPPED {test}: needs root (CAP_SYS_NICE, cgroupfs)");
        return None;
    }
    Some(FlinkJobs::build().unwrap_or_else(|e| panic!("cannot build the Flink jobs: {e}")))
}

/// A SYN job of `ops` operators with cost, chaining off, running until stopped.
fn syn_job(jobs: &FlinkJobs, parallelism: u32) -> FlinkJob {
    let args: Vec<String> = [
        "--ops",
        "3",
        "--cost-ns",
        "2000",
        "--rate",
        "20000",
        "--duration",
        "10m",
        "--parallelism",
        &parallelism.to_string(),
    ]
    .iter()
    .map(|s| s.to_string())
    .collect();
    let mut job = FlinkJob::start(jobs, "syn", &args).unwrap_or_else(|e| panic!("cannot start the Flink job: {e}"));
    job.wait_running(PATIENCE).unwrap_or_else(|e| panic!("the Flink job did not come up: {e}"));
    job
}

/// The JVM's threads by name, from a thread dump taken here with `jcmd` (independently of the
/// middleware): name → Linux tid.
fn jvm_threads(pid: u32) -> BTreeMap<String, i32> {
    let out = Command::new("jcmd").args([pid.to_string().as_str(), "Thread.print"]).output().expect("jcmd runs");
    assert!(out.status.success(), "jcmd failed: {}", String::from_utf8_lossy(&out.stderr));
    let text = String::from_utf8_lossy(&out.stdout);
    text.lines()
        .filter_map(|l| {
            let name = l.strip_prefix('"')?.split('"').next()?;
            let nid = l.split(" nid=0x").nth(1)?.split_whitespace().next()?;
            Some((name.to_string(), i32::from_str_radix(nid, 16).ok()?))
        })
        .collect()
}

/// The subtask threads of the SYN job in a dump: tid → the subtask they work for
/// (`"syn0/op1 (1/2)"`), task threads and their helpers alike.
fn subtask_threads(threads: &BTreeMap<String, i32>) -> BTreeMap<i32, String> {
    let mut out = BTreeMap::new();
    for (name, &tid) in threads {
        let task = ["Legacy Source Thread - ", "OutputFlusher for ", "System Time Trigger for "]
            .iter()
            .find_map(|p| name.strip_prefix(p))
            .unwrap_or(name);
        if task.contains("syn0/") && task.ends_with(")#0") {
            out.insert(tid, task.trim_end_matches("#0").to_string());
        }
    }
    out
}

fn nice(pid: u32, tid: i32) -> i32 {
    thread_stat(pid, tid).unwrap().nice
}

/// What the middleware says policy `policy` applied, from its own /metrics: tid → (operator
/// label, value).
fn applied(port: u16, policy: &str) -> BTreeMap<i32, (String, i64)> {
    let Ok(resp) = ureq::get(&format!("http://127.0.0.1:{port}/metrics")).call() else { return BTreeMap::new() };
    let text = resp.into_string().unwrap();
    let label =
        |l: &str, key: &str| l.split(&format!("{key}=\"")).nth(1).unwrap().split('"').next().unwrap().to_string();
    text.lines()
        .filter(|l| l.starts_with("moirai_schedule_applied{") && label(l, "policy") == policy)
        .map(|l| {
            let v = l.rsplit(' ').next().unwrap().parse::<f64>().unwrap() as i64;
            (label(l, "tid").parse().unwrap(), (label(l, "operator"), v))
        })
        .collect()
}

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
fn qs_sets_the_nice_values_of_every_flink_subtask_thread_and_restores_them() {
    let Some(jobs) = flink_jobs("qs_sets_the_nice_values_of_every_flink_subtask_thread_and_restores_them") else {
        return;
    };
    let job = syn_job(&jobs, 2);
    let pid = job.pid();
    let all_before: BTreeMap<i32, i32> =
        moirai_os::proc::threads(pid).unwrap().into_iter().map(|t| (t.tid, t.nice)).collect();
    let dir = temp_dir("qs");
    let state = dir.0.join("state.json");
    let mw_port = free_port();
    let mw = Proc::spawn(&[
        "schedule",
        "--flink",
        job.rest_url(),
        "--policy",
        "qs",
        "--period",
        "500ms",
        "--nice-best",
        "-10",
        "--nice-worst",
        "10",
        "--state-file",
        &state.display().to_string(),
        "--metrics-addr",
        &format!("127.0.0.1:{mw_port}"),
    ]);
    // Source, 3 operators and sink at parallelism 2: 10 subtasks, each with its task thread, an
    // output flusher where it has outputs, and the sources' legacy source threads.
    let expected = subtask_threads(&jvm_threads(pid));
    let subtasks: BTreeSet<&String> = expected.values().collect();
    assert_eq!(subtasks.len(), 10, "{expected:?}");
    assert!(expected.len() >= 10 + 2 + 8, "task threads, legacy source threads, flushers: {expected:?}");
    // Queue-size scheduling has something to rank: in some round not every thread gets the same
    // value (queues are short at this rate, and may all be empty in one round).
    wait_until("a nice value applied to every subtask thread, as /proc shows it, not all equal", || {
        let a = applied(mw_port, "qs");
        let values: BTreeSet<i64> = a.values().map(|(_, v)| *v).collect();
        values.len() > 1
            && expected.iter().all(|(tid, subtask)| {
                a.get(tid)
                    .is_some_and(|(op, v)| op == subtask && (-10..=10).contains(v) && *v == nice(pid, *tid) as i64)
            })
    });
    let a = applied(mw_port, "qs");
    // Only the subtasks' threads were touched: the JVM's other threads (JobManager, network, GC,
    // ...) keep their nice values.
    assert!(a.keys().all(|tid| expected.contains_key(tid)), "applied to a thread that is no subtask's: {a:?}");
    for (tid, before) in &all_before {
        if !expected.contains_key(tid) {
            if let Ok(stat) = thread_stat(pid, *tid) {
                assert_eq!(stat.nice, *before, "thread {} ({tid}) was touched", stat.name);
            }
        }
    }
    mw.signal(libc::SIGTERM);
    let (code, err) = mw.wait();
    assert_eq!(code, Some(0), "{err}");
    for (tid, before) in &all_before {
        if let Ok(stat) = thread_stat(pid, *tid) {
            assert_eq!(stat.nice, *before, "thread {} ({tid}) restored", stat.name);
        }
    }
    drop(job);
    assert!(!PathBuf::from(format!("/proc/{pid}")).exists(), "the Flink JVM {pid} is stopped");
}

#[test]
fn one_middleware_gives_moirai_and_flink_a_cgroup_each_and_queue_size_nice_inside() {
    let Some(jobs) = flink_jobs("one_middleware_gives_moirai_and_flink_a_cgroup_each_and_queue_size_nice_inside")
    else {
        return;
    };
    let h = moirai_os::CgroupLayout::detect().unwrap().cpu().clone();
    let flink = syn_job(&jobs, 1);
    let fpid = flink.pid();
    let engine_port = free_port();
    let engine = Proc::spawn(&[
        "run",
        "syn",
        "--ops",
        "3",
        "--cost-ns",
        "2000",
        "--rate",
        "20000",
        "--duration",
        "10m",
        "--metrics-addr",
        &format!("127.0.0.1:{engine_port}"),
    ]);
    let engine_threads = || -> Vec<i32> {
        let Ok(r) = ureq::get(&format!("http://127.0.0.1:{engine_port}/topology")).call() else { return Vec::new() };
        let topo: serde_json::Value = r.into_json().unwrap();
        let tids: Vec<i32> =
            topo["physical"].as_array().unwrap().iter().map(|o| o["tid"].as_i64().unwrap() as i32).collect();
        if tids.contains(&0) {
            Vec::new()
        } else {
            tids
        }
    };
    wait_until("the engine's threads", || !engine_threads().is_empty());
    let etids = engine_threads();
    let epid = engine.pid();
    let ftids: Vec<i32> = subtask_threads(&jvm_threads(fpid)).into_keys().collect();
    let threads: Vec<(u32, i32)> = etids.iter().map(|&t| (epid, t)).chain(ftids.iter().map(|&t| (fpid, t))).collect();
    let before: Vec<(String, i32)> = threads.iter().map(|&(p, t)| (cpu_cgroup(p, t), nice(p, t))).collect();

    let dir = temp_dir("multi");
    let mw_port = free_port();
    let config = dir.0.join("schedule.toml");
    std::fs::write(
        &config,
        format!(
            r#"
state_file = "{}"
metrics_addr = "127.0.0.1:{mw_port}"

[[spe]]
name = "engine"
driver = "moirai"
url = "http://127.0.0.1:{engine_port}"

[[spe]]
name = "flink"
driver = "flink"
url = "{}"

[[policy]]
name = "shares"
type = "groups"
by = "spe"
priority = {{ constant = {{ values = {{ engine = 1, flink = 3 }} }} }}
translator = "cgroup"
normalization = "linear"
weight_min = 300
weight_max = 900
period = "1s"

[[policy]]
name = "qs"
type = "qs"
translator = "nice"
nice_best = -10
nice_worst = 10
period = "500ms"
"#,
            dir.0.join("state.json").display(),
            flink.rest_url()
        ),
    )
    .unwrap();
    let mw = Proc::spawn(&["schedule", "--config", &config.display().to_string()]);
    let instance = format!("/moirai/schedule-{}", mw.pid());
    wait_until("each SPE's threads in its own group with its share", || {
        threads.iter().all(|&(p, t)| {
            let group = cpu_cgroup(p, t);
            let (spe, want) = if p == fpid { ("flink", "900") } else { ("engine", "300") };
            group.starts_with(&instance)
                && group.ends_with(spe)
                && std::fs::read_to_string(h.dir_of(&group).join(h.weight_file())).is_ok_and(|w| w.trim() == want)
        })
    });
    wait_for("queue-size nice values on every thread of both SPEs", || {
        let a = applied(mw_port, "qs");
        let wrong: Vec<String> = threads
            .iter()
            .filter(|&&(p, t)| !a.get(&t).is_some_and(|(_, v)| *v == nice(p, t) as i64 && (-10..=10).contains(v)))
            .map(|&(p, t)| format!("pid {p} tid {t}: applied {:?}, /proc says {}", a.get(&t), nice(p, t)))
            .collect();
        if wrong.is_empty() {
            Ok(())
        } else {
            Err(wrong.join("; "))
        }
    });
    mw.signal(libc::SIGINT);
    let (code, err) = mw.wait();
    assert_eq!(code, Some(0), "{err}");
    let after: Vec<(String, i32)> = threads.iter().map(|&(p, t)| (cpu_cgroup(p, t), nice(p, t))).collect();
    assert_eq!(after, before, "cgroups and nice values restored");
    assert!(!h.dir_of(&instance).exists(), "the middleware's groups are removed");
    drop(engine);
    drop(flink);
    assert!(!PathBuf::from(format!("/proc/{fpid}")).exists(), "the Flink JVM {fpid} is stopped");
}

#[test]
fn the_flink_driver_reads_input_buffers_full_in_front_of_the_heavy_operator() {
    use moirai_middleware::driver::{flink::FlinkDriver, Driver};
    use moirai_sched::Metric;
    let Some(jobs) = flink_jobs("the_flink_driver_reads_input_buffers_full_in_front_of_the_heavy_operator") else {
        return;
    };
    // op2 burns 20 x 2 µs per tuple: at 40 000 tuples/s it needs 1.6 cores, so records pile up
    // in front of it, in network buffers, and the source is back-pressured.
    let args: Vec<String> =
        ["--ops", "3", "--cost-ns", "2000", "--heavy-op", "2", "--heavy-factor", "20", "--rate", "40000"]
            .iter()
            .chain(&["--duration", "10m", "--parallelism", "1"])
            .map(|s| s.to_string())
            .collect();
    let mut job = FlinkJob::start(&jobs, "syn", &args).unwrap_or_else(|e| panic!("cannot start the Flink job: {e}"));
    job.wait_running(PATIENCE).unwrap_or_else(|e| panic!("the Flink job did not come up: {e}"));
    let mut driver = FlinkDriver::new("flink", job.rest_url(), Some(job.pid())).unwrap();
    assert!(driver.provides().contains(&Metric::InputBuffers));
    let mut last = BTreeMap::new();
    // Flink grants a channel a few buffers of credit (2 exclusive + floating), so a full input
    // shows that many: op1, back-pressured by op2, reads as full as op2. Downstream of the heavy
    // operator the inputs are nearly empty, and a source has none.
    wait_for("the heavy operator's input buffers at least every other subtask's, above op3's", || {
        let seen = driver.observe(&[Metric::InputBuffers])?;
        let names: Vec<&str> = seen.topology.physical.iter().map(|p| p.name.as_str()).collect();
        last = seen
            .samples
            .iter()
            .filter(|(_, m, _)| *m == Metric::InputBuffers)
            .map(|&(op, _, v)| (names[op].to_string(), v))
            .collect::<BTreeMap<String, f64>>();
        let of = |op: &str| last.iter().find(|(n, _)| n.contains(op)).map(|(_, v)| *v);
        let heavy = of("/op2").ok_or("no op2")?;
        let others = last.iter().filter(|(n, _)| !n.contains("/op2")).map(|(_, v)| *v).fold(0.0, f64::max);
        if heavy > 0.0 && heavy >= others && of("/op3").is_some_and(|op3| heavy > op3) {
            Ok(())
        } else {
            Err(format!("input buffers by subtask: {last:?}"))
        }
    });
    assert_eq!(last.len(), 5, "source, 3 operators and sink: {last:?}");
    // By default queue_len is the same count (read in the same request), but for the source:
    // its backlog (`pendingRecords`, growing: it is back-pressured) in buffers' worth.
    let seen = driver.observe(&[Metric::QueueLen, Metric::InputBuffers]).unwrap();
    for op in 0..seen.topology.physical.len() {
        let of = |m: Metric| seen.samples.iter().find(|s| s.0 == op && s.1 == m).map(|s| s.2);
        let name = &seen.topology.physical[op].name;
        if name.contains("/source") {
            assert!(of(Metric::QueueLen).is_some_and(|q| q > 0.0), "{name}: {:?}", of(Metric::QueueLen));
        } else {
            assert_eq!(of(Metric::QueueLen), of(Metric::InputBuffers), "{name}");
        }
    }
    let source = last.iter().find(|(n, _)| n.contains("/source")).map(|(_, v)| *v);
    assert_eq!(source, Some(0.0), "a source has no input channels: {last:?}");
}

//! `moirai schedule` against real Apache Storm topologies (`integrations/storm`, built with Maven on
//! first use; a `LocalCluster` in one JVM): the middleware finds the worker JVM, maps every
//! executor to its Linux thread through a thread dump, reads Storm's own CSV metrics, sets the
//! executors' nice values (checked in /proc against an independent thread dump taken here),
//! leaves Storm's other threads alone, and restores everything when it stops — also after it was
//! killed with SIGKILL, when it starts again. And three SPEs at once (Lachesis §6.6): a moirai
//! engine, a Flink job and a Storm topology under one middleware, each in its own cpu cgroup with
//! its share, queue-size nice values inside.
//!
//! Every process started here is stopped by its PID when its guard drops, also when a test fails.
//! The tests need root (CAP_SYS_NICE, cgroupfs) and a JDK with Maven; without root they say so and
//! skip.

use std::collections::{BTreeMap, BTreeSet};
use std::path::PathBuf;
use std::time::{Duration, Instant};

use moirai_bench::jvm::JvmJobs;
use moirai_bench::jvm_job::JvmJob;
use moirai_bench::storm::STORM;

#[path = "common/spe.rs"]
mod spe;
use spe::*;

/// The Storm jobs, built on first use; `None` (test skipped, with the reason) without root.
fn storm_jobs(test: &str) -> Option<JvmJobs> {
    moirai_bench::requires::or_skip(test, moirai_bench::requires::jdk_and_maven())?;
    if !is_root() {
        eprintln!("SKIPPED {test}: needs root (CAP_SYS_NICE, cgroupfs)");
        return None;
    }
    Some(JvmJobs::build(&STORM).unwrap_or_else(|e| panic!("cannot build the Storm jobs: {e}")))
}

/// A SYN topology of 3 operators with cost, running until stopped, once a spout emits.
fn storm_syn(jobs: &JvmJobs, parallelism: u32) -> JvmJob {
    let args: Vec<String> =
        ["--ops", "3", "--cost-ns", "2000", "--rate", "20000", "--duration", "10m", "--parallelism"]
            .iter()
            .map(|s| s.to_string())
            .chain([parallelism.to_string()])
            .collect();
    let mut job = JvmJob::start(jobs, "syn", &args).unwrap_or_else(|e| panic!("cannot start the Storm job: {e}"));
    job.wait_running(PATIENCE).unwrap_or_else(|e| panic!("the Storm topology did not come up: {e}"));
    job
}

/// The executor threads of the SYN topology in a dump: tid → component (`"syn0-op1"`); Storm's
/// own executors (`__system`, ...) are not among them.
fn executor_threads(threads: &BTreeMap<String, i32>) -> BTreeMap<i32, String> {
    threads
        .iter()
        .filter_map(|(name, &tid)| {
            let rest = name.strip_prefix("Thread-")?.split_once('-')?.1;
            let (component, _) = rest.rsplit_once("-executor[")?;
            component.starts_with("syn0-").then(|| (tid, component.to_string()))
        })
        .collect()
}

/// `moirai schedule --storm DIR --policy qs` with a 500 ms period and nice in [-10, 10].
fn schedule_storm(job: &JvmJob, state: &std::path::Path, mw_port: u16) -> Proc {
    Proc::spawn(&[
        "schedule",
        "--storm",
        job.endpoint(),
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
        &state.display().to_string(),
        "--metrics-addr",
        &format!("127.0.0.1:{mw_port}"),
    ])
}

/// Waits until policy `qs` applied a value in [-10, 10] to every thread of `expected` (tid →
/// component), as /proc shows it, on the operator of that component, and not the same value to all.
fn wait_all_applied(mw_port: u16, pid: u32, expected: &BTreeMap<i32, String>) {
    wait_for("a nice value applied to every executor thread, as /proc shows it, not all equal", || {
        let a = applied(mw_port, "qs");
        let values: BTreeSet<i64> = a.values().map(|(_, v)| *v).collect();
        let wrong: Vec<String> = expected
            .iter()
            .filter(|(tid, component)| {
                !a.get(tid).is_some_and(|(op, v)| {
                    op.starts_with(&format!("{component} (")) && (-10..=10).contains(v) && *v == nice(pid, **tid) as i64
                })
            })
            .map(|(tid, component)| format!("{component} tid {tid}: applied {:?}", a.get(tid)))
            .collect();
        match (wrong.is_empty(), values.len() > 1) {
            (true, true) => Ok(()),
            (true, false) => Err(format!("every thread got {values:?}")),
            (false, _) => Err(wrong.join("; ")),
        }
    });
}

#[test]
fn qs_sets_the_nice_values_of_every_storm_executor_thread_and_restores_them() {
    let Some(jobs) = storm_jobs("qs_sets_the_nice_values_of_every_storm_executor_thread_and_restores_them") else {
        return;
    };
    let job = storm_syn(&jobs, 2);
    let pid = job.pid();
    let all_before = thread_nices(pid);
    // Spout, 3 bolts and the sink at parallelism 2: 10 executors, one thread each.
    let expected = executor_threads(&jvm_threads(pid));
    assert_eq!(expected.len(), 10, "{expected:?}");
    let dir = temp_dir("storm-qs");
    let mw_port = free_port();
    let mw = schedule_storm(&job, &dir.0.join("state.json"), mw_port);
    wait_all_applied(mw_port, pid, &expected);
    // Only the executors' threads were touched: Storm's own (Nimbus, ZooKeeper, the supervisor,
    // the system executor, transfer threads, GC, ...) keep their nice values.
    let a = applied(mw_port, "qs");
    assert!(a.keys().all(|tid| expected.contains_key(tid)), "applied to a thread that is no executor's: {a:?}");
    assert_untouched(pid, &all_before, &expected);
    mw.signal(libc::SIGTERM);
    let (code, err) = mw.wait();
    assert_eq!(code, Some(0), "{err}");
    assert_restored(pid, &all_before);
    drop(job);
    assert!(!PathBuf::from(format!("/proc/{pid}")).exists(), "the Storm JVM {pid} is stopped");
}

#[test]
fn a_killed_middleware_is_undone_when_it_starts_again() {
    let Some(jobs) = storm_jobs("a_killed_middleware_is_undone_when_it_starts_again") else {
        return;
    };
    let job = storm_syn(&jobs, 1);
    let pid = job.pid();
    let expected = executor_threads(&jvm_threads(pid));
    let before: BTreeMap<i32, i32> = expected.keys().map(|&t| (t, nice(pid, t))).collect();
    let dir = temp_dir("storm-kill");
    let state = dir.0.join("state.json");
    let mw = schedule_storm(&job, &state, free_port());
    wait_until("some executor thread reniced", || expected.keys().any(|&t| nice(pid, t) != before[&t]));
    // SIGKILL: no chance to restore. The values stay as the dead middleware left them, and its
    // state file says what they were.
    mw.signal(libc::SIGKILL);
    let _ = mw.wait();
    let left: BTreeMap<i32, i32> = expected.keys().map(|&t| (t, nice(pid, t))).collect();
    assert_ne!(left, before, "the killed middleware left its values");
    // The next start first restores the crashed run's values, then schedules again; on SIGTERM
    // it puts back what it found at its own start — the values from before the crash.
    let mw_port = free_port();
    let mw = schedule_storm(&job, &state, mw_port);
    wait_all_applied(mw_port, pid, &expected);
    mw.signal(libc::SIGTERM);
    let (code, err) = mw.wait();
    assert_eq!(code, Some(0), "{err}");
    assert!(err.contains("restored"), "{err}");
    let after: BTreeMap<i32, i32> = expected.keys().map(|&t| (t, nice(pid, t))).collect();
    assert_eq!(after, before, "every executor thread is back at its value from before the crash");
}

/// A process stopped with SIGSTOP until the guard drops (SIGCONT), whatever the test's outcome.
struct Frozen(u32);

impl Frozen {
    fn new(pid: u32) -> Frozen {
        // SAFETY: kill(2) on the pid of a JVM this test started and has not reaped.
        assert_eq!(unsafe { libc::kill(pid as i32, libc::SIGSTOP) }, 0, "cannot stop the JVM {pid}");
        Frozen(pid)
    }
}

impl Drop for Frozen {
    fn drop(&mut self) {
        // SAFETY: as above.
        unsafe { libc::kill(self.0 as i32, libc::SIGCONT) };
    }
}

/// A JVM that does not answer a thread dump (stopped here: a JVM whose threads are starved of CPU
/// answers as late) does not hold up the middleware's stop: the dump under way is given up, and
/// the middleware restores and exits 0 at once — not after its 5 s grace (then its watchdog
/// restores and exits 1) nor after the dump's 20 s.
#[test]
fn a_stop_during_a_thread_dump_gives_the_dump_up_and_restores_at_once() {
    let Some(jobs) = storm_jobs("a_stop_during_a_thread_dump_gives_the_dump_up_and_restores_at_once") else {
        return;
    };
    let job = storm_syn(&jobs, 1);
    let dir = temp_dir("storm-stop-dump");
    let frozen = Frozen::new(job.pid());
    let mw = schedule_storm(&job, &dir.0.join("state.json"), free_port());
    // The first round maps the executors by a dump, which the stopped JVM does not answer.
    std::thread::sleep(Duration::from_secs(2));
    let start = Instant::now();
    mw.signal(libc::SIGTERM);
    let (code, err) = mw.wait();
    let took = start.elapsed();
    drop(frozen);
    assert!(err.contains("thread dump") && err.contains("stopping"), "no dump was given up: {err}");
    assert_eq!(code, Some(0), "{err}");
    assert!(took < Duration::from_secs(3), "the stop took {took:?}: {err}");
    assert!(err.contains("restored"), "{err}");
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
fn one_middleware_gives_moirai_flink_and_storm_a_cgroup_each_and_queue_size_nice_inside() {
    let test = "one_middleware_gives_moirai_flink_and_storm_a_cgroup_each_and_queue_size_nice_inside";
    let (Some(storm_jobs), Some(flink_jobs)) = (storm_jobs(test), flink_jobs(test)) else {
        return;
    };
    let h = moirai_os::CgroupLayout::detect().unwrap().cpu().clone();
    let storm = storm_syn(&storm_jobs, 1);
    let flink = syn_job(&flink_jobs, 1);
    let (spid, fpid) = (storm.pid(), flink.pid());
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
    let epid = engine.pid();
    let threads: Vec<(u32, i32, &str)> = engine_threads()
        .into_iter()
        .map(|t| (epid, t, "engine"))
        .chain(subtask_threads(&jvm_threads(fpid)).into_keys().map(|t| (fpid, t, "flink")))
        .chain(executor_threads(&jvm_threads(spid)).into_keys().map(|t| (spid, t, "storm")))
        .collect();
    assert_eq!(threads.iter().filter(|t| t.2 == "storm").count(), 5, "spout, 3 bolts, sink");
    let before: Vec<(String, i32)> = threads.iter().map(|&(p, t, _)| (cpu_cgroup(p, t), nice(p, t))).collect();

    let dir = temp_dir("three-spes");
    let mw_port = free_port();
    let config = dir.0.join("schedule.toml");
    // Queue-size nice values between 0 and 10, as documented for Storm's default (spinning)
    // executors: raised above 0 they starve the machine's other threads, the JVMs' attach
    // listeners and Flink's REST among them, and a round (its thread dumps) then outlasted the 5 s
    // a stop grants (seen once in CI: exit code 1 after restoring everything from the state file).
    std::fs::write(
        &config,
        format!(
            r#"
state_file = "{}"
activation = "always"
metrics_addr = "127.0.0.1:{mw_port}"

[[spe]]
name = "engine"
driver = "moirai"
url = "http://127.0.0.1:{engine_port}"

[[spe]]
name = "flink"
driver = "flink"
url = "{}"

[[spe]]
name = "storm"
driver = "storm"
metrics_dir = "{}"

[[policy]]
name = "shares"
type = "groups"
by = "spe"
priority = {{ constant = {{ values = {{ engine = 1, flink = 2, storm = 3 }} }} }}
translator = "cgroup"
normalization = "linear"
weight_min = 300
weight_max = 900
period = "1s"

[[policy]]
name = "qs"
type = "qs"
translator = "nice"
nice_best = 0
nice_worst = 10
period = "500ms"
"#,
            dir.0.join("state.json").display(),
            flink.endpoint(),
            storm.endpoint()
        ),
    )
    .unwrap();
    let mw = Proc::spawn(&["schedule", "--config", &config.display().to_string()]);
    let instance = format!("/moirai/schedule-{}", mw.pid());
    wait_for("each SPE's threads in its own group with its share", || {
        let wrong: Vec<String> = threads
            .iter()
            .filter(|&&(p, t, spe)| {
                let want = match spe {
                    "engine" => "300",
                    "flink" => "600",
                    _ => "900",
                };
                let group = cpu_cgroup(p, t);
                !(group.starts_with(&instance)
                    && group.ends_with(spe)
                    && std::fs::read_to_string(h.dir_of(&group).join(h.weight_file())).is_ok_and(|w| w.trim() == want))
            })
            .map(|&(p, t, spe)| format!("{spe} pid {p} tid {t} in {}", cpu_cgroup(p, t)))
            .collect();
        if wrong.is_empty() {
            Ok(())
        } else {
            Err(wrong.join("; "))
        }
    });
    wait_for("queue-size nice values on every thread of the three SPEs", || {
        let a = applied(mw_port, "qs");
        let wrong: Vec<String> = threads
            .iter()
            .filter(|&&(p, t, _)| !a.get(&t).is_some_and(|(_, v)| *v == nice(p, t) as i64 && (0..=10).contains(v)))
            .map(|&(p, t, spe)| format!("{spe} pid {p} tid {t}: applied {:?}, /proc says {}", a.get(&t), nice(p, t)))
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
    let after: Vec<(String, i32)> = threads.iter().map(|&(p, t, _)| (cpu_cgroup(p, t), nice(p, t))).collect();
    assert_eq!(after, before, "cgroups and nice values restored");
    assert!(!h.dir_of(&instance).exists(), "the middleware's groups are removed");
    drop(engine);
    drop(flink);
    drop(storm);
    for pid in [fpid, spid] {
        assert!(!PathBuf::from(format!("/proc/{pid}")).exists(), "the JVM {pid} is stopped");
    }
}

/// Fields 40 (rt_priority) and 41 (policy) of a thread's stat: (priority, policy), 2 = SCHED_RR.
fn sched(pid: u32, tid: i32) -> (u32, u32) {
    let text = std::fs::read_to_string(format!("/proc/{pid}/task/{tid}/stat")).unwrap();
    let rest: Vec<&str> = text[text.rfind(')').unwrap() + 1..].split_whitespace().collect();
    (rest[40 - 3].parse().unwrap(), rest[41 - 3].parse().unwrap())
}

/// The realtime translator on Storm: refused while the executors idle in Storm's default
/// progressive wait (a thread dump shows it; the refusal says what to set), accepted once they
/// park (`--wait-strategy park`, WaitStrategyPark): the executor a constant policy ranks highest
/// goes SCHED_RR, no other thread of the JVM does, and it is restored on exit.
#[test]
fn real_time_is_refused_for_spinning_storm_executors_and_given_to_parking_ones() {
    let Some(jobs) = storm_jobs("real_time_is_refused_for_spinning_storm_executors_and_given_to_parking_ones") else {
        return;
    };
    if moirai_os::realtime::rt_throttling().unwrap().is_none() {
        eprintln!("SKIPPED real_time_is_refused_for_spinning_storm_executors: RT throttling is off here");
        return;
    }
    for (strategy, realtime) in [("progressive", false), ("park", true)] {
        let args: Vec<String> =
            ["--ops", "3", "--cost-ns", "2000", "--rate", "5000", "--duration", "10m", "--wait-strategy", strategy]
                .iter()
                .map(|s| s.to_string())
                .collect();
        let mut job = JvmJob::start(&jobs, "syn", &args).unwrap();
        job.wait_running(PATIENCE).unwrap_or_else(|e| panic!("the Storm topology did not come up: {e}"));
        let pid = job.pid();
        let executors = executor_threads(&jvm_threads(pid));
        let op2 = *executors.iter().find(|(_, c)| *c == "syn0-op2").expect("op2's executor").0;
        let dir = temp_dir(&format!("storm-rt-{strategy}"));
        let config = dir.0.join("rt.toml");
        std::fs::write(
            &config,
            format!(
                "state_file = \"{}\"\nactivation = \"always\"\n[[spe]]\nname = \"storm\"\ndriver = \"storm\"\nmetrics_dir = \"{}\"\n\
                 [[policy]]\nname = \"pin\"\ntype = \"constant\"\nby = \"operator\"\nvalues = {{ \"syn0-op2 (1/1)\" = 5 }}\n\
                 default = 1\ntranslator = \"realtime\"\nrt_threads = 1\nperiod = \"500ms\"\nnice_best = 0\n",
                dir.0.join("state.json").display(),
                job.endpoint()
            ),
        )
        .unwrap();
        let mw = Proc::spawn(&["schedule", "--config", &config.display().to_string(), "-v"]);
        if realtime {
            wait_until("op2's executor in SCHED_RR", || sched(pid, op2) == (49, 2));
        } else {
            // Several rounds with the executors mapped (nice values applied): none real-time.
            std::thread::sleep(std::time::Duration::from_secs(8));
        }
        let rt: Vec<i32> = moirai_os::proc::threads(pid)
            .unwrap()
            .iter()
            .map(|t| t.tid)
            .filter(|&tid| std::fs::metadata(format!("/proc/{pid}/task/{tid}")).is_ok() && sched(pid, tid).1 != 0)
            .collect();
        assert_eq!(rt, if realtime { vec![op2] } else { vec![] }, "{strategy}: real-time threads of the JVM");
        mw.signal(libc::SIGTERM);
        let (code, err) = mw.wait();
        assert_eq!(code, Some(0), "{err}");
        assert_eq!(sched(pid, op2), (0, 0), "restored");
        if !realtime {
            assert!(
                err.contains("no real-time classes for its threads") && err.contains("WaitStrategyProgressive"),
                "the refusal names the wait strategy: {err}"
            );
            assert!(err.contains("--wait-strategy park"), "and what to set: {err}");
        }
        drop(job);
    }
}

/// The rule's counter period for SPE `spe` on the middleware's /metrics, in seconds.
fn counter_period(port: u16, spe: &str) -> Option<f64> {
    let text = ureq::get(&format!("http://127.0.0.1:{port}/metrics")).call().ok()?.into_string().ok()?;
    let prefix = format!("moirai_schedule_counter_period_seconds{{spe=\"{spe}\"}} ");
    text.lines().find_map(|l| l.strip_prefix(&prefix)?.parse().ok())
}

#[test]
fn a_reporter_that_writes_every_10_s_is_measured_and_named_with_the_setting_to_change() {
    let Some(jobs) = storm_jobs("a_reporter_that_writes_every_10_s_is_measured_and_named_with_the_setting_to_change")
    else {
        return;
    };
    // Storm's own default period, which a user who sets up the reporter without report.period gets.
    let args: Vec<String> =
        ["--ops", "3", "--cost-ns", "2000", "--rate", "5000", "--duration", "10m", "--report-period", "10"]
            .iter()
            .map(|s| s.to_string())
            .collect();
    let mut job = JvmJob::start(&jobs, "syn", &args).unwrap();
    job.wait_running(PATIENCE).unwrap_or_else(|e| panic!("the Storm topology did not come up: {e}"));
    let dir = temp_dir("storm-report-period");
    let port = free_port();
    let mw = Proc::spawn(&[
        "schedule",
        "--storm",
        job.endpoint(),
        "--policy",
        "qs",
        "--state-file",
        &dir.0.join("state.json").display().to_string(),
        "--metrics-addr",
        &format!("127.0.0.1:{port}"),
    ]);
    // Storm's kind default (1 s) until two lines of a file are read (the first read takes a
    // file's last lines together); then the reporter's period in whole seconds: 10, or one off
    // where a write fell across a second.
    wait_for("the reporter's period measured", || match counter_period(port, "storm") {
        Some(p) if (9.0..=11.0).contains(&p) => Ok(()),
        p => Err(format!("{p:?} s")),
    });
    mw.signal(libc::SIGTERM);
    let (code, err) = mw.wait();
    assert_eq!(code, Some(0), "{err}");
    assert!(err.contains("Storm's metrics reporter writes every"), "the user is told: {err}");
    assert!(err.contains("report.period: 1"), "and what to set: {err}");
    drop(job);
}

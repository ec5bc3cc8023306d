//! `moirai schedule` against real Apache Flink jobs (`integrations/flink`, built with Maven on first
//! use): the middleware finds the TaskManager's JVM, maps every subtask to its Linux threads through
//! a thread dump, sets their nice values (checked in /proc against an independent thread dump
//! taken here), leaves the JVM's other threads alone, and restores everything when it stops —
//! on Flink 1.20 and on 2.3.
//! (A Flink job beside a moirai engine and a Storm topology under one middleware: in
//! `schedule_storm.rs`.) The driver reads Flink's own buffer queues
//! (`input_buffers`), full in front of the job's one heavy operator (`--heavy-op`), low behind it.
//!
//! Every process started here is stopped by its PID when its guard drops, also when a test fails.
//! The tests need root (CAP_SYS_NICE, cgroupfs) and a JDK with Maven; without them they say so and
//! skip.

use std::collections::{BTreeMap, BTreeSet};
use std::path::PathBuf;

use moirai_bench::flink::{FLINK, FLINK2};
use moirai_bench::jvm::JvmSystem;
use moirai_bench::jvm_job::JvmJob;

#[path = "common/spe.rs"]
#[allow(dead_code)]
mod spe;
use spe::*;

#[test]
fn qs_sets_the_nice_values_of_every_flink_subtask_thread_and_restores_them() {
    qs_sets_the_nice_values_and_restores_them_on(
        &FLINK,
        "qs_sets_the_nice_values_of_every_flink_subtask_thread_and_restores_them",
    );
}

/// The same on Flink 2.3: the same jobs (FLIP-27 source, Sink v2) built against it, the same
/// driver.
#[test]
fn qs_sets_the_nice_values_of_every_flink_2_subtask_thread_and_restores_them() {
    qs_sets_the_nice_values_and_restores_them_on(
        &FLINK2,
        "qs_sets_the_nice_values_of_every_flink_2_subtask_thread_and_restores_them",
    );
}

fn qs_sets_the_nice_values_and_restores_them_on(system: &'static JvmSystem, test: &str) {
    let Some(jobs) = flink_jobs_of(system, test) else {
        return;
    };
    let job = syn_job(&jobs, 2);
    let pid = job.pid();
    let all_before = thread_nices(pid);
    // A directory (and state file) per test: both QS tests run at once in this binary.
    let dir = temp_dir(test);
    let state = dir.0.join("state.json");
    let mw_port = free_port();
    let mw = Proc::spawn(&[
        "schedule",
        "--flink",
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
    ]);
    // Source, 3 operators and sink at parallelism 2: 10 subtasks, each with its task thread (a
    // FLIP-27 source's reader works in it: there is no legacy source thread), an output flusher
    // where it has outputs, and timer threads.
    let threads = jvm_threads(pid);
    assert!(!threads.keys().any(|n| n.starts_with("Legacy Source Thread")), "{threads:?}");
    let expected = subtask_threads(&threads);
    let subtasks: BTreeSet<&String> = expected.values().collect();
    assert_eq!(subtasks.len(), 10, "{expected:?}");
    assert!(expected.len() >= 10 + 8, "task threads, flushers: {expected:?}");
    assert!(subtasks.contains(&"syn0/sink: Writer (2/2)".to_string()), "the Sink v2 writer: {subtasks:?}");
    // Queue-size scheduling has something to rank: in some round not every thread gets the same
    // value (queues are short at this rate, and may all be empty in one round).
    wait_for("a nice value applied to every subtask thread, as /proc shows it, not all equal", || {
        let a = applied(mw_port, "qs");
        let values: BTreeSet<i64> = a.values().map(|(_, v)| *v).collect();
        let wrong: Vec<_> = expected
            .iter()
            .filter(|(tid, subtask)| {
                !a.get(tid)
                    .is_some_and(|(op, v)| op == *subtask && (-10..=10).contains(v) && *v == nice(pid, **tid) as i64)
            })
            .map(|(tid, subtask)| format!("{subtask} thread {tid}: applied {:?}, nice {}", a.get(tid), nice(pid, *tid)))
            .collect();
        if values.len() > 1 && wrong.is_empty() {
            Ok(())
        } else {
            Err(format!("values applied {values:?}; not as applied: {wrong:?}"))
        }
    });
    let a = applied(mw_port, "qs");
    // Only the subtasks' threads were touched: the JVM's other threads (JobManager, network, GC,
    // ...) keep their nice values.
    assert!(a.keys().all(|tid| expected.contains_key(tid)), "applied to a thread that is no subtask's: {a:?}");
    assert_untouched(pid, &all_before, &expected);
    // The threads were mapped from a thread dump of the TaskManager's JVM, and it is counted.
    let metrics = ureq::get(&format!("http://127.0.0.1:{mw_port}/metrics")).call().unwrap().into_string().unwrap();
    let dumps: u64 = (metrics.lines())
        .find_map(|l| l.strip_prefix("moirai_schedule_thread_dumps_total{").and_then(|l| l.rsplit(' ').next()))
        .and_then(|v| v.parse().ok())
        .unwrap_or_else(|| panic!("no thread dump counted in:\n{metrics}"));
    assert!(dumps >= 1, "{dumps}");
    mw.signal(libc::SIGTERM);
    let (code, err) = mw.wait();
    assert_eq!(code, Some(0), "{err}");
    assert_restored(pid, &all_before);
    drop(job);
    assert!(!PathBuf::from(format!("/proc/{pid}")).exists(), "the Flink JVM {pid} is stopped");
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
    let (job, _) = JvmJob::start_running(&jobs, "syn", &args, PATIENCE)
        .unwrap_or_else(|e| panic!("the Flink job did not come up: {e}"));
    let mut driver = FlinkDriver::new("flink", job.endpoint(), Some(job.pid())).unwrap();
    assert!(driver.provides().contains(&Metric::InputBuffers));
    let mut last = BTreeMap::new();
    // Flink grants a channel a few buffers of credit (2 exclusive + floating), so a full input
    // shows that many: op1, back-pressured by op2, reads as full as op2. Downstream of the heavy
    // operator the inputs are nearly empty, and a source has none.
    wait_for("the heavy operator's input buffers at least every other subtask's, above op3's", || {
        let seen = driver.observe(&[Metric::InputBuffers]).map_err(|e| e.to_string())?;
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

/// The job of one heavy operator (`--heavy-op 2`), its queues full in front of it.
fn heavy_job(jobs: &moirai_bench::jvm::JvmJobs) -> JvmJob {
    // op2 burns 20 x 2 µs per tuple: at 40 000 tuples/s it needs 1.6 cores, so records pile up
    // in front of it, in network buffers, and the source is back-pressured.
    let args: Vec<String> =
        ["--ops", "3", "--cost-ns", "2000", "--heavy-op", "2", "--heavy-factor", "20", "--rate", "40000"]
            .iter()
            .chain(&["--duration", "10m", "--parallelism", "1"])
            .map(|s| s.to_string())
            .collect();
    let (job, _) = JvmJob::start_running(jobs, "syn", &args, PATIENCE)
        .unwrap_or_else(|e| panic!("the Flink job did not come up: {e}"));
    job
}

/// The TaskManager's Prometheus reporter, on the lab's job (which serves it on a port of its
/// own): first the driver reads the same queues from one scrape as the REST path does (the heavy
/// operator's input buffers full, the source's backlog growing), and names an endpoint that is
/// not a reporter; then `moirai schedule --flink URL --flink-prometheus URL` schedules by QS from
/// the reporter's figures: the heavy operator (its input buffers full) gets a better nice value
/// than the operators behind it (theirs nearly empty); all is restored. One job for both: each needs 1.6
/// cores.
#[test]
fn qs_schedules_flink_from_the_prometheus_reporters_queues() {
    let test = "qs_schedules_flink_from_the_prometheus_reporters_queues";
    let Some(jobs) = flink_jobs(test) else {
        return;
    };
    let job = heavy_job(&jobs);
    reporter_reads_the_queues(&job);
    let pid = job.pid();
    let all_before = thread_nices(pid);
    let dir = temp_dir(test);
    let state = dir.0.join("state.json");
    let mw_port = free_port();
    let target = job.middleware_args();
    assert_eq!(target[2], "--flink-prometheus");
    let mut args: Vec<&str> = target.iter().map(String::as_str).collect();
    let state_arg = state.display().to_string();
    let metrics_arg = format!("127.0.0.1:{mw_port}");
    args.splice(0..0, ["schedule"]);
    args.extend([
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
        &state_arg,
        "--metrics-addr",
        &metrics_arg,
        "-v",
    ]);
    let mw = Proc::spawn(&args);
    let mut seen = BTreeMap::new();
    wait_for("op2's threads at a better nice value than op3's and the sink's", || {
        let a = applied(mw_port, "qs");
        // The task thread's value of each subtask, as /proc shows it.
        let by_op: BTreeMap<String, i32> = a
            .iter()
            .filter(|(tid, (_, v))| nice(pid, **tid) as i64 == *v)
            .map(|(tid, (op, _))| (op.clone(), nice(pid, *tid)))
            .collect();
        seen = by_op.clone();
        let of = |op: &str| by_op.iter().find(|(n, _)| n.contains(op)).map(|(_, v)| *v);
        let (Some(op2), Some(op3), Some(sink)) = (of("/op2"), of("/op3"), of("/sink")) else {
            return Err(format!("not every subtask scheduled yet: {by_op:?}"));
        };
        if op2 < op3 && op2 < sink {
            Ok(())
        } else {
            Err(format!("nice by subtask: {by_op:?}"))
        }
    });
    assert_eq!(seen.len(), 5, "source, 3 operators and sink: {seen:?}");
    mw.signal(libc::SIGTERM);
    let (code, err) = mw.wait();
    assert_eq!(code, Some(0), "{err}");
    assert!(!err.contains("unavailable"), "the reporter answered every round: {err}");
    assert_restored(pid, &all_before);
}

/// The driver's part of [`qs_schedules_flink_from_the_prometheus_reporters_queues`].
fn reporter_reads_the_queues(job: &JvmJob) {
    use moirai_middleware::driver::{flink::FlinkDriver, Driver};
    use moirai_sched::Metric;
    let url = job.metrics_url().expect("the lab gives a Flink job a metrics port");
    let args = job.middleware_args();
    assert_eq!(args[2..], ["--flink-prometheus".to_string(), url.clone()]);
    let mut driver =
        FlinkDriver::new("flink", job.endpoint(), Some(job.pid())).unwrap().prometheus(Some(&url)).unwrap();
    let mut last = BTreeMap::new();
    wait_for("from the reporter: the heavy operator's input buffers at least every other subtask's", || {
        let seen = driver.observe(&[Metric::InputBuffers, Metric::QueueLen]).map_err(|e| e.to_string())?;
        let names: Vec<&str> = seen.topology.physical.iter().map(|p| p.name.as_str()).collect();
        let of = |m: Metric| -> BTreeMap<String, f64> {
            seen.samples.iter().filter(|s| s.1 == m).map(|&(op, _, v)| (names[op].to_string(), v)).collect()
        };
        last = of(Metric::InputBuffers);
        let queues = of(Metric::QueueLen);
        let get = |op: &str| last.iter().find(|(n, _)| n.contains(op)).map(|(_, v)| *v);
        let heavy = get("/op2").ok_or("no op2")?;
        let others = last.iter().filter(|(n, _)| !n.contains("/op2")).map(|(_, v)| *v).fold(0.0, f64::max);
        let backlog = queues.iter().find(|(n, _)| n.contains("/source")).map(|(_, v)| *v);
        if heavy > 0.0 && heavy >= others && get("/op3").is_some_and(|op3| heavy > op3) && backlog > Some(0.0) {
            Ok(())
        } else {
            Err(format!("input buffers by subtask: {last:?}; queue_len: {queues:?}"))
        }
    });
    assert_eq!(last.len(), 5, "source, 3 operators and sink: {last:?}");
    // What is not Flink's reporter is named: the REST API's port, answering JSON.
    let mut wrong = FlinkDriver::new("flink", job.endpoint(), Some(job.pid()))
        .unwrap()
        .prometheus(Some(&format!("{}/jobs", job.endpoint())))
        .unwrap();
    let Err(e) = wrong.observe(&[Metric::QueueLen]).map(|_| ()) else { panic!("JSON is no reporter") };
    let e = e.to_string();
    assert!(e.contains("not a Prometheus exposition") && e.contains("PrometheusReporterFactory"), "{e}");
}

/// One `--flink-prometheus` per `--flink`, in order: another count is a usage error (exit 2)
/// that says so, before anything is touched.
#[test]
fn a_reporter_without_its_flink_cluster_is_refused() {
    let out = std::process::Command::new(BIN)
        .args(["schedule", "--policy", "qs", "--engine", "http://127.0.0.1:9"])
        .args(["--flink-prometheus", "http://127.0.0.1:9249/metrics"])
        .output()
        .unwrap();
    let err = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(2), "{err}");
    assert!(err.contains("--flink-prometheus") && err.contains("1 given for 0 --flink"), "{err}");
}

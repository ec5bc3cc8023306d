//! Apache Flink jobs of moirai's workloads, for `flink:` configurations of the lab and for tests
//! that need a real Flink job to schedule.
//!
//! The jobs live in `integrations/flink`, a Maven project: `mvn -q -B -f <dir>/pom.xml
//! -DskipTests package` builds them against Flink 1.20 into `target/moirai-flink-jobs.jar` and
//! `target/classpath.txt` (the dependencies' classpath, one `:`-separated line); with `-Pflink2`
//! against Flink 2.3 into `target/flink2/` (the same two files), so both builds stand side by side:
//! [`FLINK`] and [`FLINK2`] (`flink:` and `flink2:` configurations). One job is one JVM,
//! `java -cp <jar>:<classpath> moirai.flink.Run <workload> [flags] --rest-port N`, running a
//! local Flink environment (a MiniCluster in that JVM, operator chaining off) with the REST API
//! on 127.0.0.1:N; it ends by itself after `--duration` and, with `--json`, prints the same JSON
//! summary as `moirai run <workload> --json` on its last stdout line (plus `"system": "flink"`).
//!
//! [`FLINK`] is what is Flink's own: the project, the flags, and that a job runs once its REST
//! API says it and all its vertices are RUNNING. [`JvmJobs`](crate::jvm::JvmJobs) builds the
//! project, [`JvmJob`](crate::jvm_job::JvmJob) runs one job.

use std::sync::OnceLock;
use std::time::Duration;

use crate::jvm::{Endpoint, JvmSystem, MetricsPort, Probe};

/// Apache Flink 1.20, `integrations/flink` built by default.
pub static FLINK: JvmSystem = FLINK_1_20;

/// Apache Flink 2.x (2.3), the same jobs of `integrations/flink` built with `-Pflink2` into
/// `target/flink2/`; everything else as [`FLINK`] (the middleware's `--flink` driver reads both).
pub static FLINK2: JvmSystem = JvmSystem {
    name: "Flink 2",
    jar: "target/flink2/moirai-flink-jobs.jar",
    build_dir: "target/flink2",
    mvn_args: &["-Pflink2"],
    ..FLINK_1_20
};

/// [`FLINK`]; [`FLINK2`] differs in its name and build only.
const FLINK_1_20: JvmSystem = JvmSystem {
    name: "Flink",
    module: "flink",
    dir_env: "MOIRAI_FLINK_JOBS",
    jar: "target/moirai-flink-jobs.jar",
    build_dir: "target",
    mvn_args: &[],
    main_class: "moirai.flink.Run",
    prefix: "moirai-flink: ",
    own_flags: &["--buffer-timeout-ms"],
    endpoint: Endpoint::Port { flag: "--rest-port", what: "REST API" },
    middleware_flag: "--flink",
    // Every subtask's counters in one scrape of Flink's Prometheus reporter.
    metrics: Some(MetricsPort { flag: "--metrics-port", middleware_flag: "--flink-prometheus" }),
    ready: "the job was RUNNING",
    running: "being RUNNING",
    // A race lost after the job's own check of the port (Flink's), or the check (the job's).
    port_taken: &["BindException", "Address already in use", "is taken"],
    probe,
    late: |url, timeout, last| format!("the Flink job at {url} was not RUNNING within {timeout:?} ({last})"),
};

/// One look at the REST API at `url`: running once the job and all its vertices are RUNNING.
fn probe(url: &str) -> Probe {
    static AGENT: OnceLock<ureq::Agent> = OnceLock::new();
    let agent = AGENT.get_or_init(|| {
        ureq::AgentBuilder::new().timeout_connect(Duration::from_millis(500)).timeout(Duration::from_secs(3)).build()
    });
    let get = |path: &str| -> Result<serde_json::Value, String> {
        agent
            .get(&format!("{url}{path}"))
            .call()
            .map_err(|e| format!("GET {path}: {e}"))?
            .into_json()
            .map_err(|e| format!("GET {path}: not JSON: {e}"))
    };
    let jobs = match get("/jobs") {
        Ok(v) => v,
        Err(e) => return Probe::NotYet(e),
    };
    let Some(job) = jobs["jobs"].as_array().and_then(|a| a.first()) else {
        return Probe::NotYet("no job submitted yet".into());
    };
    let (Some(id), status) = (job["id"].as_str(), job["status"].as_str().unwrap_or("?")) else {
        return Probe::NotYet(format!("GET /jobs: a job without an id: {job}"));
    };
    if matches!(status, "FAILED" | "CANCELED" | "FINISHED" | "SUSPENDED") {
        return Probe::Ended(format!("the Flink job {id} is {status} before it ran"));
    }
    if status != "RUNNING" {
        return Probe::NotYet(format!("job {id} is {status}"));
    }
    let detail = match get(&format!("/jobs/{id}")) {
        Ok(v) => v,
        Err(e) => return Probe::NotYet(e),
    };
    let vertices = detail["vertices"].as_array().map(Vec::as_slice).unwrap_or_default();
    let running = vertices.iter().filter(|v| v["status"] == "RUNNING").count();
    if running == vertices.len() && !vertices.is_empty() && detail["state"] == "RUNNING" {
        Probe::Running(id.to_string())
    } else {
        Probe::NotYet(format!("job {id}: {running} of {} vertices RUNNING", vertices.len()))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::jvm::{JvmJobs, JvmSystem, BUILD_STAMP, CLASSPATH};
    use crate::jvm_job::JvmJob;
    use crate::output::tests::TempDir;
    use std::fs::File;
    use std::path::Path;
    use std::time::SystemTime;

    fn args(s: &str) -> Vec<String> {
        s.split_whitespace().map(str::to_string).collect()
    }

    #[test]
    fn workloads_without_a_flink_job_are_named() {
        assert_eq!(FLINK.job_workload("syn"), Ok("syn"));
        assert_eq!(FLINK.job_workload("lr"), Ok("linear-road"));
        assert_eq!(FLINK.job_workload("linear-road"), Ok("linear-road"));
        for w in ["wordcount", "wc", "ysb", "nosuch"] {
            let e = FLINK.job_workload(w).unwrap_err();
            assert!(e.contains(&format!("no '{w}' workload")) && e.contains("syn and linear-road"), "{e}");
        }
    }

    #[test]
    fn job_flags_are_checked() {
        assert_eq!(
            FLINK.check_job_args("syn", &args("--ops 3 --cost-ns=500 --queries 2 --seed 7 --parallelism 2")),
            Ok(())
        );
        assert_eq!(
            FLINK.check_job_args("syn", &args("--selectivity 0.5 --ramp-to 9000 --buffer-timeout-ms -1")),
            Ok(())
        );
        assert_eq!(
            FLINK.check_job_args("linear-road", &args("--shape lachesis --xways 2 --cars-per-second 50")),
            Ok(())
        );
        assert_eq!(FLINK.check_job_args("linear-road", &args("--shape=lachesis --traffic 1h")), Ok(()));
        let msg = |w: &str, a: &str| FLINK.check_job_args(w, &args(a)).unwrap_err();
        for engine_only in ["--threading", "--chaining", "--channel-capacity", "--batch-size", "--metrics-addr"] {
            let e = msg("syn", &format!("--ops 3 {engine_only} 1"));
            assert!(e.contains(&format!("does not take {engine_only}")) && e.contains("--cost-ns"), "{e}");
        }
        assert_eq!(FLINK.check_job_args("syn", &args("--lachesis --blocking --queries 4 --seed 3")), Ok(()));
        assert_eq!(FLINK.check_job_args("syn", &args("--ops 2 --lachesis")), Ok(()));
        assert!(msg("syn", "--lachesis=yes").contains("--lachesis takes no value"));
        assert!(msg("linear-road", "--shape lachesis --lachesis").contains("does not take --lachesis"));
        assert!(msg("syn", "--xways 2").contains("does not take --xways"));
        assert!(msg("linear-road", "--shape lachesis --ops 2").contains("does not take --ops"));
        assert!(msg("syn", "--rest-port 8081").contains("the lab picks a free port"));
        assert!(msg("syn", "--rate=5").contains("--rate cannot be passed"));
        assert!(msg("syn", "--ops").contains("--ops needs a value"));
        assert!(msg("syn", "--ops --queries 2").contains("--ops needs a value"));
        assert!(msg("syn", "--ops 3 4").contains("unexpected argument '4'"));
        assert!(msg("linear-road", "--xways 1").contains("pass -- --shape lachesis"));
        assert!(msg("linear-road", "--shape faithful").contains("--shape faithful was given"));
    }

    #[test]
    fn a_build_is_needed_when_a_source_is_newer_than_the_jar() {
        let dir = TempDir::new("flink-stale");
        let d = &dir.0.join("flink");
        let at = |p: &Path, secs: u64| {
            std::fs::create_dir_all(p.parent().unwrap()).unwrap();
            let f = File::create(p).unwrap();
            f.set_modified(SystemTime::UNIX_EPOCH + Duration::from_secs(secs)).unwrap();
        };
        let classpath = d.join(FLINK.build_dir).join(CLASSPATH);
        let stamp = d.join(FLINK.build_dir).join(BUILD_STAMP);
        at(&d.join("pom.xml"), 100);
        at(&d.join("src/main/java/moirai/flink/Run.java"), 200);
        assert!(JvmJobs::needs_build(&FLINK, d), "no jar yet");
        at(&d.join(FLINK.jar), 300);
        assert!(JvmJobs::needs_build(&FLINK, d), "no classpath.txt yet");
        // Maven leaves a classpath.txt whose content did not change as it was: its age is no matter.
        at(&classpath, 50);
        assert!(!JvmJobs::needs_build(&FLINK, d));
        // The Flink 2 build is another jar, classpath and stamp, in a directory of its own.
        assert!(JvmJobs::needs_build(&FLINK2, d), "the 1.20 build is no 2.x build");
        at(&d.join(FLINK2.jar), 300);
        at(&d.join(FLINK2.build_dir).join(CLASSPATH), 300);
        assert!(!JvmJobs::needs_build(&FLINK2, d));
        assert_ne!(FLINK.jar, FLINK2.jar);
        at(&d.join("src/main/java/moirai/flink/Syn.java"), 400);
        assert!(JvmJobs::needs_build(&FLINK, d), "a new source");
        assert!(JvmJobs::needs_build(&FLINK2, d), "a new source, for both versions");
        at(&d.join(FLINK.jar), 500);
        assert!(!JvmJobs::needs_build(&FLINK, d));
        at(&d.join("pom.xml"), 600);
        assert!(JvmJobs::needs_build(&FLINK, d), "a changed pom.xml");
        // A build that left the jar as it was (same content) still counts, by the lab's stamp.
        at(&stamp, 700);
        assert!(!JvmJobs::needs_build(&FLINK, d));
        assert!(JvmJobs::needs_build(&FLINK2, d), "the 1.20 build's stamp is not 2.x's");
        // The sources shared with the Storm jobs count too, and those of one version's API.
        at(&d.join("../common/src/main/java/moirai/jobs/Spin.java"), 800);
        assert!(JvmJobs::needs_build(&FLINK, d), "a changed shared source");
        at(&stamp, 900);
        assert!(!JvmJobs::needs_build(&FLINK, d));
        at(&d.join("src/flink1/java/moirai/flink/SinkEntry.java"), 950);
        assert!(JvmJobs::needs_build(&FLINK, d), "a changed source of 1.20's API");
        at(&stamp, 1000);
        std::fs::remove_file(&classpath).unwrap();
        assert!(JvmJobs::needs_build(&FLINK, d), "classpath.txt is gone");
    }

    #[test]
    fn a_missing_project_or_a_failing_build_is_explained() {
        if crate::requires::or_skip(
            "a_missing_project_or_a_failing_build_is_explained",
            crate::requires::jdk_and_maven(),
        )
        .is_none()
        {
            return;
        }
        let dir = TempDir::new("flink-build");
        let e = JvmJobs::build_in(&FLINK, &dir.0.join("nowhere")).unwrap_err();
        assert!(e.contains("no Flink jobs project") && e.contains(FLINK.dir_env), "{e}");
        // A real Maven run on a broken pom: the error carries Maven's own complaint.
        std::fs::write(dir.0.join("pom.xml"), "<project><modelVersion>4.0.0</modelVersion></project>").unwrap();
        let e = JvmJobs::build_in(&FLINK, &dir.0).unwrap_err();
        assert!(e.contains("building the Flink jobs failed") && e.contains("exit code 1"), "{e}");
        assert!(e.contains("groupId"), "Maven's message about the missing groupId: {e}");
    }

    fn alive(pid: u32) -> bool {
        // A reaped child has no /proc entry.
        Path::new(&format!("/proc/{pid}")).exists()
    }

    /// Real Flink: the job and its vertices become RUNNING, the REST API answers at the URL
    /// given, and `stop` ends the JVM by PID (twice is fine).
    fn a_real_job_becomes_running_and_stops_by_pid_on(system: &'static JvmSystem, test: &str) {
        if crate::requires::or_skip(test, crate::requires::jdk_and_maven()).is_none() {
            return;
        }
        let jobs = JvmJobs::build(system).unwrap();
        let (mut job, id) =
            JvmJob::start_running(&jobs, "syn", &args("--rate 1000 --duration 120s --ops 2"), Duration::from_secs(90))
                .unwrap();
        let pid = job.pid();
        assert!(id.len() == 32 && id.chars().all(|c| c.is_ascii_hexdigit()), "a Flink job id: {id}");
        let detail: serde_json::Value =
            ureq::get(&format!("{}/jobs/{id}", job.endpoint())).call().unwrap().into_json().unwrap();
        assert_eq!(detail["state"], "RUNNING");
        // SYN with 2 operators and chaining off: source, 2 operators, sink, each its own vertex;
        // the FLIP-27 source and the Sink v2 writer named as on both versions.
        let names: Vec<&str> =
            detail["vertices"].as_array().unwrap().iter().map(|v| v["name"].as_str().unwrap()).collect();
        assert_eq!(names, ["Source: syn0/source", "syn0/op1", "syn0/op2", "syn0/sink: Writer"], "{detail}");
        assert!(alive(pid));
        job.stop();
        assert!(!alive(pid), "the JVM {pid} outlived stop()");
        assert!(job.try_wait().is_some());
        job.stop();
    }

    #[test]
    fn a_real_job_becomes_running_and_stops_by_pid() {
        a_real_job_becomes_running_and_stops_by_pid_on(&FLINK, "a_real_job_becomes_running_and_stops_by_pid");
    }

    #[test]
    fn a_real_flink2_job_becomes_running_and_stops_by_pid() {
        a_real_job_becomes_running_and_stops_by_pid_on(&FLINK2, "a_real_flink2_job_becomes_running_and_stops_by_pid");
    }

    /// Real Flink: a short job ends by itself and prints its summary, which the lab can read,
    /// on the version it was built for.
    fn a_real_job_ends_by_itself_with_its_summary_on(system: &'static JvmSystem, version: &str, test: &str) {
        if crate::requires::or_skip(test, crate::requires::jdk_and_maven()).is_none() {
            return;
        }
        let jobs = JvmJobs::build(system).unwrap();
        let job = JvmJob::start(&jobs, "syn", &args("--rate 500 --duration 4s --ops 1 --json")).unwrap();
        let (pid, log) = (job.pid(), job.log_path().to_path_buf());
        let stdout = job.wait(Duration::from_secs(120)).unwrap();
        assert!(!alive(pid));
        assert!(!log.exists(), "the temp log of a clean run is removed");
        let s = crate::RunSummary::from_stdout(&stdout).unwrap();
        assert_eq!(s.extra["system"], "flink", "{stdout}");
        assert_eq!(s.extra["flink_version"], version, "{stdout}");
        assert_eq!(s.workload, "syn");
        assert_eq!(s.offered_rate, 500.0);
        // Open loop: the source emitted its 4 s at 500 tuples/s (all 2000 but for a stall at the
        // very end on a busy machine), and all of it left the sink.
        assert!((1900..=2000).contains(&s.tuples_in), "{stdout}");
        assert_eq!(s.tuples_out, s.tuples_in, "{stdout}");
    }

    #[test]
    fn a_real_job_ends_by_itself_with_its_summary() {
        a_real_job_ends_by_itself_with_its_summary_on(&FLINK, "1.20.3", "a_real_job_ends_by_itself_with_its_summary");
    }

    #[test]
    fn a_real_flink2_job_ends_by_itself_with_its_summary() {
        a_real_job_ends_by_itself_with_its_summary_on(
            &FLINK2,
            "2.3.0",
            "a_real_flink2_job_ends_by_itself_with_its_summary",
        );
    }

    /// Real Flink: flags the job rejects end the JVM with exit code 2, and waiting says so
    /// with the job's own message instead of waiting for the timeout.
    #[test]
    fn a_real_job_with_bad_flags_fails_waiting_early() {
        if crate::requires::or_skip("a_real_job_with_bad_flags_fails_waiting_early", crate::requires::jdk_and_maven())
            .is_none()
        {
            return;
        }
        let jobs = JvmJobs::build(&FLINK).unwrap();
        let mut job = JvmJob::start(&jobs, "syn", &args("--ops notanumber")).unwrap();
        let e = job.wait_running(Duration::from_secs(300)).unwrap_err();
        assert!(e.contains("exited before the job was RUNNING (exit code 2)"), "{e}");
        assert!(e.contains("it said: moirai-flink: --ops 'notanumber' is not an integer"), "{e}");
        let log = job.log_path().to_path_buf();
        assert!(e.contains("--ops") && e.contains(&log.display().to_string()), "{e}");
        drop(job);
        assert!(log.exists(), "a log an error message names is kept");
        std::fs::remove_file(log).unwrap();
    }

    /// The Java port of `syn::draw` (`moirai.jobs.SynDraw`, shared by the Flink and Storm jobs)
    /// draws bit for bit what moirai draws: the same queries, costs, selectivities (compared by
    /// their IEEE bits) and blocking operators, for several seeds and configurations.
    #[test]
    fn the_java_syn_draw_is_moirais() {
        if crate::requires::or_skip("the_java_syn_draw_is_moirais", crate::requires::jdk_and_maven()).is_none() {
            return;
        }
        use moirai_workloads::syn::{draw, SynConfig};
        let jobs = JvmJobs::build(&FLINK).unwrap();
        let lachesis = SynConfig::lachesis();
        let simple = SynConfig::default();
        let cases: Vec<(&str, SynConfig)> = vec![
            ("--lachesis", lachesis.clone()),
            ("--lachesis --seed 1", SynConfig { seed: 1, ..lachesis.clone() }),
            ("--lachesis --seed 42 --blocking", SynConfig { seed: 42, blocking: true, ..lachesis.clone() }),
            (
                "--lachesis --seed 18446744073709551615 --blocking --queries 200 --selectivity 0.2",
                SynConfig { seed: u64::MAX, blocking: true, queries: 200, selectivity: 0.2, ..lachesis.clone() },
            ),
            (
                "--lachesis --seed 7 --ops 5 --cost-ns 3000 --selectivity 0.5 --heavy-op 2 --heavy-factor 8",
                SynConfig { seed: 7, ops: 5, cost_ns: 3000, selectivity: 0.5, heavy: Some((2, 8)), ..lachesis.clone() },
            ),
            (
                "--lachesis --seed 99 --queries 50 --selectivity 0.73",
                SynConfig { seed: 99, queries: 50, selectivity: 0.73, ..lachesis },
            ),
            (
                "--queries 3 --ops 4 --cost-ns 500 --selectivity 2.5 --blocking --seed 5 --heavy-op 4",
                SynConfig {
                    queries: 3,
                    ops: 4,
                    cost_ns: 500,
                    selectivity: 2.5,
                    blocking: true,
                    seed: 5,
                    heavy: Some((4, 4)),
                    ..simple
                },
            ),
        ];
        let bits = |v: &mut serde_json::Value| {
            let s = v["selectivity"].as_f64().unwrap();
            v["selectivity"] = s.to_bits().into();
        };
        for (flags, config) in cases {
            let out = std::process::Command::new(&jobs.java)
                .arg("-cp")
                .arg(jobs.jar())
                .arg("moirai.jobs.SynDraw")
                .args(args(flags))
                .arg("--bits")
                .output()
                .unwrap();
            assert!(out.status.success(), "SynDraw {flags}: {}", String::from_utf8_lossy(&out.stderr));
            let java: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
            // serde_json writes the shortest digits that read back as the same f64 (ryu), so the
            // bits of what Rust serialises are exactly those of the drawn values.
            let mut rust = serde_json::to_value(draw(&config).unwrap()).unwrap();
            for q in rust.as_array_mut().unwrap() {
                bits(q);
                for op in q["operators"].as_array_mut().unwrap() {
                    bits(op);
                }
            }
            assert_eq!(java, rust, "SynDraw {flags}");
            let n = config.queries * (config.ops + 1);
            assert_eq!(java.to_string().matches("\"cost_ns\"").count(), n, "{flags}: every query and operator");
        }
    }

    #[test]
    fn the_command_runs_the_main_class_with_the_jar_first_on_the_classpath() {
        let jobs = JvmJobs {
            system: &FLINK,
            dir: "/p".into(),
            jar: "/p/target/moirai-flink-jobs.jar".into(),
            classpath: "/m/a.jar:/m/b.jar".into(),
            java: "/usr/bin/java".into(),
        };
        let cmd = jobs.command("syn", &args("--rate 1000 --json"), "18081".as_ref());
        let got: Vec<String> = cmd.get_args().map(|a| a.to_string_lossy().into_owned()).collect();
        assert_eq!(cmd.get_program(), "/usr/bin/java");
        assert_eq!(
            got.join(" "),
            "-Xmx1g -cp /p/target/moirai-flink-jobs.jar:/m/a.jar:/m/b.jar moirai.flink.Run syn --rate 1000 \
             --json --rest-port 18081"
        );
    }
}

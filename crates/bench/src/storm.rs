//! Apache Storm jobs of moirai's workloads, for `storm:` configurations of the lab and for tests
//! that need a real Storm topology to schedule.
//!
//! The jobs live in `integrations/storm`, a Maven project like `integrations/flink` ([`crate::jvm`]
//! builds both): one job is one JVM, `java -cp <jar>:<classpath> moirai.storm.Run <workload>
//! [flags] --metrics-dir DIR`, running a Storm `LocalCluster` (Nimbus, a supervisor and the
//! workers as threads of that JVM) with one topology whose metrics Storm's own `CsvStormReporter`
//! writes into DIR every second — what the middleware's Storm driver reads. It ends by itself
//! after `--duration` and, with `--json`, prints the same JSON summary as `moirai run <workload>
//! --json` on its last stdout line (plus `"system": "storm"`).
//!
//! [`STORM`] is what is Storm's own: the project, the flags, and that a topology runs once a
//! spout reported an emit count into the metrics directory.

use std::path::Path;

use crate::jvm::{Endpoint, JvmSystem, Probe};

/// Apache Storm, `integrations/storm`.
pub static STORM: JvmSystem = JvmSystem {
    name: "Storm",
    module: "storm",
    dir_env: "MOIRAI_STORM_JOBS",
    jar: "target/moirai-storm-jobs.jar",
    build_dir: "target",
    mvn_args: &[],
    main_class: "moirai.storm.Run",
    prefix: "moirai-storm: ",
    // How idle executors wait: progressive (Storm's default) or park[:MICROS].
    own_flags: &["--wait-strategy"],
    endpoint: Endpoint::Directory { flag: "--metrics-dir", what: "metrics" },
    middleware_flag: "--storm",
    metrics: None,
    ready: "its topology ran",
    running: "running",
    port_taken: &[],
    probe: |dir| match emitting_topology(Path::new(dir)) {
        Some(id) => Probe::Running(id),
        None => Probe::NotYet("no spout reported an emit count yet".into()),
    },
    late: |dir, timeout, _| format!("no spout of the Storm job reported an emit count in {dir} within {timeout:?}"),
};

/// The id of a topology a spout of which reported an emit count into `dir`, if any.
fn emitting_topology(dir: &Path) -> Option<String> {
    std::fs::read_dir(dir).ok()?.flatten().find_map(|e| {
        let name = e.file_name().into_string().ok()?;
        if !name.contains("-__emit-count-") || name.contains("-__emit-count-__") || name.ends_with(".m1_rate.csv") {
            return None;
        }
        let (id, _) = name.strip_prefix("storm.worker.")?.split_once('.')?;
        Some(id.to_string())
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::jvm::JvmJobs;
    use crate::jvm_job::JvmJob;
    use crate::output::tests::TempDir;
    use std::path::PathBuf;
    use std::time::Duration;

    fn args(s: &str) -> Vec<String> {
        s.split_whitespace().map(str::to_string).collect()
    }

    #[test]
    fn storm_job_flags_are_checked() {
        assert_eq!(STORM.check_job_args("syn", &args("--lachesis --queries 4 --parallelism 2 --seed 3")), Ok(()));
        assert_eq!(STORM.check_job_args("linear-road", &args("--shape lachesis --xways 2")), Ok(()));
        assert_eq!(STORM.check_job_args("syn", &args("--lachesis --wait-strategy park:100")), Ok(()));
        assert_eq!(STORM.check_job_args("linear-road", &args("--shape lachesis --wait-strategy=park")), Ok(()));
        let msg = |w: &str, a: &str| STORM.check_job_args(w, &args(a)).unwrap_err();
        assert!(msg("syn", "--metrics-dir /tmp/x").contains("a directory of its own"));
        assert!(msg("syn", "--buffer-timeout-ms 5").contains("the Storm job `syn` does not take --buffer-timeout-ms"));
        assert!(msg("syn", "--rest-port 8081").contains("does not take --rest-port"));
        assert!(msg("syn", "--wait-strategy").contains("--wait-strategy needs a value"));
        assert!(msg("linear-road", "--xways 1").contains("pass -- --shape lachesis"));
        assert!(STORM.job_workload("wordcount").unwrap_err().contains("the Storm jobs (integrations/storm) have no"));
    }

    #[test]
    fn a_topology_runs_once_a_spout_reported_emitting() {
        let dir = TempDir::new("storm-emitting");
        let d = &dir.0;
        assert_eq!(emitting_topology(d), None);
        let touch = |name: &str| std::fs::write(d.join(name), "t,count\n").unwrap();
        touch("storm.worker.moirai-syn-1-17.localhost.syn0-source.4.1024-receive-queue-population.csv");
        touch("storm.worker.moirai-syn-1-17.localhost.syn0-source.__ack_init.4.1024-__emit-count-__ack_init.csv");
        touch("storm.worker.moirai-syn-1-17.localhost.syn0-source.default.4.1024-__emit-count-default.m1_rate.csv");
        assert_eq!(emitting_topology(d), None, "queues, system streams and meters are no emit count");
        touch("storm.worker.moirai-syn-1-17.localhost.syn0-source.default.4.1024-__emit-count-default.csv");
        assert_eq!(emitting_topology(d).as_deref(), Some("moirai-syn-1-17"));
    }

    /// Real Storm: flags the job rejects end the JVM with exit code 2, and waiting says so with
    /// the job's own message instead of waiting for the timeout; the metrics directory goes with
    /// the job.
    #[test]
    fn a_real_storm_job_with_bad_flags_fails_waiting_early() {
        if crate::requires::or_skip(
            "a_real_storm_job_with_bad_flags_fails_waiting_early",
            crate::requires::jdk_and_maven(),
        )
        .is_none()
        {
            return;
        }
        let jobs = JvmJobs::build(&STORM).unwrap();
        let mut job = JvmJob::start(&jobs, "syn", &args("--ops notanumber")).unwrap();
        let e = job.wait_running(Duration::from_secs(300)).unwrap_err();
        assert!(e.contains("exited before its topology ran (exit code 2)"), "{e}");
        assert!(e.contains("moirai-storm: --ops 'notanumber' is not an integer"), "{e}");
        let (dir, log) = (PathBuf::from(job.endpoint()), job.log_path().to_path_buf());
        assert!(dir.is_dir());
        drop(job);
        assert!(!dir.exists(), "the metrics directory is removed with the job");
        assert!(log.exists(), "a log an error message names is kept");
        std::fs::remove_file(log).unwrap();
    }

    #[test]
    fn the_command_names_the_metrics_directory_last() {
        let jobs = JvmJobs {
            system: &STORM,
            dir: "/p".into(),
            jar: "/p/target/moirai-storm-jobs.jar".into(),
            classpath: "/m/a.jar".into(),
            java: "/usr/bin/java".into(),
        };
        let args: Vec<String> = ["--rate", "1000"].iter().map(|s| s.to_string()).collect();
        let cmd = jobs.command("syn", &args, Path::new("/tmp/m").as_os_str());
        let got: Vec<String> = cmd.get_args().map(|a| a.to_string_lossy().into_owned()).collect();
        assert_eq!(
            got.join(" "),
            "-Xmx1g -cp /p/target/moirai-storm-jobs.jar:/m/a.jar moirai.storm.Run syn --rate 1000 --metrics-dir /tmp/m"
        );
    }
}

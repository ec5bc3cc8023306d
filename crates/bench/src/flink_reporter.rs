//! Flink's Prometheus reporter in a standalone cluster's TaskManagers: the configuration that
//! makes each TaskManager serve its subtasks' counters in one scrape, which the middleware on its
//! node reads (`--flink-prometheus URL`) instead of one REST request per job vertex.
//!
//! The same reporter, with the same filter and labels, as `moirai.flink.Run` configures for a
//! MiniCluster (`--metrics-port`); a test below keeps the two lists equal.

/// The metrics the middleware reads per subtask, each in the scope Flink registers it in
/// (`<logical scope>:<name>[,<name>]`, as `metrics.reporter.<name>.filter.includes` takes them).
/// The twin of `Run.REPORTED`.
pub const REPORTED: [&str; 3] = [
    "taskmanager.job.task:numRecordsIn,numRecordsOut,numBuffersOut,accumulateBusyTimeMs,\
     accumulateBackPressuredTimeMs,accumulateIdleTimeMs",
    "taskmanager.job.task.Shuffle.Netty.Input.Buffers:inputQueueLength",
    "taskmanager.job.task.operator:pendingRecords",
];

/// Labels the middleware does not read, and the longest: left out of every sample (the twin of
/// `Run.EXCLUDED_LABELS`).
pub const EXCLUDED_LABELS: [&str; 3] = ["task_attempt_id", "host", "operator_id"];

/// A TaskManager's configuration lines for the reporter on `port` (all its node's interfaces).
pub fn reporter_conf(port: u16) -> Vec<(&'static str, String)> {
    vec![
        (
            "metrics.reporter.moirai.factory.class",
            "org.apache.flink.metrics.prometheus.PrometheusReporterFactory".into(),
        ),
        ("metrics.reporter.moirai.port", port.to_string()),
        ("metrics.reporter.moirai.filter.includes", REPORTED.join(";")),
        ("metrics.reporter.moirai.filterLabelValueCharacters", "false".into()),
        ("metrics.reporter.moirai.scope.variables.excludes", EXCLUDED_LABELS.join(";")),
    ]
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The Java side's lists, read from its source: a metric added there and not here (or the
    /// other way round) would make the cluster's middleware read another set than the MiniCluster's.
    #[test]
    fn the_cluster_reports_what_the_minicluster_reports() {
        let path = concat!(env!("CARGO_MANIFEST_DIR"), "/../../integrations/flink/src/main/java/moirai/flink/Run.java");
        let java = std::fs::read_to_string(path).unwrap_or_else(|e| panic!("{path}: {e}"));
        // String literals, their `+` continuations joined.
        let joined = java.replace("\"\n                + \"", "");
        for r in REPORTED {
            assert!(joined.contains(&format!("\"{r}\"")), "Run.REPORTED lacks {r:?}");
        }
        let excluded =
            joined.split("EXCLUDED_LABELS = {").nth(1).and_then(|s| s.split('}').next()).expect("Run.EXCLUDED_LABELS");
        let quoted: Vec<&str> = excluded.split('"').skip(1).step_by(2).collect();
        assert_eq!(quoted, EXCLUDED_LABELS);
        let reported = joined.split("REPORTED = {").nth(1).and_then(|s| s.split('}').next()).expect("Run.REPORTED");
        assert_eq!(reported.split('"').skip(1).step_by(2).count(), REPORTED.len(), "{reported}");
    }
}

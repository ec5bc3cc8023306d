//! One measured point of a sweep, and the engine's JSON summary it is read from.
//!
//! `moirai run <workload> --json` prints its summary as one JSON object on the last line of its
//! stdout (`Report` in `crates/cli/src/run.rs`). The lab reads only the fields it reports and
//! keeps every other field as it came ([`RunSummary::extra`]), so workloads may add fields (their
//! parameters, new statistics) without a change here. Fields that tables need are required; the
//! rest default when absent.

use serde::{Deserialize, Serialize};

/// A latency distribution in milliseconds, as the engine summarises its HdrHistogram.
#[derive(Clone, Copy, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct Latency {
    /// Tuples measured.
    #[serde(default)]
    pub count: u64,
    /// Mean.
    pub mean: f64,
    /// 10th percentile, when the engine reports it.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub p10: Option<f64>,
    /// Median.
    pub p50: f64,
    /// 90th percentile, when the engine reports it.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub p90: Option<f64>,
    /// 99th percentile.
    pub p99: f64,
    /// 99.9th percentile.
    pub p999: f64,
    /// Maximum.
    pub max: f64,
}

impl Latency {
    /// The percentiles present, as `(quantile, milliseconds)` in ascending quantile order, with
    /// the maximum as quantile 1.0.
    pub fn percentiles(&self) -> Vec<(f64, f64)> {
        let mut v = Vec::with_capacity(6);
        if let Some(p) = self.p10 {
            v.push((0.10, p));
        }
        v.push((0.50, self.p50));
        if let Some(p) = self.p90 {
            v.push((0.90, p));
        }
        v.extend([(0.99, self.p99), (0.999, self.p999), (1.0, self.max)]);
        v
    }
}

/// Distribution of queue lengths sampled during the measured window, in tuples.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
#[serde(default)]
pub struct QueueLen {
    /// Samples taken (all operators, every sampling instant).
    pub samples: u64,
    /// Mean.
    pub mean: f64,
    /// Median.
    pub p50: f64,
    /// 90th percentile.
    pub p90: f64,
    /// 99th percentile.
    pub p99: f64,
    /// Maximum.
    pub max: f64,
    /// Mean queue length per physical operator, by name.
    pub per_operator: std::collections::BTreeMap<String, f64>,
}

/// The summary one `moirai run <workload> --json` printed.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct RunSummary {
    /// Workload name.
    #[serde(default)]
    pub workload: String,
    /// Offered rate, tuples/s, as the engine understood `--rate`.
    pub offered_rate: f64,
    /// Length of the run, s.
    #[serde(default)]
    pub duration_s: f64,
    /// Length of the measured window after warm-up, s.
    #[serde(default)]
    pub measured_s: f64,
    /// Tuples/s entering the engine during the measured window.
    pub ingress_tps: f64,
    /// Tuples/s leaving the engine's sinks during the measured window.
    pub egress_tps: f64,
    /// Processing latency: egress time − ingress time.
    pub latency_ms: Latency,
    /// End-to-end latency: egress time − intended send time (includes the source queue).
    pub e2e_latency_ms: Latency,
    /// Operator threads of the engine.
    #[serde(default)]
    pub threads: u64,
    /// CPU of the engine process during the measured window, in cores.
    #[serde(default)]
    pub cpu_cores: f64,
    /// Queue lengths during the measured window.
    #[serde(default)]
    pub queue_len: QueueLen,
    /// Every other field of the summary (workload parameters, tuple counts, RSS, ...), kept as
    /// it came.
    #[serde(flatten)]
    pub extra: serde_json::Map<String, serde_json::Value>,
}

impl RunSummary {
    /// The largest outgoing-queue backlog of the run's Hone exchange (`exchange.max_backlog`),
    /// when the workload ran one.
    pub fn exchange_max_backlog(&self) -> Option<f64> {
        self.extra.get("exchange")?.get("max_backlog")?.as_f64()
    }

    /// Reads the summary from a child's stdout: the last non-empty line must be one JSON object.
    pub fn from_stdout(stdout: &str) -> Result<RunSummary, String> {
        let last = stdout
            .lines()
            .rev()
            .find(|l| !l.trim().is_empty())
            .ok_or_else(|| "the engine printed nothing on stdout (expected a JSON summary)".to_string())?;
        let summary: RunSummary = serde_json::from_str(last.trim())
            .map_err(|e| format!("the last line of the engine's stdout is not its JSON summary ({e}): {last:.200}"))?;
        summary.check()?;
        Ok(summary)
    }

    /// Rejects summaries whose numbers cannot be true (negative, or not finite), so that they
    /// never reach a median.
    fn check(&self) -> Result<(), String> {
        let mut numbers = vec![
            ("offered_rate", self.offered_rate),
            ("ingress_tps", self.ingress_tps),
            ("egress_tps", self.egress_tps),
            ("cpu_cores", self.cpu_cores),
            ("queue_len.mean", self.queue_len.mean),
        ];
        for (name, l) in [("latency_ms", &self.latency_ms), ("e2e_latency_ms", &self.e2e_latency_ms)] {
            numbers.push((name, l.mean));
            for (_, v) in l.percentiles() {
                numbers.push((name, v));
            }
        }
        match numbers.iter().find(|(_, v)| !(v.is_finite() && *v >= 0.0)) {
            Some((name, v)) => Err(format!("the engine's summary has {name} = {v}, not a finite number >= 0")),
            None => Ok(()),
        }
    }
}

/// One (configuration, rate, repetition) of a sweep.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct Point {
    /// Label of the configuration.
    pub configuration: String,
    /// The swept offered rate, tuples/s.
    pub rate: f64,
    /// Repetition, from 1.
    pub rep: u32,
    /// Wall-clock time the point took, s (start-up and shutdown included).
    pub wall_s: f64,
    /// What went wrong, if the point failed; `None` for a measured point.
    pub failure: Option<String>,
    /// The engine's summary, if it printed one.
    pub run: Option<RunSummary>,
    /// CPU of the middleware during (approximately) the measured window, as a share of one
    /// core; `None` for configurations without middleware.
    pub middleware_cpu: Option<f64>,
    /// Share of (approximately) the measured window in which the middleware acted on the SPE
    /// (`crate::mw_state`), 0..=1; `None` for configurations without middleware.
    #[serde(default)]
    pub middleware_active_share: Option<f64>,
    /// When the middleware first acted on the SPE, in seconds after the SPE's start; `None` when
    /// it never did (or there is no middleware).
    #[serde(default)]
    pub middleware_first_active_s: Option<f64>,
}

impl Point {
    /// The engine's summary of a point that did not fail.
    pub fn measured(&self) -> Option<&RunSummary> {
        if self.failure.is_none() {
            self.run.as_ref()
        } else {
            None
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A summary as `moirai run syn --json` prints it today.
    pub(crate) const SAMPLE: &str = r#"{"workload":"syn","threading":"dedicated","chaining":false,"offered_rate":100000.0,"duration_s":3.0,"measured_s":2.4,"ingress_tps":99995.2,"egress_tps":99990.2,"tuples_in":300101,"tuples_out":300101,"latency_ms":{"count":240112,"mean":0.153,"p50":0.09,"p99":1.8,"p999":6.0,"max":7.5},"e2e_latency_ms":{"count":240112,"mean":0.24,"p50":0.16,"p99":2.7,"p999":6.1,"max":7.6},"threads":7,"cpu_ns_per_tuple":9087.4,"cpu_cores":0.92,"queue_len":{"samples":168,"mean":1.93,"p50":0,"p90":12,"p99":26,"max":26,"per_operator":{"syn0/op1 (1/1)":1.125}},"rss_start_bytes":3358720,"rss_end_bytes":6111232,"cost_ns":0,"ops":5,"queries":1,"rate":100000.0,"seed":0,"selectivity":1.0}"#;

    #[test]
    fn reads_the_last_line_and_keeps_unknown_fields() {
        let stdout = format!("workload          syn\noffered rate      100000 tuples/s\n{SAMPLE}\n\n");
        let s = RunSummary::from_stdout(&stdout).unwrap();
        assert_eq!(s.workload, "syn");
        assert_eq!(s.ingress_tps, 99995.2);
        assert_eq!(s.e2e_latency_ms.p99, 2.7);
        assert_eq!(s.latency_ms.p10, None);
        assert_eq!(s.queue_len.p99, 26.0);
        assert_eq!(s.queue_len.per_operator["syn0/op1 (1/1)"], 1.125);
        assert_eq!(s.extra["ops"], serde_json::json!(5));
        assert_eq!(s.extra["threading"], serde_json::json!("dedicated"));
        // Written back, the unknown fields are still there.
        let again: serde_json::Value = serde_json::to_value(&s).unwrap();
        assert_eq!(again["selectivity"], serde_json::json!(1.0));
    }

    #[test]
    fn optional_fields_may_be_missing_and_new_percentiles_are_read() {
        let line = r#"{"offered_rate":5.0,"ingress_tps":5.0,"egress_tps":5.0,"new_field":[1,2],
            "latency_ms":{"mean":1,"p10":0.5,"p50":1,"p90":1.5,"p99":2,"p999":3,"max":4},
            "e2e_latency_ms":{"mean":1,"p50":1,"p99":2,"p999":3,"max":4}}"#
            .replace('\n', "");
        let s = RunSummary::from_stdout(&line).unwrap();
        assert_eq!(s.queue_len, QueueLen::default());
        let qs: Vec<f64> = s.latency_ms.percentiles().iter().map(|p| p.0).collect();
        assert_eq!(qs, [0.1, 0.5, 0.9, 0.99, 0.999, 1.0]);
        assert_eq!(s.e2e_latency_ms.percentiles().len(), 4);
    }

    #[test]
    fn rejects_output_that_is_not_a_summary() {
        assert!(RunSummary::from_stdout("").unwrap_err().contains("nothing on stdout"));
        assert!(RunSummary::from_stdout("hello\n").unwrap_err().contains("not its JSON summary"));
        let missing = r#"{"offered_rate":5.0,"egress_tps":5.0}"#;
        assert!(RunSummary::from_stdout(missing).unwrap_err().contains("ingress_tps"));
        let negative = SAMPLE.replace(r#""ingress_tps":99995.2"#, r#""ingress_tps":-1"#);
        assert!(RunSummary::from_stdout(&negative).unwrap_err().contains("ingress_tps = -1"));
    }
}

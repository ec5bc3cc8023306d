//! The run summary: what `moirai run <workload> --json` prints as one JSON object on the last line
//! of its stdout, in every execution mode (the continuous engine, micro-batches), and what the
//! simulator writes for a simulated run. The lab reads it (`moirai bench`, `moirai sim`).
//!
//! The same quantity has the same field in every mode: the fields of [`RunSummary`] itself. What
//! only one mode measures (the continuous engine's timeline and RSS, the micro-batch driver's
//! group sizes, the simulator's context switches) and the workload's parameters are kept in
//! [`RunSummary::extra`]; what the workload itself measured or checked (its output checked against
//! a naive computation, Linear Road's response times) is in [`RunSummary::workload_stats`], with
//! its verdict under `workload_stats.check` where the workload has one.
//!
//! A reader takes only the fields it needs and keeps every other one as it came, so a writer may
//! add fields without a change here. Fields that tables need are required; the rest default when
//! absent.

use std::collections::BTreeMap;
use std::fmt;

use serde::{Deserialize, Serialize};

/// A latency distribution in milliseconds.
#[derive(Clone, Copy, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct Latency {
    /// Values measured (tuples, windows, micro-batches).
    #[serde(default)]
    pub count: u64,
    /// Mean.
    pub mean: f64,
    /// 10th percentile, when the writer measures it.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub p10: Option<f64>,
    /// Median.
    pub p50: f64,
    /// 90th percentile, when the writer measures it.
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
    /// The distribution of `sorted` (ascending, milliseconds), every percentile taken as the
    /// nearest sample (`sorted[round((n − 1) · q)]`), p10 and p90 included.
    pub fn of_sorted(sorted: &[f64]) -> Latency {
        let Some(&max) = sorted.last() else {
            return Latency::default();
        };
        let q = |p: f64| sorted[((sorted.len() - 1) as f64 * p).round() as usize];
        Latency {
            count: sorted.len() as u64,
            mean: sorted.iter().sum::<f64>() / sorted.len() as f64,
            p10: Some(q(0.1)),
            p50: q(0.5),
            p90: Some(q(0.9)),
            p99: q(0.99),
            p999: q(0.999),
            max,
        }
    }

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

/// Distribution of queue lengths sampled during the measured window, in tuples. The quantiles
/// are to 3 significant digits (exact up to 2 047 tuples); the mean and the maximum are exact.
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
    /// Mean queue length per physical operator, by `query/operator` name.
    pub per_operator: BTreeMap<String, f64>,
}

/// The summary of one run (see the module's documentation).
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct RunSummary {
    /// Workload name (`syn`, `linear-road`, `wordcount`, `ysb`).
    #[serde(default)]
    pub workload: String,
    /// The threading model as given on the command line (`dedicated`, `dynamic:2`,
    /// `micro-batch`, ...).
    #[serde(default)]
    pub threading: String,
    /// Offered rate in tuples/s, in total over all queries and sources (0: as fast as possible).
    pub offered_rate: f64,
    /// How long the sources produced, s.
    #[serde(default)]
    pub duration_s: f64,
    /// Length of the measured window after warm-up, s.
    #[serde(default)]
    pub measured_s: f64,
    /// Tuples/s entering the engine during the measured window.
    pub ingress_tps: f64,
    /// Tuples/s leaving the sinks, from the end of the warm-up until the last tuple came out.
    pub egress_tps: f64,
    /// Tuples that entered, over the whole run.
    #[serde(default)]
    pub tuples_in: u64,
    /// Tuples that left the sinks (micro-batches: the results committed), over the whole run.
    #[serde(default)]
    pub tuples_out: u64,
    /// Processing latency: egress time − ingress time (micro-batches: each micro-batch's commit
    /// latency).
    pub latency_ms: Latency,
    /// End-to-end latency: egress time − the intended send time, the sources' queue included
    /// (micro-batches: WordCount's commit latency, YSB's window latency).
    pub e2e_latency_ms: Latency,
    /// Threads running operators (micro-batches: executor processes).
    #[serde(default)]
    pub threads: u64,
    /// CPU of the engine's processes during the measured window, in cores (1.0 = one core busy
    /// all the time).
    #[serde(default)]
    pub cpu_cores: f64,
    /// Queue lengths during the measured window (the continuous engine and the simulator).
    #[serde(default)]
    pub queue_len: QueueLen,
    /// What the workload measured or checked itself; its verdict, where it has one, is
    /// `workload_stats.check`. Null when it has nothing to say.
    #[serde(default, skip_serializing_if = "serde_json::Value::is_null")]
    pub workload_stats: serde_json::Value,
    /// Every other field: the mode's own measurements and the workload's parameters, kept as
    /// they came.
    #[serde(flatten)]
    pub extra: serde_json::Map<String, serde_json::Value>,
}

/// Why a process's stdout holds no usable [`RunSummary`].
#[derive(Debug, Clone, PartialEq)]
pub enum SummaryError {
    /// Nothing was printed on stdout.
    Empty,
    /// The last line is not a summary: the parser's message and the line (cut to 200 characters).
    NotASummary {
        /// What the JSON parser said.
        reason: String,
        /// The start of the line.
        line: String,
    },
    /// A number that cannot be true: a negative or non-finite rate, latency or CPU share.
    Impossible {
        /// The field.
        field: &'static str,
        /// Its value.
        value: f64,
    },
}

impl fmt::Display for SummaryError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            SummaryError::Empty => write!(f, "the engine printed nothing on stdout (expected a JSON summary)"),
            SummaryError::NotASummary { reason, line } => {
                write!(f, "the last line of the engine's stdout is not its JSON summary ({reason}): {line}")
            }
            SummaryError::Impossible { field, value } => {
                write!(f, "the engine's summary has {field} = {value}, not a finite number >= 0")
            }
        }
    }
}

impl std::error::Error for SummaryError {}

impl RunSummary {
    /// The largest outgoing-queue backlog of the run's Hone exchange (`exchange.max_backlog`),
    /// when the workload ran one.
    pub fn exchange_max_backlog(&self) -> Option<f64> {
        self.extra.get("exchange")?.get("max_backlog")?.as_f64()
    }

    /// The workload's verdict on its own output (`workload_stats.check`), if it has one.
    pub fn check(&self) -> Option<&str> {
        self.workload_stats.get("check")?.as_str()
    }

    /// Reads the summary from a child's stdout: the last non-empty line must be one JSON object.
    pub fn from_stdout(stdout: &str) -> Result<RunSummary, SummaryError> {
        let last = stdout.lines().rev().find(|l| !l.trim().is_empty()).ok_or(SummaryError::Empty)?;
        let summary: RunSummary = serde_json::from_str(last.trim())
            .map_err(|e| SummaryError::NotASummary { reason: e.to_string(), line: last.chars().take(200).collect() })?;
        summary.validate()?;
        Ok(summary)
    }

    /// Rejects summaries whose numbers cannot be true (negative, or not finite), so that they
    /// never reach a median.
    fn validate(&self) -> Result<(), SummaryError> {
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
        match numbers.into_iter().find(|(_, v)| !(v.is_finite() && *v >= 0.0)) {
            Some((field, value)) => Err(SummaryError::Impossible { field, value }),
            None => Ok(()),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A summary as `moirai run syn --json` prints it.
    const SAMPLE: &str = r#"{"workload":"syn","threading":"dedicated","chaining":false,"offered_rate":100000.0,"duration_s":3.0,"measured_s":2.4,"ingress_tps":99995.2,"egress_tps":99990.2,"tuples_in":300101,"tuples_out":300101,"latency_ms":{"count":240112,"mean":0.153,"p50":0.09,"p99":1.8,"p999":6.0,"max":7.5},"e2e_latency_ms":{"count":240112,"mean":0.24,"p50":0.16,"p99":2.7,"p999":6.1,"max":7.6},"threads":7,"cpu_ns_per_tuple":9087.4,"cpu_cores":0.92,"queue_len":{"samples":168,"mean":1.93,"p50":0,"p90":12,"p99":26,"max":26,"per_operator":{"syn0/op1 (1/1)":1.125}},"rss_start_bytes":3358720,"rss_end_bytes":6111232,"cost_ns":0,"ops":5,"queries":1,"rate":100000.0,"seed":0,"selectivity":1.0,"workload_stats":{"check":"counts equal a naive count"}}"#;

    #[test]
    fn reads_the_last_line_and_keeps_unknown_fields() {
        let stdout = format!("workload          syn\noffered rate      100000 tuples/s\n{SAMPLE}\n\n");
        let s = RunSummary::from_stdout(&stdout).unwrap();
        assert_eq!((s.workload.as_str(), s.threading.as_str()), ("syn", "dedicated"));
        assert_eq!((s.tuples_in, s.tuples_out, s.threads), (300101, 300101, 7));
        assert_eq!(s.ingress_tps, 99995.2);
        assert_eq!(s.e2e_latency_ms.p99, 2.7);
        assert_eq!(s.latency_ms.p10, None);
        assert_eq!(s.queue_len.p99, 26.0);
        assert_eq!(s.queue_len.per_operator["syn0/op1 (1/1)"], 1.125);
        assert_eq!(s.check(), Some("counts equal a naive count"));
        assert_eq!(s.extra["ops"], serde_json::json!(5));
        // Written back, the unknown fields are still there, and nothing is written twice.
        let again = serde_json::to_string(&s).unwrap();
        let v: serde_json::Value = serde_json::from_str(&again).unwrap();
        assert_eq!(v["selectivity"], serde_json::json!(1.0));
        assert_eq!(again.matches("\"threading\"").count(), 1);
        assert_eq!(RunSummary::from_stdout(&again).unwrap(), s);
    }

    #[test]
    fn optional_fields_may_be_missing_and_new_percentiles_are_read() {
        let line = r#"{"offered_rate":5.0,"ingress_tps":5.0,"egress_tps":5.0,"new_field":[1,2],
            "latency_ms":{"mean":1,"p10":0.5,"p50":1,"p90":1.5,"p99":2,"p999":3,"max":4},
            "e2e_latency_ms":{"mean":1,"p50":1,"p99":2,"p999":3,"max":4}}"#
            .replace('\n', "");
        let s = RunSummary::from_stdout(&line).unwrap();
        assert_eq!(s.queue_len, QueueLen::default());
        assert_eq!((s.check(), s.workload_stats.is_null()), (None, true));
        let qs: Vec<f64> = s.latency_ms.percentiles().iter().map(|p| p.0).collect();
        assert_eq!(qs, [0.1, 0.5, 0.9, 0.99, 0.999, 1.0]);
        assert_eq!(s.e2e_latency_ms.percentiles().len(), 4);
    }

    #[test]
    fn rejects_output_that_is_not_a_summary() {
        let err = |s: &str| RunSummary::from_stdout(s).unwrap_err().to_string();
        assert!(err("").contains("nothing on stdout"));
        assert!(err("hello\n").contains("not its JSON summary"));
        assert!(err(r#"{"offered_rate":5.0,"egress_tps":5.0}"#).contains("ingress_tps"));
        let negative = SAMPLE.replace(r#""ingress_tps":99995.2"#, r#""ingress_tps":-1"#);
        assert_eq!(
            RunSummary::from_stdout(&negative).unwrap_err(),
            SummaryError::Impossible { field: "ingress_tps", value: -1.0 }
        );
    }

    #[test]
    fn a_sorted_sample_gives_its_nearest_rank_percentiles() {
        let v: Vec<f64> = (1..=1000).map(f64::from).collect();
        let l = Latency::of_sorted(&v);
        assert_eq!((l.count, l.mean, l.p50, l.p99, l.max), (1000, 500.5, 501.0, 990.0, 1000.0));
        assert_eq!((l.p10, l.p90), (Some(101.0), Some(900.0)));
        assert_eq!(Latency::of_sorted(&[]), Latency::default());
    }
}

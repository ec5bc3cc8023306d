//! Flink's Prometheus reporter as the Flink driver reads it: every subtask's counters of a
//! TaskManager in one scrape, instead of one REST request per job vertex.
//!
//! The reporter (`flink-metrics-prometheus`, `metrics.reporter.<name>.factory.class:
//! org.apache.flink.metrics.prometheus.PrometheusReporterFactory` and `.port`) serves every metric
//! of its TaskManager as `flink_<logical scope>_<name>{labels} value`, the scope's and name's
//! characters outside `[A-Za-z0-9_:]` written `_`. A task's metric carries the labels `job_id`,
//! `job_name`, `task_id` (the job vertex id, as the REST API names it), `task_name`,
//! `subtask_index`, `task_attempt_num`, `tm_id` and `host` (the same in Flink 1.20 and 2.3; the
//! fixtures in `fixtures/` are scrapes of both). Samples are matched to subtasks by job id,
//! vertex id and subtask index, never by name: the reporter rewrites the characters of label
//! values unless `filterLabelValueCharacters: false`.
//!
//! Only the metrics the REST path reads are needed ([`REPORTER_FILTER`] restricts a reporter to
//! them); anything else in a scrape is skipped without being taken apart.

use std::borrow::Cow;
use std::cell::Cell;
use std::collections::hash_map::DefaultHasher;
use std::collections::HashMap;
use std::hash::{Hash, Hasher};
use std::time::Duration;

use super::flink_rest::Job;
use super::flink_topology::{SubtaskCounters, INPUT_QUEUE_LENGTH};

/// The reporter's names of the task metrics the driver reads (scope `taskmanager.job.task`).
const TASK_PREFIX: &str = "flink_taskmanager_job_task_";
/// A source's backlog, in its operator's scope.
const PENDING: &str = "flink_taskmanager_job_task_operator_pendingRecords";

/// `metrics.reporter.<name>.filter.includes` (Flink ≥ 1.16) that keeps a reporter to what the
/// driver reads: one filter per scope, `<logical scope>:<name>[,<name>]`, `;` between filters.
pub const REPORTER_FILTER: &str = "taskmanager.job.task:numRecordsIn,numRecordsOut,numBuffersOut,\
     accumulateBusyTimeMs,accumulateBackPressuredTimeMs,accumulateIdleTimeMs;\
     taskmanager.job.task.Shuffle.Netty.Input.Buffers:inputQueueLength;\
     taskmanager.job.task.operator:pendingRecords";

/// Labels the driver does not read, and the longest (an attempt id is 80 characters): a reporter
/// configured by [`reporter_conf`] leaves them out of every sample, which makes a scrape's text,
/// and the TaskManager's work to write it, smaller.
pub const REPORTER_EXCLUDED_LABELS: [&str; 3] = ["task_attempt_id", "host", "operator_id"];

/// A TaskManager's configuration lines for the reporter this driver reads, on `port` (all the
/// node's interfaces: Flink's reporter has no bind address), restricted to [`REPORTER_FILTER`]
/// and without [`REPORTER_EXCLUDED_LABELS`]. The jobs of `integrations/flink` configure the same
/// reporter in their MiniCluster (`--metrics-port`); the tests below keep the two equal.
pub fn reporter_conf(port: u16) -> Vec<(&'static str, String)> {
    vec![
        (
            "metrics.reporter.moirai.factory.class",
            "org.apache.flink.metrics.prometheus.PrometheusReporterFactory".into(),
        ),
        ("metrics.reporter.moirai.port", port.to_string()),
        ("metrics.reporter.moirai.filter.includes", REPORTER_FILTER.into()),
        ("metrics.reporter.moirai.filterLabelValueCharacters", "false".into()),
        ("metrics.reporter.moirai.scope.variables.excludes", REPORTER_EXCLUDED_LABELS.join(";")),
    ]
}

/// Which counter of [`SubtaskCounters`] a task metric is, by its name after [`TASK_PREFIX`].
#[derive(Clone, Copy)]
enum Field {
    RecordsIn,
    RecordsOut,
    BuffersOut,
    BusyMs,
    BackpressuredMs,
    IdleMs,
    InputBuffers,
    Pending,
}

fn field(name: &str) -> Option<Field> {
    if name == PENDING {
        return Some(Field::Pending);
    }
    let rest = name.strip_prefix(TASK_PREFIX)?;
    Some(match rest {
        "numRecordsIn" => Field::RecordsIn,
        "numRecordsOut" => Field::RecordsOut,
        "numBuffersOut" => Field::BuffersOut,
        "accumulateBusyTimeMs" => Field::BusyMs,
        "accumulateBackPressuredTimeMs" => Field::BackpressuredMs,
        "accumulateIdleTimeMs" => Field::IdleMs,
        _ if is_input_queue(rest) => Field::InputBuffers,
        _ => return None,
    })
}

/// `Shuffle_Netty_Input_Buffers_inputQueueLength`: [`INPUT_QUEUE_LENGTH`] as the reporter writes it.
fn is_input_queue(rest: &str) -> bool {
    rest.len() == INPUT_QUEUE_LENGTH.len()
        && rest.bytes().zip(INPUT_QUEUE_LENGTH.bytes()).all(|(a, b)| a == b || (a == b'_' && b == b'.'))
}

/// A subtask in a scrape: (job id, vertex id, subtask index).
pub type SubtaskKey<'a> = (Cow<'a, str>, Cow<'a, str>, usize);

/// What one scrape held: every subtask's counters, of its newest attempt.
#[derive(Debug, Default)]
pub struct Scrape<'a> {
    subtasks: HashMap<SubtaskKey<'a>, (u32, SubtaskCounters)>,
    /// Samples whose name starts with `flink_`: none means the endpoint is not Flink's.
    pub flink_samples: usize,
    /// All samples.
    pub samples: usize,
}

impl<'a> Scrape<'a> {
    /// Reads an exposition of Flink's Prometheus reporter; a malformed line is an error naming it.
    pub fn read(text: &'a str) -> Result<Scrape<'a>, String> {
        let mut scrape = Scrape::default();
        let mut bad: Option<String> = None;
        // Every sample is counted; only Flink's are handed over (the others' values are not read).
        let (samples, flink_samples) = (Cell::new(0), Cell::new(0));
        let wanted = |name: &str| {
            samples.set(samples.get() + 1);
            let flink = name.starts_with("flink_");
            flink_samples.set(flink_samples.get() + usize::from(flink));
            flink
        };
        super::super::prometheus::scan(text, wanted, |s| {
            let Some(f) = field(s.name) else { return };
            let (mut job, mut vertex, mut index, mut attempt) = (None, None, None, None);
            for (key, value) in s.labels() {
                match key {
                    "job_id" => job = Some(value),
                    "task_id" => vertex = Some(value),
                    "subtask_index" => index = Some(value),
                    "task_attempt_num" => attempt = Some(value),
                    _ => {}
                }
            }
            let (Some(job), Some(vertex), Some(index)) = (job, vertex, index) else {
                bad.get_or_insert_with(|| format!("{} without job_id, task_id or subtask_index", s.name));
                return;
            };
            let Ok(index) = index.parse::<usize>() else {
                bad.get_or_insert_with(|| format!("{}: subtask_index {index:?} is not a number", s.name));
                return;
            };
            let attempt = attempt.and_then(|a| a.parse::<u32>().ok()).unwrap_or(0);
            let entry = scrape.subtasks.entry((job, vertex, index)).or_insert((attempt, SubtaskCounters::default()));
            if attempt < entry.0 {
                return; // An older attempt's metrics, not unregistered yet.
            }
            if attempt > entry.0 {
                *entry = (attempt, SubtaskCounters::default());
            }
            let c = &mut entry.1;
            // NaN (a legacy source's task thread measures no busy time) counts as 0, as on REST.
            let v = if s.value.is_finite() { s.value } else { 0.0 };
            match f {
                Field::RecordsIn => c.records_in = v,
                Field::RecordsOut => c.records_out = v,
                Field::BuffersOut => c.buffers_out = v,
                Field::BusyMs => c.busy_ns = v * 1e6,
                Field::BackpressuredMs => c.backpressured_ns = v * 1e6,
                Field::IdleMs => c.idle_ns = v * 1e6,
                Field::InputBuffers => c.input_buffers = v,
                Field::Pending => c.pending = s.value.is_finite().then_some(s.value),
            }
        })?;
        scrape.samples = samples.get();
        scrape.flink_samples = flink_samples.get();
        match bad {
            Some(e) => Err(format!("a task metric the driver cannot place: {e}")),
            None => Ok(scrape),
        }
    }

    /// The counters of subtask `index` of vertex `vertex` of job `job`, if the scrape has them.
    pub fn counters(&self, job: &str, vertex: &str, index: usize) -> Option<SubtaskCounters> {
        self.subtasks.get(&(Cow::Borrowed(job), Cow::Borrowed(vertex), index)).map(|&(_, c)| c)
    }

    /// The counters of every subtask of `job`, per vertex as the REST path reads them; a subtask
    /// the scrape does not have (not deployed yet, on another TaskManager) counts 0.
    pub fn job_counters(&self, job: &Job) -> Vec<Vec<SubtaskCounters>> {
        job.vertices
            .iter()
            .map(|v| (0..v.parallelism).map(|s| self.counters(&job.id, &v.id, s).unwrap_or_default()).collect())
            .collect()
    }

    /// Whether the scrape has subtask `index` of vertex `vertex` of job `job`.
    pub fn has_subtask(&self, job: &str, vertex: &str, index: usize) -> bool {
        self.subtasks.contains_key(&(Cow::Borrowed(job), Cow::Borrowed(vertex), index))
    }

    /// Whether the scrape has any subtask of vertex `vertex` of job `job`.
    pub fn has_vertex(&self, job: &str, vertex: &str) -> bool {
        self.subtasks.keys().any(|(j, v, _)| j == job && v == vertex)
    }

    /// The subtasks (and attempts) in the scrape, as one number: it changes when a job is
    /// submitted or ends, a subtask is deployed elsewhere or restarted, which is when the driver
    /// reads the topology from the REST API again.
    pub fn signature(&self) -> u64 {
        let mut keys: Vec<(&str, &str, usize, u32)> =
            self.subtasks.iter().map(|((j, v, i), (a, _))| (j.as_ref(), v.as_ref(), *i, *a)).collect();
        keys.sort_unstable();
        let mut h = DefaultHasher::new();
        keys.hash(&mut h);
        h.finish()
    }

    /// Subtasks in the scrape.
    pub fn len(&self) -> usize {
        self.subtasks.len()
    }

    /// Whether the scrape has no subtask.
    pub fn is_empty(&self) -> bool {
        self.subtasks.is_empty()
    }
}

/// A client for a TaskManager's Prometheus reporter.
pub struct FlinkScrape {
    url: String,
    agent: ureq::Agent,
}

impl FlinkScrape {
    /// A client for the reporter at `url`, e.g. `http://127.0.0.1:9249/metrics` (a URL without a
    /// path reads `/metrics`, as the reporter serves every path alike).
    pub fn new(url: &str) -> Result<FlinkScrape, String> {
        if !url.starts_with("http://") {
            return Err(format!(
                "Flink's Prometheus reporter URL {url:?} must start with http://, e.g. http://127.0.0.1:9249/metrics"
            ));
        }
        let url = match url["http://".len()..].find('/') {
            Some(_) => url.to_string(),
            None => format!("{url}/metrics"),
        };
        // Timeouts per read (not a deadline): ureq sets a deadline's socket timeouts again before
        // every read (see FlinkRest::new).
        let agent = ureq::AgentBuilder::new()
            .timeout_connect(Duration::from_secs(1))
            .timeout_read(Duration::from_secs(3))
            .timeout_write(Duration::from_secs(3))
            .build();
        Ok(FlinkScrape { url, agent })
    }

    /// The URL scraped.
    pub fn url(&self) -> &str {
        &self.url
    }

    /// One scrape's text; an endpoint that does not answer, or answers what is not a Prometheus
    /// exposition, is an error that says what to check.
    pub fn fetch(&self) -> Result<String, String> {
        let hint = "is it a TaskManager's Prometheus reporter (metrics.reporter.<name>.factory.class: \
                    org.apache.flink.metrics.prometheus.PrometheusReporterFactory, .port)?";
        match self.agent.get(&self.url).call() {
            Ok(r) => r.into_string().map_err(|e| format!("reading {}: {e}", self.url)),
            Err(ureq::Error::Status(code, _)) => Err(format!("{} answered HTTP {code}: {hint}", self.url)),
            Err(e) => Err(format!("cannot reach Flink's Prometheus reporter at {}: {e}", self.url)),
        }
    }

    /// Reads a scrape's text, refusing one that is not from Flink's reporter.
    pub fn read<'a>(&self, text: &'a str) -> Result<Scrape<'a>, String> {
        let scrape = Scrape::read(text).map_err(|e| {
            format!(
                "{} is not a Prometheus exposition ({e}): is it a TaskManager's Prometheus reporter \
                 (org.apache.flink.metrics.prometheus.PrometheusReporterFactory)?",
                self.url
            )
        })?;
        if scrape.samples > 0 && scrape.flink_samples == 0 {
            return Err(format!(
                "{} serves Prometheus metrics, but none of Flink's (flink_*): it is not a TaskManager's Prometheus \
                 reporter; give the port of metrics.reporter.<name>.port of the TaskManager on this node",
                self.url
            ));
        }
        Ok(scrape)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::driver::flink_rest::{to_job, JobDetail};

    const FLINK_2_3: &str = include_str!("fixtures/flink-2.3-prometheus.txt");
    const FLINK_2_3_JOB: &str = include_str!("fixtures/flink-2.3-job.json");
    const FLINK_1_20: &str = include_str!("fixtures/flink-1.20-prometheus.txt");

    /// A real scrape of Flink 2.3's reporter (moirai's SYN, 2 queries of 2 operators, parallelism
    /// 2, `--metrics-port`) holds every subtask of the job the REST API described, with the
    /// counters the REST path reads.
    #[test]
    fn a_flink_2_scrape_has_every_subtask_of_the_job() {
        let detail: JobDetail = serde_json::from_str(FLINK_2_3_JOB).unwrap();
        let job = to_job(detail).unwrap();
        let scrape = Scrape::read(FLINK_2_3).unwrap();
        let expected: usize = job.vertices.iter().map(|v| v.parallelism).sum();
        assert_eq!(scrape.len(), expected);
        for v in &job.vertices {
            for s in 0..v.parallelism {
                let c = scrape.counters(&job.id, &v.id, s).unwrap_or_else(|| panic!("{} ({s})", v.name));
                if v.inputs.is_empty() {
                    // A source emits, takes nothing in, and reports its backlog.
                    assert!(c.records_out > 0.0 && c.records_in == 0.0, "{}: {c:?}", v.name);
                    assert!(c.pending.is_some(), "{}: {c:?}", v.name);
                } else {
                    assert!(c.records_in > 0.0 && c.pending.is_none(), "{}: {c:?}", v.name);
                }
                assert!(c.busy_ns + c.idle_ns + c.backpressured_ns > 0.0, "{}: {c:?}", v.name);
            }
        }
        assert_eq!(scrape.counters(&job.id, &job.vertices[0].id, 2), None);
        assert_eq!(scrape.counters("another job", &job.vertices[0].id, 0), None);
    }

    /// The reporter of Flink 1.20 writes the same names and labels.
    #[test]
    fn a_flink_1_20_scrape_reads_alike() {
        let scrape = Scrape::read(FLINK_1_20).unwrap();
        // 2 queries of source, 2 operators, sink; parallelism 1.
        assert_eq!(scrape.len(), 8);
        let with_backlog = scrape.subtasks.values().filter(|(_, c)| c.pending.is_some()).count();
        assert_eq!(with_backlog, 2);
        let queued: f64 = scrape.subtasks.values().map(|(_, c)| c.input_buffers).sum();
        assert!(queued > 0.0);
    }

    #[test]
    fn the_newest_attempt_counts_and_the_signature_follows_it() {
        let line = |attempt: u32, value: f64| {
            format!(
                "flink_taskmanager_job_task_numRecordsIn{{job_id=\"j\",task_id=\"v\",subtask_index=\"0\",\
                 task_attempt_num=\"{attempt}\",}} {value}\n"
            )
        };
        let old_then_new = format!("{}{}", line(0, 50.0), line(1, 7.0));
        let new_then_old = format!("{}{}", line(1, 7.0), line(0, 50.0));
        let a = Scrape::read(&old_then_new).unwrap();
        let b = Scrape::read(&new_then_old).unwrap();
        assert_eq!(a.counters("j", "v", 0).unwrap().records_in, 7.0);
        assert_eq!(b.counters("j", "v", 0).unwrap().records_in, 7.0);
        assert_eq!(a.signature(), b.signature());
        let only_old = line(0, 50.0);
        assert_ne!(Scrape::read(&only_old).unwrap().signature(), a.signature());
        // The queue gauge's name, and NaN as 0.
        let q = "flink_taskmanager_job_task_Shuffle_Netty_Input_Buffers_inputQueueLength\
                 {job_id=\"j\",task_id=\"v\",subtask_index=\"1\"} 3\n\
                 flink_taskmanager_job_task_accumulateBusyTimeMs{job_id=\"j\",task_id=\"v\",subtask_index=\"1\"} NaN\n";
        let c = Scrape::read(q).unwrap().counters("j", "v", 1).unwrap();
        assert_eq!((c.input_buffers, c.busy_ns), (3.0, 0.0));
    }

    #[test]
    fn what_is_not_flinks_reporter_is_named() {
        let client = FlinkScrape::new("http://127.0.0.1:9249").unwrap();
        assert_eq!(client.url(), "http://127.0.0.1:9249/metrics");
        // The moirai engine's /metrics: Prometheus, but not Flink's.
        let e = client.read("moirai_operator_queue_size{query=\"q\",operator=\"a\"} 3\n").unwrap_err();
        assert!(e.contains("none of Flink's") && e.contains("metrics.reporter"), "{e}");
        // The REST API's JSON.
        let e = client.read("{\"jobs\":[]}").unwrap_err();
        assert!(e.contains("not a Prometheus exposition"), "{e}");
        // A task metric without the labels that place it.
        let e = client.read("flink_taskmanager_job_task_numRecordsIn{job_id=\"j\"} 1\n").unwrap_err();
        assert!(e.contains("without job_id, task_id or subtask_index"), "{e}");
        // Empty: a reporter of a TaskManager without tasks.
        assert!(client.read("").unwrap().is_empty());
        assert!(FlinkScrape::new("127.0.0.1:9249").err().unwrap().contains("http://"));
        assert_eq!(FlinkScrape::new("http://h:1/x").unwrap().url(), "http://h:1/x");
    }

    /// The filter the jobs configure is the one documented here.
    #[test]
    fn the_reporter_filter_names_every_metric_read() {
        for m in [
            "numRecordsIn",
            "numRecordsOut",
            "numBuffersOut",
            "accumulateBusyTimeMs",
            "accumulateBackPressuredTimeMs",
            "accumulateIdleTimeMs",
            "inputQueueLength",
            "pendingRecords",
        ] {
            assert!(REPORTER_FILTER.contains(m), "{m}");
        }
        assert!(!REPORTER_FILTER.contains(' '));
        // The jobs' `--metrics-port` configures this filter (integrations/flink, Run.REPORTED).
        let java = include_str!("../../../../integrations/flink/src/main/java/moirai/flink/Run.java");
        let block = java.split("REPORTED = {").nth(1).and_then(|b| b.split("};").next()).expect("Run.REPORTED");
        let joined: String = block.chars().filter(|c| !c.is_whitespace()).collect::<String>().replace("\"+\"", "");
        let filters: Vec<&str> = joined.trim_end_matches(',').trim_matches('"').split("\",\"").collect();
        assert_eq!(filters.join(";"), REPORTER_FILTER);
        let excluded =
            java.split("EXCLUDED_LABELS = {").nth(1).and_then(|b| b.split('}').next()).expect("Run.EXCLUDED_LABELS");
        let quoted: Vec<&str> = excluded.split('"').skip(1).step_by(2).collect();
        assert_eq!(quoted, REPORTER_EXCLUDED_LABELS, "Run.EXCLUDED_LABELS");
    }
}

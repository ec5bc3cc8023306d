//! Flink's REST API as the Flink driver reads it: the running jobs, their vertices and edges
//! (read once per job), and the metrics and configuration it asks for.

use std::collections::HashMap;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::Duration;

use serde::Deserialize;

/// How a job edge distributes records to the consumer's subtasks.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum ShipStrategy {
    /// Subtask i to subtask i.
    Forward,
    /// Every record to every consumer subtask.
    Broadcast,
    /// Each record to one consumer subtask (REBALANCE, HASH, RESCALE, SHUFFLE, GLOBAL, CUSTOM, ...).
    Partition,
}

impl ShipStrategy {
    fn parse(text: &str) -> ShipStrategy {
        match text {
            "FORWARD" => ShipStrategy::Forward,
            "BROADCAST" => ShipStrategy::Broadcast,
            _ => ShipStrategy::Partition,
        }
    }
}

/// A job vertex: a chain of operators run by `parallelism` subtasks.
#[derive(Clone, Debug, PartialEq)]
pub struct Vertex {
    /// Flink's vertex id.
    pub id: String,
    /// Its name, which is also its task name (`"Source: S -> Map"` when chained).
    pub name: String,
    /// Subtasks.
    pub parallelism: usize,
    /// Producers: (index of the upstream vertex in the job, ship strategy).
    pub inputs: Vec<(usize, ShipStrategy)>,
}

/// A running job.
#[derive(Clone, Debug, PartialEq)]
pub struct Job {
    /// Flink's job id.
    pub id: String,
    /// The job's name (the query's name).
    pub name: String,
    /// Its vertices, in the order Flink lists them (sources first).
    pub vertices: Vec<Vertex>,
}

impl Job {
    pub(super) fn consumers(&self, vertex: usize) -> impl Iterator<Item = (&Vertex, ShipStrategy)> {
        self.vertices
            .iter()
            .flat_map(move |v| v.inputs.iter().filter(move |(u, _)| *u == vertex).map(move |&(_, s)| (v, s)))
    }
}

#[derive(Deserialize)]
struct JobsList {
    jobs: Vec<JobStatus>,
}

#[derive(Deserialize)]
struct JobStatus {
    id: String,
    status: String,
}

#[derive(Deserialize)]
pub(super) struct JobDetail {
    jid: String,
    name: String,
    vertices: Vec<VertexDetail>,
    plan: Plan,
}

#[derive(Deserialize)]
pub(super) struct VertexDetail {
    id: String,
    name: String,
    parallelism: usize,
}

#[derive(Deserialize)]
pub(super) struct Plan {
    nodes: Vec<PlanNode>,
}

#[derive(Deserialize)]
pub(super) struct PlanNode {
    id: String,
    #[serde(default)]
    inputs: Vec<PlanInput>,
}

#[derive(Deserialize)]
pub(super) struct PlanInput {
    id: String,
    #[serde(default)]
    ship_strategy: String,
}

#[derive(Deserialize)]
struct MetricValue {
    id: String,
    #[serde(default)]
    value: Option<String>,
}

#[derive(Deserialize)]
struct DashboardConfig {
    #[serde(rename = "flink-version", default)]
    flink_version: String,
}

#[derive(Deserialize)]
struct ConfigEntry {
    key: String,
    value: String,
}

/// Converts `/jobs/<id>` into a [`Job`]; an edge to a vertex the job does not list is an error.
pub(super) fn to_job(d: JobDetail) -> Result<Job, String> {
    let index: HashMap<&str, usize> = d.vertices.iter().enumerate().map(|(i, v)| (v.id.as_str(), i)).collect();
    let mut vertices: Vec<Vertex> = d
        .vertices
        .iter()
        .map(|v| Vertex { id: v.id.clone(), name: v.name.clone(), parallelism: v.parallelism, inputs: Vec::new() })
        .collect();
    for node in &d.plan.nodes {
        let Some(&to) = index.get(node.id.as_str()) else {
            return Err(format!("job {}: the plan names vertex {}, which the job does not list", d.jid, node.id));
        };
        for input in &node.inputs {
            let Some(&from) = index.get(input.id.as_str()) else {
                return Err(format!("job {}: vertex {} reads from unknown vertex {}", d.jid, node.id, input.id));
            };
            vertices[to].inputs.push((from, ShipStrategy::parse(&input.ship_strategy)));
        }
    }
    Ok(Job { id: d.jid, name: d.name, vertices })
}

/// A client for a Flink cluster's REST API.
pub struct FlinkRest {
    base: String,
    agent: ureq::Agent,
    /// Raised when the middleware stops: no request is made after it ([`FlinkRest::give_up_on`]).
    stop: Arc<AtomicBool>,
}

pub(super) fn encode(text: &str) -> String {
    let mut out = String::with_capacity(text.len());
    for b in text.bytes() {
        if b.is_ascii_alphanumeric() || matches!(b, b'.' | b'_' | b'-' | b'~') {
            out.push(b as char);
        } else {
            out.push_str(&format!("%{b:02X}"));
        }
    }
    out
}

/// The longest `get=` list of one request: Flink's REST server refuses request lines over 4096 bytes.
pub(super) const MAX_QUERY: usize = 3000;

/// Escaped, comma-separated lists of `names`, each short enough for one request.
pub(super) fn query_lists(names: &[String]) -> Vec<String> {
    let mut lists: Vec<String> = Vec::new();
    for name in names.iter().map(|n| encode(n)) {
        match lists.last_mut() {
            Some(list) if list.len() + 1 + name.len() <= MAX_QUERY => {
                list.push(',');
                list.push_str(&name);
            }
            _ => lists.push(name),
        }
    }
    lists
}

impl FlinkRest {
    /// A client for the REST API at `base`, e.g. `http://127.0.0.1:8081`.
    pub fn new(base: &str) -> Result<Self, String> {
        let base = base.trim_end_matches('/').to_string();
        if !(base.starts_with("http://") || base.starts_with("https://")) {
            return Err(format!("Flink URL {base:?} must start with http://, e.g. http://127.0.0.1:8081"));
        }
        // A bound per connect, read and write rather than one deadline per request: with a
        // deadline, ureq sets both socket timeouts again before every read (15 `setsockopt` per
        // request measured, a quarter of a Flink round's CPU); these are set once per request.
        let agent = ureq::AgentBuilder::new()
            .timeout_connect(Duration::from_secs(1))
            .timeout_read(Duration::from_secs(3))
            .timeout_write(Duration::from_secs(3))
            .build();
        Ok(FlinkRest { base, agent, stop: Arc::default() })
    }

    /// Makes no request once `stop` is raised: a round of many requests against a JobManager
    /// that no longer answers ends after the one under way (at most its read timeout, 3 s)
    /// instead of waiting out each of them.
    pub(super) fn give_up_on(&mut self, stop: &Arc<AtomicBool>) {
        self.stop = stop.clone();
    }

    /// The base URL.
    pub fn url(&self) -> &str {
        &self.base
    }

    pub(super) fn get<T: serde::de::DeserializeOwned>(&self, path: &str) -> Result<T, String> {
        let url = format!("{}{path}", self.base);
        if self.stop.load(Ordering::SeqCst) {
            return Err(format!("stopping: {url} was not asked"));
        }
        let text = match self.agent.get(&url).call() {
            Ok(r) => r.into_string().map_err(|e| format!("reading {url}: {e}"))?,
            Err(ureq::Error::Status(404, _)) => {
                return Err(format!(
                    "{url} answered HTTP 404: is {} the REST API of a Flink JobManager (e.g. http://127.0.0.1:8081)?",
                    self.base
                ))
            }
            Err(ureq::Error::Status(code, _)) => return Err(format!("{url} answered HTTP {code}")),
            Err(e) => return Err(format!("cannot reach Flink's REST API at {url}: {e}")),
        };
        serde_json::from_str(&text).map_err(|e| {
            format!("{url} is not what Flink's REST API answers ({e}): is {} a Flink JobManager's REST API?", self.base)
        })
    }

    /// The RUNNING jobs, with their vertices and edges.
    pub fn running_jobs(&self) -> Result<Vec<Job>, String> {
        self.running_jobs_with(&mut HashMap::new())
    }

    /// The RUNNING jobs, each job's details read once: a job's graph is fixed for its life (a
    /// restart keeps its id and its vertices), so `known` keeps them by job id and only `/jobs`
    /// is read every round. Jobs no longer running leave `known`.
    pub fn running_jobs_with(&self, known: &mut HashMap<String, Job>) -> Result<Vec<Job>, String> {
        let list: JobsList = self.get("/jobs")?;
        let running: Vec<&str> = list.jobs.iter().filter(|j| j.status == "RUNNING").map(|j| j.id.as_str()).collect();
        known.retain(|id, _| running.contains(&id.as_str()));
        let mut jobs = Vec::with_capacity(running.len());
        for id in running {
            let job = match known.get(id) {
                Some(job) => job.clone(),
                None => {
                    let detail: JobDetail = self.get(&format!("/jobs/{id}"))?;
                    let job = to_job(detail)?;
                    known.insert(id.to_string(), job.clone());
                    job
                }
            };
            jobs.push(job);
        }
        jobs.sort_by(|a, b| a.name.cmp(&b.name).then(a.id.cmp(&b.id)));
        Ok(jobs)
    }

    /// Values of the named metrics of a vertex (names as the vertex store keeps them,
    /// `<subtask>.<metric>`); metrics Flink has not fetched yet are absent.
    pub fn vertex_metrics(&self, job: &str, vertex: &str, names: &[String]) -> Result<HashMap<String, f64>, String> {
        let mut out = HashMap::new();
        for get in query_lists(names) {
            let values: Vec<MetricValue> = self.get(&format!("/jobs/{job}/vertices/{vertex}/metrics?get={get}"))?;
            out.extend(values.into_iter().filter_map(|m| Some((m.id, m.value?.parse::<f64>().ok()?))));
        }
        Ok(out)
    }

    /// The names of a vertex's metrics.
    pub fn vertex_metric_names(&self, job: &str, vertex: &str) -> Result<Vec<String>, String> {
        let values: Vec<MetricValue> = self.get(&format!("/jobs/{job}/vertices/{vertex}/metrics"))?;
        Ok(values.into_iter().map(|m| m.id).collect())
    }

    /// The cluster's Flink version (`GET /config`), e.g. `2.3.0`; `None` when it does not say.
    pub fn version(&self) -> Result<Option<String>, String> {
        let config: DashboardConfig = self.get("/config")?;
        Ok(Some(config.flink_version).filter(|v| !v.is_empty()))
    }

    /// `metrics.fetcher.update-interval` of the cluster, in ms (Flink's default 10 000 when unset).
    pub fn fetcher_interval_ms(&self) -> Result<u64, String> {
        let config: Vec<ConfigEntry> = self.get("/jobmanager/config")?;
        Ok(config
            .iter()
            .find(|e| e.key == "metrics.fetcher.update-interval")
            .and_then(|e| duration_ms(&e.value))
            .unwrap_or(10_000))
    }
}

/// The configuration file of a cluster of Flink `version`: `config.yaml` from 2.0 on (standard
/// YAML), `flink-conf.yaml` before; both when the version is not known.
pub fn config_file(version: Option<&str>) -> &'static str {
    match version.and_then(|v| v.split('.').next()).and_then(|major| major.parse::<u32>().ok()) {
        Some(major) if major >= 2 => "config.yaml",
        Some(_) => "flink-conf.yaml",
        None => "flink-conf.yaml (Flink 1.x) or config.yaml (2.x)",
    }
}

/// A duration as Flink's configuration writes it: milliseconds (`1000`) or with a unit (`1 s`,
/// `500 ms`, `1 min`).
pub(super) fn duration_ms(text: &str) -> Option<u64> {
    let text: String = text.chars().filter(|c| !c.is_whitespace()).collect();
    match text.parse::<u64>() {
        Ok(ms) => Some(ms),
        Err(_) => humantime::parse_duration(&text).ok().map(|d| d.as_millis() as u64),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_version_is_read_from_the_dashboards_configuration() {
        // `GET /config` of Flink 2.3.0; 1.20.3 answers the same fields.
        let text = r#"{"refresh-interval":3000,"timezone-name":"Coordinated Universal Time","timezone-offset":0,
            "flink-version":"2.3.0","flink-revision":"c0f8d1a @ 2026-06-14T16:29:03+02:00",
            "features":{"web-submit":true,"web-cancel":true,"web-rescale":false,"web-history":false}}"#;
        let c: DashboardConfig = serde_json::from_str(text).unwrap();
        assert_eq!(config_file(Some(&c.flink_version)), "config.yaml");
        let c: DashboardConfig = serde_json::from_str(r#"{"refresh-interval":3000}"#).unwrap();
        assert_eq!(c.flink_version, "");
    }

    #[test]
    fn the_configuration_file_is_named_by_the_clusters_version() {
        assert_eq!(config_file(Some("2.3.0")), "config.yaml");
        assert_eq!(config_file(Some("1.20.3")), "flink-conf.yaml");
        assert!(config_file(None).contains("config.yaml") && config_file(Some("?")).contains("flink-conf.yaml"));
    }

    /// `GET /jobs/<id>` of Flink 2.3.0 (moirai's SYN job, cut to two vertices): the fields 2.x
    /// adds are ignored, the plan is read as in 1.x.
    #[test]
    fn flink_2_job_details_become_jobs() {
        let text = r#"{"jid":"f93d","application-id":"a1","name":"moirai-syn","isStoppable":false,
            "state":"RUNNING","job-type":"STREAMING","schedulerType":"Default","start-time":1,"end-time":-1,
            "duration":2,"maxParallelism":-1,"now":3,"timestamps":{},"status-counts":{},"pending-operators":0,
            "vertices":[
              {"id":"bc76","slotSharingGroupId":"s","name":"Source: syn0/source","maxParallelism":128,
               "parallelism":2,"status":"RUNNING","start-time":1,"end-time":-1,"duration":2,"tasks":{},"metrics":{}},
              {"id":"cf2a","slotSharingGroupId":"s","name":"syn0/sink: Writer","maxParallelism":128,
               "parallelism":2,"status":"RUNNING","start-time":1,"end-time":-1,"duration":2,"tasks":{},"metrics":{}}],
            "plan":{"jid":"f93d","name":"moirai-syn","type":"STREAMING","nodes":[
              {"id":"cf2a","operator":"","parallelism":2,"operator_strategy":"","description":"syn0/sink: Writer<br/>",
               "optimizer_properties":{},"inputs":[{"id":"bc76","num":0,"exchange":"pipelined_bounded",
               "ship_strategy":"FORWARD"}]},
              {"id":"bc76","operator":"","parallelism":2,"operator_strategy":"","description":"Source: syn0/source<br/>",
               "optimizer_properties":{}}]}}"#;
        let job = to_job(serde_json::from_str(text).unwrap()).unwrap();
        assert_eq!(job.name, "moirai-syn");
        assert_eq!(job.vertices[1].name, "syn0/sink: Writer");
        assert_eq!(job.vertices[1].inputs, vec![(0, ShipStrategy::Forward)]);
        assert!(job.vertices[0].inputs.is_empty());
    }

    #[test]
    fn job_details_become_jobs() {
        let text = r#"{"jid":"j","name":"n","state":"RUNNING","vertices":[
            {"id":"a","name":"Source: s","parallelism":1,"status":"RUNNING"},
            {"id":"b","name":"Sink: k","parallelism":2,"status":"RUNNING"}],
            "plan":{"jid":"j","name":"n","nodes":[
              {"id":"b","parallelism":2,"operator":"","description":"k","inputs":[{"num":0,"id":"a","ship_strategy":"REBALANCE","exchange":"pipelined_bounded"}]},
              {"id":"a","parallelism":1,"operator":"","description":"s"}]}}"#;
        let job = to_job(serde_json::from_str(text).unwrap()).unwrap();
        assert_eq!(job.vertices[1].inputs, vec![(0, ShipStrategy::Partition)]);
        assert!(job.vertices[0].inputs.is_empty());
        let bad = text.replace(r#""id":"a","ship"#, r#""id":"zz","ship"#);
        let e = to_job(serde_json::from_str(&bad).unwrap()).unwrap_err();
        assert!(e.contains("unknown vertex zz"), "{e}");
    }

    #[test]
    fn metric_names_are_escaped_and_split_into_short_requests() {
        assert_eq!(encode("0.Source: a/b.pendingRecords"), "0.Source%3A%20a%2Fb.pendingRecords");
        let names: Vec<String> = (0..400).map(|s| format!("{s}.accumulateBackPressuredTimeMs")).collect();
        let lists = query_lists(&names);
        assert!(lists.len() > 1 && lists.iter().all(|l| l.len() <= MAX_QUERY), "{}", lists.len());
        let back: Vec<&str> = lists.iter().flat_map(|l| l.split(',')).collect();
        assert_eq!(back, names.iter().map(String::as_str).collect::<Vec<_>>());
        assert!(query_lists(&[]).is_empty());
    }

    #[test]
    fn fetch_intervals_are_read_in_flink_duration_syntax() {
        assert_eq!(duration_ms("1000"), Some(1000));
        assert_eq!(duration_ms("1 s"), Some(1000));
        assert_eq!(duration_ms("250 ms"), Some(250));
        assert_eq!(duration_ms("1 min"), Some(60_000));
        assert_eq!(duration_ms("soon"), None);
    }

    #[test]
    fn no_request_is_made_once_the_middleware_stops() {
        // A JobManager that accepts connections and never answers.
        let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
        listener.set_nonblocking(true).unwrap();
        let mut rest = FlinkRest::new(&format!("http://{}", listener.local_addr().unwrap())).unwrap();
        let stop = Arc::new(AtomicBool::new(true));
        rest.give_up_on(&stop);
        let e = rest.get::<serde_json::Value>("/jobs").unwrap_err();
        assert!(e.starts_with("stopping:") && e.contains("/jobs"), "{e}");
        let accepted = listener.accept();
        assert!(
            matches!(&accepted, Err(e) if e.kind() == std::io::ErrorKind::WouldBlock),
            "a connection was made: {accepted:?}"
        );
        // Not stopped: the request is made (and fails on the closed port).
        stop.store(false, Ordering::SeqCst);
        drop(listener);
        assert!(rest.get::<serde_json::Value>("/jobs").unwrap_err().contains("cannot reach"));
    }

    #[test]
    fn bad_urls_are_named() {
        assert!(FlinkRest::new("127.0.0.1:8081").err().unwrap().contains("http://"));
    }
}

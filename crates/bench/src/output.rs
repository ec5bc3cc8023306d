//! The files of a sweep: `results.csv` (one row per point) and `results.json` (everything: the
//! command line, the machine, every point with the engine's full summary, the medians and the
//! sustainable rates), so that every figure of a report can be traced to its raw data.

use std::path::Path;

use serde::Serialize;

use crate::point::{Latency, Point};
use crate::speed::SpeedProbes;
use crate::summary::Summary;
use crate::sweep::{SweepEnd, SweepSpec};
use crate::BenchError;

/// Facts about the machine a sweep ran on, recorded with its results.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct Machine {
    /// CPUs this process may use.
    pub nproc: usize,
    /// Kernel release (`/proc/sys/kernel/osrelease`).
    pub kernel: String,
    /// CPU model (first `model name` of `/proc/cpuinfo`).
    pub cpu_model: String,
    /// Host name.
    pub hostname: String,
    /// Load averages over 1, 5 and 15 minutes when the sweep started: a busy machine shows here.
    pub loadavg: String,
    /// When the sweep started, UTC, ISO 8601.
    pub date: String,
    /// The moirai version that ran it.
    pub moirai_version: String,
    /// How fast the machine was when the sweep started and when it ended ([`crate::speed`]);
    /// `None` where not probed (a simulated machine).
    pub speed: Option<SpeedProbes>,
}

impl Machine {
    /// Reads the facts of this machine now.
    pub fn now() -> Machine {
        let read = |p: &str| std::fs::read_to_string(p).map(|s| s.trim().to_string()).unwrap_or_default();
        let cpuinfo = read("/proc/cpuinfo");
        Machine {
            nproc: std::thread::available_parallelism().map(|n| n.get()).unwrap_or(1),
            kernel: read("/proc/sys/kernel/osrelease"),
            cpu_model: cpuinfo
                .lines()
                .find_map(|l| {
                    l.strip_prefix("model name").and_then(|r| r.split_once(':')).map(|(_, m)| m.trim().to_string())
                })
                .unwrap_or_default(),
            hostname: read("/proc/sys/kernel/hostname"),
            loadavg: read("/proc/loadavg").split_whitespace().take(3).collect::<Vec<_>>().join(" "),
            date: utc_iso8601(std::time::SystemTime::now()),
            moirai_version: env!("CARGO_PKG_VERSION").to_string(),
            speed: None,
        }
    }
}

/// `YYYY-MM-DDTHH:MM:SSZ` for a time (civil-from-days, proleptic Gregorian calendar).
pub fn utc_iso8601(t: std::time::SystemTime) -> String {
    let secs = t.duration_since(std::time::UNIX_EPOCH).map(|d| d.as_secs()).unwrap_or(0) as i64;
    let (days, rem) = (secs.div_euclid(86_400), secs.rem_euclid(86_400));
    // Howard Hinnant's days_from_civil inverse.
    let z = days + 719_468;
    let era = z.div_euclid(146_097);
    let doe = z - era * 146_097;
    let yoe = (doe - doe / 1460 + doe / 36_524 - doe / 146_096) / 365;
    let doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
    let mp = (5 * doy + 2) / 153;
    let day = doy - (153 * mp + 2) / 5 + 1;
    let month = if mp < 10 { mp + 3 } else { mp - 9 };
    let year = yoe + era * 400 + i64::from(month <= 2);
    format!("{year:04}-{month:02}-{day:02}T{:02}:{:02}:{:02}Z", rem / 3600, rem / 60 % 60, rem % 60)
}

/// Everything `results.json` holds.
#[derive(Serialize)]
pub struct Results<'a> {
    /// The lab's command line, exactly.
    pub command_line: &'a [String],
    /// The machine.
    pub machine: &'a Machine,
    /// The sweep as asked.
    pub spec: &'a SweepSpec,
    /// How it ended.
    pub end: &'a SweepEnd,
    /// Every point, failed ones included.
    pub points: &'a [Point],
    /// Medians, verdicts, sustainable rates.
    pub summary: &'a Summary,
}

/// One row of `results.csv`. Latencies in ms, rates in tuples/s, CPU in cores (middleware: share
/// of one core); the share of the window in which the middleware acted (0..=1) and when it first
/// did (s after the SPE's start); empty cells for a failed point.
#[derive(Serialize)]
struct Row<'a> {
    configuration: &'a str,
    rate: f64,
    rep: u32,
    ok: bool,
    offered_rate: Option<f64>,
    measured_s: Option<f64>,
    ingress_tps: Option<f64>,
    egress_tps: Option<f64>,
    proc_mean_ms: Option<f64>,
    proc_p50_ms: Option<f64>,
    proc_p99_ms: Option<f64>,
    proc_p999_ms: Option<f64>,
    proc_max_ms: Option<f64>,
    e2e_mean_ms: Option<f64>,
    e2e_p50_ms: Option<f64>,
    e2e_p99_ms: Option<f64>,
    e2e_p999_ms: Option<f64>,
    e2e_max_ms: Option<f64>,
    queue_len_mean: Option<f64>,
    queue_len_p50: Option<f64>,
    queue_len_p90: Option<f64>,
    queue_len_p99: Option<f64>,
    queue_len_max: Option<f64>,
    exchange_max_backlog: Option<f64>,
    engine_cpu_cores: Option<f64>,
    middleware_cpu_share: Option<f64>,
    /// One middleware per node (a standalone cluster): each node's share, space-separated.
    middleware_cpu_nodes: String,
    middleware_active_share: Option<f64>,
    middleware_first_active_s: Option<f64>,
    middleware_activations: Option<u64>,
    /// `reason:count`, space-separated (`no_gain:1 probing:2`).
    middleware_releases: String,
    threads: Option<u64>,
    wall_s: f64,
    /// The machine's speed probed right before the point ([`crate::speed`]).
    speed_compute_ns: Option<f64>,
    speed_memory_ns: Option<f64>,
    failure: &'a str,
}

/// Writes `results.csv` to `path`.
pub fn write_csv(path: &Path, points: &[Point]) -> Result<(), BenchError> {
    let err = |e: csv::Error| BenchError::Write { path: path.to_path_buf(), source: e.into() };
    let mut w = csv::Writer::from_path(path).map_err(err)?;
    for p in points {
        let r = p.measured();
        let lat = |f: fn(&crate::point::RunSummary) -> &Latency, g: fn(&Latency) -> f64| r.map(|r| g(f(r)));
        let row = Row {
            configuration: &p.configuration,
            rate: p.rate,
            rep: p.rep,
            ok: p.failure.is_none(),
            offered_rate: r.map(|r| r.offered_rate),
            measured_s: r.map(|r| r.measured_s),
            ingress_tps: r.map(|r| r.ingress_tps),
            egress_tps: r.map(|r| r.egress_tps),
            proc_mean_ms: lat(|r| &r.latency_ms, |l| l.mean),
            proc_p50_ms: lat(|r| &r.latency_ms, |l| l.p50),
            proc_p99_ms: lat(|r| &r.latency_ms, |l| l.p99),
            proc_p999_ms: lat(|r| &r.latency_ms, |l| l.p999),
            proc_max_ms: lat(|r| &r.latency_ms, |l| l.max),
            e2e_mean_ms: lat(|r| &r.e2e_latency_ms, |l| l.mean),
            e2e_p50_ms: lat(|r| &r.e2e_latency_ms, |l| l.p50),
            e2e_p99_ms: lat(|r| &r.e2e_latency_ms, |l| l.p99),
            e2e_p999_ms: lat(|r| &r.e2e_latency_ms, |l| l.p999),
            e2e_max_ms: lat(|r| &r.e2e_latency_ms, |l| l.max),
            queue_len_mean: r.map(|r| r.queue_len.mean),
            queue_len_p50: r.map(|r| r.queue_len.p50),
            queue_len_p90: r.map(|r| r.queue_len.p90),
            queue_len_p99: r.map(|r| r.queue_len.p99),
            queue_len_max: r.map(|r| r.queue_len.max),
            exchange_max_backlog: r.and_then(|r| r.exchange_max_backlog()),
            engine_cpu_cores: r.map(|r| r.cpu_cores),
            middleware_cpu_share: p.middleware_cpu,
            middleware_cpu_nodes: p
                .middleware_cpu_nodes
                .iter()
                .map(|c| format!("{c:.4}"))
                .collect::<Vec<_>>()
                .join(" "),
            middleware_active_share: p.middleware_active_share.filter(|_| r.is_some()),
            middleware_first_active_s: p.middleware_first_active_s.filter(|_| r.is_some()),
            middleware_activations: p.middleware_activations.filter(|_| r.is_some()),
            middleware_releases: crate::progress::releases_text(&p.middleware_releases),
            threads: r.map(|r| r.threads),
            wall_s: p.wall_s,
            speed_compute_ns: p.speed.map(|s| s.compute_ns),
            speed_memory_ns: p.speed.map(|s| s.memory_ns),
            failure: p.failure.as_deref().unwrap_or(""),
        };
        w.serialize(row).map_err(err)?;
    }
    w.flush().map_err(|e| BenchError::Write { path: path.to_path_buf(), source: e })
}

/// Writes `results.json` to `path`.
pub fn write_json(path: &Path, results: &Results<'_>) -> Result<(), BenchError> {
    let text = serde_json::to_string_pretty(results)
        .map_err(|e| BenchError::Write { path: path.to_path_buf(), source: e.into() })?;
    std::fs::write(path, text + "\n").map_err(|e| BenchError::Write { path: path.to_path_buf(), source: e })
}

#[cfg(test)]
pub(crate) mod tests {
    use super::*;
    use crate::summary::tests::{failed, point};
    use crate::summary::{summarise, Criteria};

    /// A directory under the system temp dir, removed on drop (also when the test fails).
    pub(crate) struct TempDir(pub std::path::PathBuf);
    impl TempDir {
        pub(crate) fn new(name: &str) -> TempDir {
            let p = std::env::temp_dir().join(format!("moirai-bench-{name}-{}", std::process::id()));
            let _ = std::fs::remove_dir_all(&p);
            std::fs::create_dir_all(&p).unwrap();
            TempDir(p)
        }
    }
    impl Drop for TempDir {
        fn drop(&mut self) {
            let _ = std::fs::remove_dir_all(&self.0);
        }
    }

    #[test]
    fn dates_are_utc_iso8601() {
        let t = |s: u64| utc_iso8601(std::time::UNIX_EPOCH + std::time::Duration::from_secs(s));
        assert_eq!(t(0), "1970-01-01T00:00:00Z");
        assert_eq!(t(951_782_400), "2000-02-29T00:00:00Z");
        assert_eq!(t(1_709_210_096), "2024-02-29T12:34:56Z");
    }

    #[test]
    fn machine_facts_are_read() {
        let m = Machine::now();
        assert!(m.nproc >= 1);
        assert!(!m.kernel.is_empty());
        assert!(m.date.ends_with('Z'));
    }

    #[test]
    fn csv_has_one_row_per_point_and_empty_cells_for_failures() {
        let dir = TempDir::new("csv");
        let path = dir.0.join("results.csv");
        let mut ok = point("os", 1000.0, 1, 999.5, 2.0);
        ok.middleware_cpu = Some(0.031);
        ok.middleware_active_share = Some(0.75);
        ok.middleware_first_active_s = Some(2.5);
        ok.middleware_activations = Some(2);
        ok.middleware_releases = [("no_gain".to_string(), 1), ("probing".to_string(), 1)].into_iter().collect();
        write_csv(&path, &[ok, failed("qs", 1000.0, 1)]).unwrap();
        let mut r = csv::Reader::from_path(&path).unwrap();
        let header = r.headers().unwrap().clone();
        let rows: Vec<csv::StringRecord> = r.records().map(|x| x.unwrap()).collect();
        assert_eq!(rows.len(), 2);
        let col = |row: &csv::StringRecord, name: &str| row[header.iter().position(|h| h == name).unwrap()].to_string();
        assert_eq!(col(&rows[0], "configuration"), "os");
        assert_eq!(col(&rows[0], "ingress_tps"), "999.5");
        assert_eq!(col(&rows[0], "e2e_p99_ms"), "2.0");
        assert_eq!(col(&rows[0], "middleware_cpu_share"), "0.031");
        assert_eq!(col(&rows[0], "middleware_active_share"), "0.75");
        assert_eq!(col(&rows[0], "middleware_first_active_s"), "2.5");
        assert_eq!(col(&rows[0], "middleware_activations"), "2");
        assert_eq!(col(&rows[0], "middleware_releases"), "no_gain:1 probing:1");
        assert_eq!(col(&rows[1], "middleware_active_share"), "");
        assert_eq!(col(&rows[0], "ok"), "true");
        assert_eq!(col(&rows[1], "ok"), "false");
        assert_eq!(col(&rows[1], "ingress_tps"), "");
        assert!(col(&rows[1], "failure").contains("boom"));
    }

    #[test]
    fn json_holds_command_machine_points_and_summary() {
        let dir = TempDir::new("json");
        let path = dir.0.join("results.json");
        let points = vec![point("os", 1000.0, 1, 1000.0, 2.0)];
        let summary = summarise(&points, &["os".to_string()], &[1000.0], &Criteria::default());
        let spec = crate::sweep::tests::spec(&dir.0);
        let machine = Machine::now();
        let command_line = vec!["moirai".to_string(), "bench".to_string(), "syn".to_string()];
        let results = Results {
            command_line: &command_line,
            machine: &machine,
            spec: &spec,
            end: &SweepEnd::Completed,
            points: &points,
            summary: &summary,
        };
        write_json(&path, &results).unwrap();
        let v: serde_json::Value = serde_json::from_str(&std::fs::read_to_string(&path).unwrap()).unwrap();
        assert_eq!(v["command_line"][1], "bench");
        assert_eq!(v["machine"]["nproc"], machine.nproc);
        assert_eq!(v["end"], "completed");
        assert_eq!(v["points"][0]["run"]["e2e_latency_ms"]["p99"], 2.0);
        assert_eq!(v["summary"]["configurations"][0]["sustainable_rate"], 1000.0);
        assert_eq!(v["spec"]["duration"], 1.0);
        // Points read back as they were written.
        let back: Vec<Point> = serde_json::from_value(v["points"].clone()).unwrap();
        assert_eq!(back, points);
    }
}

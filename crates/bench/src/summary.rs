//! From points to figures: medians over repetitions, sustainable rates, the side-by-side table.
//!
//! **Sustainable** (`BENCHMARKING.md`), made concrete: an offered rate is sustainable for a
//! configuration when every repetition at that rate ran (none failed), the median ingress
//! throughput is at least [`Criteria::min_ingress_share`] (98 %) of the offered rate, and the
//! median end-to-end p99 is at most [`Criteria::p99_bound_ms`] (1 s by default). The bound is what
//! "does not grow through the run" comes to with one p99 per run: past saturation the source
//! queue grows for the whole run and end-to-end latency reaches a share of the run's length
//! (seconds), while a sustainable run stays in milliseconds. The **saturation point** is the first
//! swept rate that is not sustainable; the **sustainable rate** is the highest rate below it (every
//! lower rate sustainable too), so one lucky repetition above saturation does not count.

use std::fmt::Write;

use serde::Serialize;

use crate::point::{Latency, Point};
use crate::spec::fmt_rate;
use crate::BenchError;

/// What "sustainable" means for a sweep.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct Criteria {
    /// Least share of the offered rate that median ingress must reach.
    pub min_ingress_share: f64,
    /// Largest median end-to-end p99, in milliseconds.
    pub p99_bound_ms: f64,
}

impl Default for Criteria {
    fn default() -> Self {
        Criteria { min_ingress_share: 0.98, p99_bound_ms: 1000.0 }
    }
}

impl Criteria {
    /// Rejects bounds that cannot be met or mean nothing.
    pub fn validate(&self) -> Result<(), BenchError> {
        if !(self.p99_bound_ms.is_finite() && self.p99_bound_ms > 0.0) {
            return Err(BenchError::Spec(format!("the p99 bound {} ms must be positive", self.p99_bound_ms)));
        }
        if !(self.min_ingress_share > 0.0 && self.min_ingress_share <= 1.0) {
            return Err(BenchError::Spec(format!("the ingress share {} must be in (0, 1]", self.min_ingress_share)));
        }
        Ok(())
    }

    /// The definition in words, for tables and the report.
    pub fn describe(&self) -> String {
        format!(
            "every repetition ran, median ingress >= {:.0} % of offered, and median end-to-end p99 <= {} ms",
            self.min_ingress_share * 100.0,
            self.p99_bound_ms
        )
    }
}

/// The median of `values` (the mean of the middle two for an even count); NaN if empty.
pub fn median(values: &[f64]) -> f64 {
    let mut v: Vec<f64> = values.to_vec();
    v.sort_by(f64::total_cmp);
    let n = v.len();
    match n {
        0 => f64::NAN,
        _ if n % 2 == 1 => v[n / 2],
        _ => (v[n / 2 - 1] + v[n / 2]) / 2.0,
    }
}

/// Medians over the measured repetitions of one (configuration, rate).
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct CellStats {
    /// Median ingress, tuples/s.
    pub ingress_tps: f64,
    /// Median egress, tuples/s.
    pub egress_tps: f64,
    /// Median of each statistic of the end-to-end latency, ms.
    pub e2e_ms: Latency,
    /// Median of each statistic of the processing latency, ms.
    pub processing_ms: Latency,
    /// Median of the mean queue length, tuples.
    pub queue_mean: f64,
    /// Median of the queue length's p99, tuples.
    pub queue_p99: f64,
    /// Median of the largest backlog of a Hone exchange's outgoing queue, tuples, when the
    /// workload ran one.
    pub exchange_max_backlog: Option<f64>,
    /// Median engine CPU, cores.
    pub engine_cpu_cores: f64,
    /// Median middleware CPU, share of one core, when the configuration has middleware.
    pub middleware_cpu: Option<f64>,
    /// Median share of the window in which the middleware acted, when the configuration has
    /// middleware.
    pub middleware_active_share: Option<f64>,
    /// How many times the middleware handed the SPE back, by reason (`no_gain`, `probing`, …),
    /// summed over the repetitions, when it reported them.
    pub middleware_releases: Option<std::collections::BTreeMap<String, u64>>,
}

/// One (configuration, rate) of the table.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct Cell {
    /// Configuration label.
    pub configuration: String,
    /// Offered rate, tuples/s.
    pub rate: f64,
    /// Repetitions measured.
    pub reps_ok: usize,
    /// Repetitions that failed.
    pub reps_failed: usize,
    /// Medians, if any repetition was measured.
    pub stats: Option<CellStats>,
    /// Whether the rate is sustainable (module doc).
    pub sustainable: bool,
    /// Why not, when it is not.
    pub why_not: Option<String>,
}

/// Sustainable rate and saturation point of one configuration.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct ConfigSummary {
    /// Configuration label.
    pub configuration: String,
    /// Highest sustainable rate below the saturation point; `None` if the lowest rate is not.
    pub sustainable_rate: Option<f64>,
    /// First swept rate that is not sustainable; `None` if every swept rate is.
    pub saturation_rate: Option<f64>,
    /// A rate above the saturation point was sustainable again: noise, or a non-monotone system.
    pub sustainable_above_saturation: bool,
}

/// The CPU bound a sweep measured: the rate the SPE could take in if it kept every core busy at the
/// least CPU per tuple any cell of the sweep needed (its engine CPU over its ingress, both over the
/// measured window). Schedulers are judged by how close their highest ingress comes to it. It
/// counts the SPE's own CPU only (not the middleware's, the kernel's or other processes'), and
/// the least CPU per tuple is often found past saturation, where batches are fullest.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct CpuBound {
    /// Tuples per second: `cores / cpu_us_per_tuple`.
    pub tuples_per_s: f64,
    /// The least engine CPU per ingress tuple over the sweep, µs.
    pub cpu_us_per_tuple: f64,
    /// The machine's cores.
    pub cores: f64,
    /// Where that least CPU per tuple was measured: configuration and offered rate.
    pub configuration: String,
    /// Offered rate of that cell.
    pub rate: f64,
}

/// Everything the table, the plots and `results.json` show.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct Summary {
    /// The definition used.
    pub criteria: Criteria,
    /// Cells by rate, then configuration in `--compare` order.
    pub cells: Vec<Cell>,
    /// One per configuration, in `--compare` order.
    pub configurations: Vec<ConfigSummary>,
}

fn median_latency(ls: &[&Latency]) -> Latency {
    let m = |f: &dyn Fn(&Latency) -> f64| median(&ls.iter().map(|l| f(l)).collect::<Vec<_>>());
    let opt = |f: &dyn Fn(&Latency) -> Option<f64>| {
        let v: Option<Vec<f64>> = ls.iter().map(|l| f(l)).collect();
        v.filter(|v| !v.is_empty()).map(|v| median(&v))
    };
    Latency {
        count: median(&ls.iter().map(|l| l.count as f64).collect::<Vec<_>>()) as u64,
        mean: m(&|l| l.mean),
        p10: opt(&|l| l.p10),
        p50: m(&|l| l.p50),
        p90: opt(&|l| l.p90),
        p99: m(&|l| l.p99),
        p999: m(&|l| l.p999),
        max: m(&|l| l.max),
    }
}

/// Summarises the points of a sweep over `configurations` (labels, baseline first) and `rates`.
pub fn summarise(points: &[Point], configurations: &[String], rates: &[f64], criteria: &Criteria) -> Summary {
    let mut cells = Vec::new();
    for &rate in rates {
        for label in configurations {
            let here: Vec<&Point> = points.iter().filter(|p| p.configuration == *label && p.rate == rate).collect();
            if here.is_empty() {
                continue;
            }
            let runs: Vec<_> = here.iter().filter_map(|p| p.measured()).collect();
            let reps_failed = here.len() - runs.len();
            let stats = (!runs.is_empty()).then(|| {
                let mw_median = |f: fn(&Point) -> Option<f64>| {
                    let v: Vec<f64> = here.iter().filter(|p| p.failure.is_none()).filter_map(|p| f(p)).collect();
                    (!v.is_empty()).then(|| median(&v))
                };
                CellStats {
                    ingress_tps: median(&runs.iter().map(|r| r.ingress_tps).collect::<Vec<_>>()),
                    egress_tps: median(&runs.iter().map(|r| r.egress_tps).collect::<Vec<_>>()),
                    e2e_ms: median_latency(&runs.iter().map(|r| &r.e2e_latency_ms).collect::<Vec<_>>()),
                    processing_ms: median_latency(&runs.iter().map(|r| &r.latency_ms).collect::<Vec<_>>()),
                    queue_mean: median(&runs.iter().map(|r| r.queue_len.mean).collect::<Vec<_>>()),
                    queue_p99: median(&runs.iter().map(|r| r.queue_len.p99).collect::<Vec<_>>()),
                    exchange_max_backlog: {
                        let x: Vec<f64> = runs.iter().filter_map(|r| r.exchange_max_backlog()).collect();
                        (!x.is_empty()).then(|| median(&x))
                    },
                    engine_cpu_cores: median(&runs.iter().map(|r| r.cpu_cores).collect::<Vec<_>>()),
                    middleware_cpu: mw_median(|p| p.middleware_cpu),
                    middleware_active_share: mw_median(|p| p.middleware_active_share),
                    middleware_releases: {
                        let reported =
                            here.iter().filter(|p| p.failure.is_none() && p.middleware_activations.is_some());
                        reported.fold(None, |sum, p| {
                            let mut sum: std::collections::BTreeMap<String, u64> = sum.unwrap_or_default();
                            for (reason, n) in &p.middleware_releases {
                                *sum.entry(reason.clone()).or_default() += n;
                            }
                            Some(sum)
                        })
                    },
                }
            });
            let why_not = match &stats {
                _ if reps_failed > 0 => Some(format!("{reps_failed} of {} repetitions failed", here.len())),
                None => Some("not measured".to_string()),
                Some(s) if s.ingress_tps < criteria.min_ingress_share * rate => {
                    Some(format!("ingress {:.1} % of offered", 100.0 * s.ingress_tps / rate))
                }
                Some(s) if s.e2e_ms.p99 > criteria.p99_bound_ms => {
                    Some(format!("e2e p99 {} ms above the bound {} ms", fmt_ms(s.e2e_ms.p99), criteria.p99_bound_ms))
                }
                Some(_) => None,
            };
            cells.push(Cell {
                configuration: label.clone(),
                rate,
                reps_ok: runs.len(),
                reps_failed,
                stats,
                sustainable: why_not.is_none(),
                why_not,
            });
        }
    }
    let configurations = configurations
        .iter()
        .map(|label| {
            let mine: Vec<&Cell> = cells.iter().filter(|c| c.configuration == *label).collect();
            let first_bad = mine.iter().position(|c| !c.sustainable);
            let below = &mine[..first_bad.unwrap_or(mine.len())];
            ConfigSummary {
                configuration: label.clone(),
                sustainable_rate: below.last().map(|c| c.rate),
                saturation_rate: first_bad.map(|i| mine[i].rate),
                sustainable_above_saturation: first_bad.is_some_and(|i| mine[i..].iter().any(|c| c.sustainable)),
            }
        })
        .collect();
    Summary { criteria: criteria.clone(), cells, configurations }
}

/// Milliseconds with three significant digits.
pub fn fmt_ms(ms: f64) -> String {
    if !ms.is_finite() {
        "-".into()
    } else if ms >= 100.0 {
        format!("{ms:.0}")
    } else if ms >= 10.0 {
        format!("{ms:.1}")
    } else if ms >= 1.0 {
        format!("{ms:.2}")
    } else {
        format!("{ms:.3}")
    }
}

/// `x` rounded to three significant digits (a measured rate claims no more).
fn three_digits(x: f64) -> f64 {
    if x <= 0.0 || !x.is_finite() {
        return x;
    }
    let scale = 10f64.powi(x.log10().floor() as i32 - 2);
    (x / scale).round() * scale
}

fn ratio(a: f64, base: f64) -> String {
    if a.is_finite() && base.is_finite() && base > 0.0 {
        format!("{:.2}", a / base)
    } else {
        "-".into()
    }
}

impl Summary {
    /// The median statistics of `configuration` at `rate`.
    pub fn stats(&self, configuration: &str, rate: f64) -> Option<&CellStats> {
        self.cells.iter().find(|c| c.configuration == configuration && c.rate == rate).and_then(|c| c.stats.as_ref())
    }

    /// Rows of the side-by-side table: rate, configuration, reps, median ingress and its ratio to
    /// the first configuration, median e2e p99 and its ratio, CPU, verdict.
    pub fn table_rows(&self) -> (Vec<&'static str>, Vec<Vec<String>>) {
        let mut header = vec![
            "rate/s",
            "configuration",
            "reps ok",
            "ingress/s",
            "x first",
            "e2e p99 ms",
            "x first",
            "proc p99 ms",
            "queue mean",
            "engine cores",
            "middleware % core",
            "mw active %",
            "mw handed back",
            "sustainable",
        ];
        let base_label = self.configurations.first().map(|c| c.configuration.as_str()).unwrap_or("");
        // Only sweeps of a workload with a Hone exchange get its column.
        let exchange = self.cells.iter().any(|c| c.stats.as_ref().is_some_and(|s| s.exchange_max_backlog.is_some()));
        if exchange {
            header.insert(header.len() - 1, "exchange max backlog");
        }
        let mut rows = Vec::new();
        for c in &self.cells {
            let base = self.stats(base_label, c.rate);
            let mut row =
                vec![fmt_rate(c.rate), c.configuration.clone(), format!("{}/{}", c.reps_ok, c.reps_ok + c.reps_failed)];
            match &c.stats {
                Some(s) => row.extend([
                    format!("{:.0}", s.ingress_tps),
                    ratio(s.ingress_tps, base.map_or(f64::NAN, |b| b.ingress_tps)),
                    fmt_ms(s.e2e_ms.p99),
                    ratio(s.e2e_ms.p99, base.map_or(f64::NAN, |b| b.e2e_ms.p99)),
                    fmt_ms(s.processing_ms.p99),
                    format!("{:.1}", s.queue_mean),
                    format!("{:.2}", s.engine_cpu_cores),
                    s.middleware_cpu.map_or("-".into(), |m| format!("{:.1}", m * 100.0)),
                    s.middleware_active_share.map_or("-".into(), |m| format!("{:.0}", m * 100.0)),
                    match &s.middleware_releases {
                        None => "-".into(),
                        Some(r) if r.is_empty() => "never".into(),
                        Some(r) => crate::progress::releases_text(r),
                    },
                ]),
                None => row.extend(vec!["-".to_string(); 10]),
            }
            if exchange {
                row.push(
                    c.stats.as_ref().and_then(|s| s.exchange_max_backlog).map_or("-".into(), |b| format!("{b:.0}")),
                );
            }
            row.push(match &c.why_not {
                None => "yes".into(),
                Some(w) => format!("no: {w}"),
            });
            rows.push(row);
        }
        (header, rows)
    }

    /// One line per configuration: sustainable rate, saturation point, ratio to the first.
    pub fn sustainable_lines(&self) -> Vec<String> {
        let base = self.configurations.first().and_then(|c| c.sustainable_rate);
        self.configurations
            .iter()
            .enumerate()
            .map(|(i, c)| {
                let rate = c
                    .sustainable_rate
                    .map_or("none of the swept rates".into(), |r| format!("{} tuples/s", fmt_rate(r)));
                let sat = match c.saturation_rate {
                    Some(s) => format!("saturation point {} tuples/s", fmt_rate(s)),
                    None => "no saturation in the swept range".into(),
                };
                let vs = match (i, c.sustainable_rate, base) {
                    (0, _, _) => String::new(),
                    (_, Some(r), Some(b)) => format!(", x{:.2} of {}", r / b, self.configurations[0].configuration),
                    _ => String::new(),
                };
                let odd = if c.sustainable_above_saturation {
                    " (a higher rate was sustainable again: noise? more repetitions would tell)"
                } else {
                    ""
                };
                format!("{}: {rate} ({sat}{vs}){odd}", c.configuration)
            })
            .collect()
    }

    /// The CPU bound measured by this sweep on a machine of `cores` cores ([`CpuBound`]); `None`
    /// when no cell has both ingress and engine CPU.
    pub fn cpu_bound(&self, cores: f64) -> Option<CpuBound> {
        self.cells
            .iter()
            .filter_map(|c| {
                let s = c.stats.as_ref()?;
                let ok = s.ingress_tps > 0.0 && s.engine_cpu_cores > 0.0 && s.engine_cpu_cores.is_finite();
                ok.then(|| (c, 1e6 * s.engine_cpu_cores / s.ingress_tps))
            })
            .min_by(|a, b| a.1.total_cmp(&b.1))
            .map(|(c, us)| CpuBound {
                tuples_per_s: cores * 1e6 / us,
                cpu_us_per_tuple: us,
                cores,
                configuration: c.configuration.clone(),
                rate: c.rate,
            })
    }

    /// The CPU bound and each configuration's highest median ingress as a share of it, one line
    /// each (empty when the sweep measured no CPU).
    pub fn cpu_bound_lines(&self, cores: f64) -> Vec<String> {
        let Some(b) = self.cpu_bound(cores) else { return Vec::new() };
        let mut lines = vec![format!(
            "CPU bound (measured): {} tuples/s = {} cores / {:.2} µs of SPE CPU per tuple (the least over the sweep: {} at {} tuples/s)",
            fmt_rate(three_digits(b.tuples_per_s)),
            b.cores,
            b.cpu_us_per_tuple,
            b.configuration,
            fmt_rate(b.rate)
        )];
        for c in &self.configurations {
            let best = self
                .cells
                .iter()
                .filter(|cell| cell.configuration == c.configuration)
                .filter_map(|cell| cell.stats.as_ref().map(|s| s.ingress_tps))
                .fold(f64::NAN, f64::max);
            if best.is_finite() {
                lines.push(format!(
                    "{}: highest ingress {} tuples/s = {:.0} % of the CPU bound",
                    c.configuration,
                    fmt_rate(three_digits(best)),
                    100.0 * best / b.tuples_per_s
                ));
            }
        }
        lines
    }

    /// The side-by-side table and the sustainable rates, as printed at the end of a sweep.
    pub fn render_table(&self) -> String {
        let (header, rows) = self.table_rows();
        let mut widths: Vec<usize> = header.iter().map(|h| h.chars().count()).collect();
        for r in &rows {
            for (w, cell) in widths.iter_mut().zip(r) {
                *w = (*w).max(cell.chars().count());
            }
        }
        let mut out = String::new();
        let line = |out: &mut String, cells: Vec<String>| {
            let last = cells.len() - 1;
            for (i, (cell, w)) in cells.iter().zip(&widths).enumerate() {
                // Text columns left-aligned, numbers right-aligned; the verdict is not padded.
                if i == last {
                    out.push_str(cell);
                } else if i == 1 {
                    let _ = write!(out, "{cell:<w$}  ");
                } else {
                    let _ = write!(out, "{cell:>w$}  ");
                }
            }
            out.push('\n');
        };
        line(&mut out, header.iter().map(|h| h.to_string()).collect());
        for r in rows {
            line(&mut out, r);
        }
        let _ = writeln!(out, "\nsustainable rate ({}):", self.criteria.describe());
        for l in self.sustainable_lines() {
            let _ = writeln!(out, "  {l}");
        }
        out
    }
}

#[cfg(test)]
pub(crate) mod tests {
    use super::*;
    use crate::point::{QueueLen, RunSummary};

    /// A measured point with the given ingress and e2e p99 (other latencies derived from it).
    pub(crate) fn point(config: &str, rate: f64, rep: u32, ingress: f64, e2e_p99: f64) -> Point {
        let lat = |p99: f64| Latency {
            count: 100,
            mean: p99 / 4.0,
            p10: None,
            p50: p99 / 5.0,
            p90: None,
            p99,
            p999: p99 * 1.5,
            max: p99 * 2.0,
        };
        Point {
            configuration: config.into(),
            rate,
            rep,
            wall_s: 1.0,
            failure: None,
            run: Some(RunSummary {
                workload: "syn".into(),
                threading: "dedicated".into(),
                offered_rate: rate,
                duration_s: 2.0,
                measured_s: 1.6,
                ingress_tps: ingress,
                egress_tps: ingress,
                tuples_in: (ingress * 2.0) as u64,
                tuples_out: (ingress * 2.0) as u64,
                latency_ms: lat(e2e_p99 / 2.0),
                e2e_latency_ms: lat(e2e_p99),
                threads: 7,
                cpu_cores: 0.5,
                queue_len: QueueLen {
                    samples: 10,
                    mean: 1.0,
                    p50: 1.0,
                    p90: 2.0,
                    p99: 3.0,
                    max: 4.0,
                    ..Default::default()
                },
                workload_stats: serde_json::Value::Null,
                extra: Default::default(),
            }),
            middleware_cpu: None,
            middleware_active_share: None,
            middleware_first_active_s: None,
            middleware_activations: None,
            middleware_releases: Default::default(),
            middleware_cpu_nodes: Vec::new(),
            speed: None,
        }
    }

    pub(crate) fn failed(config: &str, rate: f64, rep: u32) -> Point {
        Point {
            failure: Some("the engine failed (exit code 1): boom".into()),
            run: None,
            ..point(config, rate, rep, 0.0, 0.0)
        }
    }

    fn labels(ls: &[&str]) -> Vec<String> {
        ls.iter().map(|s| s.to_string()).collect()
    }

    #[test]
    fn medians() {
        assert_eq!(median(&[3.0, 1.0, 2.0]), 2.0);
        assert_eq!(median(&[4.0, 1.0, 3.0, 2.0]), 2.5);
        assert!(median(&[]).is_nan());
    }

    #[test]
    fn sustainable_rate_is_the_last_rate_before_saturation() {
        let rates = [1000.0, 2000.0, 3000.0, 4000.0];
        let points = vec![
            point("os", 1000.0, 1, 1000.0, 1.0),
            point("os", 2000.0, 1, 1990.0, 2.0),
            // Throughput keeps up, latency explodes: saturated.
            point("os", 3000.0, 1, 2990.0, 2500.0),
            // Plateau.
            point("os", 4000.0, 1, 3000.0, 4000.0),
            point("qs", 1000.0, 1, 1000.0, 1.0),
            point("qs", 2000.0, 1, 2000.0, 1.0),
            point("qs", 3000.0, 1, 3000.0, 5.0),
            // 97 % of offered: below the 98 % line.
            point("qs", 4000.0, 1, 3880.0, 9.0),
        ];
        let s = summarise(&points, &labels(&["os", "qs"]), &rates, &Criteria::default());
        assert_eq!(s.configurations[0].sustainable_rate, Some(2000.0));
        assert_eq!(s.configurations[0].saturation_rate, Some(3000.0));
        assert_eq!(s.configurations[1].sustainable_rate, Some(3000.0));
        assert_eq!(s.configurations[1].saturation_rate, Some(4000.0));
        let qs4 = s.cells.iter().find(|c| c.configuration == "qs" && c.rate == 4000.0).unwrap();
        assert_eq!(qs4.why_not.as_deref(), Some("ingress 97.0 % of offered"));
        let os3 = s.cells.iter().find(|c| c.configuration == "os" && c.rate == 3000.0).unwrap();
        assert!(os3.why_not.as_deref().unwrap().contains("above the bound 1000 ms"), "{:?}", os3.why_not);
        let lines = s.sustainable_lines();
        assert!(lines[1].contains("3k tuples/s") && lines[1].contains("x1.50 of os"), "{lines:?}");
    }

    #[test]
    fn medians_over_reps_decide_and_failures_disqualify() {
        let rates = [1000.0, 2000.0];
        let points = vec![
            // Two of three reps keep up: the median does.
            point("os", 1000.0, 1, 1000.0, 1.0),
            point("os", 1000.0, 2, 900.0, 1.0),
            point("os", 1000.0, 3, 995.0, 1.0),
            point("os", 2000.0, 1, 2000.0, 1.0),
            failed("os", 2000.0, 2),
        ];
        let s = summarise(&points, &labels(&["os"]), &rates, &Criteria::default());
        let c1 = &s.cells[0];
        assert_eq!((c1.reps_ok, c1.reps_failed, c1.sustainable), (3, 0, true));
        assert_eq!(c1.stats.as_ref().unwrap().ingress_tps, 995.0);
        let c2 = &s.cells[1];
        assert_eq!((c2.reps_ok, c2.reps_failed, c2.sustainable), (1, 1, false));
        assert_eq!(c2.why_not.as_deref(), Some("1 of 2 repetitions failed"));
        assert_eq!(s.configurations[0].sustainable_rate, Some(1000.0));
        assert_eq!(s.configurations[0].saturation_rate, Some(2000.0));
    }

    #[test]
    fn no_sustainable_rate_when_the_lowest_rate_saturates_and_noise_above_is_flagged() {
        let rates = [1000.0, 2000.0, 3000.0];
        let points = vec![
            point("os", 1000.0, 1, 500.0, 1.0),
            point("os", 2000.0, 1, 2000.0, 1.0),
            point("os", 3000.0, 1, 1000.0, 1.0),
        ];
        let s = summarise(&points, &labels(&["os"]), &rates, &Criteria::default());
        assert_eq!(s.configurations[0].sustainable_rate, None);
        assert_eq!(s.configurations[0].saturation_rate, Some(1000.0));
        assert!(s.configurations[0].sustainable_above_saturation);
        // A tighter bound moves the saturation point.
        let all_ok = vec![point("os", 1000.0, 1, 1000.0, 5.0), point("os", 2000.0, 1, 2000.0, 50.0)];
        let tight = Criteria { p99_bound_ms: 10.0, ..Criteria::default() };
        let s = summarise(&all_ok, &labels(&["os"]), &rates[..2], &tight);
        assert_eq!(
            (s.configurations[0].sustainable_rate, s.configurations[0].saturation_rate),
            (Some(1000.0), Some(2000.0))
        );
        let s = summarise(&all_ok, &labels(&["os"]), &rates[..2], &Criteria::default());
        assert_eq!((s.configurations[0].sustainable_rate, s.configurations[0].saturation_rate), (Some(2000.0), None));
    }

    #[test]
    fn table_shows_ratios_to_the_first_configuration() {
        let mut points = vec![point("os", 1000.0, 1, 1000.0, 2.0), point("qs", 1000.0, 1, 990.0, 0.5)];
        points.extend([0.2, 0.9, 0.6].into_iter().enumerate().map(|(i, share)| Point {
            middleware_cpu: Some(0.01),
            middleware_active_share: Some(share),
            middleware_activations: Some(1),
            middleware_releases: [("no_gain".to_string(), 1), ("probing".to_string(), i as u64)].into(),
            ..point("qs", 1000.0, 2 + i as u32, 990.0, 0.5)
        }));
        let s = summarise(&points, &labels(&["os", "qs"]), &[1000.0], &Criteria::default());
        let (header, rows) = s.table_rows();
        assert_eq!(header.len(), rows[0].len());
        assert_eq!(rows[1][..7], ["1k", "qs", "4/4", "990", "0.99", "0.500", "0.25"]);
        // The median share of the window in which the middleware acted, over the points that have one.
        let active = header.iter().position(|h| *h == "mw active %").unwrap();
        assert_eq!((rows[0][active].as_str(), rows[1][active].as_str()), ("-", "60"));
        // Why it stopped, summed over the repetitions that reported it.
        assert_eq!((rows[0][active + 1].as_str(), rows[1][active + 1].as_str()), ("-", "no_gain:3 probing:3"));
        let text = s.render_table();
        assert!(text.contains("sustainable rate (every repetition ran, median ingress >= 98 %"), "{text}");
        assert!(text.lines().count() >= 6);
    }

    #[test]
    fn the_cpu_bound_is_the_cores_over_the_least_cpu_per_tuple_of_the_sweep() {
        let with_cpu = |mut p: Point, cores: f64| {
            p.run.as_mut().unwrap().cpu_cores = cores;
            p
        };
        // os: 1k tuples/s on 0.5 cores (500 µs each), 2k on 0.8 (400 µs); qs: 1k on 0.25 cores
        // (250 µs: the least) and 1.5k at 2k offered.
        let points = vec![
            with_cpu(point("os", 1000.0, 1, 1000.0, 2.0), 0.5),
            with_cpu(point("qs", 1000.0, 1, 1000.0, 1.0), 0.25),
            with_cpu(point("os", 2000.0, 1, 2000.0, 2.0), 0.8),
            with_cpu(point("qs", 2000.0, 1, 1500.0, 1.0), 0.6),
        ];
        let s = summarise(&points, &labels(&["os", "qs"]), &[1000.0, 2000.0], &Criteria::default());
        let b = s.cpu_bound(2.0).unwrap();
        assert_eq!((b.configuration.as_str(), b.rate), ("qs", 1000.0));
        assert!((b.cpu_us_per_tuple - 250.0).abs() < 1e-9, "{b:?}");
        assert!((b.tuples_per_s - 8000.0).abs() < 1e-6, "{b:?}");
        let lines = s.cpu_bound_lines(2.0);
        assert_eq!(lines.len(), 3, "{lines:?}");
        assert!(lines[0].starts_with("CPU bound (measured): 8k tuples/s = 2 cores / 250.00 µs"), "{lines:?}");
        assert_eq!(lines[1], "os: highest ingress 2k tuples/s = 25 % of the CPU bound");
        assert_eq!(lines[2], "qs: highest ingress 1.5k tuples/s = 19 % of the CPU bound");
        // No CPU measured, no bound.
        let none = vec![with_cpu(point("os", 1000.0, 1, 1000.0, 2.0), 0.0)];
        let s = summarise(&none, &labels(&["os"]), &[1000.0], &Criteria::default());
        assert_eq!(s.cpu_bound(2.0), None);
        assert!(s.cpu_bound_lines(2.0).is_empty());
    }
}

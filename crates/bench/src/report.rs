//! `report.html`: one self-contained page (inline SVG, inline CSS, no external assets) with the
//! charts, the side-by-side table, the definitions used and the failures, so that a report can
//! be mailed or archived alone and still say how its figures were obtained.

use std::fmt::Write;
use std::path::Path;

use crate::output::Results;
use crate::plots;
use crate::spec::fmt_rate;
use crate::summary::Summary;
use crate::sweep::SweepEnd;
use crate::BenchError;

/// Escapes text for HTML.
pub fn escape(s: &str) -> String {
    let mut out = String::with_capacity(s.len());
    for c in s.chars() {
        match c {
            '&' => out.push_str("&amp;"),
            '<' => out.push_str("&lt;"),
            '>' => out.push_str("&gt;"),
            '"' => out.push_str("&quot;"),
            '\'' => out.push_str("&#39;"),
            c => out.push(c),
        }
    }
    out
}

/// Rates at which latency distributions are drawn, with why: the first configuration's highest
/// sustainable rate (the best it does) and its saturation point (where the papers compare).
pub fn distribution_rates(summary: &Summary) -> Vec<(f64, String)> {
    let Some(first) = summary.configurations.first() else { return Vec::new() };
    let mut out = Vec::new();
    if let Some(r) = first.sustainable_rate {
        out.push((r, format!("highest sustainable rate of {}", first.configuration)));
    }
    if let Some(r) = first.saturation_rate {
        out.push((r, format!("saturation point of {}", first.configuration)));
    }
    out
}

const STYLE: &str = "body{font-family:sans-serif;max-width:1100px;margin:2em auto;padding:0 1em;color:#222}\
h1{font-size:1.6em}h2{font-size:1.2em;margin-top:1.6em}code{background:#f3f3f3;padding:0 .2em}\
table{border-collapse:collapse;font-size:.85em}td,th{border:1px solid #ccc;padding:.2em .5em;text-align:right}\
td:nth-child(2),th{text-align:left}tr.no td:last-child{color:#a33}dt{font-weight:bold}\
figure{margin:1em 0}.err{color:#a33}";

/// Renders the page.
pub fn render(r: &Results<'_>) -> String {
    let spec = r.spec;
    let labels: Vec<String> = spec.configurations.iter().map(|c| c.label.clone()).collect();
    let mut h = String::new();
    let _ = write!(
        h,
        "<!DOCTYPE html>\n<html lang=\"en\"><head><meta charset=\"utf-8\"><title>moirai bench {w}</title>\
         <style>{STYLE}</style></head><body>\n<h1>moirai bench: {w}</h1>\n",
        w = escape(&spec.workload)
    );
    let (window_start, window_end) = spec.measured_window();
    let measured = window_end - window_start;
    let end = match r.end {
        SweepEnd::Completed => "completed".to_string(),
        SweepEnd::Interrupted => "<span class=\"err\">interrupted (Ctrl-C): partial results</span>".to_string(),
        SweepEnd::Aborted(why) => format!("<span class=\"err\">aborted: {}</span>", escape(why)),
    };
    let _ = writeln!(
        h,
        "<dl><dt>Command</dt><dd><code>{cmd}</code></dd>\
         <dt>Machine</dt><dd>{nproc} CPUs ({cpu}), Linux {kernel}, load {load} at start, host {host}</dd>\
         <dt>Date</dt><dd>{date} (moirai {ver})</dd>\
         <dt>Points</dt><dd>{n} of {total} measured; {end}. Each ran {d:.1} s: the first {wu:.0} % is warm-up \
         and discarded, throughput and latency come from the remaining {measured:.1} s. {reps} repetition(s) per \
         rate and configuration, interleaved (for each rate, for each repetition, every configuration in turn); \
         figures are medians over repetitions.</dd>\
         <dt>Definitions</dt><dd>Processing latency = egress time − ingress time; end-to-end latency = egress \
         time − the tuple's intended send time (open loop: includes the wait in the source queue); throughput = \
         ingress tuples/s in the measured window (it can exceed the offered rate when the engine \
         catches up a backlog left by the warm-up). <b>Sustainable</b>: {crit}. The saturation point is the first \
         swept rate that is not sustainable; the sustainable rate is the highest rate below it.</dd></dl>",
        cmd = escape(&shell_words(r.command_line)),
        nproc = r.machine.nproc,
        cpu = escape(&r.machine.cpu_model),
        kernel = escape(&r.machine.kernel),
        load = escape(&r.machine.loadavg),
        host = escape(&r.machine.hostname),
        date = escape(&r.machine.date),
        ver = escape(&r.machine.moirai_version),
        n = r.points.iter().filter(|p| p.failure.is_none()).count(),
        total = spec.total_points(),
        d = spec.duration.as_secs_f64(),
        wu = spec.warmup * 100.0,
        reps = spec.reps,
        crit = escape(&r.summary.criteria.describe()),
    );
    h.push_str("<h2>Sustainable rates</h2>\n<ul>");
    for l in r.summary.sustainable_lines() {
        let _ = write!(h, "<li>{}</li>", escape(&l));
    }
    h.push_str("</ul>\n");
    let bound = r.summary.cpu_bound_lines(r.machine.nproc as f64);
    if let Some((first, rest)) = bound.split_first() {
        let _ = write!(h, "<p>{}</p>\n<ul>", escape(first));
        for l in rest {
            let _ = write!(h, "<li>{}</li>", escape(l));
        }
        h.push_str("</ul>\n");
    }
    let speeds: Vec<_> = r.points.iter().filter_map(|p| p.speed).collect();
    for l in r.machine.speed.iter().flat_map(|s| s.lines(&speeds)) {
        let _ = writeln!(h, "<p>{}</p>", escape(&l));
    }
    for l in crate::mw_state::late_start_lines(r.points, window_start, window_end) {
        let _ = writeln!(h, "<p>{}</p>", escape(&l));
    }

    let mut charts = vec![
        ("Throughput vs offered rate".to_string(), plots::throughput(r.summary, &labels, r.points)),
        (
            "End-to-end latency vs offered rate".to_string(),
            plots::latency_vs_rate(r.summary, &labels, true, Some(r.summary.criteria.p99_bound_ms)),
        ),
        ("Processing latency vs offered rate".to_string(), plots::latency_vs_rate(r.summary, &labels, false, None)),
    ];
    for (rate, why) in distribution_rates(r.summary) {
        charts.push((
            format!("Latency distribution at {} tuples/s", fmt_rate(rate)),
            plots::distribution(r.summary, &labels, rate, &why),
        ));
    }
    charts.push(("Queue sizes vs offered rate".to_string(), plots::queues(r.summary, &labels)));
    for (rate, why) in distribution_rates(r.summary) {
        let title = format!("Queued tuples over time at {} tuples/s", fmt_rate(rate));
        let y = "tuples queued (source backlog + channels)";
        if let Some(svg) = plots::over_time(&labels, r.points, rate, title.clone(), y, &plots::queued_now) {
            charts.push((format!("{title} ({why}; first repetition)"), svg));
        }
        let title = format!("Largest exchange backlog over time at {} tuples/s", fmt_rate(rate));
        let y = "largest outgoing queue (tuples)";
        if let Some(svg) = plots::over_time(&labels, r.points, rate, title.clone(), y, &plots::exchange_backlog_now) {
            charts.push((format!("{title} ({why}; first repetition)"), svg));
        }
    }
    charts.push(("CPU use vs offered rate".to_string(), plots::cpu(r.summary, &labels)));
    if let Some(levels) = plots::thread_level(&labels, r.points) {
        charts.push(("Elastic thread level over time".to_string(), levels));
    }
    for (title, svg) in charts {
        let _ = write!(h, "<h2>{}</h2>\n<figure>", escape(&title));
        match svg {
            Ok(svg) => h.push_str(&svg),
            Err(e) => {
                let _ = write!(h, "<p class=\"err\">{}</p>", escape(&e));
            }
        }
        h.push_str("</figure>\n");
    }

    h.push_str(
        "<h2>Side by side</h2>\n<p>Medians over repetitions; “x first” is the ratio to the first \
                configuration at the same rate. Middleware CPU is a share of one core, from /proc; “mw active %” is the share of the \
                measured window in which the middleware acted on the SPE, from its /metrics; “mw handed back” how many times it \
                 stopped acting, by reason, over the repetitions.</p>\n<table><tr>",
    );
    let (header, rows) = r.summary.table_rows();
    for c in header {
        let _ = write!(h, "<th>{}</th>", escape(c));
    }
    h.push_str("</tr>\n");
    for row in rows {
        let class = if row.last().is_some_and(|v| v.starts_with("no")) { " class=\"no\"" } else { "" };
        let _ = write!(h, "<tr{class}>");
        for c in row {
            let _ = write!(h, "<td>{}</td>", escape(&c));
        }
        h.push_str("</tr>\n");
    }
    h.push_str("</table>\n");

    let failed: Vec<_> = r.points.iter().filter(|p| p.failure.is_some()).collect();
    if !failed.is_empty() {
        h.push_str("<h2>Failed points</h2>\n<ul>");
        for p in failed {
            let _ = write!(
                h,
                "<li>{} @ {} tuples/s, rep {}: <pre>{}</pre></li>",
                escape(&p.configuration),
                fmt_rate(p.rate),
                p.rep,
                escape(p.failure.as_deref().unwrap_or(""))
            );
        }
        h.push_str("</ul>\n");
    }
    h.push_str(
        "<p>Raw data: <code>results.csv</code> (one row per point) and <code>results.json</code> (every \
                point with the engine's full summary) beside this file.</p>\n</body></html>\n",
    );
    h
}

/// The command line as one could type it again.
pub fn shell_words(args: &[String]) -> String {
    args.iter()
        .map(|a| {
            if !a.is_empty() && a.chars().all(|c| c.is_ascii_alphanumeric() || "-_./:=,@#%+".contains(c)) {
                a.clone()
            } else {
                format!("'{}'", a.replace('\'', r"'\''"))
            }
        })
        .collect::<Vec<_>>()
        .join(" ")
}

/// Writes `report.html` to `path`.
pub fn write_report(path: &Path, results: &Results<'_>) -> Result<(), BenchError> {
    std::fs::write(path, render(results)).map_err(|e| BenchError::Write { path: path.to_path_buf(), source: e })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn escapes_html() {
        assert_eq!(escape("<a href=\"x\">&'"), "&lt;a href=&quot;x&quot;&gt;&amp;&#39;");
    }

    #[test]
    fn command_lines_can_be_typed_again() {
        let args: Vec<String> = ["moirai", "bench", "syn", "--rates", "1k:2k:1k", "--", "--cost-ns", "it's"]
            .iter()
            .map(|s| s.to_string())
            .collect();
        assert_eq!(shell_words(&args), r"moirai bench syn --rates 1k:2k:1k -- --cost-ns 'it'\''s'");
    }
}

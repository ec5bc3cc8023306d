//! Timelines of micro-batch runs (`moirai run … --threading micro-batch --json`): commit latency
//! per micro-batch, and the group size and coordination overhead per group, over the run's time,
//! one line per run — how a recovery and AIMD look over time. `moirai micro-batch-timeline` draws
//! them.

use serde_json::Value;

use crate::plots::{colour, draw, Chart, Series, Style};

fn numbers(v: &Value, key: &str) -> Vec<f64> {
    v.get(key).and_then(Value::as_array).map_or_else(Vec::new, |a| a.iter().filter_map(Value::as_f64).collect())
}

fn axis(max: f64) -> std::ops::Range<f64> {
    0.0..if max.is_finite() && max > 0.0 { max * 1.08 } else { 1.0 }
}

/// Reads a run: the summary is the last line that parses as a JSON object with `commit_ms`.
pub fn read_run(text: &str) -> Result<Value, String> {
    text.lines()
        .rev()
        .filter_map(|l| serde_json::from_str::<Value>(l).ok())
        .find(|v| v.get("commit_ms").is_some())
        .ok_or_else(|| "no micro-batch summary (a `moirai run … --threading micro-batch --json` line) in it".into())
}

/// The charts of `runs` (label, summary), as (file name, SVG).
pub fn charts(runs: &[(String, Value)]) -> Result<Vec<(String, String)>, String> {
    let mut latency = Vec::new();
    let mut groups = Vec::new();
    let mut overheads = Vec::new();
    let (mut max_t, mut max_l, mut max_g) = (1.0f64, 1.0f64, 1.0f64);
    for (i, (label, run)) in runs.iter().enumerate() {
        let interval_s = run.get("batch_interval_ms").and_then(Value::as_f64).unwrap_or(100.0) / 1e3;
        let commit = numbers(run, "commit_ms");
        let points: Vec<(f64, f64)> =
            commit.iter().enumerate().map(|(b, &l)| ((b + 1) as f64 * interval_s, l)).collect();
        max_t = max_t.max(commit.len() as f64 * interval_s);
        max_l = points.iter().map(|p| p.1).fold(max_l, f64::max);
        latency.push(Series { label: label.clone(), colour: colour(i), style: Style::Solid, points });
        for r in run.get("recoveries").and_then(Value::as_array).into_iter().flatten() {
            if let Some(at) = r.get("at_ms").and_then(Value::as_f64) {
                let t = at / 1e3;
                latency.push(Series {
                    label: format!("{label}: executor lost"),
                    colour: colour(i),
                    style: Style::Reference,
                    points: vec![(t, 0.0), (t, f64::MAX)],
                });
            }
        }
        let sizes = numbers(run, "group_sizes");
        let mut start = 0.0;
        let (mut g, mut o) = (Vec::new(), Vec::new());
        for (size, overhead) in sizes.iter().zip(numbers(run, "overheads")) {
            g.push((start * interval_s, *size));
            o.push((start * interval_s, overhead));
            start += size;
        }
        max_g = sizes.iter().copied().fold(max_g, f64::max);
        groups.push(Series { label: label.clone(), colour: colour(i), style: Style::Solid, points: g });
        overheads.push(Series { label: label.clone(), colour: colour(i), style: Style::Solid, points: o });
    }
    for s in &mut latency {
        for p in &mut s.points {
            p.1 = p.1.min(max_l * 1.08);
        }
    }
    let t = |v: &f64| format!("{v:.1}");
    let chart = |title: &str, y_desc: &'static str, series| Chart {
        title: title.to_string(),
        x_desc: "time since the first micro-batch (s)",
        y_desc,
        series,
    };
    Ok(vec![
        (
            "latency.svg".into(),
            draw(
                &chart("Commit latency per micro-batch", "commit − end of its interval (ms)", latency),
                axis(max_t),
                axis(max_l),
                &t,
                &|v| format!("{v:.0}"),
            )?,
        ),
        (
            "group-size.svg".into(),
            draw(&chart("Group size", "micro-batches per decision", groups), axis(max_t), axis(max_g), &t, &|v| {
                format!("{v:.0}")
            })?,
        ),
        (
            "overhead.svg".into(),
            draw(
                &chart("Coordination overhead per group", "share of the group's wall time", overheads),
                axis(max_t),
                0.0..1.0,
                &t,
                &|v| format!("{v:.2}"),
            )?,
        ),
    ])
}

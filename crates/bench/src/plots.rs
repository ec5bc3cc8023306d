//! The report's charts, drawn as inline SVG with plotters.
//!
//! Every chart is a set of [`Series`] over one x axis (the offered rate, or the percentile) and
//! one y axis (linear or logarithmic), drawn by [`draw`]. One colour per configuration, the same
//! in every chart; solid lines for the first statistic of a chart (p50, mean, engine), dashed for
//! the second (p99, middleware), and grey dots for single repetitions, so spread is visible next
//! to the medians.

use plotters::coord::combinators::LogCoord;
use plotters::coord::ranged1d::{AsRangedCoord, Ranged, ValueFormatter};
use plotters::coord::types::RangedCoordf64;
use plotters::prelude::*;

use crate::point::Point;
use crate::spec::fmt_rate;
use crate::summary::{fmt_ms, Summary};

/// Width and height of a chart, in pixels.
const SIZE: (u32, u32) = (760, 440);

/// Okabe–Ito colours: distinguishable with the common colour-vision deficiencies.
const PALETTE: [RGBColor; 7] = [
    RGBColor(0, 114, 178),
    RGBColor(213, 94, 0),
    RGBColor(0, 158, 115),
    RGBColor(204, 121, 167),
    RGBColor(230, 159, 0),
    RGBColor(86, 180, 233),
    RGBColor(0, 0, 0),
];

/// The colour of the `i`-th configuration.
pub fn colour(i: usize) -> RGBColor {
    PALETTE[i % PALETTE.len()]
}

/// How a series is drawn.
#[derive(Clone, Copy, PartialEq, Eq)]
pub enum Style {
    /// Solid line with round markers.
    Solid,
    /// Dashed line with triangle markers.
    Dashed,
    /// Dotted line without markers (a reference, such as a bound).
    Reference,
    /// Small dots only, not in the legend (single repetitions).
    Dots,
}

/// One line (or set of dots) of a chart.
pub struct Series {
    /// Legend text.
    pub label: String,
    /// Colour.
    pub colour: RGBColor,
    /// How it is drawn.
    pub style: Style,
    /// Points in data coordinates.
    pub points: Vec<(f64, f64)>,
}

/// What a chart shows.
pub struct Chart<'a> {
    /// Title above the chart.
    pub title: String,
    /// X axis description, with unit.
    pub x_desc: &'a str,
    /// Y axis description, with unit.
    pub y_desc: &'a str,
    /// Lines and dots.
    pub series: Vec<Series>,
}

/// Draws a chart over the coordinate specs `x` and `y` into an SVG string.
pub fn draw<X, Y>(
    chart: &Chart<'_>,
    x: X,
    y: Y,
    x_fmt: &dyn Fn(&f64) -> String,
    y_fmt: &dyn Fn(&f64) -> String,
) -> Result<String, String>
where
    X: AsRangedCoord<Value = f64>,
    Y: AsRangedCoord<Value = f64>,
    X::CoordDescType: Ranged<ValueType = f64> + ValueFormatter<f64>,
    Y::CoordDescType: Ranged<ValueType = f64> + ValueFormatter<f64>,
{
    let mut svg = String::new();
    {
        let err = |e: &dyn std::fmt::Display| format!("cannot draw '{}': {e}", chart.title);
        let root = SVGBackend::with_string(&mut svg, SIZE).into_drawing_area();
        root.fill(&WHITE).map_err(|e| err(&e))?;
        let mut ctx = ChartBuilder::on(&root)
            .caption(&chart.title, ("sans-serif", 20))
            .margin(12)
            .x_label_area_size(48)
            .y_label_area_size(72)
            .build_cartesian_2d(x, y)
            .map_err(|e| err(&e))?;
        ctx.configure_mesh()
            .x_desc(chart.x_desc)
            .y_desc(chart.y_desc)
            .x_label_formatter(x_fmt)
            .y_label_formatter(y_fmt)
            .axis_desc_style(("sans-serif", 15))
            .label_style(("sans-serif", 13))
            .light_line_style(RGBColor(238, 238, 238))
            .max_light_lines(2)
            .draw()
            .map_err(|e| err(&e))?;
        let mut any_legend = false;
        for s in &chart.series {
            let c = s.colour;
            match s.style {
                Style::Dots => {
                    ctx.draw_series(s.points.iter().map(|&p| Circle::new(p, 2, c.mix(0.45).filled())))
                        .map_err(|e| err(&e))?;
                }
                Style::Solid => {
                    ctx.draw_series(LineSeries::new(s.points.iter().copied(), c.stroke_width(2)))
                        .map_err(|e| err(&e))?
                        .label(&s.label)
                        .legend(move |(x, y)| {
                            EmptyElement::at((x, y))
                                + PathElement::new(vec![(0, 0), (20, 0)], c.stroke_width(2))
                                + Circle::new((10, 0), 3, c.filled())
                        });
                    ctx.draw_series(s.points.iter().map(|&p| Circle::new(p, 3, c.filled()))).map_err(|e| err(&e))?;
                    any_legend = true;
                }
                Style::Dashed | Style::Reference => {
                    let (dash, width) = if s.style == Style::Dashed { (8, 2) } else { (3, 1) };
                    ctx.draw_series(DashedLineSeries::new(
                        s.points.iter().copied(),
                        dash,
                        dash - 2,
                        c.stroke_width(width),
                    ))
                    .map_err(|e| err(&e))?
                    .label(&s.label)
                    .legend(move |(x, y)| {
                        EmptyElement::at((x, y))
                            + PathElement::new(vec![(0, 0), (6, 0)], c.stroke_width(width))
                            + PathElement::new(vec![(9, 0), (20, 0)], c.stroke_width(width))
                    });
                    if s.style == Style::Dashed {
                        ctx.draw_series(s.points.iter().map(|&p| TriangleMarker::new(p, 4, c.filled())))
                            .map_err(|e| err(&e))?;
                    }
                    any_legend = true;
                }
            }
        }
        if any_legend {
            ctx.configure_series_labels()
                .position(SeriesLabelPosition::UpperLeft)
                .background_style(WHITE.mix(0.85))
                .border_style(RGBColor(160, 160, 160))
                .label_font(("sans-serif", 13))
                .draw()
                .map_err(|e| err(&e))?;
        }
        root.present().map_err(|e| err(&e))?;
    }
    Ok(svg)
}

/// A linear axis from 0 to a little above the largest value.
fn linear_to(max: f64) -> RangedCoordf64 {
    let top = if max.is_finite() && max > 0.0 { max * 1.08 } else { 1.0 };
    (0.0..top).into()
}

/// A log axis around the positive values, with room above for the legend.
fn log_around(values: impl Iterator<Item = f64>) -> LogCoord<f64> {
    let (lo, hi) = values
        .filter(|v| v.is_finite() && *v > 0.0)
        .fold((f64::INFINITY, 0.0f64), |(lo, hi), v| (lo.min(v), hi.max(v)));
    let (lo, hi) = if lo.is_finite() { (lo, hi) } else { (0.001, 1.0) };
    (lo / 2.0..hi * 8.0).log_scale().into()
}

/// The largest swept rate.
fn max_rate(summary: &Summary) -> f64 {
    summary.cells.iter().map(|c| c.rate).fold(0.0, f64::max)
}

/// The x axis of rate charts other than throughput: the swept range with a margin, so that the
/// points are not squeezed to the right as they would be on an axis from 0.
fn rate_axis(summary: &Summary) -> RangedCoordf64 {
    let lo = summary.cells.iter().map(|c| c.rate).fold(f64::INFINITY, f64::min);
    let hi = max_rate(summary);
    if !lo.is_finite() {
        return (0.0..1.0).into();
    }
    let pad = if hi > lo { (hi - lo) * 0.05 } else { hi * 0.1 };
    ((lo - pad).max(0.0)..hi + pad).into()
}

/// Throughput vs offered rate: median ingress per configuration, single repetitions as dots,
/// and the ideal (ingress = offered) as a dotted reference.
pub fn throughput(summary: &Summary, labels: &[String], points: &[Point]) -> Result<String, String> {
    let top = max_rate(summary);
    let mut series = vec![Series {
        label: "offered (ideal)".into(),
        colour: RGBColor(140, 140, 140),
        style: Style::Reference,
        points: vec![(0.0, 0.0), (top, top)],
    }];
    let mut max_y = top;
    for (i, label) in labels.iter().enumerate() {
        let reps: Vec<(f64, f64)> = points
            .iter()
            .filter(|p| p.configuration == *label)
            .filter_map(|p| p.measured().map(|r| (p.rate, r.ingress_tps)))
            .collect();
        max_y = reps.iter().map(|p| p.1).fold(max_y, f64::max);
        series.push(Series { label: String::new(), colour: colour(i), style: Style::Dots, points: reps });
        series.push(Series {
            label: format!("{label} (median ingress)"),
            colour: colour(i),
            style: Style::Solid,
            points: medians(summary, label, |s| Some(s.ingress_tps)),
        });
    }
    let chart = Chart {
        title: "Throughput vs offered rate".into(),
        x_desc: "offered rate (tuples/s)",
        y_desc: "ingress throughput (tuples/s)",
        series,
    };
    draw(&chart, linear_to(top), linear_to(max_y), &rate_label, &rate_label)
}

/// Latency vs offered rate on a log axis: median p50 (solid) and p99 (dashed) per
/// configuration; `bound` adds the sustainable-rate bound as a dotted line.
pub fn latency_vs_rate(summary: &Summary, labels: &[String], e2e: bool, bound: Option<f64>) -> Result<String, String> {
    let pick = |s: &crate::summary::CellStats| if e2e { s.e2e_ms } else { s.processing_ms };
    let mut series = Vec::new();
    for (i, label) in labels.iter().enumerate() {
        series.push(Series {
            label: format!("{label} p50"),
            colour: colour(i),
            style: Style::Solid,
            points: medians(summary, label, |s| Some(pick(s).p50)),
        });
        series.push(Series {
            label: format!("{label} p99"),
            colour: colour(i),
            style: Style::Dashed,
            points: medians(summary, label, |s| Some(pick(s).p99)),
        });
    }
    for s in &mut series {
        s.points.retain(|p| p.1 > 0.0);
    }
    let top = max_rate(summary);
    if let Some(b) = bound {
        series.push(Series {
            label: format!("p99 bound of 'sustainable' ({} ms)", fmt_ms(b)),
            colour: RGBColor(140, 140, 140),
            style: Style::Reference,
            points: vec![(0.0, b), (top * 2.0, b)],
        });
    }
    let y = log_around(series.iter().flat_map(|s| s.points.iter().map(|p| p.1)));
    let (title, desc) = if e2e {
        ("End-to-end latency vs offered rate", "end-to-end latency (ms, log)")
    } else {
        ("Processing latency vs offered rate", "processing latency (ms, log)")
    };
    let chart = Chart { title: title.into(), x_desc: "offered rate (tuples/s)", y_desc: desc, series };
    draw(&chart, rate_axis(summary), y, &rate_label, &ms_label)
}

/// A linear axis whose ticks are exactly the given points (plotters' `with_key_points` would
/// do, but its result has no label formatter over `f64`).
struct KeyAxis {
    range: std::ops::Range<f64>,
    keys: Vec<f64>,
}

impl Ranged for KeyAxis {
    type FormatOption = plotters::coord::ranged1d::DefaultFormatting;
    type ValueType = f64;

    fn map(&self, value: &f64, limit: (i32, i32)) -> i32 {
        let share = (value - self.range.start) / (self.range.end - self.range.start);
        limit.0 + (share * f64::from(limit.1 - limit.0)).round() as i32
    }

    fn key_points<H: plotters::coord::ranged1d::KeyPointHint>(&self, hint: H) -> Vec<f64> {
        // Bold points carry the labels; no light grid between them.
        match hint.weight() {
            plotters::coord::ranged1d::KeyPointWeight::Bold => self.keys.clone(),
            plotters::coord::ranged1d::KeyPointWeight::Any => Vec::new(),
        }
    }

    fn range(&self) -> std::ops::Range<f64> {
        self.range.clone()
    }
}

/// Position of a quantile on a "nines" axis: p50 → 0.3, p90 → 1, p99 → 2, p99.9 → 3; the maximum
/// (quantile 1) is drawn at 3.6.
pub fn nines(q: f64) -> f64 {
    if q >= 1.0 {
        3.6
    } else {
        -(1.0 - q).log10()
    }
}

/// Latency distribution per configuration at one offered rate: the median over repetitions of
/// each reported percentile, on a "nines" axis (a letter-value-like summary: each step right is
/// ten times rarer). End-to-end solid, processing dashed.
pub fn distribution(summary: &Summary, labels: &[String], rate: f64, why: &str) -> Result<String, String> {
    let mut series = Vec::new();
    for (i, label) in labels.iter().enumerate() {
        let Some(s) = summary.stats(label, rate) else { continue };
        for (e2e, style, name) in [(true, Style::Solid, "end-to-end"), (false, Style::Dashed, "processing")] {
            let l = if e2e { s.e2e_ms } else { s.processing_ms };
            series.push(Series {
                label: format!("{label} {name}"),
                colour: colour(i),
                style,
                points: l.percentiles().into_iter().map(|(q, v)| (nines(q), v)).filter(|p| p.1 > 0.0).collect(),
            });
        }
    }
    let y = log_around(series.iter().flat_map(|s| s.points.iter().map(|p| p.1)));
    // Ticks only where some configuration has a value (the engine may not report p10 or p90).
    let mut keys: Vec<f64> = series.iter().flat_map(|s| s.points.iter().map(|p| p.0)).collect();
    keys.sort_by(f64::total_cmp);
    keys.dedup_by(|a, b| (*a - *b).abs() < 1e-9);
    let start = keys.first().map_or(0.0, |k| k - 0.15).max(0.0);
    let x = KeyAxis { range: start..3.8, keys };
    let x_fmt = |v: &f64| {
        [(0.1, "p10"), (0.5, "p50"), (0.9, "p90"), (0.99, "p99"), (0.999, "p99.9"), (1.0, "max")]
            .iter()
            .find(|(q, _)| (nines(*q) - v).abs() < 1e-6)
            .map(|(_, n)| n.to_string())
            .unwrap_or_default()
    };
    let chart = Chart {
        title: format!("Latency distribution at {} tuples/s ({why})", fmt_rate(rate)),
        x_desc: "percentile (each step right: 10x rarer)",
        y_desc: "latency (ms, log)",
        series,
    };
    draw(&chart, x, y, &x_fmt, &ms_label)
}

/// Queue lengths vs offered rate: median of the mean (solid) and of the p99 (dashed).
pub fn queues(summary: &Summary, labels: &[String]) -> Result<String, String> {
    let mut series = Vec::new();
    let mut max_y: f64 = 1.0;
    for (i, label) in labels.iter().enumerate() {
        let mean = medians(summary, label, |s| Some(s.queue_mean));
        let p99 = medians(summary, label, |s| Some(s.queue_p99));
        max_y = mean.iter().chain(&p99).map(|p| p.1).fold(max_y, f64::max);
        series.push(Series { label: format!("{label} mean"), colour: colour(i), style: Style::Solid, points: mean });
        series.push(Series { label: format!("{label} p99"), colour: colour(i), style: Style::Dashed, points: p99 });
    }
    let chart = Chart {
        title: "Queue sizes vs offered rate".into(),
        x_desc: "offered rate (tuples/s)",
        y_desc: "queue length per operator (tuples)",
        series,
    };
    draw(&chart, rate_axis(summary), linear_to(max_y), &rate_label, &|v| format!("{v:.0}"))
}

/// CPU vs offered rate: the engine process (solid) and the middleware (dashed), in cores.
pub fn cpu(summary: &Summary, labels: &[String]) -> Result<String, String> {
    let mut series = Vec::new();
    let mut max_y: f64 = 0.1;
    for (i, label) in labels.iter().enumerate() {
        let engine = medians(summary, label, |s| Some(s.engine_cpu_cores));
        let mw = medians(summary, label, |s| s.middleware_cpu);
        max_y = engine.iter().chain(&mw).map(|p| p.1).fold(max_y, f64::max);
        series.push(Series {
            label: format!("{label} engine"),
            colour: colour(i),
            style: Style::Solid,
            points: engine,
        });
        if !mw.is_empty() {
            series.push(Series {
                label: format!("{label} middleware"),
                colour: colour(i),
                style: Style::Dashed,
                points: mw,
            });
        }
    }
    let chart = Chart {
        title: "CPU use vs offered rate".into(),
        x_desc: "offered rate (tuples/s)",
        y_desc: "CPU (cores)",
        series,
    };
    draw(&chart, rate_axis(summary), linear_to(max_y), &rate_label, &|v| format!("{v:.2}"))
}

/// `(t, thread level)` of a point's per-second timeline, if it ran a pool threading model.
fn thread_levels(point: &Point) -> Option<Vec<(f64, f64)>> {
    let levels = timeline_of(point, &|p| p.get("thread_level")?.as_f64())?;
    levels.iter().any(|&(_, l)| l > 0.0).then_some(levels)
}

/// The thread level over time of every configuration whose thread level moved (elastic), at
/// each swept rate, first repetition; `None` when no configuration's level moved.
pub fn thread_level(labels: &[String], points: &[Point]) -> Option<Result<String, String>> {
    let mut series = Vec::new();
    let (mut max_t, mut max_level): (f64, f64) = (1.0, 1.0);
    for (i, label) in labels.iter().enumerate() {
        for p in points.iter().filter(|p| &p.configuration == label && p.rep == 1) {
            let Some(levels) = thread_levels(p) else { continue };
            if levels.iter().all(|&(_, l)| l == levels[0].1) {
                continue;
            }
            max_t = levels.iter().map(|p| p.0).fold(max_t, f64::max);
            max_level = levels.iter().map(|p| p.1).fold(max_level, f64::max);
            series.push(Series {
                label: format!("{label} @ {}", rate_label(&p.rate)),
                colour: colour(i + series.len()),
                style: Style::Solid,
                points: levels,
            });
        }
    }
    if series.is_empty() {
        return None;
    }
    let chart = Chart {
        title: "Elastic thread level over time".into(),
        x_desc: "time since the start of the point (s)",
        y_desc: "worker threads running operators",
        series,
    };
    Some(draw(&chart, linear_to(max_t), linear_to(max_level + 1.0), &|v| format!("{v:.0}"), &|v| format!("{v:.0}")))
}

/// `(t, value)` of a point's per-second timeline, `value` computed from each timeline entry;
/// `None` when the point has no timeline or no entry has the value.
fn timeline_of(point: &Point, value: &dyn Fn(&serde_json::Value) -> Option<f64>) -> Option<Vec<(f64, f64)>> {
    let timeline = point.measured()?.extra.get("timeline")?.as_array()?;
    let v: Vec<(f64, f64)> = timeline.iter().filter_map(|p| Some((p.get("t_s")?.as_f64()?, value(p)?))).collect();
    (!v.is_empty()).then_some(v)
}

/// Tuples waiting in the query over time: the sources' external queue plus the engine's channels.
pub fn queued_now(entry: &serde_json::Value) -> Option<f64> {
    Some(entry.get("backlog")?.as_f64()? + entry.get("queued")?.as_f64()?)
}

/// The largest outgoing-queue backlog of a Hone exchange during each second.
pub fn exchange_backlog_now(entry: &serde_json::Value) -> Option<f64> {
    entry.get("exchange_max_backlog")?.as_f64()
}

/// One value of the per-second timeline over time, one line per configuration, at `rate`, first
/// repetition; `None` when no configuration has the value at that rate. Log y axis (0 is drawn
/// at the axis' bottom), since queues of configurations past saturation are orders of
/// magnitude above the others.
pub fn over_time(
    labels: &[String],
    points: &[Point],
    rate: f64,
    title: String,
    y_desc: &str,
    value: &dyn Fn(&serde_json::Value) -> Option<f64>,
) -> Option<Result<String, String>> {
    let mut series = Vec::new();
    let mut max_t: f64 = 1.0;
    for (i, label) in labels.iter().enumerate() {
        let Some(p) = points.iter().find(|p| &p.configuration == label && p.rate == rate && p.rep == 1) else {
            continue;
        };
        let Some(values) = timeline_of(p, value) else { continue };
        max_t = values.iter().map(|p| p.0).fold(max_t, f64::max);
        series.push(Series { label: label.clone(), colour: colour(i), style: Style::Solid, points: values });
    }
    if series.is_empty() {
        return None;
    }
    let y = log_around(series.iter().flat_map(|s| s.points.iter().map(|p| p.1)).chain([1.0]));
    let bottom = y.range().start;
    for s in &mut series {
        for p in &mut s.points {
            p.1 = p.1.max(bottom);
        }
    }
    let chart = Chart { title, x_desc: "time since the start of the point (s)", y_desc, series };
    Some(draw(&chart, linear_to(max_t), y, &|v| format!("{v:.0}"), &|v| format!("{v:.0}")))
}

/// `(rate, value)` of a configuration's cells that have a value, by rate.
fn medians(
    summary: &Summary,
    label: &str,
    value: impl Fn(&crate::summary::CellStats) -> Option<f64>,
) -> Vec<(f64, f64)> {
    summary
        .cells
        .iter()
        .filter(|c| c.configuration == label)
        .filter_map(|c| c.stats.as_ref().and_then(&value).map(|v| (c.rate, v)))
        .filter(|p| p.1.is_finite())
        .collect()
}

fn rate_label(v: &f64) -> String {
    fmt_rate(*v)
}

fn ms_label(v: &f64) -> String {
    // Log-axis ticks are powers of ten and their multiples: keep them short.
    let s = format!("{v:.4}");
    s.trim_end_matches('0').trim_end_matches('.').to_string()
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::summary::tests::point;
    use crate::summary::{summarise, Criteria};

    fn sample() -> (Summary, Vec<String>, Vec<Point>) {
        let points = vec![
            point("os", 1000.0, 1, 1000.0, 1.0),
            point("os", 1000.0, 2, 995.0, 1.2),
            point("os", 2000.0, 1, 1500.0, 900.0),
            point("qs", 1000.0, 1, 1000.0, 0.5),
            point("qs", 2000.0, 1, 1990.0, 2.0),
        ];
        let labels = vec!["os".to_string(), "qs".to_string()];
        (summarise(&points, &labels, &[1000.0, 2000.0], &Criteria::default()), labels, points)
    }

    #[test]
    fn charts_are_svg_with_titles_axes_and_legends() {
        let (s, labels, points) = sample();
        let charts = [
            ("Throughput vs offered rate", throughput(&s, &labels, &points).unwrap()),
            ("End-to-end latency vs offered rate", latency_vs_rate(&s, &labels, true, Some(1000.0)).unwrap()),
            ("Processing latency vs offered rate", latency_vs_rate(&s, &labels, false, None).unwrap()),
            ("Latency distribution at 1k tuples/s", distribution(&s, &labels, 1000.0, "test").unwrap()),
            ("Queue sizes vs offered rate", queues(&s, &labels).unwrap()),
            ("CPU use vs offered rate", cpu(&s, &labels).unwrap()),
        ];
        for (title, svg) in charts {
            assert!(svg.starts_with("<svg"), "{title}: {:.80}", svg);
            assert!(svg.contains(title), "{title} missing");
            assert!(svg.contains("offered rate (tuples/s)") || svg.contains("percentile"), "{title}: no x label");
            assert!(svg.contains("os") && svg.contains("qs"), "{title}: no legend");
        }
    }

    #[test]
    fn the_distribution_axis_is_labelled_by_percentile() {
        let (s, labels, _) = sample();
        let svg = distribution(&s, &labels, 1000.0, "test").unwrap();
        for p in ["p50", "p99", "p99.9", "max"] {
            assert!(svg.contains(&format!(">\n{p}\n</text>")), "no {p} tick");
        }
        assert!((nines(0.99) - 2.0).abs() < 1e-9);
        assert!((nines(0.999) - 3.0).abs() < 1e-9);
    }

    #[test]
    fn empty_summaries_still_draw() {
        let s = summarise(&[], &[], &[], &Criteria::default());
        assert!(throughput(&s, &[], &[]).unwrap().contains("<svg"));
        assert!(latency_vs_rate(&s, &[], true, Some(1000.0)).unwrap().contains("<svg"));
        assert!(distribution(&s, &[], 1000.0, "none").unwrap().contains("<svg"));
    }
}

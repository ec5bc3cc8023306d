//! Tests of user-script policies: binding, metric detection, compile and runtime errors, limits.

use std::collections::BTreeMap;

use super::*;
use crate::fixtures::*;
use crate::{Cluster, MetricValues, OpRef, Scope};

/// Runs `script` on the two-query SPE with queue_size = 1, 2, ... and cost = 10 for every operator.
fn run(script: &str, level: Level) -> Result<BTreeMap<OpRef, f64>, PolicyError> {
    let c = Cluster::new(vec![two_queries("engine")]).unwrap();
    let m = MetricValues::from_fn(&c, &Metric::ALL, |m, op| match m {
        Metric::QueueSize => op.op as f64 + 1.0,
        Metric::Cost => 10.0,
        _ => 0.5,
    });
    let scope = Scope::all().resolve(&c);
    let mut p = ScriptPolicy::new("user", script, level)?;
    match p.schedule(&PolicyContext { cluster: &c, metrics: &m, scope: &scope })? {
        Schedule::Single(s) => Ok(s),
        Schedule::Grouping(_) => panic!("single expected"),
    }
}

fn values(s: &BTreeMap<OpRef, f64>) -> Vec<f64> {
    s.values().copied().collect()
}

#[test]
fn evaluates_metric_expressions_per_operator() {
    let s = run("queue_size * cost", Level::Physical).unwrap();
    assert_eq!(values(&s), vec![10.0, 20.0, 30.0, 40.0, 50.0, 60.0]);
    let p = ScriptPolicy::new("user", "queue_size * cost", Level::Physical).unwrap();
    assert_eq!(p.metrics(), vec![Metric::QueueSize, Metric::Cost]);
}

#[test]
fn binds_names_and_mixes_integers_with_floats() {
    let s = run(r#"if query == "q1" { 100 } else { queue_size }"#, Level::Physical).unwrap();
    assert_eq!(values(&s), vec![100.0, 100.0, 100.0, 4.0, 5.0, 6.0]);
    let s = run(r#"if kind == "sink" && spe == "engine" { instance + 7 } else { 0.5 }"#, Level::Physical).unwrap();
    assert_eq!(values(&s), vec![0.5, 0.5, 7.0, 0.5, 0.5, 7.0]);
    let s = run(r#"if name == "map" { 1 } else { 0 }"#, Level::Logical).unwrap();
    assert_eq!(values(&s), vec![0.0, 1.0, 0.0, 0.0, 1.0, 0.0]);
}

#[test]
fn small_scripts_with_statements_work() {
    let script = "let total = 0.0;\nfor i in 0..3 { total += queue_size; }\ntotal";
    assert_eq!(values(&run(script, Level::Physical).unwrap()), vec![3.0, 6.0, 9.0, 12.0, 15.0, 18.0]);
    // print has no effect (the scheduling core has no I/O) and does not disturb the result.
    assert_eq!(values(&run("print(name); 2", Level::Physical).unwrap()), vec![2.0; 6]);
}

#[test]
fn metrics_are_detected_from_the_script_only() {
    let metrics = |s: &str| ScriptPolicy::new("user", s, Level::Physical).unwrap().metrics();
    assert_eq!(metrics("1"), vec![]);
    assert_eq!(metrics("highest_rate + head_wait"), vec![Metric::HeadWait, Metric::HighestRate]);
    // A local variable shadowing a metric name is not the metric.
    assert_eq!(metrics("let cost = 2; cost * queue_size"), vec![Metric::QueueSize]);
    // Strings and property names that look like metrics are not reads.
    assert_eq!(metrics(r#"if name == "cost" { 1 } else { 2 }"#), vec![]);
}

#[test]
fn syntax_errors_have_line_and_column() {
    let err = ScriptPolicy::new("user", "queue_size +\n  * 2", Level::Physical).unwrap_err();
    let PolicyError::ScriptCompile { line, column, .. } = &err else { panic!("compile error expected, got {err}") };
    assert_eq!((*line, *column), (2, 3), "{err}");
    assert!(err.to_string().starts_with("policy 'user': script error at line 2, column 3:"), "{err}");
}

#[test]
fn unknown_metrics_are_compile_errors() {
    let err = ScriptPolicy::new("user", "2 * queue_sise", Level::Physical).unwrap_err();
    let msg = err.to_string();
    assert!(msg.contains("line 1, column 5") && msg.contains("unknown variable 'queue_sise'"), "{msg}");
    assert!(msg.contains("queue_size") && msg.contains("instance"), "{msg}");
    let err = ScriptPolicy::new("user", "queue_size + instance", Level::Logical).unwrap_err();
    assert!(err.to_string().contains("`instance` is only defined for policies on physical operators"), "{err}");
}

#[test]
fn runaway_scripts_stop_at_the_operations_limit() {
    for script in ["loop { }", "let x = 0; while true { x += 1; } x"] {
        let err = run(script, Level::Physical).unwrap_err();
        let PolicyError::ScriptRuntime { op, message, .. } = &err else { panic!("runtime error expected, got {err}") };
        assert!(op.contains("'source (1/1)'"), "{err}");
        assert!(message.contains("limit of operations"), "{err}");
    }
    let p = ScriptPolicy::with_max_operations("user", "1", Level::Physical, 0);
    assert!(matches!(p, Err(PolicyError::Config { .. })));
}

#[test]
fn a_round_over_its_time_limit_is_stopped_and_says_so() {
    // Operations limit raised out of reach (as the operations error suggests doing): the time
    // limit still ends the loop, within the round.
    let c = Cluster::new(vec![two_queries("engine")]).unwrap();
    let m = MetricValues::from_fn(&c, &Metric::ALL, |_, _| 1.0);
    let scope = Scope::all().resolve(&c);
    let limit = std::time::Duration::from_millis(50);
    let mut p = ScriptPolicy::with_limits("user", "loop { }", Level::Physical, u64::MAX, limit).unwrap();
    let started = std::time::Instant::now();
    let err = p.schedule(&PolicyContext { cluster: &c, metrics: &m, scope: &scope }).unwrap_err();
    assert!(err.to_string().contains("ran over its time limit of 50ms"), "{err}");
    assert!(err.to_string().contains("time_limit_ms"), "{err}");
    // Not a speed assertion: without the limit this loop would not end at all.
    assert!(started.elapsed() < std::time::Duration::from_secs(30));
    // The next round gets its own budget: a script that ends is fine.
    let mut ok = ScriptPolicy::with_limits("user", "queue_size", Level::Physical, u64::MAX, limit).unwrap();
    assert!(ok.schedule(&PolicyContext { cluster: &c, metrics: &m, scope: &scope }).is_ok());
    assert!(ScriptPolicy::with_limits("user", "1", Level::Physical, 10, std::time::Duration::ZERO).is_err());
}

#[test]
fn non_numbers_are_runtime_errors_naming_the_operator() {
    let err = run("name", Level::Physical).unwrap_err();
    assert!(
        err.to_string().contains("script failed for operator 'source (1/1)' of query 'q1' in SPE 'engine': "),
        "{err}"
    );
    assert!(
        err.to_string().contains("returned a value of type string (source (1/1)); it must return a number"),
        "{err}"
    );
    let err = run("queue_size > 1", Level::Physical).unwrap_err();
    assert!(err.to_string().contains("returned a value of type bool (false)"), "{err}");
    let err = run("let x = 1;", Level::Physical).unwrap_err();
    assert!(err.to_string().contains("returned nothing"), "{err}");
    let err = run("queue_size / 0.0", Level::Physical).unwrap_err();
    assert!(err.to_string().contains("must return a finite number"), "{err}");
    let err = run("1 / 0", Level::Physical).unwrap_err();
    assert!(matches!(err, PolicyError::ScriptRuntime { line: 1, column: 3, .. }), "{err}");
    assert!(err.to_string().contains("'engine' at line 1, column 3: Division by zero"), "{err}");
}

#[test]
fn scripts_cannot_import_or_eval() {
    let err = run(r#"import "os" as os; 1"#, Level::Physical).unwrap_err();
    assert!(matches!(err, PolicyError::ScriptRuntime { .. }), "{err}");
    assert!(ScriptPolicy::new("user", r#"eval("1")"#, Level::Physical).is_err());
    assert!(matches!(ScriptPolicy::new("user", "  ", Level::Physical), Err(PolicyError::Config { .. })));
}

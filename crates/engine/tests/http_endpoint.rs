//! The metrics endpoint, read with a real HTTP client (ureq) from a running engine, as the
//! middleware reads it (contract: docs/metrics-endpoint.md).
//!
//! - `/topology`: the pid is this process; every physical operator has a thread id that exists
//!   under `/proc/<pid>/task/` and whose `comm` is the operator's physical name cut to 15 bytes;
//!   logical and physical parts are consistent.
//! - `/metrics`: valid Prometheus text (every sample line `name{labels} value` with a float value,
//!   HELP and TYPE for each family); every family of `metrics::names` is present; the operator
//!   labels match the topology; the sources' `tuples_in` counter grows between scrapes.
//! - A Hone exchange adds its families: one backlog gauge per outgoing queue, the largest
//!   backlog, tuples carried and ticks, labelled with the exchange and its scheduler; the carried
//!   counter grows between scrapes. An engine without an exchange has none of them.
//! - Anything else: 404 with a hint.

mod common;

use std::collections::{BTreeMap, BTreeSet};
use std::net::SocketAddr;
use std::time::Duration;

use moirai_engine::metrics::names;
use moirai_engine::{Agg, Engine, EngineConfig, Hone, Query, Source, Window};
use serde_json::Value;

use common::{wait_or_fail, wait_until, HANG};

/// An endless rate-limited query with a long operator name (cut in `comm`) and fan-out.
fn start() -> Engine {
    let q = Query::new("web");
    q.source("ticks", Source::new(|_, _| 0u64..).rate(2000.0))
        .parallelism(2)
        .map("a_rather_long_operator_name", |x| x + 1)
        .parallelism(3)
        .key_by(|x: &u64| x % 4)
        .window("count", Window::tumbling(Duration::from_millis(5)), Agg::count())
        .parallelism(2)
        .discard("out");
    let config = EngineConfig {
        metrics_addr: Some("127.0.0.1:0".parse().unwrap()),
        chaining: false,
        channel_capacity: 64,
        batch_size: 8,
        ..EngineConfig::default()
    };
    Engine::start(config, vec![q.build().unwrap()]).unwrap()
}

#[allow(clippy::result_large_err)] // ureq's own error type
fn get(addr: SocketAddr, path: &str) -> Result<ureq::Response, ureq::Error> {
    ureq::get(&format!("http://{addr}{path}")).timeout(Duration::from_secs(10)).call()
}

fn topology(addr: SocketAddr) -> Value {
    let response = get(addr, "/topology").expect("GET /topology");
    assert_eq!(response.status(), 200);
    assert_eq!(response.content_type(), "application/json");
    response.into_json().expect("/topology is JSON")
}

fn scrape(addr: SocketAddr) -> String {
    let response = get(addr, "/metrics").expect("GET /metrics");
    assert_eq!(response.status(), 200);
    assert_eq!(response.content_type(), "text/plain", "{:?}", response.header("Content-Type"));
    response.into_string().unwrap()
}

// ---------------------------------------------------------------------------------------------
// A strict reader of the Prometheus text exposition format 0.0.4.

#[derive(Debug)]
struct Sample {
    name: String,
    labels: BTreeMap<String, String>,
    value: f64,
}

#[derive(Debug, Default)]
struct Exposition {
    /// Family → type, from `# TYPE` lines.
    types: BTreeMap<String, String>,
    helps: BTreeSet<String>,
    samples: Vec<Sample>,
}

fn is_name_char(c: char, first: bool) -> bool {
    c.is_ascii_alphabetic() || c == '_' || c == ':' || (!first && c.is_ascii_digit())
}

fn parse_name(s: &str) -> Result<(&str, &str), String> {
    let end = s.char_indices().find(|&(i, c)| !is_name_char(c, i == 0)).map_or(s.len(), |(i, _)| i);
    if end == 0 {
        return Err(format!("no metric name at '{s}'"));
    }
    Ok(s.split_at(end))
}

fn parse_labels(mut s: &str) -> Result<(BTreeMap<String, String>, &str), String> {
    let mut labels = BTreeMap::new();
    s = s.strip_prefix('{').expect("called at '{'");
    loop {
        if let Some(rest) = s.strip_prefix('}') {
            return Ok((labels, rest));
        }
        let (name, rest) = parse_name(s)?;
        if name.contains(':') {
            return Err(format!("bad label name '{name}'"));
        }
        let mut chars = rest.strip_prefix("=\"").ok_or_else(|| format!("expected =\" after label {name}"))?.chars();
        let mut value = String::new();
        loop {
            match chars.next().ok_or("unterminated label value")? {
                '"' => break,
                '\\' => match chars.next().ok_or("dangling escape")? {
                    '\\' => value.push('\\'),
                    '"' => value.push('"'),
                    'n' => value.push('\n'),
                    c => return Err(format!("bad escape \\{c}")),
                },
                '\n' => return Err("newline in a label value".into()),
                c => value.push(c),
            }
        }
        if labels.insert(name.to_string(), value).is_some() {
            return Err(format!("label {name} twice"));
        }
        s = chars.as_str();
        s = s.strip_prefix(',').unwrap_or(s);
    }
}

fn parse_exposition(text: &str) -> Result<Exposition, String> {
    let mut exp = Exposition::default();
    for (n, line) in text.lines().enumerate() {
        let at = |e: String| format!("line {}: {e}: '{line}'", n + 1);
        if line.is_empty() {
            continue;
        }
        if let Some(comment) = line.strip_prefix('#') {
            let words: Vec<&str> = comment.split_whitespace().collect();
            match words.as_slice() {
                ["TYPE", family, kind] => {
                    if !["counter", "gauge", "summary", "histogram", "untyped"].contains(kind) {
                        return Err(at(format!("unknown type {kind}")));
                    }
                    if exp.types.insert(family.to_string(), kind.to_string()).is_some() {
                        return Err(at("TYPE given twice".into()));
                    }
                }
                ["HELP", family, ..] => {
                    exp.helps.insert(family.to_string());
                }
                ["TYPE" | "HELP", ..] => return Err(at("malformed TYPE/HELP".into())),
                _ => {}
            }
            continue;
        }
        let (name, rest) = parse_name(line).map_err(at)?;
        let (labels, rest) =
            if rest.starts_with('{') { parse_labels(rest).map_err(at)? } else { (BTreeMap::new(), rest) };
        let rest = rest.strip_prefix(' ').ok_or_else(|| at("expected a space before the value".into()))?;
        let mut fields = rest.split(' ');
        let value = fields.next().unwrap_or("");
        let value: f64 = value.parse().map_err(|_| at(format!("value '{value}' is not a float")))?;
        if let Some(ts) = fields.next() {
            ts.parse::<i64>().map_err(|_| at(format!("timestamp '{ts}' is not an integer")))?;
        }
        if fields.next().is_some() {
            return Err(at("trailing fields".into()));
        }
        exp.samples.push(Sample { name: name.to_string(), labels, value });
    }
    Ok(exp)
}

/// The family a sample belongs to (summaries add `_sum` and `_count`).
fn family<'a>(exp: &Exposition, sample: &'a str) -> Option<&'a str> {
    if exp.types.contains_key(sample) {
        return Some(sample);
    }
    let base = sample.strip_suffix("_sum").or_else(|| sample.strip_suffix("_count"))?;
    (exp.types.get(base).map(String::as_str) == Some("summary")).then_some(base)
}

/// Sum of `metric` over the physical operators whose ids are in `ids`.
fn total(exp: &Exposition, metric: &str, ids: &BTreeSet<String>) -> f64 {
    exp.samples.iter().filter(|s| s.name == metric && ids.contains(&s.labels["id"])).map(|s| s.value).sum()
}

// ---------------------------------------------------------------------------------------------

#[test]
fn the_parser_rejects_what_prometheus_rejects() {
    for bad in ["m{a=\"1\"}", "m 1 2 3", "m{a=1} 1", "m{a=\"1} 1", "m one", "1m 1", "m{a=\"x\",a=\"y\"} 1"] {
        assert!(parse_exposition(bad).is_err(), "accepted '{bad}'");
    }
    let ok = parse_exposition("# HELP m help text\n# TYPE m gauge\nm{a=\"x\\\"y\",b=\"\"} -1.5e3\nm 2 1700000000\n")
        .unwrap();
    assert_eq!(ok.samples.len(), 2);
    assert_eq!(ok.samples[0].labels["a"], "x\"y");
    assert_eq!(ok.samples[0].value, -1500.0);
}

#[test]
fn topology_names_live_threads_of_this_process() {
    let engine = start();
    let addr = engine.metrics_addr().expect("the endpoint is on");
    assert_ne!(addr.port(), 0, "the real port, not the requested 0");

    // Thread ids are 0 until each thread has started.
    let mut topo = Value::Null;
    wait_until("every thread id", HANG, || {
        topo = topology(addr);
        topo["physical"].as_array().unwrap().iter().all(|o| o["tid"].as_i64() != Some(0))
    });

    let pid = std::process::id();
    assert_eq!(topo["pid"].as_u64(), Some(pid as u64));
    assert_eq!(topo["threading"], "dedicated");
    assert_eq!(topo["chaining"], false);
    assert_eq!(topo["queries"], serde_json::json!(["web"]));

    let logical = topo["logical"]["nodes"].as_array().unwrap();
    let logical_names: Vec<&str> = logical.iter().map(|n| n["name"].as_str().unwrap()).collect();
    assert_eq!(logical_names, ["ticks", "a_rather_long_operator_name", "count", "out"]);
    let parallelism: Vec<u64> = logical.iter().map(|n| n["parallelism"].as_u64().unwrap()).collect();
    assert_eq!(parallelism, [2, 3, 2, 2], "a sink runs as many instances as its input");
    let partitionings: Vec<&str> =
        topo["logical"]["edges"].as_array().unwrap().iter().map(|e| e["partitioning"].as_str().unwrap()).collect();
    assert_eq!(partitionings, ["rebalance", "key_by", "forward"]);

    let physical = topo["physical"].as_array().unwrap();
    assert_eq!(physical.len(), 2 + 3 + 2 + 2, "chaining is off: one physical operator per instance");
    let mut tids = BTreeSet::new();
    for (k, op) in physical.iter().enumerate() {
        assert_eq!(op["id"].as_u64(), Some(k as u64));
        let name = op["name"].as_str().unwrap();
        let (instance, parallelism) = (op["instance"].as_u64().unwrap(), op["parallelism"].as_u64().unwrap());
        let logical_id = op["logical"][0].as_u64().unwrap() as usize;
        assert_eq!(op["logical_names"][0], logical_names[logical_id]);
        assert_eq!(name, format!("{} ({}/{parallelism})", logical_names[logical_id], instance + 1));
        let kind = op["kind"].as_str().unwrap();
        assert_eq!(kind, ["source", "operator", "operator", "sink"][logical_id], "{name}");

        let tid = op["tid"].as_i64().unwrap();
        assert!(tids.insert(tid), "tid {tid} twice: dedicated threads are one per operator");
        let task = format!("/proc/{pid}/task/{tid}");
        let comm = std::fs::read_to_string(format!("{task}/comm")).unwrap_or_else(|e| panic!("{task}: {e}"));
        let cut = &name.as_bytes()[..name.len().min(15)];
        assert_eq!(comm.trim_end_matches('\n').as_bytes(), cut, "comm of {name} (tid {tid})");
    }
    assert!(physical.iter().any(|o| o["name"].as_str().unwrap().len() > 15), "some name is cut");

    for ch in topo["channels"].as_array().unwrap() {
        for end in ["from", "to"] {
            assert!((ch[end].as_u64().unwrap() as usize) < physical.len(), "{ch}");
        }
    }
    // 2x3 rebalance + 3x2 key_by + 2x1 rebalance.
    assert_eq!(topo["channels"].as_array().unwrap().len(), 6 + 6 + 2);

    // The endpoint serves what the API returns.
    let api = serde_json::to_value(engine.topology()).unwrap();
    assert_eq!(api["physical"], topo["physical"]);
    assert_eq!(api["channels"], topo["channels"]);

    engine.stop();
    wait_or_fail(engine, HANG).unwrap();
}

#[test]
fn metrics_are_prometheus_text_and_counters_grow() {
    let engine = start();
    let addr = engine.metrics_addr().unwrap();
    wait_until("every thread id", HANG, || engine.topology().physical.iter().all(|o| o.tid != 0));
    let topo = engine.topology();

    let first = parse_exposition(&scrape(addr)).unwrap_or_else(|e| panic!("{e}"));
    let families = [
        (names::TUPLES_IN, "counter"),
        (names::TUPLES_OUT, "counter"),
        (names::QUEUE_LEN, "gauge"),
        (names::HEAD_WAIT, "gauge"),
        (names::CPU, "counter"),
        (names::COST, "gauge"),
        (names::SELECTIVITY, "gauge"),
        (names::BLOCKED, "counter"),
        (names::LATENCY, "summary"),
        (names::E2E_LATENCY, "summary"),
    ];
    for (name, kind) in families {
        assert_eq!(first.types.get(name).map(String::as_str), Some(kind), "TYPE of {name}");
        assert!(first.helps.contains(name), "HELP of {name}");
        assert!(first.samples.iter().any(|s| family(&first, &s.name) == Some(name)), "no sample of {name}");
    }
    for s in &first.samples {
        assert!(family(&first, &s.name).is_some(), "sample {} of no declared family", s.name);
        assert!(s.value.is_finite() && s.value >= 0.0, "{s:?}");
    }

    // Operator samples: one per physical operator and family, labelled as in the topology.
    let operator_families = &families[..8];
    for (name, _) in operator_families {
        let samples: Vec<&Sample> = first.samples.iter().filter(|s| s.name == *name).collect();
        assert_eq!(samples.len(), topo.physical.len(), "{name}");
        for (s, op) in samples.iter().zip(&topo.physical) {
            let want: BTreeMap<String, String> = [
                ("query", op.query.clone()),
                ("operator", op.name.clone()),
                ("id", op.id.to_string()),
                ("tid", op.tid.to_string()),
            ]
            .into_iter()
            .map(|(k, v)| (k.to_string(), v))
            .collect();
            assert_eq!(s.labels, want, "{name}");
        }
    }
    // The sinks' summaries (one per sink instance): three quantiles, _sum and _count.
    for name in [names::LATENCY, names::E2E_LATENCY] {
        let quantiles: BTreeSet<&str> =
            first.samples.iter().filter(|s| s.name == name).map(|s| s.labels["quantile"].as_str()).collect();
        assert_eq!(quantiles, BTreeSet::from(["0.5", "0.99", "0.999"]), "{name}");
        for suffix in ["_sum", "_count"] {
            assert_eq!(first.samples.iter().filter(|s| s.name == format!("{name}{suffix}")).count(), 2);
        }
    }

    // While the sources run, their tuples_in counter grows from one scrape to a later one.
    let sources: BTreeSet<String> =
        topo.physical.iter().filter(|o| o.logical_names[0] == "ticks").map(|o| o.id.to_string()).collect();
    assert_eq!(sources.len(), 2);
    let before = total(&first, names::TUPLES_IN, &sources);
    wait_until("tuples_in to grow", HANG, || {
        let later = parse_exposition(&scrape(addr)).unwrap();
        total(&later, names::TUPLES_IN, &sources) > before
    });

    engine.stop();
    let summary = wait_or_fail(engine, HANG).unwrap();
    assert!(summary.tuples_in as f64 > before);
}

#[test]
fn an_exchange_reports_its_outgoing_queues() {
    // Three producers offer 3 000 tuples/s to a link that carries 1 000: its queues fill.
    let q = Query::new("hone");
    q.source("ticks", Source::new(|_, _| 0u64..).rate(1000.0))
        .parallelism(3)
        .exchange(Hone::rr(Duration::from_millis(5)).capacity(1000))
        .shuffle()
        .map("next", |x| x + 1)
        .discard("out");
    let config =
        EngineConfig { metrics_addr: Some("127.0.0.1:0".parse().unwrap()), chaining: false, ..EngineConfig::default() };
    let engine = Engine::start(config, vec![q.build().unwrap()]).unwrap();
    let addr = engine.metrics_addr().unwrap();
    let samples = |exp: &Exposition, name: &str| -> Vec<(BTreeMap<String, String>, f64)> {
        exp.samples.iter().filter(|s| s.name == name).map(|s| (s.labels.clone(), s.value)).collect()
    };
    let mut first = Exposition::default();
    wait_until("a backlog in the exchange", HANG, || {
        first = parse_exposition(&scrape(addr)).unwrap();
        samples(&first, names::EXCHANGE_MAX_BACKLOG).first().is_some_and(|s| s.1 > 0.0)
    });
    for (name, kind) in [
        (names::EXCHANGE_BACKLOG, "gauge"),
        (names::EXCHANGE_MAX_BACKLOG, "gauge"),
        (names::EXCHANGE_SENT, "counter"),
        (names::EXCHANGE_TICKS, "counter"),
    ] {
        assert_eq!(first.types.get(name).map(String::as_str), Some(kind), "TYPE of {name}");
        assert!(first.helps.contains(name), "HELP of {name}");
    }
    let backlogs = samples(&first, names::EXCHANGE_BACKLOG);
    let queues: Vec<&str> = backlogs.iter().map(|(l, _)| l["queue"].as_str()).collect();
    assert_eq!(queues, ["0", "1", "2"], "one gauge per producer instance");
    for (labels, _) in &backlogs {
        assert_eq!(labels["exchange"], "ticks -> next");
        assert_eq!(labels["policy"], "rr");
    }
    let sent = |exp: &Exposition| samples(exp, names::EXCHANGE_SENT)[0].1;
    let before = sent(&first);
    wait_until("the link to carry more", HANG, || sent(&parse_exposition(&scrape(addr)).unwrap()) > before);
    engine.stop();
    wait_or_fail(engine, HANG).unwrap();

    // Without an exchange, no exchange family.
    let engine = start();
    let text = scrape(engine.metrics_addr().unwrap());
    assert!(!text.contains("moirai_exchange_"), "{text}");
    engine.stop();
    wait_or_fail(engine, HANG).unwrap();
}

/// `?name[]=` keeps the named families only (both spellings), every sample of them; an unknown
/// name gives nothing, not an error.
#[test]
fn a_scrape_can_ask_for_some_families_only() {
    let engine = start();
    let addr = engine.metrics_addr().unwrap();
    wait_until("every thread id", HANG, || engine.topology().physical.iter().all(|o| o.tid != 0));
    let n = engine.topology().physical.len();
    let path = format!("/metrics?name[]={}&name%5B%5D={}", names::QUEUE_LEN, names::TUPLES_IN);
    let text = get(addr, &path).unwrap().into_string().unwrap();
    let exp = parse_exposition(&text).unwrap_or_else(|e| panic!("{e}"));
    let kept: BTreeSet<&str> = exp.types.keys().map(String::as_str).collect();
    assert_eq!(kept, BTreeSet::from([names::QUEUE_LEN, names::TUPLES_IN]), "{text}");
    assert_eq!(exp.samples.len(), 2 * n, "one sample per operator and family: {text}");
    let none = get(addr, "/metrics?name[]=no_such_metric").unwrap().into_string().unwrap();
    assert!(parse_exposition(&none).unwrap().samples.is_empty(), "{none}");
    let all = parse_exposition(&scrape(addr)).unwrap();
    assert!(all.types.contains_key(names::E2E_LATENCY), "no filter: every family");
}

#[test]
fn unknown_paths_get_404_with_a_hint() {
    let engine = start();
    let addr = engine.metrics_addr().unwrap();
    match get(addr, "/nope") {
        Err(ureq::Error::Status(404, response)) => {
            let body = response.into_string().unwrap();
            assert!(body.contains("/metrics") && body.contains("/topology"), "{body}");
        }
        other => panic!("expected 404, got {other:?}"),
    }
    // Query strings do not change the endpoint.
    assert_eq!(get(addr, "/metrics?x=1").unwrap().status(), 200);
    assert!(get(addr, "/").unwrap().into_string().unwrap().contains("/topology"));
    engine.stop();
    wait_or_fail(engine, HANG).unwrap();
}

#[test]
fn the_endpoint_closes_with_the_engine() {
    let engine = start();
    let addr = engine.metrics_addr().unwrap();
    assert_eq!(get(addr, "/metrics").unwrap().status(), 200);
    engine.stop();
    wait_or_fail(engine, HANG).unwrap();
    assert!(matches!(get(addr, "/metrics"), Err(ureq::Error::Transport(_))), "still serving after wait()");
}

//! The metrics endpoint: `/metrics` (Prometheus text exposition) and `/topology` (JSON).
//!
//! Served by the bounded poll-loop server of `moirai-http` (one thread, a connection cap below
//! the descriptor limit, timeouts on every stalled message; see that crate); this file is what
//! the paths answer. It reads counters and channel occupancy only when asked, so it costs
//! nothing between scrapes. The format is documented in `docs/metrics-endpoint.md`, the contract
//! the middleware relies on.

use std::fmt::Write as _;
use std::net::SocketAddr;
use std::sync::Arc;

use moirai_http::{Request, Response, Server};

use crate::metrics::{latency_of, names};
use crate::sync::lock;
use crate::view::EngineView;

/// The running endpoint.
pub(crate) struct MetricsServer {
    server: Server,
}

impl MetricsServer {
    pub(crate) fn start(addr: SocketAddr, view: Arc<EngineView>) -> std::io::Result<MetricsServer> {
        let server = Server::start(addr, "moirai engine: metrics endpoint", move |r: &Request<'_>| respond(r, &view))?;
        Ok(MetricsServer { server })
    }

    pub(crate) fn addr(&self) -> SocketAddr {
        self.server.addr()
    }

    pub(crate) fn stop(self) {
        self.server.stop();
    }
}

fn respond(request: &Request<'_>, view: &EngineView) -> Response {
    if request.method != "GET" && request.method != "HEAD" {
        return Response::new(405, "text/plain", format!("method {} not allowed; use GET\n", request.method));
    }
    match request.path() {
        "/metrics" => {
            let only = families(request.target);
            Response::new(200, "text/plain; version=0.0.4; charset=utf-8", prometheus(view, only.as_deref()))
        }
        "/topology" => match serde_json::to_string_pretty(&view.topology()) {
            Ok(json) => Response::new(200, "application/json", json),
            Err(e) => Response::new(500, "text/plain", format!("cannot serialise the topology: {e}\n")),
        },
        "/" => Response::new(200, "text/plain", "moirai engine: GET /metrics (Prometheus), GET /topology (JSON)\n"),
        other => Response::new(404, "text/plain", format!("no such endpoint: {other}; try /metrics or /topology\n")),
    }
}

/// The metric families a `/metrics` request asks for, `?name[]=A&name[]=B` (the form Prometheus'
/// Python client reads; `name%5B%5D=` too); `None`: every family. A client that needs a few
/// counters every 200 ms (the middleware) spares the engine the sink summaries, most of a full
/// scrape's CPU.
fn families(target: &str) -> Option<Vec<&str>> {
    let (_, query) = target.split_once('?')?;
    let names: Vec<&str> = query
        .split('&')
        .filter_map(|pair| pair.strip_prefix("name[]=").or_else(|| pair.strip_prefix("name%5B%5D=")))
        .collect();
    (!names.is_empty()).then_some(names)
}

/// Escapes a Prometheus label value.
fn escape(value: &str) -> String {
    value.replace('\\', "\\\\").replace('"', "\\\"").replace('\n', "\\n")
}

/// Renders the metrics in the Prometheus text exposition format 0.0.4: every family, or those
/// named in `only`.
pub(crate) fn prometheus(view: &EngineView, only: Option<&[&str]>) -> String {
    let wanted = |name: &str| only.is_none_or(|o| o.contains(&name));
    let ops = view.snapshot();
    let mut out = String::new();
    let labels = |o: &crate::metrics::OperatorSnapshot| {
        format!("query=\"{}\",operator=\"{}\",id=\"{}\",tid=\"{}\"", escape(&o.query), escape(&o.name), o.id, o.tid)
    };
    type Get = fn(&crate::metrics::OperatorSnapshot) -> f64;
    let families: [(&str, &str, &str, Get); 9] = [
        (
            names::TUPLES_IN,
            "counter",
            "Tuples taken from the operator's input channels (generated, for a source).",
            |o| o.tuples_in as f64,
        ),
        (names::TUPLES_OUT, "counter", "Tuples sent to the operator's output channels (consumed, for a sink).", |o| {
            o.tuples_out as f64
        }),
        (names::QUEUE_LEN, "gauge", "Tuples queued in the operator's input channels.", |o| o.queue_len as f64),
        (names::HEAD_WAIT, "gauge", "Age of the oldest tuple queued for the operator, seconds.", |o| {
            o.head_wait_ns as f64 / 1e9
        }),
        (names::CPU, "counter", "CPU time of the operator's thread, seconds.", |o| o.cpu_ns as f64 / 1e9),
        (names::COST, "gauge", "CPU nanoseconds per input tuple since start.", |o| o.cost_ns()),
        (names::SELECTIVITY, "gauge", "Output tuples per input tuple since start.", |o| o.selectivity()),
        (names::BLOCKED, "counter", "Time blocked on full output channels (backpressure), seconds.", |o| {
            o.blocked_ns as f64 / 1e9
        }),
        (names::BACKLOG, "gauge", "Tuples a source is behind its offered schedule (the external queue).", |o| {
            o.backlog as f64
        }),
    ];
    for (name, kind, help, get) in families.into_iter().filter(|f| wanted(f.0)) {
        let _ = writeln!(out, "# HELP {name} {help}\n# TYPE {name} {kind}");
        for o in &ops {
            let _ = writeln!(out, "{name}{{{}}} {}", labels(o), get(o));
        }
    }
    for (name, help, e2e) in [
        (names::LATENCY, "Processing latency at the sink (egress - ingress), seconds.", false),
        (names::E2E_LATENCY, "End-to-end latency at the sink (egress - intended send time), seconds.", true),
    ] {
        if !wanted(name) {
            continue;
        }
        let _ = writeln!(out, "# HELP {name} {help}\n# TYPE {name} summary");
        for (id, sink) in view.sinks() {
            // Summarised under the lock rather than cloned: a clone copies the whole counts array
            // (most of a scrape's CPU when it was done), the summary reads it once.
            let s = if e2e { latency_of(&lock(&sink.e2e)) } else { latency_of(&lock(&sink.processing)) };
            let o = &ops[*id];
            for (q, v) in [("0.5", s.p50), ("0.99", s.p99), ("0.999", s.p999)] {
                let _ = writeln!(out, "{name}{{{},quantile=\"{q}\"}} {}", labels(o), v / 1e3);
            }
            let _ = writeln!(out, "{name}_sum{{{}}} {}", labels(o), s.mean * s.count as f64 / 1e3);
            let _ = writeln!(out, "{name}_count{{{}}} {}", labels(o), s.count);
        }
    }
    let exchanges = view.exchanges();
    let labels =
        |x: &crate::exchange::ExchangeSnapshot| format!("exchange=\"{}\",policy=\"{}\"", escape(&x.name), x.policy);
    if !exchanges.is_empty() && wanted(names::EXCHANGE_BACKLOG) {
        let _ = writeln!(
            out,
            "# HELP {n} Tuples in an outgoing queue of a Hone exchange at its last tick.\n# TYPE {n} gauge",
            n = names::EXCHANGE_BACKLOG
        );
        for x in &exchanges {
            for (queue, b) in x.backlogs.iter().enumerate() {
                let _ = writeln!(out, "{}{{{},queue=\"{queue}\"}} {b}", names::EXCHANGE_BACKLOG, labels(x));
            }
        }
    }
    type GetExchange = fn(&crate::exchange::ExchangeSnapshot) -> u64;
    let exchange_families: [(&str, &str, &str, GetExchange); 3] = [
        (names::EXCHANGE_MAX_BACKLOG, "gauge", "Largest backlog of any outgoing queue at any tick.", |x| x.max_backlog),
        (names::EXCHANGE_SENT, "counter", "Tuples the exchange's link carried.", |x| x.sent),
        (names::EXCHANGE_TICKS, "counter", "Scheduling intervals the exchange ran.", |x| x.ticks),
    ];
    for (name, kind, help, get) in exchange_families.into_iter().filter(|f| !exchanges.is_empty() && wanted(f.0)) {
        let _ = writeln!(out, "# HELP {name} {help}\n# TYPE {name} {kind}");
        for x in &exchanges {
            let _ = writeln!(out, "{name}{{{}}} {}", labels(x), get(x));
        }
    }
    let threading = escape(&view.threading().to_string());
    if wanted(names::THREAD_LEVEL) {
        let (name, level) = (names::THREAD_LEVEL, view.thread_level());
        let _ = writeln!(
            out,
            "# HELP {name} Worker threads running operators now (pool threading models; 0 for dedicated)."
        );
        let _ = writeln!(out, "# TYPE {name} gauge\n{name}{{threading=\"{threading}\"}} {level}");
    }
    if let Some(active) = view.policy_active().filter(|_| wanted(names::POLICY_ACTIVE)) {
        let name = names::POLICY_ACTIVE;
        let _ = writeln!(
            out,
            "# HELP {name} 1 while the policy executor's priorities order its ready queue, 0 while every operator \
             waits at one level (the activation rule idle)."
        );
        let _ = writeln!(out, "# TYPE {name} gauge\n{name}{{threading=\"{threading}\"}} {}", u8::from(active));
    }
    out
}

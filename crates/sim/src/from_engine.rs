//! A model of a running moirai engine (`moirai sim --from-engine URL`): its `/topology` and what
//! its `/metrics` counters say each operator costs, read twice over a window.
//!
//! The engine is read through the middleware's own client ([`EngineClient`]: the same JSON and
//! Prometheus parsing `moirai schedule` uses, `docs/metrics-endpoint.md`). Over the window, per
//! chain of fused logical operators (summed over its instances):
//!
//! - **cost per tuple** = thread CPU time / tuples taken in (`moirai_operator_cpu_seconds_total`
//!   over `moirai_operator_tuples_in_total`; for a source, per tuple generated);
//! - **selectivity** = tuples out / tuples in (a broadcast output counts once per receiving
//!   channel in the engine, so it is divided by the channels);
//! - **rate** of each source = tuples generated / window.
//!
//! The thread CPU the engine measures includes what the simulator adds on top of an operator's
//! own cost: the per-tuple overhead and, per wake-up, the context switch, the woken thread's own
//! CPU and its waker's notification. When the engine runs on this machine (a loopback URL), each thread's
//! voluntary context switches (`/proc/PID/task/TID/status`, one per sleep) count its wake-ups
//! over the same window, and their costs at the simulator's own values ([`HopCosts`]) are
//! subtracted, so that they are not counted twice: the woken thread's for every wake-up, its
//! waker's notification for at most one wake-up per tuple (an idle engine thread also wakes on
//! its own, from a timed wait, which nobody notified and the model does not simulate: its CPU,
//! under 1 % of a core per thread, is dropped); otherwise the cost stays as measured (an
//! over-estimate at low load, where every tuple wakes every thread).
//!
//! The logical graph is planned again by the engine's planner ([`Model::from_graph`]); the model
//! is refused unless that gives the engine's physical operators (same ids, names, instances).

use std::collections::BTreeMap;
use std::fmt::Write as _;
use std::time::{Duration, Instant};

use moirai_contract::metrics::OperatorCounters;
use moirai_engine::graph::{LogicalEdge, LogicalGraph, LogicalNode, NodeKind, Partitioning};
use moirai_engine::topology::Topology;
use moirai_middleware::driver::moirai::EngineClient;

use crate::event::Nanos;
use crate::model::{Model, NodeCost, Rate};
use crate::SimError;

/// What the simulator charges besides an operator's own cost, subtracted from the measured CPU
/// (see the module docs). [`HopCosts::of`] takes them from a run's configuration.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct HopCosts {
    /// Per tuple (`--tuple-overhead-ns`).
    pub tuple_ns: f64,
    /// Per wake-up, to the woken thread (`--context-switch-ns` + `--wakeup-cpu-ns`).
    pub wakeup_ns: f64,
    /// Per wake-up, to the thread that woke it (`--notify-ns`).
    pub notify_ns: f64,
}

impl HopCosts {
    /// The costs a run with `config` charges.
    pub fn of(config: &crate::SimConfig) -> HopCosts {
        HopCosts {
            tuple_ns: config.tuple_overhead_ns as f64,
            wakeup_ns: (config.cfs.context_switch_ns + config.wakeup_cpu_ns) as f64,
            notify_ns: config.notify_ns as f64,
        }
    }
}

/// One physical operator's counters over the window (differences of two reads).
#[derive(Clone, Debug, Default, PartialEq)]
pub struct SampledOperator {
    /// Tuples taken in (a source: generated).
    pub tuples_in: f64,
    /// Tuples sent on (a sink: consumed).
    pub tuples_out: f64,
    /// CPU time of its thread, ns.
    pub cpu_ns: f64,
    /// Wake-ups of its thread (voluntary context switches); `None` when its thread could not be
    /// read (the engine runs elsewhere, or under a pool threading model).
    pub wakeups: Option<f64>,
}

/// One chain of fused logical operators as sampled, summed over its instances.
#[derive(Clone, Debug, PartialEq)]
pub struct SampledChain {
    /// Query.
    pub query: String,
    /// Its name without the instance, `"a -> b"`.
    pub name: String,
    /// The fused logical operators (indices into the topology's logical nodes), upstream first.
    pub logical: Vec<usize>,
    /// Physical ids of its instances.
    pub ids: Vec<usize>,
    /// Kind of the chain's head.
    pub kind: NodeKind,
    /// CPU per tuple as measured (thread CPU over tuples in), ns.
    pub measured_ns: f64,
    /// CPU per tuple as simulated: measured less the hop costs the simulator adds (never below 0).
    pub cost_ns: f64,
    /// Tuples out per tuple in (per receiving consumer for a broadcast).
    pub selectivity: f64,
    /// Tuples in per second over the window (a source: its rate).
    pub tuples_in_per_s: f64,
    /// Wake-ups of its threads per tuple in, when known.
    pub wakeups_per_tuple: Option<f64>,
}

/// A running engine as sampled: its topology and a model's worth of costs.
#[derive(Clone, Debug)]
pub struct EngineSample {
    /// The endpoint read.
    pub url: String,
    /// The window between the two reads, seconds (as timed here).
    pub window_s: f64,
    /// `/topology`.
    pub topology: Topology,
    /// Per chain, in the order of their first physical operator.
    pub chains: Vec<SampledChain>,
}

/// Reads `/topology` and `/metrics` of the engine at `url`, waits `window`, reads `/metrics`
/// again and derives every chain's cost and selectivity; `hop` is what the simulator adds and is
/// subtracted from the measured CPU where the wake-ups can be counted.
pub fn sample(url: &str, window: Duration, hop: HopCosts) -> Result<EngineSample, SimError> {
    let bad = |m: String| SimError::Model(m);
    let client = EngineClient::new(url).map_err(|e| SimError::Config(format!("--from-engine: {e}")))?;
    const START: &str = "e.g. `moirai run syn --rate 5000 --duration 10m --metrics-addr 127.0.0.1:9464` serves \
                         http://127.0.0.1:9464";
    let topology = client.topology().map_err(|e| {
        if e.starts_with("cannot reach") {
            bad(format!(
                "--from-engine: nothing answers at {url} ({e}); start the engine with its metrics endpoint ({START}) \
                 or correct the address"
            ))
        } else {
            bad(format!(
                "--from-engine: {url} is not a moirai engine's metrics endpoint ({e}); give the address of one ({START})"
            ))
        }
    })?;
    topology.check_ids().map_err(|e| bad(format!("--from-engine: {url}/topology: {e}")))?;
    // Threads are read only for an engine on this machine (a loopback URL): a remote engine's pid
    // would name some other process here.
    let local = moirai_middleware::driver::loopback_port(url).is_some();
    let read = |t: &Topology| -> Result<(Instant, BTreeMap<usize, OperatorCounters>, Vec<Option<f64>>), SimError> {
        let at = Instant::now();
        let counters = client.counters().map_err(|e| bad(format!("--from-engine: {e}")))?;
        let wakeups = t.physical.iter().map(|p| if local { voluntary_switches(t.pid, p.tid) } else { None }).collect();
        Ok((at, counters, wakeups))
    };
    let (t0, before, w0) = read(&topology)?;
    std::thread::sleep(window);
    let (t1, after, w1) = read(&topology)?;
    let window_s = (t1 - t0).as_secs_f64();
    let pool = topology.is_pool();
    let ops: Vec<SampledOperator> = (0..topology.physical.len())
        .map(|id| {
            let (a, b) = (before.get(&id).cloned().unwrap_or_default(), after.get(&id).cloned().unwrap_or_default());
            SampledOperator {
                tuples_in: b.tuples_in - a.tuples_in,
                tuples_out: b.tuples_out - a.tuples_out,
                cpu_ns: b.cpu_ns - a.cpu_ns,
                wakeups: match (w0[id], w1[id]) {
                    (Some(x), Some(y)) if !pool && y >= x => Some(y - x),
                    _ => None,
                },
            }
        })
        .collect();
    let chains = chains(&topology, &ops, window_s, hop)?;
    Ok(EngineSample { url: url.to_string(), window_s, topology, chains })
}

/// A thread's voluntary context switches so far, if this process can read them.
fn voluntary_switches(pid: u32, tid: i32) -> Option<f64> {
    if tid <= 0 {
        return None;
    }
    moirai_os::proc::thread_voluntary_switches(pid, tid).ok().map(|n| n as f64)
}

/// The chain name of a physical operator: its name without `" (i/n)"`.
fn chain_name(physical: &str) -> &str {
    physical.rsplit_once(" (").map_or(physical, |(name, _)| name)
}

/// Checks that every index in `topology` points at something, so that nothing below indexes out
/// of bounds on an engine that answers garbage.
fn check(topology: &Topology, operators: usize) -> Result<(), SimError> {
    let bad = |what: String| Err(SimError::Model(format!("--from-engine: /topology is inconsistent: {what}")));
    let (n, nodes) = (topology.physical.len(), topology.logical.nodes.len());
    if n != operators || topology.physical.iter().enumerate().any(|(i, p)| p.id != i) {
        return bad(format!("physical ids are not 0..{n} in order"));
    }
    if let Some(c) = topology.channels.iter().find(|c| c.from >= n || c.to >= n) {
        return bad(format!("a channel {} -> {} names an operator beyond the {n} physical ones", c.from, c.to));
    }
    if let Some(p) = topology.physical.iter().find(|p| p.logical.is_empty() || p.logical.iter().any(|&l| l >= nodes)) {
        return bad(format!("physical operator '{}' names logical operators {:?} of {nodes}", p.name, p.logical));
    }
    if let Some(e) = topology.logical.edges.iter().find(|e| e.from >= nodes || e.to >= nodes) {
        return bad(format!("a stream {} -> {} names an operator beyond the {nodes} logical ones", e.from, e.to));
    }
    Ok(())
}

/// Per-chain costs from per-operator counters (`ops`, indexed by physical id; see the module docs).
pub fn chains(
    topology: &Topology,
    ops: &[SampledOperator],
    window_s: f64,
    hop: HopCosts,
) -> Result<Vec<SampledChain>, SimError> {
    check(topology, ops.len())?;
    // Who wakes whom: a wake-up of an operator is a notification by its upstream operators, shared
    // in proportion to the channels from them — but at most one per tuple it took in: an idle
    // engine thread also wakes on its own (a timed wait, ~1000 times a second here), and nobody
    // notified it for those.
    let mut notify = vec![0.0; ops.len()];
    for (to, op) in ops.iter().enumerate() {
        let from: Vec<usize> = topology.channels.iter().filter(|c| c.to == to).map(|c| c.from).collect();
        if let Some(w) = op.wakeups {
            for &f in &from {
                notify[f] += w.min(op.tuples_in) / from.len() as f64;
            }
        }
    }
    let mut order: Vec<Vec<usize>> = Vec::new();
    let mut by_chain: BTreeMap<Vec<usize>, Vec<usize>> = BTreeMap::new();
    for p in &topology.physical {
        let ids = by_chain.entry(p.logical.clone()).or_insert_with(|| {
            order.push(p.logical.clone());
            Vec::new()
        });
        ids.push(p.id);
    }
    let mut chains = Vec::with_capacity(order.len());
    for logical in order {
        let ids = &by_chain[&logical];
        let first = &topology.physical[ids[0]];
        let head = logical.first().and_then(|&n| topology.logical.nodes.get(n)).ok_or_else(|| {
            SimError::Model(format!("--from-engine: operator '{}' names no logical operator", first.name))
        })?;
        let kind = head.kind;
        let sum = |f: &dyn Fn(&SampledOperator) -> f64| ids.iter().map(|&i| f(&ops[i])).sum::<f64>();
        let (tuples_in, tuples_out, cpu_ns) = (sum(&|o| o.tuples_in), sum(&|o| o.tuples_out), sum(&|o| o.cpu_ns));
        let name = chain_name(&first.name).to_string();
        if tuples_in < 1.0 {
            return Err(SimError::Model(format!(
                "--from-engine: operator '{name}' of query '{}' took in no tuples in the {window_s:.1} s sampled, so \
                 its cost per tuple is unknown; sample longer (--sample-for 30s) or load the engine (a higher --rate)",
                first.query
            )));
        }
        let wakeups = ids.iter().map(|&i| ops[i].wakeups).sum::<Option<f64>>();
        let notified: f64 = ids.iter().map(|&i| notify[i]).sum();
        let measured_ns = cpu_ns / tuples_in;
        let hops = match wakeups {
            Some(w) => hop.tuple_ns + (w * hop.wakeup_ns + notified * hop.notify_ns) / tuples_in,
            None => hop.tuple_ns,
        };
        // A broadcast output is counted once per receiving channel; the model sends a copy to each.
        let fan_out = ids
            .iter()
            .map(|&i| {
                let broadcast = topology
                    .channels
                    .iter()
                    .filter(|c| c.from == i)
                    .filter(|c| {
                        topology.logical.edges.iter().any(|e| {
                            e.partitioning == Partitioning::Broadcast
                                && logical.contains(&e.from)
                                && topology.physical[c.to].logical.first() == Some(&e.to)
                        })
                    })
                    .count();
                broadcast.max(1) as f64
            })
            .fold(0.0, f64::max)
            .max(1.0);
        chains.push(SampledChain {
            query: first.query.clone(),
            name,
            logical: logical.clone(),
            ids: ids.clone(),
            kind,
            measured_ns,
            cost_ns: (measured_ns - hops).max(0.0),
            selectivity: tuples_out / tuples_in / fan_out,
            tuples_in_per_s: tuples_in / window_s,
            wakeups_per_tuple: wakeups.map(|w| w / tuples_in),
        });
    }
    Ok(chains)
}

impl EngineSample {
    /// The sources' rate over the window, tuples/s in total.
    pub fn rate(&self) -> f64 {
        self.chains.iter().filter(|c| c.kind == NodeKind::Source).map(|c| c.tuples_in_per_s).sum()
    }

    /// The logical graph `/topology` describes; a stream with a Hone exchange is refused.
    pub fn graph(&self) -> Result<LogicalGraph, SimError> {
        let l = &self.topology.logical;
        // The same logical operators the engine planned (their thread hints are no business of the model).
        let nodes = l.nodes.iter().map(|n| LogicalNode { thread: None, ..n.clone() }).collect();
        let edges = (l.edges.iter())
            .map(|e| {
                if e.exchange.is_some() {
                    return Err(SimError::Model(format!(
                        "--from-engine: the stream {} -> {} has a Hone exchange, which is not simulated inside a \
                         query; see `moirai sim hone` for the link alone",
                        l.nodes.get(e.from).map_or("?", |n| &n.name),
                        l.nodes.get(e.to).map_or("?", |n| &n.name)
                    )));
                }
                Ok(LogicalEdge { from: e.from, to: e.to, port: e.port, partitioning: e.partitioning, exchange: None })
            })
            .collect::<Result<Vec<_>, SimError>>()?;
        Ok(LogicalGraph { nodes, edges })
    }

    /// The model of the engine's queries with the sampled costs, its sources offering `rate`
    /// tuples/s in total (shared as they shared the measured rate), or the measured rate when
    /// `None`; each source offers a constant rate, as the engine's open-loop sources do.
    pub fn model(&self, rate: Option<f64>) -> Result<Model, SimError> {
        let graph = self.graph()?;
        let measured = self.rate();
        let total = rate.unwrap_or(measured);
        let mut cost: BTreeMap<usize, NodeCost> = BTreeMap::new();
        for c in &self.chains {
            // The chain's cost goes to its head; its selectivity to its first non-source operator.
            for (k, &n) in c.logical.iter().enumerate() {
                let mut node = NodeCost::cost(if k == 0 { c.cost_ns.round() as Nanos } else { 0 });
                let carries = if c.kind == NodeKind::Source { 1 } else { 0 };
                if k == carries {
                    node.selectivity = c.selectivity;
                }
                if k == 0 && c.kind == NodeKind::Source {
                    let instances = c.ids.len().max(1) as f64;
                    let share = if measured > 0.0 { c.tuples_in_per_s / measured } else { 0.0 };
                    node.rate = Rate::Constant(total * share / instances);
                }
                cost.insert(n, node);
            }
        }
        let model = Model::from_graph(self.topology.queries.clone(), graph, self.topology.chaining, |q, name, _| {
            let n = (self.topology.logical.nodes.iter())
                .position(|n| n.query == q && n.name == name)
                .and_then(|n| cost.get(&n))
                .ok_or_else(|| SimError::Model(format!("--from-engine: operator '{name}' of '{q}' was not sampled")))?;
            Ok(*n)
        })?;
        let planned: Vec<(usize, &str, usize)> =
            model.topology.physical.iter().map(|p| (p.id, p.name.as_str(), p.instance)).collect();
        let engine: Vec<(usize, &str, usize)> =
            self.topology.physical.iter().map(|p| (p.id, p.name.as_str(), p.instance)).collect();
        if planned != engine {
            return Err(SimError::Model(format!(
                "--from-engine: planning the engine's logical graph gives other physical operators than the engine \
                 runs ({} planned, {} running, e.g. {:?} vs {:?}); the engine and this moirai differ in version",
                planned.len(),
                engine.len(),
                planned.iter().zip(&engine).find(|(a, b)| a != b).map(|(a, _)| a.1),
                planned.iter().zip(&engine).find(|(a, b)| a != b).map(|(_, b)| b.1),
            )));
        }
        Ok(model)
    }

    /// The sampled model as a table: per chain its ids, measured and simulated cost, selectivity
    /// and rate in.
    pub fn table(&self) -> String {
        let mut s = format!(
            "sampled {} over {:.1} s: {} queries, {} physical operators, threading {}, chaining {}; sources {:.0} \
             tuples/s\n",
            self.url,
            self.window_s,
            self.topology.queries.len(),
            self.topology.physical.len(),
            if self.topology.threading.is_empty() { "?" } else { &self.topology.threading },
            if self.topology.chaining { "on" } else { "off" },
            self.rate()
        );
        let _ = writeln!(
            s,
            "{:<12} {:<28} {:>8} {:>8} {:>12} {:>12} {:>11} {:>12}",
            "query", "operator", "ids", "kind", "measured ns", "cost ns", "selectivity", "in tuples/s"
        );
        for c in &self.chains {
            let ids = match (c.ids.first(), c.ids.last()) {
                (Some(a), Some(b)) if a != b => format!("{a}-{b}"),
                (Some(a), _) => a.to_string(),
                _ => String::new(),
            };
            let kind = match c.kind {
                NodeKind::Source => "source",
                NodeKind::Operator => "operator",
                NodeKind::Sink => "sink",
            };
            let _ = writeln!(
                s,
                "{:<12} {:<28} {:>8} {:>8} {:>12.0} {:>12.0} {:>11.3} {:>12.0}",
                c.query, c.name, ids, kind, c.measured_ns, c.cost_ns, c.selectivity, c.tuples_in_per_s
            );
        }
        if self.chains.iter().any(|c| c.wakeups_per_tuple.is_none()) {
            s.push_str(
                "(wake-ups not readable from /proc for some threads: their cost is as measured, less the per-tuple \
                 overhead only)\n",
            );
        }
        s
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// `/topology` of a source (2 instances) shuffling into a sink (1 instance), as an engine serves it.
    fn topology(channels: &str) -> Topology {
        serde_json::from_str(&format!(
            r#"{{"pid": 1, "threading": "dedicated", "chaining": false, "queries": ["q"],
            "logical": {{"nodes": [{{"query": "q", "name": "src", "kind": "source", "ports": 0, "parallelism": 2}},
                                  {{"query": "q", "name": "out", "kind": "sink", "ports": 1, "parallelism": 1}}],
                        "edges": [{{"from": 0, "to": 1, "port": 0, "partitioning": "shuffle"}}]}},
            "physical": [{{"id": 0, "query": "q", "name": "src (1/2)", "logical": [0], "instance": 0, "tid": 0}},
                         {{"id": 1, "query": "q", "name": "src (2/2)", "logical": [0], "instance": 1, "tid": 0}},
                         {{"id": 2, "query": "q", "name": "out (1/1)", "logical": [1], "instance": 0, "tid": 0}}],
            "channels": {channels}}}"#
        ))
        .unwrap()
    }

    const CHANNELS: &str = r#"[{"from": 0, "to": 2}, {"from": 1, "to": 2}]"#;
    const HOP: HopCosts = HopCosts { tuple_ns: 10.0, wakeup_ns: 1000.0, notify_ns: 2000.0 };

    fn op(tuples_in: f64, tuples_out: f64, cpu_ns: f64, wakeups: f64) -> SampledOperator {
        SampledOperator { tuples_in, tuples_out, cpu_ns, wakeups: Some(wakeups) }
    }

    #[test]
    fn instances_are_summed_and_the_hops_subtracted() {
        // Sources: 1000 tuples each in 1 s, 5 ms of CPU each, 100 wake-ups each. The sink: 2000
        // tuples, 4 ms, 3000 wake-ups, of which at most 2000 (one per tuple) were notified.
        let ops = [op(1000.0, 1000.0, 5e6, 100.0), op(1000.0, 1000.0, 5e6, 100.0), op(2000.0, 2000.0, 4e6, 3000.0)];
        let chains = chains(&topology(CHANNELS), &ops, 1.0, HOP).unwrap();
        assert_eq!(chains.len(), 2);
        let (src, sink) = (&chains[0], &chains[1]);
        assert_eq!((src.name.as_str(), src.ids.clone(), src.kind), ("src", vec![0, 1], NodeKind::Source));
        assert_eq!(src.measured_ns, 5000.0);
        // 10 + (200 wake-ups × 1000 + 2000 notifications × 2000) / 2000 tuples = 2110.
        assert!((src.cost_ns - (5000.0 - 2110.0)).abs() < 1e-9, "{}", src.cost_ns);
        assert_eq!(src.tuples_in_per_s, 2000.0);
        // 10 + 3000 × 1000 / 2000 = 1510; it notifies nobody.
        assert!((sink.cost_ns - (2000.0 - 1510.0)).abs() < 1e-9, "{}", sink.cost_ns);
        assert_eq!(sink.wakeups_per_tuple, Some(1.5));
        // The model: the engine's operators, the sampled costs, the rate shared by the instances.
        let sample = EngineSample { url: "test".into(), window_s: 1.0, topology: topology(CHANNELS), chains };
        let model = sample.model(Some(4000.0)).unwrap();
        let names: Vec<&str> = model.topology.physical.iter().map(|p| p.name.as_str()).collect();
        assert_eq!(names, ["src (1/2)", "src (2/2)", "out (1/1)"]);
        assert_eq!(model.operators[1].rate, Rate::Constant(2000.0));
        assert_eq!(model.operators[2].cost_ns, 490);
        assert_eq!(sample.model(None).unwrap().offered_rate(1_000_000_000), 2000.0);
    }

    #[test]
    fn an_inconsistent_topology_is_refused_and_an_idle_operator_explained() {
        let ops = [op(1.0, 1.0, 1.0, 0.0), op(1.0, 1.0, 1.0, 0.0), op(0.0, 0.0, 0.0, 0.0)];
        let e = chains(&topology(r#"[{"from": 0, "to": 7}]"#), &ops, 1.0, HOP).unwrap_err().to_string();
        assert!(e.contains("inconsistent") && e.contains("0 -> 7"), "{e}");
        let e = chains(&topology(CHANNELS), &ops[..2], 1.0, HOP).unwrap_err().to_string();
        assert!(e.contains("inconsistent"), "{e}");
        let e = chains(&topology(CHANNELS), &ops, 2.0, HOP).unwrap_err().to_string();
        assert!(e.contains("'out'") && e.contains("took in no tuples") && e.contains("--sample-for"), "{e}");
    }
}

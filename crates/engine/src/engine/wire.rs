//! Wiring a validated plan: a signal per task, a channel per producer instance → consumer
//! instance, Hone links, routers and chains, and the tasks an executor runs — the second of
//! [`super::Engine::start`]'s steps. Nothing runs yet.

use std::collections::{BTreeMap, HashMap};
use std::sync::Arc;

use crate::code::{InstanceContext, RouteParts};
use crate::config::EngineConfig;
use crate::erase::AnyBox;
use crate::exchange::ExchangeMetrics;
use crate::executor::ExecutorTask;
use crate::graph::NodeKind;
use crate::metrics::{OperatorMetrics, SinkMetrics};
use crate::sync::channel::Observe;
use crate::sync::Signal;
use crate::task::StopFlag;

use super::validate::Validated;

/// A plan wired into tasks and the handles that observe and stop them.
pub(super) struct Wired {
    /// The physical operators' tasks (by physical id), then the Hone links'.
    pub(super) tasks: Vec<ExecutorTask>,
    /// Counters of each physical operator, by physical id.
    pub(super) metrics: Vec<Arc<OperatorMetrics>>,
    /// (physical id, histograms) of each physical operator that ends in a sink.
    pub(super) sinks: Vec<(usize, Arc<SinkMetrics>)>,
    /// Each Hone exchange's counters.
    pub(super) exchanges: Vec<Arc<ExchangeMetrics>>,
    /// Every channel, to close on an abort.
    pub(super) channels: Vec<Arc<dyn Observe>>,
    /// Every task's signal, to wake on an abort.
    pub(super) signals: Vec<Arc<Signal>>,
    /// The sources' stop request.
    pub(super) stop: Arc<StopFlag>,
}

/// Wires `v`'s plan under `config`.
pub(super) fn wire(config: &EngineConfig, v: &Validated) -> Wired {
    let (graph, plan, entries, edges) = (&v.graph, &v.plan, &v.entries, &v.edges);
    // Channels: create each by the producer's output type; the consumer's signal wakes it,
    // the producer's holds it back while the channel is full.
    let signals: Vec<Arc<Signal>> = plan.operators.iter().map(|_| Arc::new(Signal::default())).collect();
    // A Hone exchange's link is a task of its own, after the physical operators: the producer
    // of the exchange edge's channels, each producer instance queueing into it.
    let exchange_edges: Vec<usize> = (0..graph.edges.len()).filter(|&e| graph.edges[e].exchange.is_some()).collect();
    let link_of = |e: usize| exchange_edges.iter().position(|&x| x == e);
    let link_signals: Vec<Arc<Signal>> = exchange_edges.iter().map(|_| Arc::new(Signal::default())).collect();
    let mut senders: Vec<Option<AnyBox>> = Vec::new();
    let mut receivers: Vec<Option<AnyBox>> = Vec::new();
    let mut observers = Vec::new();
    // Channels into and out of each physical operator, and of each logical edge per producer.
    let mut channels_in: Vec<Vec<usize>> = vec![Vec::new(); plan.operators.len()];
    let mut channels_out: Vec<Vec<usize>> = vec![Vec::new(); plan.operators.len()];
    for (i, ch) in plan.channels.iter().enumerate() {
        let output = entries[graph.edges[ch.edge].from].output.as_ref().expect("producer has an output");
        let producer = match link_of(ch.edge) {
            Some(k) => link_signals[k].clone(),
            None => signals[ch.from].clone(),
        };
        let (tx, rx, obs) = output.channel(config.channel_capacity, signals[ch.to].clone(), producer);
        senders.push(Some(tx));
        receivers.push(Some(rx));
        observers.push(obs);
        channels_in[ch.to].push(i);
        channels_out[ch.from].push(i);
    }
    let mut edges_out: Vec<Vec<usize>> = vec![Vec::new(); graph.nodes.len()];
    for (e, edge) in graph.edges.iter().enumerate() {
        edges_out[edge.from].push(e);
    }

    let mut metrics = Vec::new();
    for op in &plan.operators {
        metrics.push(Arc::new(OperatorMetrics {
            inputs: channels_in[op.id].iter().map(|&i| observers[i].clone()).collect(),
            outputs: channels_out[op.id].iter().map(|&i| observers[i].clone()).collect(),
            ..OperatorMetrics::default()
        }));
    }

    // The links: each takes its edge's channels, grouped by producer instance.
    let mut link_outs: HashMap<(usize, usize), Vec<AnyBox>> = std::collections::HashMap::new();
    let mut links = Vec::new();
    let mut exchange_metrics = Vec::new();
    for (k, &e) in exchange_edges.iter().enumerate() {
        let edge = &graph.edges[e];
        let hone = edge.exchange.clone().expect("an exchange edge");
        let mut by_producer: BTreeMap<usize, Vec<(usize, AnyBox)>> = Default::default();
        for (i, ch) in plan.channels.iter().enumerate() {
            if ch.edge == e {
                by_producer
                    .entry(ch.from)
                    .or_default()
                    .push((ch.to, senders[i].take().expect("each sender used once")));
            }
        }
        let producers: Vec<usize> = by_producer.keys().copied().collect();
        let consumers: Vec<usize> = {
            let mut c: Vec<usize> = plan.channels.iter().filter(|ch| ch.edge == e).map(|ch| ch.to).collect();
            c.sort_unstable();
            c.dedup();
            c
        };
        let grouped: Vec<Vec<AnyBox>> = by_producer
            .into_values()
            .map(|mut targets| {
                targets.sort_by_key(|(to, _)| *to);
                targets.into_iter().map(|(_, s)| s).collect()
            })
            .collect();
        let name = format!("{} -> {}", graph.nodes[edge.from].name, graph.nodes[edge.to].name);
        let metrics = Arc::new(ExchangeMetrics {
            name: name.clone(),
            hone: Some(hone.clone()),
            queues: producers.len(),
            backlogs: producers.iter().map(|_| Default::default()).collect(),
            ..ExchangeMetrics::default()
        });
        let output = entries[edge.from].output.as_ref().expect("producer has an output");
        let (outs, task) = output.exchange(
            &hone,
            hone.queue.unwrap_or(config.channel_capacity),
            producers.iter().map(|&p| signals[p].clone()).collect(),
            grouped,
            link_signals[k].clone(),
            metrics.clone(),
        );
        for (&p, o) in producers.iter().zip(outs) {
            link_outs.insert((e, p), o);
        }
        exchange_metrics.push(metrics);
        links.push(ExecutorTask {
            name: format!("exchange {} ({})", name, hone.policy),
            task,
            metrics: Arc::new(OperatorMetrics::default()),
            signal: link_signals[k].clone(),
            downstream: consumers,
            thread_hint: producers
                .first()
                .and_then(|&p| plan.operators[p].logical.iter().find_map(|&n| graph.nodes[n].thread.clone())),
            affinity: None,
            source: false,
        });
    }

    let stop = Arc::new(StopFlag::default());
    // One start per parallel source, shared by its instances.
    let source_starts: Vec<Option<Arc<std::sync::atomic::AtomicU64>>> =
        (graph.nodes.iter()).map(|n| (n.kind == NodeKind::Source && n.parallelism > 1).then(Arc::default)).collect();
    let mut sinks = Vec::new();
    let mut tasks = Vec::new();
    for op in &plan.operators {
        let tail = *op.logical.last().expect("a chain has operators");
        let sink = (graph.nodes[tail].kind == NodeKind::Sink).then(|| Arc::new(SinkMetrics::default()));
        if let Some(s) = &sink {
            sinks.push((op.id, s.clone()));
        }
        let ctx = InstanceContext {
            instance: op.instance,
            parallelism: op.parallelism,
            batch_size: config.batch_size,
            metrics: metrics[op.id].clone(),
            sink,
            signal: signals[op.id].clone(),
            stop: stop.clone(),
            ramp: config.ramp,
            source_start: source_starts[op.logical[0]].clone(),
            source_slack_ns: config.source_slack.as_nanos() as u64,
        };
        // The router, over this instance's channels of each outgoing logical edge.
        let mut down: Option<AnyBox> = None;
        if graph.nodes[tail].kind != NodeKind::Sink {
            let mut routes = Vec::new();
            for &e in &edges_out[tail] {
                let edge = &graph.edges[e];
                if let Some(outs) = link_outs.remove(&(e, op.id)) {
                    routes.push(RouteParts {
                        partitioning: edge.partitioning,
                        key_hash: edges[e].key_hash.clone(),
                        senders: outs,
                    });
                    continue;
                }
                let mut targets: Vec<(usize, AnyBox)> = Vec::new();
                for &i in &channels_out[op.id] {
                    let ch = &plan.channels[i];
                    if ch.edge == e {
                        targets.push((ch.to, senders[i].take().expect("each sender used once")));
                    }
                }
                targets.sort_by_key(|(to, _)| *to);
                routes.push(RouteParts {
                    partitioning: edge.partitioning,
                    key_hash: edges[e].key_hash.clone(),
                    senders: targets.into_iter().map(|(_, s)| s).collect(),
                });
            }
            let output = entries[tail].output.as_ref().expect("non-sink has an output");
            down = Some(output.router(routes, config.batch_size, metrics[op.id].clone()));
        }
        for &n in op.logical[1..].iter().rev() {
            down = Some(entries[n].code.link(&ctx, down));
        }
        let head = op.logical[0];
        let mut ports: Vec<Vec<(usize, AnyBox)>> = (0..graph.nodes[head].ports).map(|_| Vec::new()).collect();
        for &i in &channels_in[op.id] {
            let ch = &plan.channels[i];
            ports[ch.port].push((ch.from, receivers[i].take().expect("each receiver used once")));
        }
        let ports = ports
            .into_iter()
            .map(|mut p| {
                p.sort_by_key(|(from, _)| *from);
                p.into_iter().map(|(_, r)| r).collect()
            })
            .collect();
        let task = entries[head].code.task(&ctx, ports, down);
        let mut downstream: Vec<usize> = channels_out[op.id]
            .iter()
            .map(|&i| {
                let ch = &plan.channels[i];
                link_of(ch.edge).map_or(ch.to, |k| plan.operators.len() + k)
            })
            .collect();
        downstream.dedup();
        tasks.push(ExecutorTask {
            name: op.name.clone(),
            task,
            metrics: metrics[op.id].clone(),
            signal: signals[op.id].clone(),
            downstream,
            thread_hint: op.logical.iter().find_map(|&n| graph.nodes[n].thread.clone()),
            affinity: (op.parallelism > 1).then_some(op.instance),
            source: graph.nodes[op.logical[0]].kind == NodeKind::Source,
        });
    }
    tasks.extend(links);
    let mut signals = signals;
    signals.extend(link_signals);
    Wired { tasks, metrics, sinks, exchanges: exchange_metrics, channels: observers, signals, stop }
}

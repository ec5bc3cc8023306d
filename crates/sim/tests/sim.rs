//! The simulator against closed forms, invariants and the live engine: M/D/1, determinism,
//! conservation on random graphs, the controller's samples, policies that act.

use std::time::Duration;

use moirai_bench::parse_configurations;
use moirai_bench::summary::Criteria;
use moirai_engine::graph::{LogicalEdge, LogicalGraph, LogicalNode, NodeKind, Partitioning};
use moirai_engine::{Engine, EngineConfig};
use moirai_middleware::activity::ActivationMode;
use moirai_sim::lab::{self, Sweep};
use moirai_sim::{Model, MwActivity, NodeCost, Rate, SimConfig, SimError, Simulation};
use moirai_workloads::syn::{self, SynConfig};
use proptest::prelude::*;

/// A directory under the temp dir, removed on drop.
struct TempDir(std::path::PathBuf);
impl TempDir {
    fn new(name: &str) -> TempDir {
        let p = std::env::temp_dir().join(format!("moirai-sim-{name}-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&p);
        TempDir(p)
    }
}
impl Drop for TempDir {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.0);
    }
}

fn node(name: &str, kind: NodeKind, parallelism: usize) -> LogicalNode {
    let ports = usize::from(kind != NodeKind::Source);
    LogicalNode { query: "q".into(), name: name.into(), kind, ports, parallelism, thread: None }
}

fn edge(from: usize, to: usize, partitioning: Partitioning) -> LogicalEdge {
    LogicalEdge { from, to, port: 0, partitioning, exchange: None }
}

/// `source → server → sink` with Poisson arrivals at `rate` and a server of constant `service_ns`.
fn md1(rate: f64, service_ns: u64) -> Model {
    let graph = LogicalGraph {
        nodes: vec![
            node("source", NodeKind::Source, 1),
            node("server", NodeKind::Operator, 1),
            node("sink", NodeKind::Sink, 1),
        ],
        edges: vec![edge(0, 1, Partitioning::Forward), edge(1, 2, Partitioning::Forward)],
    };
    Model::from_graph(vec!["q".into()], graph, false, |_, name, _| {
        Ok(match name {
            "source" => NodeCost { rate: Rate::Poisson(rate), ..NodeCost::cost(1) },
            "server" => NodeCost::cost(service_ns),
            _ => NodeCost::cost(1),
        })
    })
    .unwrap()
}

#[test]
fn a_single_queue_with_poisson_arrivals_waits_as_md1_says() {
    // λ = 500k/s, D = 1 µs: ρ = 0.5, Wq = ρ / (2 μ (1 − ρ)) = 500 ns.
    let (rate, d) = (500_000.0, 1_000u64);
    let model = md1(rate, d);
    // Every thread on a core of its own, no switching or wake-up costs, one tuple per step: the
    // server is exactly a deterministic server behind a FIFO queue.
    let mut config = SimConfig::ideal(3, Duration::from_secs(2));
    config.batch_size = 1;
    config.warmup = 0.05;
    let mut sim = Simulation::new(&model, config).unwrap();
    let events = sim.run();
    let s = sim.summary("md1", serde_json::Value::Null, events);
    let rho = rate * d as f64 / 1e9;
    let wq_ns = rho / (2.0 * (1e9 / d as f64) * (1.0 - rho)) * 1e9;
    // End-to-end = source (1 ns) + wait + service + sink (1 ns).
    let waited_ns = s.e2e_latency_ms.mean * 1e6 - d as f64 - 2.0;
    assert!(s.e2e_latency_ms.count > 900_000, "{} tuples measured", s.e2e_latency_ms.count);
    assert!((waited_ns / wq_ns - 1.0).abs() < 0.02, "mean wait {waited_ns:.1} ns, M/D/1 says {wq_ns:.1} ns");
    assert!((s.ingress_tps / rate - 1.0).abs() < 0.01, "Poisson arrivals at {} /s", s.ingress_tps);
}

fn lachesis_sweep(out: std::path::PathBuf, seed: u64) -> Sweep {
    let mut base = SimConfig::new(2, Duration::from_secs(2));
    base.seed = seed;
    Sweep {
        workload: "syn".into(),
        rates: vec![2000.0, 40_000.0],
        configurations: parse_configurations("os,qs,qs@policy:2,os@dynamic:2").unwrap(),
        reps: 1,
        base,
        nodes: 1,
        criteria: Criteria::default(),
        out_dir: out,
        command_line: vec!["moirai".into(), "sim".into()],
        extra_args: vec!["--lachesis".into(), "--blocking".into()],
    }
}

fn lachesis_at(rate: f64) -> Result<(Vec<Model>, serde_json::Value), SimError> {
    let config = SynConfig { rate: rate / 20.0, blocking: true, ..SynConfig::lachesis() };
    Ok((vec![Model::syn(&config, 0)?], serde_json::to_value(&config).unwrap()))
}

#[test]
fn the_same_seed_gives_the_same_bytes_and_another_seed_other_ones() {
    let machine = lab::simulated_machine(2, "fixed".into());
    let read = |dir: &TempDir| {
        ["results.csv", "results.json", "report.html"].map(|f| std::fs::read(dir.0.join(f)).expect("written"))
    };
    // The same directory each time: results.json and the report record it.
    let dir = TempDir::new("det");
    lab::run(&lachesis_sweep(dir.0.clone(), 7), &lachesis_at, &machine, |_| {}).unwrap();
    let fa = read(&dir);
    lab::run(&lachesis_sweep(dir.0.clone(), 7), &lachesis_at, &machine, |_| {}).unwrap();
    let fb = read(&dir);
    let finished = lab::run(&lachesis_sweep(dir.0.clone(), 8), &lachesis_at, &machine, |_| {}).unwrap();
    let fc = read(&dir);
    for i in 0..3 {
        assert!(fa[i] == fb[i], "file {i} differs between two runs with the same seed");
    }
    assert!(fa[0] != fc[0], "another seed draws other blocking sleeps: results.csv must differ");
    assert_eq!(finished.points.len(), 8);
    assert!(finished.points.iter().all(|p| p.measured().is_some()));
}

/// A random DAG: `sources` sources, then operators and sinks, each fed by earlier nodes.
fn random_graph() -> impl Strategy<Value = (LogicalGraph, Vec<f64>)> {
    (1usize..3, 1usize..6, 1usize..3).prop_flat_map(|(sources, ops, sinks)| {
        let n = sources + ops + sinks;
        (
            Just((sources, ops, sinks)),
            prop::collection::vec((0usize..1000, 0usize..1000, 0usize..4), n),
            prop::collection::vec(1usize..3, n),
            prop::collection::vec(0.0f64..1.8, n),
        )
            .prop_map(move |((sources, ops, sinks), picks, par, sel)| {
                let n = sources + ops + sinks;
                let kind = |i: usize| {
                    if i < sources {
                        NodeKind::Source
                    } else if i < sources + ops {
                        NodeKind::Operator
                    } else {
                        NodeKind::Sink
                    }
                };
                let nodes: Vec<LogicalNode> = (0..n).map(|i| node(&format!("n{i}"), kind(i), par[i])).collect();
                let mut edges = Vec::new();
                let parts =
                    [Partitioning::Rebalance, Partitioning::Shuffle, Partitioning::Broadcast, Partitioning::KeyBy];
                for (i, &(a, b, p)) in picks.iter().enumerate().skip(sources) {
                    // One or two inputs from earlier non-sink nodes.
                    let producers: Vec<usize> = (0..i).filter(|&j| kind(j) != NodeKind::Sink).collect();
                    let mut from = vec![producers[a % producers.len()]];
                    if b % 2 == 0 {
                        from.push(producers[b % producers.len()]);
                    }
                    from.dedup();
                    for f in from {
                        edges.push(edge(f, i, parts[p]));
                    }
                }
                // Every non-sink feeds someone: dangling ones feed the last sink.
                for j in 0..sources + ops {
                    if !edges.iter().any(|e| e.from == j) {
                        edges.push(edge(j, n - 1, Partitioning::Rebalance));
                    }
                }
                (LogicalGraph { nodes, edges }, sel)
            })
    })
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 24, ..ProptestConfig::default() })]

    /// Tuples in = tuples out + queued, with nothing dropped or duplicated, on every channel and
    /// at every operator, whatever the graph, partitioning, selectivity and threading.
    #[test]
    fn no_tuple_is_lost_or_duplicated((graph, sel) in random_graph(), pool in 0usize..3, cores in 1usize..4, capacity in 1usize..64, eevdf in proptest::bool::ANY) {
        conserves(graph, &sel, pool, cores, capacity, eevdf)?;
    }
}

/// Runs `graph` (sources at 2000 t/s, operators of 3 µs with selectivities `sel`) for 0.3 s and
/// a drain, and checks that every tuple taken in is accounted for: pushed = popped + queued on
/// every channel, nothing left queued, each operator took what its inputs gave and sent every
/// output. `pool`: 0 dedicated threads, 1 `dynamic:2`, 2 `policy:qs:2` acting from the start.
fn conserves(
    graph: LogicalGraph,
    sel: &[f64],
    pool: usize,
    cores: usize,
    capacity: usize,
    eevdf: bool,
) -> Result<(), TestCaseError> {
    let selectivity: std::collections::BTreeMap<String, f64> =
        graph.nodes.iter().zip(sel).map(|(n, &s)| (n.name.clone(), s)).collect();
    let model = Model::from_graph(vec!["q".into()], graph, false, |_, name, kind| {
        Ok(match kind {
            NodeKind::Source => NodeCost { rate: Rate::Constant(2000.0), ..NodeCost::cost(50) },
            _ => NodeCost { selectivity: selectivity[name], ..NodeCost::cost(3_000) },
        })
    })
    .unwrap();
    let mut config = SimConfig::new(cores, Duration::from_millis(300));
    config.channel_capacity = capacity;
    config.batch_size = capacity.min(16);
    config.threading = match pool {
        0 => moirai_engine::Threading::Dedicated,
        1 => "dynamic:2".parse().unwrap(),
        _ => "policy:qs:2:period=10ms:activation=always".parse().unwrap(),
    };
    config.drain_limit_ns = 100_000_000_000;
    if eevdf {
        config.cfs.scheduler = moirai_sim::cfs::FairScheduler::Eevdf;
    }
    let mut sim = Simulation::new(&model, config).unwrap();
    let events = sim.run();
    let channels = sim.channel_counts();
    for (i, &(queued, pushed, popped)) in channels.iter().enumerate() {
        prop_assert_eq!(pushed, popped + queued, "channel {}", i);
        prop_assert_eq!(queued, 0, "channel {} drained", i);
    }
    let snaps = sim.snapshots();
    let topo = sim.topology();
    let mut ingress = 0;
    for (op, s) in snaps.iter().enumerate() {
        let inputs: Vec<usize> = (0..topo.channels.len()).filter(|&c| topo.channels[c].to == op).collect();
        let outputs: Vec<usize> = (0..topo.channels.len()).filter(|&c| topo.channels[c].from == op).collect();
        let popped: u64 = inputs.iter().map(|&c| channels[c].2).sum();
        let pushed: u64 = outputs.iter().map(|&c| channels[c].1).sum();
        let kind = topo.physical[op].kind;
        if kind != NodeKind::Source {
            prop_assert_eq!(popped, s.tuples_in, "operator {} takes what its inputs gave", op);
        } else {
            ingress += s.tuples_out;
        }
        if kind != NodeKind::Sink {
            // Each output tuple goes once into every stream out of it (all instances of a
            // broadcast stream).
            let mut per_tuple = 0u64;
            let mut seen = std::collections::BTreeSet::new();
            for &c in &outputs {
                let ch = &topo.channels[c];
                let e = &topo.logical.edges[ch.edge];
                if seen.insert(ch.edge) {
                    per_tuple += if e.partitioning == Partitioning::Broadcast {
                        topo.logical.nodes[e.to].parallelism as u64
                    } else {
                        1
                    };
                }
            }
            prop_assert_eq!(pushed, s.tuples_out * per_tuple, "operator {} sends every output", op);
        }
    }
    let summary = sim.summary("random", serde_json::Value::Null, events);
    prop_assert_eq!(summary.tuples_in, ingress);
    prop_assert!(ingress >= 590, "2000 t/s per source for 0.3 s: {} taken in", ingress);
    Ok(())
}

/// The case proptest found (`sim.proptest-regressions`), as a plain test: diamonds on dedicated
/// threads with channels of one tuple. n1 (selectivity 1.29) at times shuffles both copies of a
/// tuple into one channel of n2; the simulator used to refuse such a tuple for want of two free
/// slots, and n1's thread slept for good with a tuple in its input (the source then blocked on
/// it: "channel 0 drained" failed).
#[test]
fn diamonds_on_channels_of_one_tuple_drain() {
    use Partitioning::{Broadcast, KeyBy, Rebalance, Shuffle};
    let kinds = [NodeKind::Source, NodeKind::Operator, NodeKind::Operator, NodeKind::Operator, NodeKind::Operator];
    let par = [1, 2, 2, 2, 1, 2, 2];
    let nodes =
        (0..7).map(|i| node(&format!("n{i}"), kinds.get(i).copied().unwrap_or(NodeKind::Sink), par[i])).collect();
    let edges = [
        (0, 1, Rebalance),
        (1, 2, Shuffle),
        (0, 2, Shuffle),
        (0, 3, Rebalance),
        (0, 4, Broadcast),
        (2, 4, Broadcast),
        (2, 5, KeyBy),
        (4, 6, Shuffle),
        (3, 6, Rebalance),
    ];
    let graph = LogicalGraph { nodes, edges: edges.iter().map(|&(f, t, p)| edge(f, t, p)).collect() };
    let sel = [
        1.5196892190054714,
        1.2934086918185281,
        0.5971702282332283,
        0.6036608508557563,
        0.418182409155356,
        1.0724163552928736,
        1.6496972482187946,
    ];
    conserves(graph, &sel, 0, 3, 1, true).unwrap();
}

#[test]
fn the_controller_gets_the_samples_a_live_engine_gives() {
    let config = SynConfig { queries: 2, ops: 2, cost_ns: 1000, rate: 500.0, ..SynConfig::default() };
    let engine_config = EngineConfig { chaining: false, ..EngineConfig::default() };
    let engine = Engine::start(engine_config, syn::queries(&config).unwrap()).unwrap();
    std::thread::sleep(Duration::from_millis(200));
    let (live_topology, live_snapshots) = (engine.topology(), engine.snapshot());
    engine.stop();
    engine.wait().unwrap();

    let model = Model::syn(&config, 0).unwrap();
    let mut sim = Simulation::new(&model, SimConfig::new(2, Duration::from_millis(200))).unwrap();
    sim.run();
    let mut live = moirai_engine::adapter::spe_topology(&live_topology);
    let simulated = moirai_engine::adapter::spe_topology(sim.topology());
    live.pid = simulated.pid;
    assert_eq!(simulated, live, "the same topology: names, queries, logical and physical operators, edges");
    let key = |s: Vec<(usize, moirai_sched::Metric, f64)>| s.into_iter().map(|(op, m, _)| (op, m)).collect::<Vec<_>>();
    let live_samples = moirai_engine::adapter::samples(&live_topology, &live_snapshots);
    let sim_samples = moirai_engine::adapter::samples(sim.topology(), &sim.snapshots());
    assert_eq!(key(sim_samples.clone()), key(live_samples), "the same (operator, metric) samples, in the same order");
    // And they say something: every tuple went through, and the sources' CPU is counted.
    let snaps = sim.snapshots();
    assert_eq!(snaps[3].tuples_in, 100, "a sink took the query's 100 tuples (500 t/s for 0.2 s)");
    assert!(sim_samples.iter().any(|&(_, m, v)| m == moirai_sched::Metric::CpuNs && v > 0.0));
}

#[test]
fn the_middleware_s_queue_size_policy_renices_the_threads() {
    // Two queries on one core past saturation (24k t/s x 60 µs): queues grow, and QS, run by the
    // middleware's controller every second, renices the threads (the longest queue to −20).
    let config =
        SynConfig { queries: 2, ops: 2, cost_ns: 20_000, rate: 12_000.0, variance_factor: 0, ..SynConfig::default() };
    let model = Model::syn(&config, 0).unwrap();
    let mut sim_config = SimConfig::new(1, Duration::from_secs(3));
    sim_config.os_policy = Some("qs".into());
    // About what is applied: act from the first round (the activation rule is tested below).
    sim_config.activation = ActivationMode::Always;
    let mut sim = Simulation::new(&model, sim_config).unwrap();
    sim.run();
    let nices = sim.nices();
    assert_eq!(nices.len(), 8);
    assert!(nices.iter().any(|&n| n != 0), "the policy set nice values: {nices:?}");
    assert!(nices.contains(&-20), "the longest queue gets the best nice: {nices:?}");
    // Without the policy, every thread keeps nice 0.
    let mut os = Simulation::new(&model, SimConfig::new(1, Duration::from_secs(1))).unwrap();
    os.run();
    assert!(os.nices().iter().all(|&n| n == 0));
    // The same under the EEVDF model: reniced threads keep their lag and the run goes on.
    let mut eevdf_config = SimConfig::new(1, Duration::from_secs(3));
    eevdf_config.os_policy = Some("qs".into());
    eevdf_config.activation = ActivationMode::Always;
    eevdf_config.cfs.scheduler = moirai_sim::cfs::FairScheduler::Eevdf;
    let mut eevdf = Simulation::new(&model, eevdf_config).unwrap();
    eevdf.run();
    assert!(eevdf.nices().contains(&-20), "{:?}", eevdf.nices());
}

/// The Lachesis SYN at `rate` in all, its 20 queries placed on `nodes` nodes.
fn lachesis_on(nodes: usize, rate: f64) -> Result<(Vec<Model>, serde_json::Value), SimError> {
    let config = SynConfig { rate: rate / 20.0, blocking: true, ..SynConfig::lachesis() };
    let models = (moirai_sim::cluster::placement(config.queries, nodes)?.iter())
        .map(|part| Model::syn_part(&config, 0, part))
        .collect::<Result<_, _>>()?;
    Ok((models, serde_json::to_value(&config).unwrap()))
}

#[test]
fn a_cluster_is_the_sum_of_its_nodes_and_repeats_itself_byte_for_byte() {
    use moirai_sim::cluster::{self, node_seed};
    let mut config = SimConfig::new(2, Duration::from_secs(2));
    config.os_policy = Some("qs".into());
    config.seed = 3;
    let (models, _) = lachesis_on(4, 8_000.0).unwrap();
    assert_eq!(models.iter().map(|m| m.topology.queries.len()).collect::<Vec<_>>(), vec![5; 4]);
    let merged = cluster::run(&models, &config, "syn", serde_json::Value::Null).unwrap().summary;
    // Each node alone, with its seed: the cluster's counts are their sums.
    let (mut tuples_in, mut tuples_out, mut count, mut threads) = (0, 0, 0, 0);
    let mut worst_p99: f64 = 0.0;
    for (k, model) in models.iter().enumerate() {
        let mut sim = Simulation::new(model, SimConfig { seed: node_seed(3, k), ..config.clone() }).unwrap();
        let events = sim.run();
        let s = sim.summary("syn", serde_json::Value::Null, events);
        tuples_in += s.tuples_in;
        tuples_out += s.tuples_out;
        count += s.e2e_latency_ms.count;
        threads += s.threads;
        worst_p99 = worst_p99.max(s.e2e_latency_ms.p99);
    }
    assert!(tuples_in > 10_000, "{tuples_in}");
    assert_eq!(merged.tuples_in, tuples_in);
    assert_eq!(merged.tuples_out, tuples_out);
    assert_eq!((merged.e2e_latency_ms.count, merged.threads), (count, threads));
    assert_eq!(merged.extra["nodes"], 4);
    // The merged p99 is read from the merged distribution: it lies between the nodes' p99s,
    // never above the worst one (within the histogram's precision).
    assert!(merged.e2e_latency_ms.p99 <= worst_p99 * 1.001, "{} vs {worst_p99}", merged.e2e_latency_ms.p99);
    // One node of a one-node cluster is the plain run.
    let (one, _) = lachesis_on(1, 8_000.0).unwrap();
    let alone = {
        let mut sim = Simulation::new(&one[0], config.clone()).unwrap();
        let events = sim.run();
        sim.summary("syn", serde_json::Value::Null, events)
    };
    assert_eq!(cluster::run(&one, &config, "syn", serde_json::Value::Null).unwrap().summary, alone);

    // The lab's files, twice with the same seed: the same bytes.
    let machine = lab::simulated_machine(8, "fixed".into());
    let dir = TempDir::new("cluster");
    let sweep = || Sweep { nodes: 4, rates: vec![8_000.0], ..lachesis_sweep(dir.0.clone(), 5) };
    let at = |rate| lachesis_on(4, rate);
    let read = || ["results.csv", "results.json"].map(|f| std::fs::read(dir.0.join(f)).expect("written"));
    lab::run(&sweep(), &at, &machine, |_| {}).unwrap();
    let first = read();
    lab::run(&sweep(), &at, &machine, |_| {}).unwrap();
    assert!(first == read(), "the same seed, the same bytes");
}

#[test]
fn the_cgroup_translator_puts_each_operator_in_a_group_weighted_by_its_priority() {
    // Two queries on one core past saturation, as above, with QS through cpu cgroups.
    let config =
        SynConfig { queries: 2, ops: 2, cost_ns: 20_000, rate: 12_000.0, variance_factor: 0, ..SynConfig::default() };
    let model = Model::syn(&config, 0).unwrap();
    let mut sim_config = SimConfig::new(1, Duration::from_secs(3));
    sim_config.os_policy = Some("qs".into());
    sim_config.activation = ActivationMode::Always;
    sim_config.translator = "cgroup".parse().unwrap();
    let mut sim = Simulation::new(&model, sim_config.clone()).unwrap();
    sim.run();
    assert!(sim.nices().iter().all(|&n| n == 0), "no thread reniced: {:?}", sim.nices());
    let groups = sim.cgroups();
    assert_eq!(groups.len(), 8, "one group per physical operator: {groups:?}");
    assert!(groups.iter().all(|(_, _, members)| members.len() == 1));
    // Log-normalised over cpu.weight 1..10000: the longest queue gets 10000 (102400 in the
    // kernel), the shortest 1 (10).
    let weights: Vec<u64> = groups.iter().map(|g| g.1).collect();
    assert_eq!(weights.iter().max(), Some(&102_400), "{groups:?}");
    assert_eq!(weights.iter().min(), Some(&10), "{groups:?}");
    // A configuration can ask for the cgroup translator on its own, and it is refused without a policy.
    let configs = parse_configurations("qs/translator=cgroup-v1,os/translator=cgroup").unwrap();
    let c = lab::configure(&configs[0], &SimConfig::new(1, Duration::from_secs(1))).unwrap();
    assert_eq!(c.translator.to_string(), "cgroup-v1");
    let e = lab::configure(&configs[1], &SimConfig::new(1, Duration::from_secs(1))).unwrap_err().to_string();
    assert!(e.contains("needs a middleware policy"), "{e}");
}

#[test]
fn the_middleware_acts_only_past_saturation_unless_told_always() {
    // Two queries of two 20 µs operators on one core: 40 µs a tuple, so 32 % of the core at 4k
    // t/s per query (8k in all) and 120 % at 15k per query, before the sources' and sinks' share.
    let run = |rate: f64, activation: ActivationMode| {
        let config =
            SynConfig { queries: 2, ops: 2, cost_ns: 20_000, rate, variance_factor: 0, ..SynConfig::default() };
        let model = Model::syn(&config, 0).unwrap();
        let mut sim_config = SimConfig::new(1, Duration::from_secs(6));
        sim_config.os_policy = Some("qs".into());
        sim_config.policy_period_ns = 200_000_000;
        sim_config.activation = activation;
        let mut sim = Simulation::new(&model, sim_config).unwrap();
        sim.run();
        (sim.nices().to_vec(), sim.middleware_activity().expect("a middleware"))
    };
    // Below saturation the rule keeps it idle: every thread keeps nice 0, it never acted.
    let (nices, a) = run(4_000.0, ActivationMode::Auto);
    assert!(nices.iter().all(|&n| n == 0), "{nices:?}");
    assert_eq!(a, MwActivity::default(), "never acted");
    // Told to act always, it acts from the first round (the queues are short and alike, so QS
    // ranks the threads alike: the values themselves say little here).
    let (_, a) = run(4_000.0, ActivationMode::Always);
    assert!(a.share > 0.99 && a.first_s == Some(0.0), "{a:?}");
    assert!(a.activations == 1 && a.releases.is_empty(), "started once, never stopped: {a:?}");
    // Past saturation it acts, after the rule's confirm window (1 s), for most of the window.
    let (nices, a) = run(15_000.0, ActivationMode::Auto);
    assert!(nices.contains(&-20), "{nices:?}");
    let first = a.first_s.expect("it acted");
    assert!((1.0..3.0).contains(&first), "first acted at {first} s");
    assert!(a.share > 0.5, "acted for {} of the window", a.share);

    // A configuration says it as the lab's do; bad values are refused with the fix.
    let base = SimConfig::new(1, Duration::from_secs(1));
    let configure = |text: &str| lab::configure(&parse_configurations(text).unwrap()[0], &base);
    assert_eq!(base.activation, ActivationMode::Auto, "the middleware's default");
    assert_eq!(configure("qs/activation=always").unwrap().activation, ActivationMode::Always);
    assert_eq!(configure("qs/activation-threshold=0.8").unwrap().activation_threshold, 0.8);
    assert_eq!(configure("qs/activation-lag=40ms").unwrap().activation_lag, Some(Duration::from_millis(40)));
    let e = configure("qs/activation-lag=1ms").unwrap_err().to_string();
    assert!(e.contains("from 10ms to 10s"), "{e}");
    let e = configure("qs/activation-threshold=2").unwrap_err().to_string();
    assert!(e.contains("out of range") && e.contains("0.5 to 1"), "{e}");
    let e = configure("qs/activation=sometimes").unwrap_err().to_string();
    assert!(e.contains("use auto or always"), "{e}");
}

#[test]
fn when_the_rate_falls_back_the_middleware_hands_every_thread_back() {
    // From 20k t/s per query (160 % of the core) down to 2k over 10 s, then 2k to the end of
    // 30 s: the rule acts within ~1 s; the backlog drains by ~9 s; after its release window
    // (10 s) with room on the core it lets go (~18 s), and every thread is back at nice 0.
    let config =
        SynConfig { queries: 2, ops: 2, cost_ns: 20_000, rate: 20_000.0, variance_factor: 0, ..SynConfig::default() };
    let mut model = Model::syn(&config, 0).unwrap();
    for op in &mut model.operators {
        if op.kind == NodeKind::Source {
            op.rate = Rate::Ramp { from: 20_000.0, to: 2_000.0, over_ns: 10_000_000_000 };
        }
    }
    let run = |seconds: u64| {
        let mut sim_config = SimConfig::new(1, Duration::from_secs(seconds));
        sim_config.os_policy = Some("qs".into());
        sim_config.policy_period_ns = 200_000_000;
        let mut sim = Simulation::new(&model, sim_config).unwrap();
        sim.run();
        (sim.nices().to_vec(), sim.middleware_activity().expect("a middleware"))
    };
    // Cut at 3 s, while it is behind: acting, threads reniced.
    let (nices, a) = run(3);
    assert!(a.first_s.is_some() && nices.iter().any(|&n| n != 0), "{a:?} {nices:?}");
    // The whole run: it acted once, and handed every thread back once the input fell.
    let (nices, a) = run(30);
    assert!(a.first_s.is_some_and(|f| f < 3.0), "{a:?}");
    assert!(a.share > 0.0 && a.share < 0.9, "acted for part of the window: {a:?}");
    assert_eq!(a.activations, 1, "{a:?}");
    let released: Vec<_> = a.releases.iter().collect();
    assert!(
        matches!(released[..], [(&"cpu_room" | &"rate_fell_back", &1)]),
        "handed back once, for room or the input falling: {a:?}"
    );
    assert!(nices.iter().all(|&n| n == 0), "every thread back at nice 0: {nices:?}");
}

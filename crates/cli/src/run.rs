//! `moirai run <workload>`: one workload, one rate, one summary ([`RunSummary`]). The workload
//! runs on the continuous engine here, or as micro-batches (`crate::micro_batch`).

use std::time::{Duration, Instant};

use hdrhistogram::Histogram;
use moirai_contract::summary::{Latency, QueueLen};
use moirai_contract::RunSummary;
use moirai_engine::{Engine, EngineConfig, EngineError, Threading};
use serde::Serialize;

use crate::workload::{summary_extra, ThreadingFlag, Workload, Workloads};

/// Runs the workload chosen; its exit code.
pub fn run(workloads: Workloads) -> i32 {
    let workload = workloads.workload();
    let args = workload.engine_args();
    if let Err(e) = workload.check().and_then(|()| args.check(workload.until_input_ends())) {
        eprintln!("moirai: {e}");
        return 2;
    }
    match &args.threading {
        ThreadingFlag::Engine(threading) => execute(workload, threading.clone()),
        ThreadingFlag::MicroBatch(_) => match workload.micro_batch() {
            Some(job) => crate::micro_batch::run(workload, job),
            None => {
                // Say which operator stands in the way, if one does.
                let why = match workload.queries() {
                    Ok((queries, _)) => queries
                        .into_iter()
                        .find_map(|q| q.stages().err())
                        .map_or("its runner is not wired to micro-batch mode".to_string(), |e| e.to_string()),
                    Err(e) => e,
                };
                eprintln!(
                    "moirai: {} cannot run in micro-batch mode (wordcount and ysb can): {why}; run it on the \
                     continuous engine (--threading dedicated, dynamic, elastic, fused or policy)",
                    workload.name()
                );
                2
            }
        },
    }
}

/// What only the continuous engine measures: the summary's mode-specific fields.
#[derive(Serialize)]
struct ContinuousFields {
    chaining: bool,
    /// The time `egress_tps` is over, in seconds: `measured_s` + `drained_s`.
    egress_s: f64,
    /// How long the run drained after its end (the sources stopped, the tuples still queued came
    /// out), in seconds: a few ms when the engine keeps up, long when it is far behind.
    drained_s: f64,
    cpu_ns_per_tuple: f64,
    rss_start_bytes: u64,
    /// RSS when the warm-up ended: compare with `rss_end_bytes` to see memory stay flat.
    rss_warm_bytes: u64,
    rss_end_bytes: u64,
    /// The rate the run ramped to (from `offered_rate`), if it ramped.
    #[serde(skip_serializing_if = "Option::is_none")]
    ramp_to: Option<f64>,
    /// Per second: throughput, the sources' backlog, the engine's queued tuples.
    timeline: Vec<TimelinePoint>,
    /// Every change of the elastic thread level.
    level_changes: Vec<moirai_engine::executor::LevelChange>,
    /// The policy executor's activation (policy threading only).
    #[serde(flatten, skip_serializing_if = "Option::is_none")]
    policy: Option<PolicyActivity>,
    /// The Hone exchange's backlogs over the whole run (the first exchange, if the query has one).
    #[serde(skip_serializing_if = "Option::is_none")]
    exchange: Option<moirai_engine::exchange::ExchangeSnapshot>,
}

/// When the policy executor's priorities applied (`--threading policy:…`, activation `auto` or
/// `always`): the lab reads the share as its scheduler-active column.
#[derive(Serialize)]
struct PolicyActivity {
    /// Every change, in seconds since the engine started.
    activation_changes: Vec<moirai_engine::executor::ActivationChange>,
    /// The share of the measured window in which the priorities applied, 0..=1.
    policy_active_share: f64,
    /// When they first applied, in seconds since the engine started; `None` if never.
    policy_first_active_s: Option<f64>,
}

impl PolicyActivity {
    /// From the changes, for the measured window `from..to` (seconds since the engine started).
    fn over(changes: Vec<moirai_engine::executor::ActivationChange>, from: f64, to: f64) -> PolicyActivity {
        let mut active_s = 0.0;
        // Idle until the first change.
        let mut since: Option<f64> = None;
        for c in &changes {
            match (c.active, since) {
                (true, None) => since = Some(c.at_s),
                (false, Some(s)) => {
                    active_s += (c.at_s.min(to) - s.max(from)).max(0.0);
                    since = None;
                }
                _ => {}
            }
        }
        if let Some(s) = since {
            active_s += (to - s.max(from)).max(0.0);
        }
        PolicyActivity {
            policy_first_active_s: changes.iter().find(|c| c.active).map(|c| c.at_s),
            policy_active_share: if to > from { (active_s / (to - from)).clamp(0.0, 1.0) } else { 0.0 },
            activation_changes: changes,
        }
    }
}

/// Runs `workload` on the continuous engine with `threading` and prints its summary; its exit
/// code.
fn execute(workload: &dyn Workload, threading: Threading) -> i32 {
    let args = workload.engine_args();
    let duration = args.duration(workload.until_input_ends());
    let (queries, workload_after) = match workload.queries() {
        Ok(q) => q,
        Err(e) => {
            eprintln!("moirai: {e}");
            return 2;
        }
    };
    let config = EngineConfig {
        threading: threading.clone(),
        chaining: args.chaining,
        channel_capacity: args.channel_capacity,
        batch_size: args.batch_size,
        metrics_addr: args.metrics_addr,
        ramp: args.ramp_to.zip(args.ramp_over.or(duration)).map(|(to, over)| (to / args.rate, over)),
        verbose: args.verbose,
        source_slack: args.source_slack,
    };
    let pid = std::process::id();
    let rss_start = moirai_os::proc::process_rss_bytes(pid).unwrap_or(0);
    let engine = match Engine::start(config, queries) {
        Ok(e) => e,
        Err(e @ EngineError::Build(_)) => {
            eprintln!("moirai: {e}");
            return 2;
        }
        Err(e) => {
            eprintln!("moirai: {e}");
            return 1;
        }
    };
    if let Some(addr) = engine.metrics_addr() {
        eprintln!("moirai: serving http://{addr}/metrics and http://{addr}/topology");
    }
    let topology = engine.topology();
    // Operator threads: one per physical operator, or the pool's workers.
    let threads = if topology.threads.is_empty() { topology.physical.len() } else { topology.threads.len() };
    let start = Instant::now();
    // If the queries end during the warm-up (a finite input), the whole run is measured.
    let from_start = (engine.totals(), moirai_os::proc::process_cpu_ns(pid).unwrap_or(0), rss_start, start);
    // Until the input ends, the whole run is measured: there is no length to take a share of.
    let warmup = duration.map(|d| d.mul_f64(args.warmup));
    // Sleep until then, or until the operators end (the input ended, or an operator failed).
    let sleep_until = |until: Duration| {
        engine.wait_finished(until.saturating_sub(start.elapsed()));
    };
    // Sample every 100 ms: queue lengths after the warm-up, and a per-second timeline of the
    // whole run (throughput and the sources' backlog as the offered rate holds or ramps). A
    // queue-length sample reads every operator's input channels, a cache miss each: a plan of
    // more than 1 000 operators is sampled less often (every 100 ms per started thousand, at
    // least once a second), so that the sampler reads at most ~10 000 queues a second and does
    // not weigh on what the run measures (10 000 operators at 10 tuples/s: every 100 ms, even
    // these lean samples took ~a fifth of the process's CPU). The thread wakes only for a tick
    // at which something is due ([`ticks_to_next`]) and for the warm-up's end: a wake-up costs
    // this VM ~60 µs of CPU, and 10 000 operators at 10 tuples/s woke it ten times a second for
    // one sample.
    let mut queues = QueueSampler::new();
    let mut queue_lengths = Vec::new();
    let queue_every = engine.view().operators().len().div_ceil(1000).clamp(1, 10) as u64;
    let mut timeline: Vec<TimelinePoint> = Vec::new();
    let mut last_point = (0.0, 0u64, 0u64);
    let mut measured_from: Option<(moirai_engine::RunTotals, u64, u64, Instant)> = None;
    let mut next_sample = Duration::ZERO;
    let mut samples = 0u64;
    loop {
        if measured_from.is_none() && warmup.is_some_and(|w| start.elapsed() >= w) {
            let before = engine.totals();
            engine.reset_latency();
            let cpu = moirai_os::proc::process_cpu_ns(pid).unwrap_or(0);
            let rss = moirai_os::proc::process_rss_bytes(pid).unwrap_or(0);
            measured_from = Some((before, cpu, rss, Instant::now()));
        }
        if duration.is_some_and(|d| start.elapsed() >= d) || engine.is_finished() {
            break;
        }
        let ticks = ticks_to_next(samples, queue_every, measured_from.is_some());
        let tick_at = next_sample + SAMPLE_TICK * ticks as u32;
        if let Some(w) = warmup.filter(|&w| measured_from.is_none() && w < tick_at) {
            // The measured window starts at the warm-up's end, not at the tick after it.
            sleep_until(duration.map_or(w, |d| w.min(d)));
            continue;
        }
        next_sample = tick_at;
        sleep_until(duration.map_or(next_sample, |d| next_sample.min(d)));
        samples += ticks;
        let sampled = measured_from.is_some() && samples % queue_every == 0;
        if sampled {
            engine.view().queue_lengths(&mut queue_lengths);
            queues.sample(&queue_lengths);
        }
        if samples % TIMELINE_TICKS == 0 {
            // Counts alone, and the queue lengths read once a second at most.
            let s = engine.view().counts();
            if !sampled {
                engine.view().queue_lengths(&mut queue_lengths);
            }
            let t = start.elapsed().as_secs_f64();
            let dt = (t - last_point.0).max(1e-9);
            timeline.push(TimelinePoint {
                t_s: t,
                ingress_tps: (s.tuples_in - last_point.1) as f64 / dt,
                egress_tps: (s.tuples_out - last_point.2) as f64 / dt,
                backlog: s.backlog,
                queued: queue_lengths.iter().sum(),
                thread_level: engine.thread_level(),
                exchange_max_backlog: engine.exchange_window_max().first().copied(),
            });
            last_point = (t, s.tuples_in, s.tuples_out);
        }
    }
    let (before, cpu_before, rss_warm, measure_start) = measured_from.unwrap_or(from_start);
    let after = engine.totals();
    let measured = measure_start.elapsed().as_secs_f64().max(1e-9);
    let cpu_after = moirai_os::proc::process_cpu_ns(pid).unwrap_or(0);
    let rss_end = moirai_os::proc::process_rss_bytes(pid).unwrap_or(0);
    let run_end = Instant::now();
    engine.stop();
    let end = match engine.wait() {
        Ok(s) => s,
        Err(e) => {
            eprintln!("moirai: {e}");
            return 1;
        }
    };
    // The tuples still queued at the end come out while the engine drains: egress counts them
    // over the time they took, not over the measured window alone (which may have seen none).
    let drained = run_end.elapsed().as_secs_f64();
    let egress_s = measured + drained;
    let cpu: u64 = end.operators.iter().map(|o| o.cpu_ns).sum();
    let workload_stats = workload_after();
    let policy = matches!(threading, Threading::Policy(_)).then(|| {
        let since_start = |at: Instant| at.duration_since(start).as_secs_f64();
        PolicyActivity::over(end.activation_changes.clone(), since_start(measure_start), since_start(run_end))
    });
    let mode = ContinuousFields {
        chaining: args.chaining,
        egress_s,
        drained_s: drained,
        cpu_ns_per_tuple: if end.tuples_in > 0 { cpu as f64 / end.tuples_in as f64 } else { 0.0 },
        rss_start_bytes: rss_start,
        rss_warm_bytes: rss_warm,
        rss_end_bytes: rss_end,
        ramp_to: args.ramp_to,
        timeline,
        level_changes: end.level_changes.clone(),
        policy,
        exchange: end.exchanges.first().cloned(),
    };
    let extra = summary_extra(serde_json::to_value(&mode).unwrap_or_default(), workload);
    let summary = RunSummary {
        workload: workload.name().to_string(),
        threading: threading.to_string(),
        offered_rate: args.rate,
        duration_s: duration.unwrap_or(run_end - start).as_secs_f64(),
        measured_s: measured,
        ingress_tps: (after.tuples_in - before.tuples_in) as f64 / measured,
        egress_tps: end.tuples_out.saturating_sub(before.tuples_out) as f64 / egress_s,
        tuples_in: end.tuples_in,
        tuples_out: end.tuples_out,
        latency_ms: end.latency_ms,
        e2e_latency_ms: end.e2e_latency_ms,
        threads: threads as u64,
        cpu_cores: cpu_after.saturating_sub(cpu_before) as f64 / 1e9 / measured,
        queue_len: queues.stats(&end.operators),
        workload_stats,
        extra,
    };
    print_summary(&summary, &mode, args.json);
    0
}

/// One second of a run.
#[derive(Serialize)]
struct TimelinePoint {
    /// Seconds since the start.
    t_s: f64,
    /// Tuples in per second over the last second.
    ingress_tps: f64,
    /// Tuples out per second over the last second.
    egress_tps: f64,
    /// Tuples the sources are behind their schedule (the external queue).
    backlog: u64,
    /// Tuples queued in the engine's channels.
    queued: u64,
    /// Worker threads running operators (pool models; 0 under dedicated).
    thread_level: usize,
    /// The largest backlog of an outgoing queue of the Hone exchange during the last second.
    #[serde(skip_serializing_if = "Option::is_none")]
    exchange_max_backlog: Option<u64>,
}

/// Collects queue-length samples: their distribution over every operator and sampling instant,
/// and each operator's mean.
///
/// A sample is the engine's queue lengths by physical id ([`EngineView::queue_lengths`]), read
/// without a name, clock or string per operator, and it lands in a histogram instead of a list:
/// 10 000 operators sampled ten times a second cost the sampling thread little, and its memory
/// does not grow with the run's length.
///
/// [`EngineView::queue_lengths`]: moirai_engine::view::EngineView::queue_lengths
struct QueueSampler {
    /// Every operator at every instant (3 significant digits: exact up to 2 047 tuples).
    distribution: Histogram<u64>,
    /// The sum of all samples (for an exact mean) and the largest.
    sum: u64,
    max: u64,
    /// Per physical id, the sum of its samples.
    per_operator: Vec<u64>,
    /// Sampling instants.
    instants: u64,
}

impl QueueSampler {
    fn new() -> Self {
        // Auto-resizing: no queue length is out of range.
        let distribution = Histogram::new(3).expect("3 significant digits are valid");
        QueueSampler { distribution, sum: 0, max: 0, per_operator: Vec::new(), instants: 0 }
    }

    /// Adds one instant: `queue_lengths[id]` is physical operator `id`'s.
    fn sample(&mut self, queue_lengths: &[u64]) {
        if self.per_operator.len() < queue_lengths.len() {
            self.per_operator.resize(queue_lengths.len(), 0);
        }
        for (sum, &len) in self.per_operator.iter_mut().zip(queue_lengths) {
            *sum += len;
            self.sum += len;
            self.max = self.max.max(len);
            self.distribution.saturating_record(len);
        }
        self.instants += 1;
    }

    /// The statistics, each operator's mean under its `query/operator` name in `operators`.
    fn stats(self, operators: &[moirai_engine::metrics::OperatorSnapshot]) -> QueueLen {
        let samples = self.distribution.len();
        if samples == 0 {
            return QueueLen::default();
        }
        let q = |p: f64| self.distribution.value_at_quantile(p) as f64;
        // Operators of one name (none in practice) share one mean, as they share one entry.
        let mut by_label: std::collections::BTreeMap<String, (u64, u64)> = Default::default();
        for o in operators {
            let Some(&sum) = self.per_operator.get(o.id) else { continue };
            let e = by_label.entry(format!("{}/{}", o.query, o.name)).or_default();
            e.0 += sum;
            e.1 += self.instants;
        }
        QueueLen {
            samples,
            mean: self.sum as f64 / samples as f64,
            p50: q(0.5),
            p90: q(0.9),
            p99: q(0.99),
            max: self.max as f64,
            per_operator: by_label.into_iter().map(|(k, (sum, count))| (k, sum as f64 / count as f64)).collect(),
        }
    }
}

/// The run's sampling period: queue lengths every tick (or every `queue_every` ticks on a large
/// plan) once the warm-up is over.
const SAMPLE_TICK: Duration = Duration::from_millis(100);
/// Ticks between two points of the run's timeline: one a second.
const TIMELINE_TICKS: u64 = 10;

/// Ticks from tick `samples` to the next one at which the run samples something: a timeline
/// point, or (while `measuring`) the queue lengths every `queue_every` ticks.
fn ticks_to_next(samples: u64, queue_every: u64, measuring: bool) -> u64 {
    (1..TIMELINE_TICKS)
        .find(|k| {
            let tick = samples + k;
            tick % TIMELINE_TICKS == 0 || (measuring && tick % queue_every.max(1) == 0)
        })
        .unwrap_or(TIMELINE_TICKS)
}

/// Prints the run's summary: as text, followed by one JSON line with `json`.
fn print_summary(r: &RunSummary, mode: &ContinuousFields, json: bool) {
    let l = |s: &Latency| {
        format!("mean {:.3}  p50 {:.3}  p99 {:.3}  p99.9 {:.3}  max {:.3}", s.mean, s.p50, s.p99, s.p999, s.max)
    };
    println!(
        "workload          {} ({} threads, threading {}, chaining {})",
        r.workload, r.threads, r.threading, mode.chaining
    );
    let offered = if r.offered_rate == 0.0 {
        "as fast as possible".to_string()
    } else {
        format!("{:.0} tuples/s", r.offered_rate)
    };
    println!("offered rate      {offered}");
    println!("ingress           {:.0} tuples/s over {:.2} s after warm-up", r.ingress_tps, r.measured_s);
    println!(
        "egress            {:.0} tuples/s over {:.2} s, until the last tuple came out",
        r.egress_tps, mode.egress_s
    );
    if mode.drained_s >= 0.1 {
        println!(
            "drained           {:.2} s after the end of the run: tuples still queued came out then (egress counts them)",
            mode.drained_s
        );
    }
    println!("tuples            {} in, {} out", r.tuples_in, r.tuples_out);
    println!("latency (ms)      {}", l(&r.latency_ms));
    println!("end-to-end (ms)   {}", l(&r.e2e_latency_ms));
    println!("CPU per tuple     {:.1} ns (all operator threads)", mode.cpu_ns_per_tuple);
    println!("CPU use           {:.2} cores (engine process, measured window)", r.cpu_cores);
    println!(
        "queue lengths     mean {:.1}  p50 {}  p99 {}  max {} (tuples, {} samples)",
        r.queue_len.mean, r.queue_len.p50, r.queue_len.p99, r.queue_len.max, r.queue_len.samples
    );
    println!(
        "RSS               {} KiB before start, {} KiB after warm-up, {} KiB at end",
        mode.rss_start_bytes / 1024,
        mode.rss_warm_bytes / 1024,
        mode.rss_end_bytes / 1024
    );
    if let Some(p) = &mode.policy {
        let first = p.policy_first_active_s.map_or("never".into(), |s| format!("first at {s:.2} s"));
        let activations = p.activation_changes.iter().filter(|c| c.active).count();
        let mut releases = std::collections::BTreeMap::<&str, usize>::new();
        for c in p.activation_changes.iter().filter(|c| !c.active) {
            *releases.entry(c.code).or_default() += 1;
        }
        let releases: Vec<String> = releases.iter().map(|(code, n)| format!("{code}:{n}")).collect();
        let back = if releases.is_empty() { String::new() } else { format!(", handed back: {}", releases.join(" ")) };
        println!(
            "policy active     {:.0} % of the measured window ({first}; {activations} activation(s){back})",
            p.policy_active_share * 100.0,
        );
    }
    if let Some(x) = &mode.exchange {
        println!(
            "exchange          {} {} every {:.1} ms over {} tuples/s, {} queues: max backlog {}, mean {:.1}, mean of the largest {:.1} (tuples, {} ticks, {} sent)",
            x.name, x.policy, x.tau_ms, x.capacity, x.queues, x.max_backlog, x.mean_backlog, x.mean_max_backlog, x.ticks, x.sent
        );
    }
    if !r.workload_stats.is_null() {
        println!("{:<18}{}", r.workload, r.workload_stats);
    }
    if json {
        println!("{}", serde_json::to_string(r).unwrap_or_default());
    }
}

#[cfg(test)]
mod tests {
    use super::{ticks_to_next, PolicyActivity, QueueSampler};
    use moirai_engine::executor::ActivationChange;
    use moirai_engine::metrics::OperatorSnapshot;

    fn op(id: usize, name: &str, queue_len: u64) -> OperatorSnapshot {
        OperatorSnapshot {
            id,
            query: "q".into(),
            name: name.into(),
            tid: 0,
            tuples_in: 0,
            tuples_out: 0,
            queue_len,
            head_wait_ns: 0,
            cpu_ns: 0,
            blocked_ns: 0,
            backlog: 0,
        }
    }

    #[test]
    fn queue_means_are_each_operator_s_and_the_quantiles_cover_every_sample() {
        let mut s = QueueSampler::new();
        s.sample(&[2, 10, 7]);
        s.sample(&[4, 20, 7]);
        s.sample(&[6, 100_003, 7]);
        // Named by id, in any order.
        let q = s.stats(&[op(2, "c", 0), op(0, "a", 0), op(1, "b", 0)]);
        assert_eq!(q.samples, 9);
        // Sorted: 2 4 6 7 7 7 10 20 100003.
        assert_eq!((q.p50, q.p90), (7.0, 20.0));
        assert_eq!(q.max, 100_003.0, "exact, beyond the histogram's exact range");
        assert!((q.mean - (12.0 + 100_033.0 + 21.0) / 9.0).abs() < 1e-9, "{}", q.mean);
        assert_eq!(q.per_operator.get("q/a"), Some(&4.0));
        assert_eq!(q.per_operator.get("q/b"), Some(&(100_033.0 / 3.0)));
        assert_eq!(q.per_operator.get("q/c"), Some(&7.0));
        assert_eq!(q.per_operator.len(), 3);
        assert_eq!(QueueSampler::new().stats(&[op(0, "a", 0)]).samples, 0, "nothing sampled: no statistics");
    }

    #[test]
    fn the_policy_s_active_share_counts_only_the_measured_window() {
        let change = |at_s: f64, active: bool| ActivationChange { at_s, active, code: "", reason: String::new() };
        let p = PolicyActivity::over(vec![change(1.0, true), change(3.0, false), change(6.0, true)], 2.0, 10.0);
        // Active 2..3 and 6..10 of 2..10.
        assert!((p.policy_active_share - 5.0 / 8.0).abs() < 1e-9, "{}", p.policy_active_share);
        assert_eq!(p.policy_first_active_s, Some(1.0));
        let never = PolicyActivity::over(vec![], 2.0, 10.0);
        assert_eq!((never.policy_active_share, never.policy_first_active_s), (0.0, None));
        let always = PolicyActivity::over(vec![change(0.0, true)], 2.0, 10.0);
        assert_eq!(always.policy_active_share, 1.0);
        let before = PolicyActivity::over(vec![change(0.5, true), change(1.5, false)], 2.0, 10.0);
        assert_eq!(before.policy_active_share, 0.0, "a stretch that ended before the window");
    }

    #[test]
    fn the_sampler_wakes_only_for_a_tick_at_which_something_is_due() {
        // A small plan, measuring: every tick samples its queues.
        assert!((0..30).all(|s| ticks_to_next(s, 1, true) == 1));
        // Warming up: only the timeline's ticks (every tenth), from wherever it stands.
        assert_eq!(ticks_to_next(0, 1, false), 10);
        assert_eq!(ticks_to_next(13, 1, false), 7);
        assert_eq!(ticks_to_next(19, 1, false), 1);
        // 10 000 operators (queues every tenth tick): once a second, not ten times.
        assert_eq!(ticks_to_next(20, 10, true), 10);
        // 3 000 operators: every third tick and every tenth, whichever comes first.
        let wakes: Vec<u64> =
            std::iter::successors(Some(0), |&s| Some(s + ticks_to_next(s, 3, true))).take_while(|&s| s <= 20).collect();
        assert_eq!(wakes, [0, 3, 6, 9, 10, 12, 15, 18, 20]);
    }
}

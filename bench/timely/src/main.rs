//! `timely-syn`: moirai's SYN pipeline with cost 0 and selectivity 1 (`moirai run syn --ops N
//! --cost-ns 0 --rate R --duration D`) on timely-dataflow, so that the two engines can be measured
//! side by side.
//!
//! Each timely worker (one thread) runs its own copy of `source -> N identity maps -> sink` and
//! carries its share of the offered rate; records never cross workers (every edge is a pipeline
//! edge). A record is moirai's 32-byte tuple `(event_ns, intended_ns, ingress_ns, data)`. The sink
//! records end-to-end latency, `now - intended_ns`, in an HdrHistogram (a run of equal latencies
//! in a batch once, with its count, as moirai's sink does).
//!
//! The source is open-loop, with moirai's source rule: on each step of its worker it sends every
//! tuple whose intended time has passed, as one batch (at most 1024), and advances the input's
//! frontier to the current time; when none is due it parks the worker until the next tuple is due,
//! but for at least 50 µs. At rate 0 it sends batches of 1024 as fast as the dataflow takes them,
//! with at most a few batches in flight.

use std::cell::{Cell, RefCell};
use std::collections::VecDeque;
use std::process::ExitCode;
use std::rc::Rc;
use std::sync::{Arc, OnceLock};
use std::time::{Duration, Instant};

use hdrhistogram::Histogram;
use timely::dataflow::operators::vec::Map;
use timely::dataflow::operators::{Input, Inspect, Probe};

/// The timely release this program is built against (Cargo.toml pins `0.32`).
const TIMELY_VERSION: &str = "0.32";
/// The most tuples a source sends in one step (and the batch size at rate 0).
const BATCH: u64 = 1024;
/// The shortest a rate-limited source parks its worker (moirai's `MIN_SLEEP_NS`).
const MIN_SLEEP_NS: u64 = 50_000;
/// At rate 0: how many batches a worker may have in flight before it waits for the oldest.
const IN_FLIGHT_BATCHES: usize = 4;
/// The most operators a pipeline may have.
const MAX_OPS: u64 = 20_000;
/// The most workers.
const MAX_WORKERS: usize = 256;

/// moirai's tuple: `(event_ns, intended_ns, ingress_ns, data)`, times in ns since the run's start.
type Rec = (u64, u64, u64, u64);

const USAGE: &str = "\
usage: timely-syn [--ops N] [--rate R] [--duration D] [--workers W] [--json]

  --ops N        identity map operators between source and sink, 1..=20000 (default 5)
  --rate R       offered tuples/s in total over all workers; 0 = as fast as possible (default 0)
  --duration D   how long the source sends, with a unit: 10s, 500ms, 2m, 250us (default 10s)
  --workers W    timely workers (threads), each with its own copy of the pipeline (default 1)
  --json         also print the summary as one JSON line (last line of stdout)

Source rule: on each step the source sends every tuple whose intended time has passed as one
batch (at most 1024) and advances its frontier to the current time; when none is due it parks
the worker until the next one is due, but for at least 50 us. At rate 0 it sends batches of
1024 and waits for the probe whenever 4 batches are in flight.";

#[derive(Clone, Debug)]
struct Args {
    ops: u64,
    rate: f64,
    duration: Duration,
    workers: usize,
    json: bool,
}

fn parse_duration(s: &str) -> Result<Duration, String> {
    let s = s.trim();
    let split = s.find(|c: char| !(c.is_ascii_digit() || c == '.')).unwrap_or(s.len());
    let (num, unit) = s.split_at(split);
    if num.is_empty() {
        return Err(format!("duration {s:?} does not start with a number (e.g. 10s, 500ms)"));
    }
    let value: f64 = num.parse().map_err(|_| format!("duration {s:?}: {num:?} is not a number"))?;
    let scale = match unit.trim() {
        "ns" => 1e-9,
        "us" | "µs" => 1e-6,
        "ms" => 1e-3,
        "s" => 1.0,
        "m" | "min" => 60.0,
        "" => return Err(format!("duration {s:?} has no unit: write e.g. {s}s or {s}ms")),
        u => return Err(format!("duration {s:?}: unknown unit {u:?} (use ns, us, ms, s or m)")),
    };
    let secs = value * scale;
    if !(secs.is_finite() && secs > 0.0 && secs <= 86_400.0) {
        return Err(format!("duration {s:?} must be more than 0 and at most a day"));
    }
    Ok(Duration::from_secs_f64(secs))
}

fn parse_args(mut it: impl Iterator<Item = String>) -> Result<Option<Args>, String> {
    let mut args = Args { ops: 5, rate: 0.0, duration: Duration::from_secs(10), workers: 1, json: false };
    while let Some(flag) = it.next() {
        // Accept both `--flag value` and `--flag=value`.
        let (flag, inline) = match flag.split_once('=') {
            Some((f, v)) if f.starts_with("--") => (f.to_string(), Some(v.to_string())),
            _ => (flag, None),
        };
        let mut value = |name: &str| -> Result<String, String> {
            inline.clone().or_else(|| it.next()).ok_or_else(|| format!("{name} needs a value"))
        };
        match flag.as_str() {
            "-h" | "--help" => return Ok(None),
            "--json" => args.json = true,
            "--ops" => {
                let v = value("--ops")?;
                args.ops = v.parse().map_err(|_| format!("--ops {v:?} is not a whole number"))?;
                if !(1..=MAX_OPS).contains(&args.ops) {
                    return Err(format!("--ops {} must be from 1 to {MAX_OPS}", args.ops));
                }
            }
            "--rate" => {
                let v = value("--rate")?;
                args.rate = v.parse().map_err(|_| format!("--rate {v:?} is not a number"))?;
                if !(args.rate.is_finite() && args.rate >= 0.0) {
                    return Err(format!("--rate {v} must be a finite number >= 0 (0 = as fast as possible)"));
                }
            }
            "--duration" => args.duration = parse_duration(&value("--duration")?)?,
            "--workers" => {
                let v = value("--workers")?;
                args.workers = v.parse().map_err(|_| format!("--workers {v:?} is not a whole number"))?;
                if !(1..=MAX_WORKERS).contains(&args.workers) {
                    return Err(format!("--workers {} must be from 1 to {MAX_WORKERS}", args.workers));
                }
            }
            other => return Err(format!("unknown argument {other:?}")),
        }
    }
    Ok(Some(args))
}

/// CPU time (user + system) of the whole process so far, in ns.
fn process_cpu_ns() -> u64 {
    // SAFETY: getrusage only writes the struct we pass.
    let mut ru: libc::rusage = unsafe { std::mem::zeroed() };
    if unsafe { libc::getrusage(libc::RUSAGE_SELF, &mut ru) } != 0 {
        return 0;
    }
    let tv = |t: libc::timeval| t.tv_sec as u64 * 1_000_000_000 + t.tv_usec as u64 * 1_000;
    tv(ru.ru_utime) + tv(ru.ru_stime)
}

fn new_histogram() -> Histogram<u64> {
    // 1 ns to 1 hour at 3 significant digits.
    Histogram::new_with_bounds(1, 3_600_000_000_000, 3).expect("valid histogram bounds")
}

/// The common start of all workers' schedules.
struct Start {
    at: Instant,
    cpu_ns: u64,
}

/// What one worker hands back.
struct WorkerOut {
    tuples_in: u64,
    tuples_out: u64,
    e2e: Histogram<u64>,
    /// When the source stopped sending, ns after the start.
    send_end_ns: u64,
    /// When the sink saw the last tuple, ns after the start.
    last_out_ns: u64,
    /// Set by worker 0 after all workers drained: (ns after the start, process CPU ns).
    end: Option<(u64, u64)>,
    build_s: f64,
}

/// The schedule: tuple `k` (numbered over all workers) is intended `k / rate` s after the start.
fn intended_ns(k: u64, rate: f64) -> u64 {
    (k as f64 / rate * 1e9) as u64
}

/// How many of `total` tuples (numbered over all workers) are worker `index`'s of `peers`.
fn share(total: u64, index: u64, peers: u64) -> u64 {
    if total <= index {
        0
    } else {
        (total - index - 1) / peers + 1
    }
}

fn run_worker(worker: &mut timely::worker::Worker, args: &Args, start: &Arc<OnceLock<Start>>) -> WorkerOut {
    let index = worker.index() as u64;
    let peers = worker.peers() as u64;
    let build = Instant::now();

    let e2e = Rc::new(RefCell::new(new_histogram()));
    let out_count = Rc::new(Cell::new(0u64));
    let last_out = Rc::new(Cell::new(0u64));

    let (mut input, probe) = worker.dataflow::<u64, _, _>(|scope| {
        let (input, mut stream) = scope.new_input::<Vec<Rec>>();
        for _ in 0..args.ops {
            // Identity, record by record, as moirai's SYN operator with cost 0 and selectivity 1.
            stream = stream.map(|t: Rec| t);
        }
        let (e2e, out_count, last_out, start) = (e2e.clone(), out_count.clone(), last_out.clone(), start.clone());
        let (probe, _) = stream
            .inspect_core(move |event| {
                if let Ok((_, batch)) = event {
                    let t0 = start.get().expect("the start is set before any tuple is sent").at;
                    let now = t0.elapsed().as_nanos() as u64;
                    let mut h = e2e.borrow_mut();
                    // A run of equal latencies is recorded once, with its count, as moirai's sink
                    // does (never 0, so the first record starts a run).
                    let mut run = (0u64, 0u64);
                    for &(_event_ns, intended_ns, _ingress_ns, _data) in batch.iter() {
                        let latency = now.saturating_sub(intended_ns).max(1);
                        if latency == run.0 {
                            run.1 += 1;
                        } else {
                            if run.1 > 0 {
                                h.saturating_record_n(run.0, run.1);
                            }
                            run = (latency, 1);
                        }
                    }
                    if run.1 > 0 {
                        h.saturating_record_n(run.0, run.1);
                    }
                    out_count.set(out_count.get() + batch.len() as u64);
                    last_out.set(now);
                }
            })
            .probe();
        (input, probe)
    });
    let build_s = build.elapsed().as_secs_f64();

    // Every worker has built its dataflow; the first past the barrier starts the schedule.
    timely::synchronization::Barrier::new(worker).wait();
    let t0 = start.get_or_init(|| Start { at: Instant::now(), cpu_ns: process_cpu_ns() }).at;
    let now_ns = || t0.elapsed().as_nanos() as u64;
    let dur_ns = args.duration.as_nanos() as u64;

    let mut sent = 0u64;
    if args.rate > 0.0 {
        // Open loop at `rate`: this worker sends tuples index, index + peers, ... of the schedule.
        let total = share((args.rate * args.duration.as_secs_f64()).ceil() as u64, index, peers);
        loop {
            let now = now_ns();
            let due = share((args.rate * now as f64 / 1e9).floor() as u64 + 1, index, peers).min(total);
            let n = due.saturating_sub(sent).min(BATCH);
            for _ in 0..n {
                let k = index + sent * peers;
                let intended = intended_ns(k, args.rate);
                input.send((intended, intended, now, k));
                sent += 1;
            }
            // Only a step that sent advances the frontier: advancing it on every step would
            // activate the dataflow's progress tracking, so the worker would never park (with one
            // worker, 5 maps and 1000 tuples/s that burns a whole core), and with several workers
            // each advance wakes the others, which advance in turn.
            if n > 0 {
                if now > *input.time() {
                    input.advance_to(now); // (also flushes the handle's buffer)
                } else {
                    input.flush();
                }
            }
            if sent >= total || now >= dur_ns {
                break;
            }
            if n > 0 {
                worker.step();
            } else {
                let next = intended_ns(index + sent * peers, args.rate).min(dur_ns);
                let sleep = next.saturating_sub(now).max(MIN_SLEEP_NS);
                worker.step_or_park(Some(Duration::from_nanos(sleep)));
            }
        }
    } else {
        // As fast as possible: batches of BATCH, each at its own timestamp, at most
        // IN_FLIGHT_BATCHES of them not yet through the probe.
        let mut in_flight: VecDeque<u64> = VecDeque::with_capacity(IN_FLIGHT_BATCHES + 1);
        loop {
            let now = now_ns();
            if now >= dur_ns {
                break;
            }
            let time = *input.time();
            for _ in 0..BATCH {
                input.send((now, now, now, index + sent * peers));
                sent += 1;
            }
            in_flight.push_back(time);
            let next = now_ns();
            if next > time {
                input.advance_to(next);
            }
            worker.step();
            while in_flight.len() >= IN_FLIGHT_BATCHES {
                let oldest = in_flight[0];
                if probe.less_equal(&oldest) {
                    worker.step();
                } else {
                    in_flight.pop_front();
                }
            }
        }
    }
    let send_end_ns = now_ns();

    // Drain: close the input and step until nothing is left in the dataflow.
    drop(input);
    while !probe.done() {
        worker.step_or_park(Some(Duration::from_millis(1)));
    }
    timely::synchronization::Barrier::new(worker).wait();
    let end = (index == 0).then(|| (now_ns(), process_cpu_ns()));

    let e2e = e2e.borrow().clone();
    WorkerOut {
        tuples_in: sent,
        tuples_out: out_count.get(),
        e2e,
        send_end_ns,
        last_out_ns: last_out.get(),
        end,
        build_s,
    }
}

fn main() -> ExitCode {
    let args = match parse_args(std::env::args().skip(1)) {
        Ok(Some(a)) => a,
        Ok(None) => {
            println!("{USAGE}");
            return ExitCode::SUCCESS;
        }
        Err(e) => {
            eprintln!("timely-syn: {e}\n\n{USAGE}");
            return ExitCode::from(2);
        }
    };

    let start: Arc<OnceLock<Start>> = Arc::new(OnceLock::new());
    let config = timely::Config::process(args.workers);
    let worker_args = args.clone();
    let worker_start = start.clone();
    let guards = match timely::execute(config, move |worker| run_worker(worker, &worker_args, &worker_start)) {
        Ok(g) => g,
        Err(e) => {
            eprintln!("timely-syn: timely did not start: {e}");
            return ExitCode::from(1);
        }
    };
    let mut outs = Vec::new();
    for r in guards.join() {
        match r {
            Ok(o) => outs.push(o),
            Err(e) => {
                eprintln!("timely-syn: a worker failed: {e}");
                return ExitCode::from(1);
            }
        }
    }
    let start = start.get().expect("workers set the start");

    let mut e2e = new_histogram();
    let (mut tuples_in, mut tuples_out, mut send_end_ns, mut last_out_ns, mut build_s) = (0u64, 0u64, 0u64, 0u64, 0f64);
    let mut end = None;
    for o in &outs {
        e2e.add(&o.e2e).expect("same histogram bounds");
        tuples_in += o.tuples_in;
        tuples_out += o.tuples_out;
        send_end_ns = send_end_ns.max(o.send_end_ns);
        last_out_ns = last_out_ns.max(o.last_out_ns);
        build_s = f64::max(build_s, o.build_s);
        end = end.or(o.end);
    }
    let (end_ns, end_cpu_ns) = end.expect("worker 0 reports the end");
    let wall_s = end_ns as f64 / 1e9;
    let cpu_s = end_cpu_ns.saturating_sub(start.cpu_ns) as f64 / 1e9;
    let send_s = (send_end_ns as f64 / 1e9).max(1e-9);
    let egress_s = (last_out_ns as f64 / 1e9).max(1e-9);
    let ingress_tps = tuples_in as f64 / send_s;
    let egress_tps = tuples_out as f64 / egress_s;
    let cpu_cores = cpu_s / wall_s.max(1e-9);
    let cpu_ns_per_op_tuple = if tuples_out > 0 { cpu_s * 1e9 / (args.ops as f64 * tuples_out as f64) } else { 0.0 };
    let ms = |q: f64| if e2e.is_empty() { 0.0 } else { e2e.value_at_quantile(q) as f64 / 1e6 };
    let (p50, p99, p999, max) =
        (ms(0.5), ms(0.99), ms(0.999), if e2e.is_empty() { 0.0 } else { e2e.max() as f64 / 1e6 });
    let mean = if e2e.is_empty() { 0.0 } else { e2e.mean() / 1e6 };

    let offered = if args.rate == 0.0 { "as fast as possible".to_string() } else { format!("{} tuples/s", args.rate) };
    println!(
        "pipeline          source -> {} identity maps -> sink, one copy per worker (timely {TIMELY_VERSION}, {} workers)",
        args.ops, args.workers
    );
    println!("offered rate      {offered}");
    if args.rate == 0.0 {
        println!("source rule       batches of {BATCH}, at most {IN_FLIGHT_BATCHES} in flight per worker");
    } else {
        println!(
            "source rule       each step sends every due tuple (at most {BATCH}); parks until the next is due, at least 50 us"
        );
    }
    println!("build             {build_s:.3} s (dataflow construction, before the start; not measured)");
    println!("tuples            {tuples_in} in, {tuples_out} out");
    println!("ingress           {ingress_tps:.0} tuples/s over {send_s:.2} s");
    println!("egress            {egress_tps:.0} tuples/s over {egress_s:.2} s, until the last tuple came out");
    println!("end-to-end (ms)   mean {mean:.3}  p50 {p50:.3}  p99 {p99:.3}  p99.9 {p999:.3}  max {max:.3}");
    println!("CPU use           {cpu_cores:.2} cores ({cpu_s:.3} s user+sys over {wall_s:.2} s, whole process)");
    println!("CPU per op-tuple  {cpu_ns_per_op_tuple:.1} ns (process CPU / (ops x tuples out))");

    let ok = tuples_in == tuples_out;
    if args.json {
        println!(
            "{{\"engine\":\"timely\",\"timely\":\"{TIMELY_VERSION}\",\"workers\":{},\"ops\":{},\"rate\":{},\"duration_s\":{},\
\"tuples_in\":{tuples_in},\"tuples_out\":{tuples_out},\"ingress_tps\":{ingress_tps:.1},\"egress_tps\":{egress_tps:.1},\
\"cpu_cores\":{cpu_cores:.4},\"cpu_ns_per_op_tuple\":{cpu_ns_per_op_tuple:.2},\
\"e2e_latency_ms\":{{\"mean\":{mean:.4},\"p50\":{p50:.4},\"p99\":{p99:.4},\"p999\":{p999:.4},\"max\":{max:.4}}},\
\"wall_s\":{wall_s:.4},\"build_s\":{build_s:.4},\"ok\":{ok}}}",
            args.workers,
            args.ops,
            args.rate,
            args.duration.as_secs_f64()
        );
    }
    if !ok {
        eprintln!("timely-syn: error: {tuples_in} tuples in but {tuples_out} out after the drain");
        return ExitCode::from(1);
    }
    ExitCode::SUCCESS
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn durations() {
        assert_eq!(parse_duration("10s").unwrap(), Duration::from_secs(10));
        assert_eq!(parse_duration("500ms").unwrap(), Duration::from_millis(500));
        assert_eq!(parse_duration("1.5s").unwrap(), Duration::from_millis(1500));
        assert_eq!(parse_duration("250us").unwrap(), Duration::from_micros(250));
        assert!(parse_duration("10").is_err());
        assert!(parse_duration("abc").is_err());
        assert!(parse_duration("0s").is_err());
        assert!(parse_duration("5 fortnights").is_err());
    }

    #[test]
    fn shares_add_up() {
        for peers in 1..5 {
            for total in 0..50 {
                assert_eq!((0..peers).map(|i| share(total, i, peers)).sum::<u64>(), total);
            }
        }
    }
}

//! `moirai demo`: the Lachesis experiment in a few minutes — SYN as the Lachesis evaluation ran it
//! (20 queries x 3 operators, costs drawn per query), the OS scheduler alone vs queue-size (QS)
//! scheduling by the middleware vs IBM Streams' dynamic pool (a worker per core, any worker runs
//! any operator), side by side at rates around this machine's saturation point, with the table
//! and `report.html`.

use std::path::PathBuf;
use std::time::Duration;

use clap::Args;
use moirai_bench::{parse_configurations, Criteria, SweepSpec};
use moirai_workloads::syn::{self, SynConfig};

#[derive(Args, Debug)]
pub struct DemoArgs {
    /// Where results.csv, results.json and report.html go.
    #[arg(long, default_value = "results/demo")]
    out: PathBuf,
    /// How long each point runs (warm-up included).
    #[arg(long, default_value = "8s", value_parser = humantime::parse_duration)]
    duration: Duration,
    /// Share of each point's run discarded as warm-up (as `moirai bench --warmup`).
    #[arg(long, default_value_t = 0.25)]
    warmup: f64,
    /// Repetitions per point (figures are medians).
    #[arg(long, default_value_t = 1)]
    reps: u32,
}

/// Offered rates, as shares of the CPU capacity the drawn query costs allow (cores / CPU time a
/// tuple takes through all operators of all queries). Channel hand-offs cost CPU too, so the
/// saturation point lies below 1.0: the sweep brackets it.
const SHARES: [f64; 5] = [0.5, 0.6, 0.7, 0.8, 0.9];

/// The total rate (split evenly over the queries) at which the Lachesis SYN's operators alone
/// would need every core.
fn capacity() -> Result<f64, String> {
    let queries = syn::draw(&SynConfig::lachesis()).map_err(|e| e.to_string())?;
    // One tuple into every query costs this much CPU in all (selectivity ~1).
    let ns: u64 = queries.iter().map(|q| q.operators.iter().map(|o| o.cost_ns).sum::<u64>() + q.sink_cost_ns).sum();
    let cores = std::thread::available_parallelism().map(|n| n.get()).unwrap_or(1) as f64;
    Ok(cores * 1e9 / ns.max(1) as f64 * queries.len() as f64)
}

pub fn run(a: DemoArgs) -> i32 {
    let exe = match std::env::current_exe() {
        Ok(e) => e,
        Err(e) => {
            eprintln!("moirai demo: cannot find the moirai binary itself: {e}");
            return 1;
        }
    };
    let privileged = moirai_os::caps::preflight(&[moirai_os::caps::Need::Nice]).is_ok();
    let compare = if privileged { "os,qs,os@dynamic" } else { "os,os@dynamic" };
    println!(
        "moirai demo: SYN as in the Lachesis evaluation (20 queries x 3 operators, per-query cost 1 us x 2^U{{0..5}}),"
    );
    println!("  the Linux scheduler alone (os) vs queue-size scheduling through per-thread nice values (qs)");
    println!("  vs a pool of one worker per core where any worker runs any operator (os@dynamic, IBM Streams 4.2).");
    if !privileged {
        println!(
            "  NOTE: qs needs CAP_SYS_NICE (run as root, or `setcap cap_sys_nice+ep` on the binary); running os and os@dynamic."
        );
    }
    let capacity = match capacity() {
        Ok(c) => c,
        Err(e) => {
            eprintln!("moirai demo: {e}");
            return 1;
        }
    };
    let rates: Vec<f64> = SHARES.iter().map(|s| (s * capacity / 100.0).round() * 100.0).collect();
    println!(
        "  The operators' CPU costs allow {capacity:.0} tuples/s on this machine; sweeping {rates:?} tuples/s (all queries)."
    );
    let configurations = match parse_configurations(compare) {
        Ok(c) => c,
        Err(e) => {
            eprintln!("moirai demo: {e}");
            return 1;
        }
    };
    let spec = SweepSpec {
        exe,
        workload: "syn".into(),
        rates,
        duration: a.duration,
        warmup: a.warmup,
        reps: a.reps,
        configurations,
        extra_args: vec!["--lachesis".into()],
        policy_period: None,
        criteria: Criteria { p99_bound_ms: 1000.0, ..Criteria::default() },
        grace: SweepSpec::default_grace(a.duration),
        speed_probes: Default::default(),
        out_dir: a.out,
        command_line: std::env::args().collect(),
    };
    if let Err(e) = spec.validate() {
        eprintln!("moirai demo: {e}");
        return 2;
    }
    crate::bench::execute(&spec)
}

//! The floor under a low-rate pipeline's CPU: one thread that does nothing but sleep until the
//! next due time and wake, as a pool worker keeping a source's timer does (a timed wait on a
//! condition variable: a futex wait with a timeout), at a fixed period.
//!
//! usage: floor PERIOD_US SECONDS — prints `cores <CPU seconds / wall seconds>` and
//! `wakes_per_s <voluntary context switches / s>` for the whole process.
use std::sync::{Condvar, Mutex};
use std::time::{Duration, Instant};

/// (CPU seconds of this single-threaded process: the scheduler's own count in ns, as the
/// process CPU clock `moirai run` reads; voluntary context switches).
fn cpu_and_switches() -> (f64, u64) {
    let schedstat = std::fs::read_to_string("/proc/self/schedstat").expect("/proc/self/schedstat");
    let ns: f64 = schedstat.split_whitespace().next().and_then(|v| v.parse().ok()).expect("schedstat format");
    let status = std::fs::read_to_string("/proc/self/status").expect("/proc/self/status");
    let switches = status
        .lines()
        .find_map(|l| l.strip_prefix("voluntary_ctxt_switches:"))
        .map_or(0, |v| v.trim().parse().unwrap());
    (ns / 1e9, switches)
}

fn main() {
    let args: Vec<String> = std::env::args().collect();
    let period = Duration::from_micros(args.get(1).and_then(|a| a.parse().ok()).unwrap_or(1000));
    let seconds: u64 = args.get(2).and_then(|a| a.parse().ok()).unwrap_or(10);
    let (lock, wake) = (Mutex::new(()), Condvar::new());
    let start = Instant::now();
    let (cpu0, sw0) = cpu_and_switches();
    let mut due = start;
    while start.elapsed() < Duration::from_secs(seconds) {
        due += period;
        let now = Instant::now();
        if due > now {
            let guard = lock.lock().unwrap();
            drop(wake.wait_timeout(guard, due - now).unwrap());
        }
    }
    let (cpu1, sw1) = cpu_and_switches();
    let wall = start.elapsed().as_secs_f64();
    println!("cores {:.4}", (cpu1 - cpu0) / wall);
    println!("wakes_per_s {:.0}", (sw1 - sw0) as f64 / wall);
}

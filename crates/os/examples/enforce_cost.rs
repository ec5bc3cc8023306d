//! What enforcing a schedule costs: per-thread nice and cgroup moves through moirai-os, against
//! forking `renice` per thread as the original Lachesis did.
//!
//! Run as root: `cargo run --release -p moirai-os --example enforce_cost [threads]`.
//! It changes only threads it spawns, in groups it creates under the cpu hierarchy, and its
//! `RestoreLog`s put everything back (also on an early error, through `Drop`).

use std::path::PathBuf;
use std::sync::mpsc;
use std::time::Instant;

use moirai_os::{current_tid, is_root, set_nice, CgroupLayout, CgroupTree, OsError, RestoreLog, Tid};

fn per_call_us(start: Instant, calls: usize) -> f64 {
    start.elapsed().as_secs_f64() * 1e6 / calls as f64
}

fn main() -> Result<(), OsError> {
    if !is_root() {
        eprintln!("enforce_cost needs root (it lowers nice values and creates cgroups)");
        std::process::exit(2);
    }
    let n: usize = std::env::args().nth(1).and_then(|a| a.parse().ok()).unwrap_or(64);
    let pid = std::process::id();
    // Threads that only block, standing in for operator threads.
    let (stops, tids): (Vec<mpsc::Sender<()>>, Vec<Tid>) = (0..n)
        .map(|_| {
            let (stop_tx, stop_rx) = mpsc::channel::<()>();
            let (tid_tx, tid_rx) = mpsc::channel();
            std::thread::spawn(move || {
                tid_tx.send(current_tid()).unwrap();
                let _ = stop_rx.recv();
            });
            (stop_tx, tid_rx.recv().unwrap())
        })
        .unzip();
    let dir = std::env::temp_dir().join(format!("moirai-enforce-cost-{pid}"));
    std::fs::create_dir_all(&dir)
        .map_err(|e| OsError::Io { what: format!("creating {}", dir.display()), source: e })?;
    let state = |name: &str| -> PathBuf { dir.join(name) };
    println!("{n} threads, pid {pid}");

    let rounds = 100;
    let t = Instant::now();
    for r in 0..rounds {
        for &tid in &tids {
            set_nice(tid, (r % 10) as i32)?;
        }
    }
    println!("set_nice (raw syscall):                  {:>9.2} us/call", per_call_us(t, rounds * n));

    let forks = 16.min(n);
    let t = Instant::now();
    for &tid in &tids[..forks] {
        let out = std::process::Command::new("renice").args(["-n", "3", "-p", &tid.to_string()]).output();
        if out.is_err() {
            println!("renice not found; skipping the fork comparison");
            break;
        }
    }
    println!("fork+exec renice (Lachesis):             {:>9.0} us/call", per_call_us(t, forks));

    let mut log = RestoreLog::create(state("nice.json"))?;
    let t = Instant::now();
    for &tid in &tids {
        log.set_nice(pid, tid, 5)?;
    }
    println!("RestoreLog::set_nice, first change:      {:>9.0} us/thread (one fsync each)", per_call_us(t, n));
    let t = Instant::now();
    for r in 0..rounds {
        for &tid in &tids {
            log.set_nice(pid, tid, (r % 10) as i32)?;
        }
    }
    println!("RestoreLog::set_nice, later changes:     {:>9.2} us/call", per_call_us(t, rounds * n));
    let t = Instant::now();
    let report = log.restore();
    println!("restore of {n} nice values:              {:>9.0} us total ({report})", per_call_us(t, 1));

    let mut log = RestoreLog::create(state("nices.json"))?;
    let changes: Vec<(u32, Tid, i32)> = tids.iter().map(|&t| (pid, t, 4)).collect();
    let t = Instant::now();
    let results = log.set_nices(&changes);
    println!(
        "RestoreLog::set_nices, first change:     {:>9.0} us total for {n} threads (one fsync)",
        per_call_us(t, 1)
    );
    if let Some(Err(e)) = results.into_iter().find(Result::is_err) {
        return Err(e);
    }
    log.restore();

    match CgroupLayout::detect() {
        Ok(layout) => {
            let h = layout.cpu().clone();
            let mut log = RestoreLog::create(state("cgroup.json"))?;
            let mut tree = CgroupTree::create_under(&mut log, &h, &format!("moirai-enforce-cost-{pid}"), "m")?;
            tree.ensure_group(&mut log, "g1")?;
            tree.ensure_group(&mut log, "g2")?;
            let moves: Vec<(u32, Tid, &str)> = tids.iter().map(|&t| (pid, t, "g1")).collect();
            let t = Instant::now();
            for r in tree.move_threads(&mut log, &moves) {
                r?;
            }
            println!("move_threads, first move:                {:>9.0} us total for {n} threads", per_call_us(t, 1));
            let t = Instant::now();
            for r in 0..20 {
                for &tid in &tids {
                    tree.move_thread(&mut log, pid, tid, if r % 2 == 0 { "g2" } else { "g1" })?;
                }
            }
            println!("move_thread, later moves:                {:>9.1} us/call", per_call_us(t, 20 * n));
            let t = Instant::now();
            let report = log.restore();
            println!("restore of {n} threads and 4 groups:     {:>9.0} us total ({report})", per_call_us(t, 1));
        }
        Err(e) => println!("cgroup costs not measured: {e}"),
    }
    drop(stops);
    let _ = std::fs::remove_dir_all(&dir);
    Ok(())
}

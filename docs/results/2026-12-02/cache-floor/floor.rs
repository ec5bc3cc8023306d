//! The floor under a hop at a low rate: what it costs a core to touch an operator's memory when a
//! tuple comes only every so often, with no engine around it.
//!
//! A pool worker that carries a tuple down its segment of a long pipeline touches, per operator,
//! the same few dozen cache lines each time (its slot, state word, task, router, channels,
//! counters: separate allocations). Here `OPS` "operators" of `LINES` cache lines each, allocated
//! one operator after another with small unrelated allocations between them (as an engine's build
//! interleaves them), are visited in order `RATE` times a second for `SECONDS`: a visit reads
//! every line of an operator and writes one word in every other line, after hinting the lines of
//! the operator two visits ahead (as moirai's pool does, `executor/ahead.rs`). Between walks the
//! thread sleeps until the next is due. CPU is this thread's own clock over the walks after the
//! first second; the walk's instructions are few, so what it costs is the lines' coming back.
//!
//! usage: floor OPS LINES RATE SECONDS — prints `ns_per_op <CPU ns / (OPS × walks)>` and
//! `walks <n>`.
use std::time::{Duration, Instant};

#[repr(C, align(64))]
struct Line {
    words: [u64; 8],
}

#[repr(C)]
struct Timespec {
    sec: i64,
    nsec: i64,
}

extern "C" {
    fn clock_gettime(clock: i32, ts: *mut Timespec) -> i32;
}

/// This thread's CPU time (CLOCK_THREAD_CPUTIME_ID), ns.
fn thread_cpu_ns() -> u64 {
    let mut ts = Timespec { sec: 0, nsec: 0 };
    // SAFETY: `ts` is a valid, writable timespec; clock 3 is CLOCK_THREAD_CPUTIME_ID on Linux.
    let rc = unsafe { clock_gettime(3, &mut ts) };
    assert_eq!(rc, 0, "clock_gettime(CLOCK_THREAD_CPUTIME_ID)");
    ts.sec as u64 * 1_000_000_000 + ts.nsec as u64
}

fn prefetch(line: &Line) {
    // SAFETY: a prefetch is a hint; it cannot fault.
    unsafe {
        std::arch::x86_64::_mm_prefetch::<{ std::arch::x86_64::_MM_HINT_T0 }>(line as *const Line as *const i8);
    }
}

fn main() {
    let args: Vec<u64> = std::env::args().skip(1).map(|a| a.parse().expect("a number")).collect();
    let [ops, lines, rate, seconds] = args[..] else {
        eprintln!("usage: floor OPS LINES RATE SECONDS");
        std::process::exit(2);
    };
    // Operator i's lines are `lines_of[i * lines..(i + 1) * lines]`: the pointers in one flat
    // list, as the pool keeps its hints' addresses, the lines themselves apart.
    let lines = lines as usize;
    let mut keep = Vec::new();
    let mut lines_of: Vec<Box<Line>> = Vec::new();
    for _ in 0..ops {
        for l in 0..lines {
            lines_of.push(Box::new(Line { words: [l as u64; 8] }));
            keep.push(vec![0u8; 40]);
        }
    }
    let period = Duration::from_nanos(1_000_000_000 / rate);
    let start = Instant::now();
    let (mut due, mut walks, mut cpu_from) = (start, 0u64, None);
    let mut sum = 0u64;
    while start.elapsed() < Duration::from_secs(seconds) {
        if cpu_from.is_none() && start.elapsed() >= Duration::from_secs(1) {
            cpu_from = Some(thread_cpu_ns());
        }
        for i in 0..ops as usize {
            if let Some(ahead) = lines_of.get((i + 2) * lines..(i + 3) * lines) {
                ahead.iter().for_each(|l| prefetch(l));
            }
            for (l, line) in lines_of[i * lines..(i + 1) * lines].iter_mut().enumerate() {
                sum = sum.wrapping_add(line.words[0]);
                if l % 2 == 0 {
                    line.words[1] = line.words[1].wrapping_add(1);
                }
            }
        }
        if cpu_from.is_some() {
            walks += 1;
        }
        due += period;
        let now = Instant::now();
        if due > now {
            std::thread::sleep(due - now);
        }
    }
    let cpu = thread_cpu_ns() - cpu_from.unwrap_or(0);
    println!("ns_per_op {:.1}", cpu as f64 / (ops * walks.max(1)) as f64);
    println!("walks {walks}");
    std::hint::black_box((sum, keep));
}

//! Simulated operator cost: a calibrated busy loop, not a sleep, so that it takes CPU time the
//! way real work does (and competes for the CPU the way the papers' synthetic operators do).

use std::hint::black_box;
use std::sync::OnceLock;
use std::time::Instant;

/// One step of the loop: a dependent multiply-add the compiler cannot fold.
#[inline(always)]
fn step(x: u64) -> u64 {
    black_box(x.wrapping_mul(6364136223846793005).wrapping_add(1442695040888963407))
}

fn spin_iterations(n: u64) -> u64 {
    let mut x = n;
    for _ in 0..n {
        x = step(x);
    }
    x
}

/// Loop iterations per nanosecond on this machine, measured once per process: the fastest of a
/// few 5 ms runs, so a preempted run does not skew it.
pub fn iterations_per_ns() -> f64 {
    static CALIBRATION: OnceLock<f64> = OnceLock::new();
    *CALIBRATION.get_or_init(|| {
        let n = 1_000_000;
        let mut best = f64::MAX;
        for _ in 0..7 {
            let start = Instant::now();
            black_box(spin_iterations(n));
            best = best.min(start.elapsed().as_nanos() as f64);
        }
        n as f64 / best.max(1.0)
    })
}

/// Burns about `ns` nanoseconds of CPU.
#[derive(Clone, Copy, Debug)]
pub struct Spin {
    iterations: u64,
}

impl Spin {
    /// A loop that takes about `ns` nanoseconds on this machine (calibrates on first use).
    pub fn new(ns: u64) -> Self {
        let iterations = if ns == 0 { 0 } else { (ns as f64 * iterations_per_ns()).round() as u64 };
        Spin { iterations }
    }

    /// Runs the loop.
    #[inline]
    pub fn run(&self, seed: u64) -> u64 {
        if self.iterations == 0 {
            seed
        } else {
            spin_iterations(self.iterations ^ (seed & 1))
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn spin_takes_cpu_time_roughly_as_asked() {
        // Behaviour, not speed: 2 ms of spinning must take CPU time of the same order (a loose
        // band, since CI machines are shared), and zero cost must take none.
        let spin = Spin::new(2_000_000);
        let start = Instant::now();
        spin.run(1);
        let took = start.elapsed().as_nanos() as f64;
        assert!(took > 1e6 && took < 2e8, "took {took} ns");
        assert_eq!(Spin::new(0).run(7), 7);
    }
}

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
/// few runs of a million iterations, timed in *thread CPU time*, so that a run preempted by other
/// threads (a loaded machine, a test running beside others) does not make the loop look slower.
pub fn iterations_per_ns() -> f64 {
    static CALIBRATION: OnceLock<f64> = OnceLock::new();
    *CALIBRATION.get_or_init(|| {
        let n = 1_000_000;
        let mut best = f64::MAX;
        for _ in 0..7 {
            let (cpu, wall) = (moirai_os::proc::current_thread_cpu_ns(), Instant::now());
            black_box(spin_iterations(n));
            // Without a thread CPU clock (never on Linux), wall time is the fallback.
            let took = match moirai_os::proc::current_thread_cpu_ns().saturating_sub(cpu) {
                0 => wall.elapsed().as_nanos() as f64,
                ns => ns as f64,
            };
            best = best.min(took);
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
    fn spin_scales_with_the_cost_asked() {
        let rate = iterations_per_ns();
        assert!(rate.is_finite() && rate > 0.0, "{rate} iterations per ns");
        let (one, two) = (Spin::new(1_000_000).iterations, Spin::new(2_000_000).iterations);
        assert!(one > 0 && two.abs_diff(2 * one) <= 1, "1 ms: {one} iterations, 2 ms: {two}");
        assert_eq!(Spin::new(0).run(7), 7, "zero cost does nothing");
    }

    #[test]
    fn spin_burns_cpu_time() {
        // CPU time, not wall time, so a preempted thread does not fail this; and only a loose
        // lower bound, since a faster clock than at calibration runs the loop sooner.
        let spin = Spin::new(5_000_000);
        let before = moirai_os::proc::current_thread_cpu_ns();
        spin.run(1);
        let used = moirai_os::proc::current_thread_cpu_ns() - before;
        assert!(used > 1_000_000, "5 ms of spinning used {used} ns of CPU");
    }
}

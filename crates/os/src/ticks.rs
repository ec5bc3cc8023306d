//! The CPU's time-stamp counter, for a clock read once per pool turn.
//!
//! The monotonic clock, read in the vDSO, costs ~27 ns here (the kernel's clock is the TSC
//! itself, scaled under a sequence lock); the counter alone costs ~10 ns. A worker that reads
//! the clock at the end of every turn (hundreds of nanoseconds at a low rate) can read the counter
//! instead and convert it by a ratio it measured against the monotonic clock a few milliseconds
//! before. The counter is only worth that where the kernel trusts it as its own clock: then it
//! runs at a constant rate, does not stop in idle states, and agrees across CPUs.

use std::sync::OnceLock;

/// Reads the time-stamp counter (cycles of its constant rate since an arbitrary origin). Meaningful
/// only where [`reliable`] says so.
#[inline]
pub fn read() -> u64 {
    #[cfg(target_arch = "x86_64")]
    // SAFETY: `rdtsc` reads a register; it touches no memory and is part of the x86-64 baseline.
    // Only a process that forbade itself the instruction (`prctl(PR_SET_TSC)`, which nothing in
    // moirai does) would get a signal instead.
    unsafe {
        std::arch::x86_64::_rdtsc()
    }
    #[cfg(not(target_arch = "x86_64"))]
    0
}

/// True where the time-stamp counter is the kernel's clock source
/// (`/sys/devices/system/clocksource/clocksource0/current_clocksource` is `tsc`): constant in
/// rate, running in idle states and in step across CPUs, or the kernel would have dropped it.
/// Read once per process.
pub fn reliable() -> bool {
    static RELIABLE: OnceLock<bool> = OnceLock::new();
    *RELIABLE.get_or_init(|| {
        cfg!(target_arch = "x86_64")
            && std::fs::read_to_string("/sys/devices/system/clocksource/clocksource0/current_clocksource")
                .is_ok_and(|source| source.trim() == "tsc")
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn where_reliable_the_counter_moves_with_the_monotonic_clock() {
        if !reliable() {
            eprintln!("skipped: the kernel's clock source is not the TSC here");
            return;
        }
        let (t0, c0) = (read(), std::time::Instant::now());
        std::thread::sleep(std::time::Duration::from_millis(20));
        let (t1, elapsed) = (read(), c0.elapsed());
        // Between 100 MHz and 10 GHz: it moved, forward, at a rate some CPU counts at.
        let ghz = (t1 - t0) as f64 / elapsed.as_nanos() as f64;
        assert!((0.1..10.0).contains(&ghz), "{ghz} ticks a nanosecond");
    }
}

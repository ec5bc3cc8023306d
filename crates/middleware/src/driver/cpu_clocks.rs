//! The CPU time of an SPE's operator threads, read round after round from clocks kept open.
//!
//! A driver reads every mapped thread's CPU time each round ([`Metric::CpuNs`]); opening
//! `/proc/<pid>/task/<tid>/schedstat` by its path for each read cost three system calls and a
//! path walk per thread — with the three-SPE setup's 340 threads, a large part of a round. A
//! [`CpuClocks`] keeps each thread's file open ([`ThreadCpuClock`], one `pread` a read), up to
//! [`HELD`] of them, and closes those of threads no round asked for since the last
//! [`CpuClocks::sweep`].
//!
//! [`Metric::CpuNs`]: moirai_sched::Metric::CpuNs

use std::collections::HashMap;

use moirai_os::proc::{thread_cpu_ns, ThreadCpuClock};
use moirai_os::Tid;
use moirai_sched::ThreadRef;

/// The most clocks kept open; beyond them a thread's CPU time is read as `/proc` is, file by file.
pub const HELD: usize = 2048;

/// Open CPU clocks of one process's threads; see the [module docs](self).
#[derive(Debug, Default)]
pub struct CpuClocks {
    pid: u32,
    /// By tid: the clock, and whether it was read since the last sweep.
    held: HashMap<Tid, (ThreadCpuClock, bool)>,
}

impl CpuClocks {
    /// No clock open yet.
    pub fn new() -> Self {
        CpuClocks::default()
    }

    /// CPU time of `threads` of `pid` so far, ns (threads already gone count 0).
    pub fn cpu_ns(&mut self, pid: u32, threads: &[ThreadRef]) -> f64 {
        if pid != self.pid {
            self.held.clear();
            self.pid = pid;
        }
        threads.iter().filter_map(|t| self.one(pid, t.tid)).sum::<u64>() as f64
    }

    fn one(&mut self, pid: u32, tid: Tid) -> Option<u64> {
        if let Some((clock, used)) = self.held.get_mut(&tid) {
            match clock.read_ns() {
                Ok(ns) => {
                    *used = true;
                    return Some(ns);
                }
                // The thread ended (its tid may be another thread's by now): opened anew below.
                Err(_) => {
                    self.held.remove(&tid);
                }
            }
        }
        if self.held.len() < HELD {
            if let Ok(clock) = ThreadCpuClock::open(pid, tid) {
                if let Ok(ns) = clock.read_ns() {
                    self.held.insert(tid, (clock, true));
                    return Some(ns);
                }
            }
        }
        thread_cpu_ns(pid, tid).ok()
    }

    /// Closes the clocks of threads not read since the last sweep (threads no longer mapped).
    pub fn sweep(&mut self) {
        self.held.retain(|_, (_, used)| std::mem::take(used));
    }

    /// How many clocks are open.
    pub fn open(&self) -> usize {
        self.held.len()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn me(tid: Tid) -> ThreadRef {
        ThreadRef { tid, start_ticks: 0 }
    }

    #[test]
    fn clocks_stay_open_while_read_and_close_after_a_sweep_without_reads() {
        let pid = std::process::id();
        let main = pid as Tid;
        let mut clocks = CpuClocks::new();
        let first = clocks.cpu_ns(pid, &[me(main)]);
        assert!(first > 0.0);
        assert_eq!(clocks.open(), 1);
        let again = clocks.cpu_ns(pid, &[me(main), me(Tid::MAX)]);
        assert!(again >= first, "a clock does not run backwards: {first} then {again}");
        assert_eq!(clocks.open(), 1, "no clock for a thread that does not exist");
        clocks.sweep();
        assert_eq!(clocks.open(), 1, "read since the last sweep: kept");
        clocks.sweep();
        assert_eq!(clocks.open(), 0, "not read since: closed");
    }
}

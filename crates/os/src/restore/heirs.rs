//! Heirs: threads born of a thread moirai reniced.
//!
//! Linux starts a new thread at its creator's nice value. A Flink task thread that moirai set to
//! −10 starts its timer and flusher threads, and a restarted task's threads, at −10 too: their
//! value is moirai's doing, not the SPE's, yet the first look at such a thread finds −10. So per
//! process the first change records the process's own value (its main thread's nice then: the
//! *baseline*), the moment (clock ticks after boot) and every value moirai sets there since. A
//! thread that started after that moment and has one of those values, other than the baseline,
//! is an heir:
//!
//! - when moirai changes an heir, the original it records is the baseline, not the inherited value;
//! - when the process is restored, every heir moirai never changed is set back to the baseline;
//! - while moirai runs, a caller that sees new threads of the process may hand the heirs among
//!   them that it does not schedule their baseline at once ([`super::RestoreLog::reset_heirs`]):
//!   an SPE's pool or network thread that a reniced operator thread happened to start would
//!   otherwise run at that operator's value all along.
//!
//! Assumed, and documented for users: nobody else sets one of moirai's values on a thread of the
//! process while moirai runs, and the process's threads start at its main thread's value (true
//! of a JVM or a moirai engine unless the SPE renices its own threads).

use std::collections::HashSet;

use serde::{Deserialize, Serialize};

use crate::error::OsError;
use crate::nice::set_nice;
use crate::proc::{clock_ticks_per_second, thread_stat, threads, Tid};

use super::{identity, Identity, RestoreReport, State};

/// What the threads of one process born after moirai's first change there may have inherited.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub(crate) struct HeirRecord {
    pub(crate) pid: u32,
    /// The process's start time (its main thread's), which identifies it.
    pub(crate) start_ticks: u64,
    /// When moirai first changed a thread of the process, in clock ticks after boot.
    pub(crate) since_ticks: u64,
    /// The main thread's nice value then.
    pub(crate) baseline: i32,
    /// Every nice value moirai set on a thread of the process since.
    pub(crate) values: Vec<i32>,
}

impl HeirRecord {
    /// Whether a thread started at `start_ticks` with nice value `nice` is an heir.
    fn inherited(&self, start_ticks: u64, nice: i32) -> bool {
        start_ticks >= self.since_ticks && nice != self.baseline && self.values.contains(&nice)
    }
}

/// Clock ticks since boot now, as `/proc/<pid>/stat` counts a thread's start (rounded down: a
/// thread started in the same tick counts as started after).
fn now_ticks() -> Result<u64, OsError> {
    let text = std::fs::read_to_string("/proc/uptime").map_err(|e| OsError::io("reading /proc/uptime", e))?;
    let secs: f64 = text.split_whitespace().next().and_then(|s| s.parse().ok()).unwrap_or(0.0);
    Ok((secs * clock_ticks_per_second() as f64) as u64)
}

impl State {
    /// The heir record of process `pid`, if it is still the process recorded.
    fn heirs_of(&self, pid: u32) -> Option<&HeirRecord> {
        self.heirs.iter().find(|r| r.pid == pid).filter(|r| identity(pid, pid as Tid, r.start_ticks) == Identity::Same)
    }

    /// The original to record for the thread of process `pid` started at `start_ticks`, whose
    /// nice value is `nice` before moirai first changes it: the baseline for an heir, `nice` otherwise.
    pub(crate) fn original_nice_of(&self, pid: u32, start_ticks: u64, nice: i32) -> i32 {
        match self.heirs_of(pid) {
            Some(r) if r.inherited(start_ticks, nice) => r.baseline,
            _ => nice,
        }
    }

    /// Notes that moirai sets `nice` on a thread of process `pid`, whose main thread started at
    /// `main_start` (`None`: it cannot be read), called before the change; true if the record
    /// changed. The first change in a process reads its baseline; a process whose main thread
    /// cannot be read is not followed (its heirs stay as they are).
    pub(crate) fn note_nice_set(&mut self, pid: u32, main_start: Option<u64>, nice: i32) -> Result<bool, OsError> {
        let Some(main_start) = main_start else { return Ok(false) };
        if let Some(i) = self.heirs.iter().position(|r| r.pid == pid) {
            if self.heirs[i].start_ticks == main_start {
                let values = &mut self.heirs[i].values;
                if values.contains(&nice) {
                    return Ok(false);
                }
                values.push(nice);
                return Ok(true);
            }
            // Another process got the pid: the old record is moot.
            self.heirs.remove(i);
        }
        // The main thread's original if moirai already changed it (a record from before this
        // one existed cannot be: the record is made at the first change), else its value now.
        let Ok(main) = thread_stat(pid, pid as Tid) else { return Ok(false) };
        if main.start_ticks != main_start {
            return Ok(false);
        }
        let baseline = self.nice.iter().find(|r| r.pid == pid && r.tid == pid as Tid).map_or(main.nice, |r| r.nice);
        self.heirs.push(HeirRecord {
            pid,
            start_ticks: main_start,
            since_ticks: now_ticks()?,
            baseline,
            values: vec![nice],
        });
        Ok(true)
    }
}

/// Sets the heirs among threads `tids` of process `pid` that moirai never changed back to the
/// process's baseline; returns how many, and a line per failure (a thread that ended meanwhile
/// is none).
pub(crate) fn reset_heirs(state: &State, pid: u32, tids: &[Tid]) -> (usize, Vec<String>) {
    let Some(r) = state.heirs_of(pid) else { return (0, Vec::new()) };
    let (mut reset, mut failures) = (0, Vec::new());
    for &tid in tids {
        if state.nice.iter().any(|n| n.pid == pid && n.tid == tid) {
            continue;
        }
        let Ok(stat) = thread_stat(pid, tid) else { continue };
        if !r.inherited(stat.start_ticks, stat.nice) {
            continue;
        }
        match set_nice(tid, r.baseline) {
            Ok(()) => reset += 1,
            Err(OsError::ThreadGone { .. }) => {}
            Err(e) => failures.push(format!(
                "nice of thread {tid} (pid {pid}), born at a value moirai set, back to {}: {e}",
                r.baseline
            )),
        }
    }
    (reset, failures)
}

/// Sets every heir moirai never changed (not in `recorded`: the threads whose nice records
/// existed before this restore) back to its process's baseline, and drops the heir records of
/// processes with nothing left to do. What fails stays recorded.
pub(crate) fn undo_heirs(state: &mut State, recorded: &HashSet<(u32, Tid)>, report: &mut RestoreReport) {
    state.heirs.retain(|r| {
        if identity(r.pid, r.pid as Tid, r.start_ticks) != Identity::Same {
            return false;
        }
        let Ok(list) = threads(r.pid) else { return false };
        let mut failed = false;
        for t in list.iter().filter(|t| !recorded.contains(&(r.pid, t.tid)) && r.inherited(t.start_ticks, t.nice)) {
            match set_nice(t.tid, r.baseline) {
                Ok(()) => report.heirs_restored += 1,
                Err(OsError::ThreadGone { .. }) => {}
                Err(e) => {
                    failed = true;
                    report.failures.push(format!(
                        "nice of thread {} (pid {}), born at a value moirai set, back to {}: {e}",
                        t.tid, r.pid, r.baseline
                    ));
                }
            }
        }
        failed
    });
}

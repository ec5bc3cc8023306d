//! Knowing, without reading `/proc` again, that threads seen before are still the same.
//!
//! A middleware round asks two questions of every SPE process it schedules: did the process's
//! thread set change since the last round (threads born or ended: an heir to reset, a mapped
//! thread gone), and is the thread about to be reniced still the thread first seen under that
//! tid (not a later thread the kernel gave the tid to)? Listing `/proc/<pid>/task` (a directory
//! entry built per thread) and reading a thread's `stat` by its path (a path walk, an open, a
//! read that formats 52 fields, a close) answer them; with the three SPEs of a node and their
//! ~350 threads, those reads were about a third of a round's CPU. This module answers both for
//! a read of a file kept open:
//!
//! - [`ThreadSetStamp`]: a process's thread set is unchanged while two numbers are — the last
//!   id the kernel handed out in the pid namespace (`/proc/sys/kernel/ns_last_pid`: every thread
//!   born anywhere in it moves it, so no thread is born unseen) and the link count of the
//!   process's `task` directory (the kernel reports 2 + its thread count: no thread ends unseen
//!   while none is born). Where the kernel lacks `ns_last_pid` (`CONFIG_CHECKPOINT_RESTORE`
//!   unset), every stamp differs and callers list as before.
//! - [`SeenThreads`]: a thread's start time (what identifies it with its tid) read once, and a
//!   file of the thread (`schedstat`, the cheapest to read) kept open: the kernel binds an open
//!   `/proc` file to the thread it was opened for, so a read fails once that thread has ended,
//!   even if its tid names another thread by then. While the read succeeds, the tid names the
//!   thread seen, and its start time is the one read then.

use std::collections::HashMap;
use std::fs;
use std::io;
use std::os::unix::fs::{FileExt, MetadataExt};

use crate::proc::{thread_stat, ThreadCpuClock, Tid};

/// The kernel's last handed-out id in this process's pid namespace, from a file kept open.
#[derive(Debug)]
struct LastPid {
    file: Option<fs::File>,
}

impl LastPid {
    fn open() -> Self {
        LastPid { file: fs::File::open("/proc/sys/kernel/ns_last_pid").ok() }
    }

    fn read(&self) -> Option<u64> {
        let mut buf = [0u8; 24];
        let n = self.file.as_ref()?.read_at(&mut buf, 0).ok()?;
        std::str::from_utf8(&buf[..n]).ok()?.trim().parse().ok()
    }
}

/// What a process's thread set looked like, in two numbers; see the [module docs](self).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Stamp {
    last_pid: u64,
    task_links: u64,
}

/// Takes [`Stamp`]s of one process at a time, its files kept open.
#[derive(Debug)]
pub struct ThreadSetStamp {
    last_pid: LastPid,
    /// The process and its `task` directory, opened at the last [`ThreadSetStamp::take`] of it.
    task: Option<(u32, fs::File)>,
}

impl Default for ThreadSetStamp {
    fn default() -> Self {
        ThreadSetStamp::new()
    }
}

impl ThreadSetStamp {
    /// Opens `ns_last_pid` (no process yet).
    pub fn new() -> Self {
        ThreadSetStamp { last_pid: LastPid::open(), task: None }
    }

    /// The stamp of process `pid` now; `None` when it cannot be taken (no `ns_last_pid`, the
    /// process gone), which callers treat as "may have changed". Take it *before* listing the
    /// threads: a thread born or ended during the listing then shows in the next stamp.
    pub fn take(&mut self, pid: u32) -> Option<Stamp> {
        let last_pid = self.last_pid.read()?;
        if self.task.as_ref().is_none_or(|(p, _)| *p != pid) {
            self.task = fs::File::open(format!("/proc/{pid}/task")).ok().map(|f| (pid, f));
        }
        // A process that ended leaves its directory open here with no threads (2 links): the
        // count differs from any live one's, so the caller lists (and finds nothing); the next
        // stamp opens the directory by its path again, in case another process got the pid.
        let task_links = self.task.as_ref()?.1.metadata().ok()?.nlink();
        if task_links <= 2 {
            self.task = None;
        }
        Some(Stamp { last_pid, task_links })
    }
}

/// The most threads [`SeenThreads`] keeps a file open for; beyond them a thread's `stat` is read
/// by its path each time.
pub const HELD: usize = 4096;

/// Start times of threads seen, confirmed by a file of each kept open; see the [module
/// docs](self).
#[derive(Debug, Default)]
pub struct SeenThreads {
    held: HashMap<(u32, Tid), (u64, ThreadCpuClock)>,
    /// Files opened so far; every [`SWEEP`]-th closes those of threads that ended (which nobody
    /// may ask about again).
    opened: u64,
}

/// How many files [`SeenThreads`] opens between two sweeps of its ended threads.
const SWEEP: u64 = 256;

impl SeenThreads {
    /// None seen yet.
    pub fn new() -> Self {
        SeenThreads::default()
    }

    /// The start time (clock ticks after boot) of the thread `tid` of `pid` names now: the one
    /// read when it was first seen while that thread still runs (one `pread`), else read from
    /// its `stat` (and its file opened for the next time). An error when no thread `tid` of
    /// `pid` exists.
    pub fn start_ticks(&mut self, pid: u32, tid: Tid) -> io::Result<u64> {
        if let Some((ticks, file)) = self.held.get(&(pid, tid)) {
            if file.read_ns().is_ok() {
                return Ok(*ticks);
            }
            self.held.remove(&(pid, tid));
        }
        // Opened before the start time is read: if the thread it binds ended and the tid was
        // reused in between, the file reads nothing later, so the start time read here is never
        // vouched for by another thread's file.
        let file = (self.held.len() < HELD).then(|| ThreadCpuClock::open(pid, tid).ok()).flatten();
        let ticks = thread_stat(pid, tid)?.start_ticks;
        if let Some(file) = file {
            self.opened += 1;
            if self.opened % SWEEP == 0 {
                self.held.retain(|_, (_, f)| f.read_ns().is_ok());
            }
            self.held.insert((pid, tid), (ticks, file));
        }
        Ok(ticks)
    }

    /// Closes the files of the threads of `pid` (nothing of it is followed any more).
    pub fn forget_process(&mut self, pid: u32) {
        self.held.retain(|(p, _), _| *p != pid);
    }

    /// Closes every file.
    pub fn clear(&mut self) {
        self.held.clear();
    }

    /// How many files are open.
    pub fn open(&self) -> usize {
        self.held.len()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::proc::{current_tid, thread_ids};
    use std::sync::mpsc;

    /// A thread of this process that waits until told to end; returns its tid and the sender.
    fn waiting_thread() -> (Tid, mpsc::Sender<()>, std::thread::JoinHandle<()>) {
        let (tx, rx) = mpsc::channel::<()>();
        let (tid_tx, tid_rx) = mpsc::channel();
        let handle = std::thread::spawn(move || {
            tid_tx.send(current_tid()).unwrap();
            let _ = rx.recv();
        });
        (tid_rx.recv().unwrap(), tx, handle)
    }

    #[test]
    fn a_stamp_changes_when_a_thread_is_born_or_ends() {
        let me = std::process::id();
        let mut stamps = ThreadSetStamp::new();
        let Some(before) = stamps.take(me) else {
            // No ns_last_pid on this kernel: the stamp never vouches, callers always list.
            assert!(std::fs::metadata("/proc/sys/kernel/ns_last_pid").is_err());
            return;
        };
        // Other tests of this binary start threads too: a changed stamp is all that can be
        // asked of an unchanged set; here the births and deaths are ours.
        let (tid, tx, handle) = waiting_thread();
        let born = stamps.take(me).unwrap();
        assert_ne!(before, born, "a birth moves ns_last_pid");
        assert!(thread_ids(me).unwrap().contains(&tid));
        drop(tx);
        handle.join().unwrap();
        let deadline = std::time::Instant::now() + std::time::Duration::from_secs(2);
        while thread_ids(me).unwrap().contains(&tid) && std::time::Instant::now() < deadline {
            std::thread::sleep(std::time::Duration::from_millis(5));
        }
        let ended = stamps.take(me).unwrap();
        assert_ne!(born, ended, "an end lowers the task directory's link count");
        assert_eq!(stamps.take(u32::MAX / 2), None, "no such process");
    }

    #[test]
    fn a_stamp_of_an_unchanged_set_is_the_same() {
        // A child process whose threads nobody else starts or ends: `sleep`, one thread.
        let mut child = std::process::Command::new("sleep").arg("30").spawn().unwrap();
        let pid = child.id();
        let mut stamps = ThreadSetStamp::new();
        let first = stamps.take(pid);
        let second = stamps.take(pid);
        // Another process of the machine may be born in between (ns_last_pid is the
        // namespace's), so equality is asserted only when ns_last_pid did not move.
        if let (Some(a), Some(b)) = (first, second) {
            if a.last_pid == b.last_pid {
                assert_eq!(a, b);
            }
            assert_eq!(a.task_links, 3, "one thread: 2 + 1 links");
        }
        child.kill().unwrap();
        child.wait().unwrap();
        if let Some(gone) = stamps.take(pid) {
            assert_eq!(gone.task_links, 2, "an ended process's directory has no threads");
        }
    }

    #[test]
    fn a_seen_thread_s_start_is_kept_while_it_runs_and_read_anew_after() {
        let me = std::process::id();
        let mut seen = SeenThreads::new();
        let (tid, tx, handle) = waiting_thread();
        let ticks = seen.start_ticks(me, tid).unwrap();
        assert_eq!(ticks, thread_stat(me, tid).unwrap().start_ticks);
        assert_eq!(seen.open(), 1);
        assert_eq!(seen.start_ticks(me, tid).unwrap(), ticks, "from the file kept open");
        drop(tx);
        handle.join().unwrap();
        let deadline = std::time::Instant::now() + std::time::Duration::from_secs(2);
        while seen.start_ticks(me, tid).is_ok() && std::time::Instant::now() < deadline {
            std::thread::sleep(std::time::Duration::from_millis(5));
        }
        assert!(seen.start_ticks(me, tid).is_err(), "an ended thread has no start time");
        assert_eq!(seen.open(), 0, "its file was closed");
        // Files of threads that ended and are never asked about again are closed by a sweep.
        let (ended, tx, handle) = waiting_thread();
        seen.start_ticks(me, ended).unwrap();
        drop(tx);
        handle.join().unwrap();
        while std::fs::metadata(format!("/proc/{me}/task/{ended}")).is_ok() {
            std::thread::sleep(std::time::Duration::from_millis(5));
        }
        assert_eq!(seen.open(), 1);
        for _ in 0..SWEEP {
            seen.held.remove(&(me, me as Tid)); // so that the next call opens a file again
            seen.start_ticks(me, me as Tid).unwrap();
        }
        assert!(!seen.held.contains_key(&(me, ended)), "swept");
        assert_eq!(seen.open(), 1, "the main thread's file");
        seen.start_ticks(me, me as Tid).unwrap();
        seen.forget_process(me);
        assert_eq!(seen.open(), 0);
    }
}

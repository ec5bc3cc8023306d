//! A process's threads, read cheaply round after round.
//!
//! A driver needs every operator thread's start time (field 22 of its `stat`), so that a tid
//! the kernel reused is never taken for the thread it named. Reading one file per thread every
//! round made up a quarter of a round's CPU with 100 threads; a [`ThreadCensus`] lists the
//! process's thread ids (one directory read) and reads a thread's start time once, when its id
//! first appears. While the list stays the same, so do the threads: reusing a tid in between
//! would need the kernel to hand out every other free id first.

use std::collections::HashMap;

use moirai_os::limits::is_out_of_descriptors;
use moirai_os::proc::{thread_ids, thread_stat};
use moirai_os::Tid;

/// The thread ids of one process and their start times; see the [module docs](self).
#[derive(Debug, Default)]
pub struct ThreadCensus {
    pid: u32,
    tids: Vec<Tid>,
    /// The ids listed at the last refresh that the one before did not list.
    born: Vec<Tid>,
    start: HashMap<Tid, u64>,
    /// A read that failed for lack of descriptors since the last [`ThreadCensus::take_shortage`].
    shortage: Option<std::io::Error>,
}

impl ThreadCensus {
    /// An empty census (the first [`ThreadCensus::refresh`] reads everything).
    pub fn new() -> Self {
        ThreadCensus::default()
    }

    /// Lists `pid`'s threads again; true when the set differs from the last call's (or the
    /// process does, or it cannot be read), false when it is the same.
    ///
    /// Out of descriptors, it says "no change" and keeps what it knew: a listing that could not be
    /// taken says nothing about the threads ([`ThreadCensus::short`] tells).
    pub fn refresh(&mut self, pid: u32) -> bool {
        let tids = match thread_ids(pid) {
            Ok(tids) => tids,
            Err(e) if is_out_of_descriptors(&e) => {
                self.shortage.get_or_insert(e);
                return false;
            }
            Err(_) => Vec::new(),
        };
        if pid == self.pid && tids == self.tids && !tids.is_empty() {
            return false;
        }
        if pid != self.pid {
            self.start.clear();
            self.tids.clear();
        }
        self.born = tids.iter().copied().filter(|t| self.tids.binary_search(t).is_err()).collect();
        self.start.retain(|tid, _| tids.binary_search(tid).is_ok());
        self.pid = pid;
        self.tids = tids;
        true
    }

    /// The threads the last [`ThreadCensus::refresh`] that saw a change found and the one before
    /// did not (every thread, at the first listing of a process).
    pub fn born(&self) -> &[Tid] {
        &self.born
    }

    /// Whether `tid` was a thread of the process at the last [`ThreadCensus::refresh`].
    pub fn contains(&self, tid: Tid) -> bool {
        self.tids.binary_search(&tid).is_ok()
    }

    /// The start time of thread `tid` of `pid` (clock ticks after boot), read once per thread;
    /// `None` if it is not a thread of `pid` (any more).
    pub fn start_ticks(&mut self, pid: u32, tid: Tid) -> Option<u64> {
        if pid != self.pid {
            self.refresh(pid);
        }
        if !self.contains(tid) {
            return None;
        }
        if let Some(&t) = self.start.get(&tid) {
            return Some(t);
        }
        let t = match thread_stat(pid, tid) {
            Ok(stat) => stat.start_ticks,
            Err(e) => {
                if is_out_of_descriptors(&e) {
                    self.shortage.get_or_insert(e);
                }
                return None;
            }
        };
        self.start.insert(tid, t);
        Some(t)
    }
}

impl ThreadCensus {
    /// Whether a read failed for lack of descriptors since the last [`ThreadCensus::take_shortage`].
    pub fn short(&self) -> bool {
        self.shortage.is_some()
    }

    /// The descriptor shortage met since the last call, if any (and forgets it).
    pub fn take_shortage(&mut self) -> Option<std::io::Error> {
        self.shortage.take()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_census_sees_threads_come_and_go() {
        let me = std::process::id();
        let mut census = ThreadCensus::new();
        assert!(census.refresh(me), "the first listing is a change");
        let main = me as Tid;
        let ticks = census.start_ticks(me, main).expect("the main thread");
        assert_eq!(ticks, thread_stat(me, main).unwrap().start_ticks);
        let (tx, rx) = std::sync::mpsc::channel::<()>();
        let (tid_tx, tid_rx) = std::sync::mpsc::channel();
        let t = std::thread::spawn(move || {
            tid_tx.send(moirai_os::proc::current_tid()).unwrap();
            let _ = rx.recv();
        });
        let tid = tid_rx.recv().unwrap();
        assert!(census.refresh(me), "a thread was born");
        assert!(census.born().contains(&tid), "{:?}", census.born());
        assert!(census.start_ticks(me, tid).is_some());
        drop(tx);
        t.join().unwrap();
        assert!(census.refresh(me), "a thread ended");
        assert!(!census.born().contains(&tid));
        assert_eq!(census.start_ticks(me, tid), None);
        assert_eq!(census.start_ticks(u32::MAX / 2, 1), None, "no such process");
    }
}

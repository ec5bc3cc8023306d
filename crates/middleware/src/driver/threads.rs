//! A process's threads, read cheaply round after round.
//!
//! A driver needs every operator thread's start time (field 22 of its `stat`), so that a tid
//! the kernel reused is never taken for the thread it named. Reading one file per thread every
//! round made up a quarter of a round's CPU with 100 threads; a [`ThreadCensus`] lists the
//! process's thread ids (one directory read) and reads a thread's start time once, when its id
//! first appears. While the list stays the same, so do the threads: reusing a tid in between
//! would need the kernel to hand out every other free id first.
//!
//! Listing the directory (the kernel builds an entry per thread) was itself the largest part of
//! a round with three SPEs and ~350 threads, read by each driver and again by the translator.
//! So a census lists only when the process's [`Stamp`] — the namespace's last handed-out id and
//! the process's thread count, two reads of files kept open — differs from the one taken before
//! the last listing: no thread is born without moving the first, none ends without moving the
//! second unless one is born. And when the stamp moved, a listing another census took at the
//! same stamp (the translator's, a moment after the driver's) is shared, not taken again.

use std::collections::HashMap;
use std::sync::{Arc, Mutex};

use moirai_os::limits::is_out_of_descriptors;
use moirai_os::proc::{thread_ids, thread_stat};
use moirai_os::sighting::{Stamp, ThreadSetStamp};
use moirai_os::Tid;

/// The last listing of each process, with the stamp taken before it: valid for anyone whose
/// stamp of the process is the same. At most [`SHARED`] processes are kept.
static LISTINGS: Mutex<Vec<(u32, Stamp, Arc<Vec<Tid>>)>> = Mutex::new(Vec::new());
const SHARED: usize = 64;

/// `pid`'s thread ids: the shared listing taken at `stamp`, or a new one (then shared).
fn listing(pid: u32, stamp: Option<Stamp>) -> std::io::Result<(Arc<Vec<Tid>>, bool)> {
    let shared = |l: &(u32, Stamp, Arc<Vec<Tid>>)| l.0 == pid && Some(l.1) == stamp;
    if let Some(l) = LISTINGS.lock().unwrap_or_else(|e| e.into_inner()).iter().find(|l| shared(l)) {
        return Ok((Arc::clone(&l.2), false));
    }
    let tids = Arc::new(thread_ids(pid)?);
    if let Some(stamp) = stamp {
        let mut listings = LISTINGS.lock().unwrap_or_else(|e| e.into_inner());
        listings.retain(|l| l.0 != pid);
        if listings.len() >= SHARED {
            listings.remove(0);
        }
        listings.push((pid, stamp, Arc::clone(&tids)));
    }
    Ok((tids, true))
}

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
    stamps: ThreadSetStamp,
    /// The stamp taken before the last listing.
    listed: Option<Stamp>,
    /// Listings taken (not skipped for an unchanged stamp).
    listings: u64,
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
        let stamp = self.stamps.take(pid);
        if pid == self.pid && !self.tids.is_empty() && stamp.is_some() && stamp == self.listed {
            return false;
        }
        let (tids, own) = match listing(pid, stamp) {
            Ok(found) => found,
            Err(e) if is_out_of_descriptors(&e) => {
                self.shortage.get_or_insert(e);
                return false;
            }
            Err(_) => (Arc::default(), true),
        };
        self.listings += u64::from(own);
        self.listed = stamp;
        if pid == self.pid && *tids == self.tids && !tids.is_empty() {
            return false;
        }
        let tids = Arc::unwrap_or_clone(tids);
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

    /// How many times [`ThreadCensus::refresh`] listed the threads (the other calls found the
    /// process's stamp unchanged, or another census's listing at the same stamp).
    pub fn listings(&self) -> u64 {
        self.listings
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

    #[test]
    fn a_census_lists_only_when_the_stamp_moved() {
        if std::fs::metadata("/proc/sys/kernel/ns_last_pid").is_err() {
            return; // no stamp on this kernel: every refresh lists, as before
        }
        // A process nobody starts threads in; other tests of this binary start threads (which
        // move the namespace's last id), so some refreshes list: at least one of many must not.
        let mut child = std::process::Command::new("sleep").arg("30").spawn().unwrap();
        let pid = child.id();
        let mut census = ThreadCensus::new();
        assert!(census.refresh(pid));
        assert_eq!(census.born(), [pid as Tid]);
        let mut skipped = 0;
        for _ in 0..200 {
            let before = census.listings();
            assert!(!census.refresh(pid), "the same single thread");
            skipped += usize::from(census.listings() == before);
            std::thread::sleep(std::time::Duration::from_millis(2));
        }
        assert!(skipped > 0, "200 refreshes of an unchanged process all listed its threads");
        // A second census of the process finds the first one's listing when the stamp is the one
        // it was taken at (a thread of another test may move it: tried until it did not).
        let mut shared = false;
        for _ in 0..200 {
            let mut first = ThreadCensus::new();
            let mut second = ThreadCensus::new();
            assert!(first.refresh(pid) && second.refresh(pid));
            assert_eq!(second.born(), [pid as Tid]);
            if second.listings() == 0 {
                shared = true;
                break;
            }
        }
        assert!(shared, "no second census ever used the first one's listing");
        child.kill().unwrap();
        child.wait().unwrap();
        assert!(census.refresh(pid), "the process ended: its thread is gone");
        assert!(!census.contains(pid as Tid));
    }
}

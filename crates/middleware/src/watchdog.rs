//! The real-time watchdog: a thread of the middleware at `SCHED_FIFO` priority 99, above every
//! operator the [`crate::realtime`] translator raises, that demotes them all when the rounds
//! stop (the design note of `moirai_os::realtime`).
//!
//! A real-time operator that never blocks starves every normal thread of its CPU — the SPE's
//! metrics endpoint, the middleware itself — so the round that would demote it may never come.
//! The watchdog only sleeps and reads: the translator sends it every promotion and demotion (a
//! lock-free channel, so the watchdog never waits for a starved thread holding a lock), and beats
//! a clock at every round. When no round completed for [`Watchdog::stale`] while threads are
//! real-time, the watchdog puts each of them back into its original class itself (checking its
//! start time first, so a reused tid is never touched), says so on stderr, and leaves the count
//! for the translator, which then keeps real time off for a while. Because it runs above the
//! operators, they cannot starve it; because it sleeps, it costs nothing: it looks at the clock
//! every quarter of [`Watchdog::stale`] (at most every second) only while some thread is
//! real-time, and otherwise blocks until the translator promotes one.

use std::collections::HashMap;
use std::sync::atomic::{AtomicBool, AtomicU64, AtomicUsize, Ordering};
use std::sync::{mpsc, Arc};
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

use moirai_os::realtime::set_sched_class;
use moirai_os::{SchedClass, Tid};

/// The real-time priority the watchdog runs at: above every operator.
pub const WATCHDOG_PRIORITY: u8 = 99;

enum Msg {
    Promoted { pid: u32, tid: Tid, start_ticks: u64, original: SchedClass },
    Demoted { pid: u32, tid: Tid },
    Stop,
}

/// What the watchdog thread and the translator share.
#[derive(Default)]
struct Shared {
    /// Milliseconds since the watchdog started when the last round beat.
    beat_ms: AtomicU64,
    /// Set when the watchdog demoted threads; cleared by [`Watchdog::take_trip`].
    tripped: AtomicBool,
    /// How many threads the last trip demoted.
    demoted: AtomicUsize,
}

/// The watchdog thread; see the [module documentation](self). Stopped (and joined) on drop.
pub struct Watchdog {
    tx: mpsc::Sender<Msg>,
    shared: Arc<Shared>,
    epoch: Instant,
    stale: Duration,
    /// The watchdog thread's id.
    tid: Tid,
    handle: Option<JoinHandle<()>>,
}

impl Watchdog {
    /// Starts the watchdog at `SCHED_FIFO` 99; it trips when no round beat for `stale`. Fails
    /// when the thread cannot be made real-time (no `CAP_SYS_NICE`).
    pub fn start(stale: Duration) -> Result<Watchdog, String> {
        let (tx, rx) = mpsc::channel();
        let shared = Arc::new(Shared::default());
        let epoch = Instant::now();
        let (ready_tx, ready_rx) = mpsc::channel();
        let handle = std::thread::Builder::new()
            .name("rt-watchdog".into())
            .spawn({
                let shared = shared.clone();
                move || {
                    let me = moirai_os::current_tid();
                    // Plain SCHED_FIFO, no reset-on-fork needed: this thread creates none.
                    let top = set_sched_class(me, SchedClass::Fifo(WATCHDOG_PRIORITY));
                    let ok = top.is_ok();
                    let _ = ready_tx.send(top.map(|()| me).map_err(|e| e.to_string()));
                    if ok {
                        watch(rx, &shared, epoch, stale);
                    }
                }
            })
            .map_err(|e| format!("cannot start the real-time watchdog: {e}"))?;
        let tid = match ready_rx.recv() {
            Ok(Ok(tid)) => tid,
            Ok(Err(e)) => {
                let _ = handle.join();
                return Err(format!(
                    "the real-time watchdog cannot run at SCHED_FIFO {WATCHDOG_PRIORITY}, so it could not demote a \
                     runaway operator: {e}"
                ));
            }
            Err(_) => return Err("the real-time watchdog ended before it started".into()),
        };
        Ok(Watchdog { tx, shared, epoch, stale, tid, handle: Some(handle) })
    }

    /// The watchdog thread's id.
    pub fn tid(&self) -> Tid {
        self.tid
    }

    /// How long without a round before it trips.
    pub fn stale(&self) -> Duration {
        self.stale
    }

    /// A round completed (or is under way): the middleware is alive.
    pub fn beat(&self) {
        self.shared.beat_ms.store(self.epoch.elapsed().as_millis() as u64, Ordering::SeqCst);
    }

    /// Thread `tid` of `pid` (started at `start_ticks`) is real-time now; `original` is its
    /// class to go back to.
    pub fn promoted(&self, pid: u32, tid: Tid, start_ticks: u64, original: SchedClass) {
        let _ = self.tx.send(Msg::Promoted { pid, tid, start_ticks, original });
    }

    /// Thread `tid` of `pid` is no longer real-time by the translator's hand.
    pub fn demoted(&self, pid: u32, tid: Tid) {
        let _ = self.tx.send(Msg::Demoted { pid, tid });
    }

    /// `Some(number of threads demoted)` once after the watchdog tripped.
    pub fn take_trip(&self) -> Option<usize> {
        self.shared.tripped.swap(false, Ordering::SeqCst).then(|| self.shared.demoted.load(Ordering::SeqCst))
    }
}

impl Drop for Watchdog {
    fn drop(&mut self) {
        let _ = self.tx.send(Msg::Stop);
        if let Some(h) = self.handle.take() {
            let _ = h.join();
        }
    }
}

/// The watchdog thread's loop.
fn watch(rx: mpsc::Receiver<Msg>, shared: &Shared, epoch: Instant, stale: Duration) {
    let mut known: HashMap<(u32, Tid), (u64, SchedClass)> = HashMap::new();
    let every = (stale / 4).clamp(Duration::from_millis(10), Duration::from_secs(1));
    let stale_ms = stale.as_millis() as u64;
    loop {
        // With no thread real-time there is nothing to watch: block until the translator sends
        // something, so that an idle middleware's watchdog never wakes (a wake-up at FIFO 99
        // preempts whatever runs on its core).
        let first = if known.is_empty() {
            match rx.recv() {
                Ok(m) => Some(m),
                Err(mpsc::RecvError) => return,
            }
        } else {
            match rx.recv_timeout(every) {
                Ok(m) => Some(m),
                Err(mpsc::RecvTimeoutError::Timeout) => None,
                Err(mpsc::RecvTimeoutError::Disconnected) => return,
            }
        };
        for msg in first.into_iter().chain(std::iter::from_fn(|| rx.try_recv().ok())) {
            match msg {
                Msg::Promoted { pid, tid, start_ticks, original } => {
                    known.insert((pid, tid), (start_ticks, original));
                }
                Msg::Demoted { pid, tid } => {
                    known.remove(&(pid, tid));
                }
                Msg::Stop => return,
            }
        }
        let now = epoch.elapsed().as_millis() as u64;
        if known.is_empty() || now.saturating_sub(shared.beat_ms.load(Ordering::SeqCst)) <= stale_ms {
            continue;
        }
        let mut demoted = 0;
        for ((pid, tid), (start_ticks, original)) in known.drain() {
            let same = moirai_os::proc::thread_stat(pid, tid).is_ok_and(|s| s.start_ticks == start_ticks);
            if same && set_sched_class(tid, original).is_ok() {
                demoted += 1;
            }
        }
        shared.demoted.store(demoted, Ordering::SeqCst);
        shared.tripped.store(true, Ordering::SeqCst);
        // After the demotion: writing may block on a full pipe.
        eprintln!(
            "moirai schedule: error: no scheduling round completed for {stale:?}: the real-time watchdog put {demoted} \
             thread(s) back into their original class"
        );
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use moirai_os::realtime::get_sched_class;

    /// A thread that blocks until dropped (being real-time costs nothing then).
    struct Blocked {
        tid: Tid,
        stop: Option<mpsc::Sender<()>>,
        handle: Option<JoinHandle<()>>,
    }

    impl Blocked {
        fn spawn() -> Blocked {
            let (tid_tx, tid_rx) = mpsc::channel();
            let (stop, stop_rx) = mpsc::channel::<()>();
            let handle = std::thread::spawn(move || {
                tid_tx.send(moirai_os::current_tid()).unwrap();
                let _ = stop_rx.recv();
            });
            Blocked { tid: tid_rx.recv().unwrap(), stop: Some(stop), handle: Some(handle) }
        }
    }

    impl Drop for Blocked {
        fn drop(&mut self) {
            let _ = set_sched_class(self.tid, SchedClass::Other);
            drop(self.stop.take());
            if let Some(h) = self.handle.take() {
                let _ = h.join();
            }
        }
    }

    fn may_go_real_time(test: &str) -> bool {
        let ok = moirai_os::is_root() && moirai_os::realtime::rt_throttling().is_ok_and(|t| t.is_some());
        if !ok {
            use std::io::Write;
            let _ = writeln!(std::io::stderr(), "SKIPPED {test}: needs root and RT throttling on");
        }
        ok
    }

    #[test]
    fn a_watchdog_whose_rounds_stop_demotes_what_it_knows_and_only_that() {
        if !may_go_real_time("a_watchdog_whose_rounds_stop_demotes_what_it_knows_and_only_that") {
            return;
        }
        let pid = std::process::id();
        let (ours, other) = (Blocked::spawn(), Blocked::spawn());
        let start = |tid| moirai_os::proc::thread_stat(pid, tid).unwrap().start_ticks;
        let w = Watchdog::start(Duration::from_millis(200)).unwrap();
        set_sched_class(ours.tid, SchedClass::RoundRobin(10)).unwrap();
        set_sched_class(other.tid, SchedClass::RoundRobin(11)).unwrap();
        w.promoted(pid, ours.tid, start(ours.tid), SchedClass::Other);
        // Rounds beat: nothing happens.
        for _ in 0..10 {
            w.beat();
            std::thread::sleep(Duration::from_millis(50));
        }
        assert_eq!(get_sched_class(ours.tid).unwrap(), SchedClass::RoundRobin(10));
        assert_eq!(w.take_trip(), None);
        // The rounds stop: the watchdog demotes the thread it was told of, not the other one.
        let deadline = Instant::now() + Duration::from_secs(10);
        while get_sched_class(ours.tid).unwrap() != SchedClass::Other {
            assert!(Instant::now() < deadline, "the watchdog never tripped");
            std::thread::sleep(Duration::from_millis(20));
        }
        assert_eq!(w.take_trip(), Some(1));
        assert_eq!(w.take_trip(), None, "said once");
        assert_eq!(get_sched_class(other.tid).unwrap(), SchedClass::RoundRobin(11), "never told of it");
        // A thread demoted by the translator is forgotten: rounds stop again, nothing happens.
        w.beat();
        w.promoted(pid, other.tid, start(other.tid), SchedClass::Other);
        w.demoted(pid, other.tid);
        std::thread::sleep(Duration::from_millis(600));
        assert_eq!(get_sched_class(other.tid).unwrap(), SchedClass::RoundRobin(11));
        assert_eq!(w.take_trip(), None, "nothing known, nothing to demote");
        // A recorded start time that differs (a reused tid) is never touched.
        w.beat();
        w.promoted(pid, other.tid, start(other.tid) + 1, SchedClass::Other);
        std::thread::sleep(Duration::from_millis(600));
        assert_eq!(get_sched_class(other.tid).unwrap(), SchedClass::RoundRobin(11));
        assert_eq!(w.take_trip(), Some(0));
        drop(w);
    }

    /// How many times thread `tid` of this process went to sleep and woke up.
    fn wake_ups(tid: Tid) -> u64 {
        moirai_os::proc::thread_voluntary_switches(std::process::id(), tid).unwrap()
    }

    #[test]
    fn a_watchdog_with_nothing_real_time_never_wakes() {
        if !may_go_real_time("a_watchdog_with_nothing_real_time_never_wakes") {
            return;
        }
        let pid = std::process::id();
        let thread = Blocked::spawn();
        let start_ticks = moirai_os::proc::thread_stat(pid, thread.tid).unwrap().start_ticks;
        // Looks every 50 ms while something is real-time.
        let w = Watchdog::start(Duration::from_millis(200)).unwrap();
        let tid = w.tid();
        let before = wake_ups(tid);
        for _ in 0..12 {
            w.beat();
            std::thread::sleep(Duration::from_millis(50));
        }
        let idle = wake_ups(tid) - before;
        assert!(idle <= 1, "{idle} wake-ups in 600 ms with no thread real-time");
        // Told of a real-time thread, it looks at the clock (the rounds still beat: no trip).
        w.promoted(pid, thread.tid, start_ticks, SchedClass::Other);
        let before = wake_ups(tid);
        for _ in 0..12 {
            w.beat();
            std::thread::sleep(Duration::from_millis(50));
        }
        let watching = wake_ups(tid) - before;
        assert!(watching >= 5, "only {watching} wake-ups in 600 ms while a thread is real-time");
        assert_eq!(w.take_trip(), None);
        // Demoted by the translator: it blocks again.
        w.demoted(pid, thread.tid);
        std::thread::sleep(Duration::from_millis(100));
        let before = wake_ups(tid);
        std::thread::sleep(Duration::from_millis(600));
        let idle = wake_ups(tid) - before;
        assert!(idle <= 1, "{idle} wake-ups in 600 ms after the last demotion");
        drop(w);
    }

    #[test]
    fn the_watchdog_runs_above_every_operator() {
        if !may_go_real_time("the_watchdog_runs_above_every_operator") {
            return;
        }
        let w = Watchdog::start(Duration::from_secs(5)).unwrap();
        let tid = w.tid();
        let name =
            moirai_os::proc::threads(std::process::id()).unwrap().into_iter().find(|t| t.tid == tid).unwrap().name;
        assert_eq!(name, "rt-watchdog");
        assert_eq!(get_sched_class(tid).unwrap(), SchedClass::Fifo(WATCHDOG_PRIORITY));
        drop(w);
    }
}

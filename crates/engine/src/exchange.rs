//! Hone's tuple scheduler (Li et al., "Hone: Mitigating Stragglers in Distributed Stream
//! Processing With Tuple Scheduling", IEEE TPDS 2021): the outgoing tuples of all instances of one
//! operator cross a shared link of limited capacity, and a scheduler decides, every interval τ,
//! whose outgoing queue the link serves.
//!
//! - [`Hone`] is the option a query sets on a stream (`stream.exchange(Hone::lbf(tau).capacity(c))`).
//! - [`lbf`], [`round_robin`] and [`fifo`] are the scheduling decisions, pure functions from the
//!   queues' backlogs and the interval's budget to an allocation (tuples per queue), so that they
//!   can be tested, and reused by a simulator, without an engine. [`simulate`] runs the paper's
//!   slotted model (§4.1) on an arrival sequence.
//! - [`Link`], [`LinkSender`] and [`LinkTask`] are the runtime: every producer instance has a
//!   bounded outgoing queue in the link; the link is a task of its own that wakes every τ, gives
//!   the scheduler the backlogs and a budget of `capacity · τ` tuples, and moves what it allocated
//!   into the ordinary channels to the consumers, queue order preserved. A full outgoing queue
//!   blocks its producer exactly as a full channel does ([`Signal`]); a full channel to a consumer
//!   blocks the link, which then backs its producers up.

use std::collections::VecDeque;
use std::fmt;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use serde::{Serialize, Serializer};

use crate::error::InvalidSetting;
use crate::sync::channel::{Closed, Message, Sender};
use crate::sync::{lock, Signal};
use crate::task::{Step, Task};
use crate::tuple::now_ns;

/// Which outgoing queue the link serves next: the link's queueing discipline (named so as not to be
/// confused with a scheduling policy of `moirai-sched`).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Serialize)]
#[serde(rename_all = "lowercase")]
pub enum Discipline {
    /// Largest backlog first: Hone's algorithm, `3 + ⌈log₂ N⌉`-competitive (its Theorem 1).
    Lbf,
    /// Round robin: one tuple from each non-empty queue in turn (the paper's RRB baseline).
    Rr,
    /// First in, first out across the queues: tuples leave in the order the producers sent
    /// them (Storm's default, which ignores tuple scheduling).
    Fifo,
}

impl fmt::Display for Discipline {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            Discipline::Lbf => "lbf",
            Discipline::Rr => "rr",
            Discipline::Fifo => "fifo",
        })
    }
}

impl std::str::FromStr for Discipline {
    type Err = InvalidSetting;
    fn from_str(s: &str) -> Result<Self, InvalidSetting> {
        match s {
            "lbf" => Ok(Discipline::Lbf),
            "rr" => Ok(Discipline::Rr),
            "fifo" => Ok(Discipline::Fifo),
            _ => Err(InvalidSetting::new(s, format!("unknown exchange policy '{s}': use lbf, rr or fifo"))),
        }
    }
}

/// The largest scheduling interval.
pub const MAX_TAU: Duration = Duration::from_secs(60);

/// The largest link capacity, in tuples per second.
pub const MAX_LINK_CAPACITY: u64 = 1_000_000_000;

/// A Hone exchange on a stream: a link of `capacity` tuples/s shared by all instances of the
/// producing operator, scheduled every `tau` by `policy`.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub struct Hone {
    /// The scheduler.
    pub policy: Discipline,
    /// The scheduling interval τ.
    pub tau: Duration,
    /// Tuples per second the link carries (0 = not set, refused at build).
    pub capacity: u64,
    /// Tuples each producer instance may queue before it blocks (default: the channel capacity).
    pub queue: Option<usize>,
}

impl Hone {
    /// An exchange scheduled by `policy` every `tau`; set its capacity with [`Hone::capacity`].
    pub fn new(policy: Discipline, tau: Duration) -> Hone {
        Hone { policy, tau, capacity: 0, queue: None }
    }
    /// Largest backlog first.
    pub fn lbf(tau: Duration) -> Hone {
        Hone::new(Discipline::Lbf, tau)
    }
    /// Round robin.
    pub fn rr(tau: Duration) -> Hone {
        Hone::new(Discipline::Rr, tau)
    }
    /// Arrival order across the instances (Storm's default).
    pub fn fifo(tau: Duration) -> Hone {
        Hone::new(Discipline::Fifo, tau)
    }
    /// The link's capacity, tuples per second.
    pub fn capacity(mut self, tuples_per_s: u64) -> Hone {
        self.capacity = tuples_per_s;
        self
    }
    /// The bound of each producer's outgoing queue, in tuples.
    pub fn queue_capacity(mut self, tuples: usize) -> Hone {
        self.queue = Some(tuples);
        self
    }

    /// Checks the settings; the message says what to change.
    pub fn validate(&self) -> Result<(), InvalidSetting> {
        self.check().map_err(|message| InvalidSetting::new("exchange", message))
    }

    fn check(&self) -> Result<(), String> {
        if self.tau.is_zero() || self.tau > MAX_TAU {
            return Err(format!(
                "the scheduling interval tau {:?} must be above 0 and at most {MAX_TAU:?} (Hone used 10-130 ms)",
                self.tau
            ));
        }
        if self.capacity == 0 || self.capacity > MAX_LINK_CAPACITY {
            return Err(format!(
                "the link capacity {} tuples/s must be in 1..={MAX_LINK_CAPACITY}; set it, e.g. Hone::lbf(tau).capacity(20000) \
                 or --link-capacity 20000",
                self.capacity
            ));
        }
        if self.queue == Some(0) {
            return Err("an exchange's outgoing queues need a capacity of at least 1 tuple".into());
        }
        Ok(())
    }
}

impl Hone {
    /// The exchange as the `/topology` document describes it.
    pub fn document(&self) -> moirai_contract::topology::Exchange {
        moirai_contract::topology::Exchange {
            policy: self.policy.to_string(),
            tau_ms: self.tau.as_secs_f64() * 1e3,
            capacity: self.capacity,
            queue: self.queue,
        }
    }
}

impl fmt::Display for Hone {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{} every {:?} over {} tuples/s", self.policy, self.tau, self.capacity)
    }
}

impl Serialize for Hone {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        use serde::ser::SerializeStruct;
        let mut st = s.serialize_struct("Hone", 4)?;
        st.serialize_field("policy", &self.policy)?;
        st.serialize_field("tau_ms", &(self.tau.as_secs_f64() * 1e3))?;
        st.serialize_field("capacity", &self.capacity)?;
        st.serialize_field("queue", &self.queue)?;
        st.end()
    }
}

// ---------------------------------------------------------------------------------------------
// The scheduling decisions: pure functions.

/// LBF for one interval: `budget` tuples, each taken from the queue with the largest backlog at
/// that moment (ties: the lowest index) — Algorithm 1 of the paper, one slot per tuple, with the
/// backlogs seen at the start of the interval. Returns the tuples taken from each queue; takes
/// `min(budget, Σ backlogs)` in all.
///
/// Computed by water-filling in O(N log N): the queues above a level L are cut down to L, the
/// lowest L whose cut fits the budget, and what is left of the budget takes one more tuple from
/// each queue at level L, lowest index first.
pub fn lbf(backlogs: &[usize], budget: usize) -> Vec<usize> {
    let total: usize = backlogs.iter().sum();
    if budget >= total {
        return backlogs.to_vec();
    }
    let above = |level: usize| -> usize { backlogs.iter().map(|&b| b.saturating_sub(level)).sum() };
    // The lowest level whose cut fits: above(level) <= budget; above is non-increasing in level.
    let (mut lo, mut hi) = (0usize, backlogs.iter().copied().max().unwrap_or(0));
    while lo < hi {
        let mid = lo + (hi - lo) / 2;
        if above(mid) <= budget {
            hi = mid;
        } else {
            lo = mid + 1;
        }
    }
    let level = lo;
    let mut left = budget - above(level);
    backlogs
        .iter()
        .map(|&b| {
            let mut x = b.saturating_sub(level);
            if left > 0 && b >= level && level > 0 {
                x += 1;
                left -= 1;
            }
            x
        })
        .collect()
}

/// Round robin for one interval: one tuple from each non-empty queue in turn, starting at queue
/// `*next`, until `budget` tuples are taken or the queues are empty; `*next` is left at the queue
/// after the last one served, where the next interval goes on.
pub fn round_robin(backlogs: &[usize], budget: usize, next: &mut usize) -> Vec<usize> {
    let n = backlogs.len();
    let mut x = vec![0; n];
    if n == 0 {
        return x;
    }
    let mut left: Vec<usize> = backlogs.to_vec();
    let mut budget = budget;
    *next %= n;
    loop {
        let active = left.iter().filter(|&&b| b > 0).count();
        if active == 0 || budget == 0 {
            return x;
        }
        if budget >= active {
            // Whole rounds serve every non-empty queue once; the turn then goes to the queue
            // after the last one served, the last non-empty one counting from the turn.
            let least = left.iter().copied().filter(|&b| b > 0).min().unwrap_or(0);
            let rounds = (budget / active).min(least);
            let last = (0..n).map(|k| (*next + k) % n).rev().find(|&i| left[i] > 0).expect("a non-empty queue");
            for (xi, li) in x.iter_mut().zip(left.iter_mut()) {
                if *li > 0 {
                    *xi += rounds;
                    *li -= rounds;
                }
            }
            budget -= rounds * active;
            *next = (last + 1) % n;
            continue;
        }
        // A partial round: the next `budget` non-empty queues from the turn on.
        let mut i = *next;
        while budget > 0 {
            if left[i] > 0 {
                x[i] += 1;
                left[i] -= 1;
                budget -= 1;
            }
            i = (i + 1) % n;
        }
        *next = i;
        return x;
    }
}

/// FIFO across the queues for one interval: `queues[i]` lists the batches queued at instance `i`,
/// oldest first, as `(arrival sequence number, tuples)`; the link takes `budget` tuples in
/// ascending sequence numbers (the last batch it reaches possibly in part).
pub fn fifo(queues: &[Vec<(u64, usize)>], budget: usize) -> Vec<usize> {
    let mut x = vec![0; queues.len()];
    let mut cursor = vec![0usize; queues.len()];
    let mut budget = budget;
    while budget > 0 {
        let oldest = (0..queues.len()).filter(|&i| cursor[i] < queues[i].len()).min_by_key(|&i| queues[i][cursor[i]].0);
        let Some(i) = oldest else { break };
        let take = queues[i][cursor[i]].1.min(budget);
        x[i] += take;
        budget -= take;
        cursor[i] += 1;
    }
    x
}

/// A scheduler: a policy and, for round robin, whose turn it is.
#[derive(Clone, Debug)]
pub struct Scheduler {
    policy: Discipline,
    next: usize,
}

impl Scheduler {
    /// A scheduler of `policy`.
    pub fn new(policy: Discipline) -> Self {
        Scheduler { policy, next: 0 }
    }

    /// The allocation of one interval's `budget` over `queues` (batches as in [`fifo`]).
    pub fn pick(&mut self, queues: &[Vec<(u64, usize)>], budget: usize) -> Vec<usize> {
        let backlogs = || queues.iter().map(|q| q.iter().map(|b| b.1).sum()).collect::<Vec<usize>>();
        match self.policy {
            Discipline::Lbf => lbf(&backlogs(), budget),
            Discipline::Rr => round_robin(&backlogs(), budget, &mut self.next),
            Discipline::Fifo => fifo(queues, budget),
        }
    }
}

/// What [`simulate`] measured.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Simulated {
    /// The largest backlog of any queue at the end of any slot: the paper's objective (2).
    pub max_backlog: usize,
    /// Per slot, the largest backlog at its end.
    pub max_per_slot: Vec<usize>,
}

/// The paper's slotted model (§4.1): in slot `t`, `arrivals[t][i]` tuples arrive at queue `i`,
/// then the scheduler takes `budget` tuples (the paper: 1) from the backlogs it sees, and
/// `B_i(t+1) = B_i(t) + a_i(t) − x_i(t)`. Under FIFO the tuples of one slot arrive in queue
/// order. Queues are unbounded here.
pub fn simulate(policy: Discipline, arrivals: &[Vec<usize>], budget: usize) -> Simulated {
    let n = arrivals.iter().map(Vec::len).max().unwrap_or(0);
    let mut queues: Vec<VecDeque<(u64, usize)>> = vec![VecDeque::new(); n];
    let mut scheduler = Scheduler::new(policy);
    let mut seq = 0u64;
    let mut max_per_slot = Vec::with_capacity(arrivals.len());
    for slot in arrivals {
        for (i, &a) in slot.iter().enumerate() {
            if a > 0 {
                queues[i].push_back((seq, a));
                seq += 1;
            }
        }
        let view: Vec<Vec<(u64, usize)>> = queues.iter().map(|q| q.iter().copied().collect()).collect();
        let x = scheduler.pick(&view, budget);
        for (q, mut take) in queues.iter_mut().zip(x) {
            while take > 0 {
                let head = q.front_mut().expect("an allocation within the backlog");
                let t = head.1.min(take);
                head.1 -= t;
                take -= t;
                if head.1 == 0 {
                    q.pop_front();
                }
            }
        }
        max_per_slot.push(queues.iter().map(|q| q.iter().map(|b| b.1).sum::<usize>()).max().unwrap_or(0));
    }
    Simulated { max_backlog: max_per_slot.iter().copied().max().unwrap_or(0), max_per_slot }
}

// ---------------------------------------------------------------------------------------------
// Metrics.

/// Live counters of one exchange.
#[derive(Default)]
pub struct ExchangeMetrics {
    /// `"producer -> consumer"`.
    pub(crate) name: String,
    pub(crate) hone: Option<Hone>,
    pub(crate) queues: usize,
    /// Scheduling intervals run.
    pub ticks: AtomicU64,
    /// Tuples the link carried.
    pub sent: AtomicU64,
    /// The largest backlog of any outgoing queue seen at a tick.
    pub max_backlog: AtomicU64,
    /// Sum over ticks of the backlogs of all queues.
    pub sum_backlog: AtomicU64,
    /// Sum over ticks of the largest queue's backlog.
    pub sum_max_backlog: AtomicU64,
    /// The largest backlog since the last [`ExchangeMetrics::take_window_max`].
    pub window_max: AtomicU64,
    /// Each outgoing queue's backlog at the last tick, by producer instance.
    pub backlogs: Vec<AtomicU64>,
}

impl ExchangeMetrics {
    /// The largest backlog seen since the last call (for a per-second time series).
    pub fn take_window_max(&self) -> u64 {
        self.window_max.swap(0, Ordering::Relaxed)
    }

    /// The counters now.
    pub fn snapshot(&self) -> ExchangeSnapshot {
        let ticks = self.ticks.load(Ordering::Relaxed);
        let per_tick = |sum: u64, per: usize| if ticks == 0 { 0.0 } else { sum as f64 / ticks as f64 / per as f64 };
        let hone = self.hone.clone().unwrap_or_else(|| Hone::lbf(Duration::from_millis(1)));
        ExchangeSnapshot {
            name: self.name.clone(),
            policy: hone.policy,
            tau_ms: hone.tau.as_secs_f64() * 1e3,
            capacity: hone.capacity,
            queues: self.queues,
            ticks,
            sent: self.sent.load(Ordering::Relaxed),
            max_backlog: self.max_backlog.load(Ordering::Relaxed),
            mean_backlog: per_tick(self.sum_backlog.load(Ordering::Relaxed), self.queues.max(1)),
            mean_max_backlog: per_tick(self.sum_max_backlog.load(Ordering::Relaxed), 1),
            backlogs: self.backlogs.iter().map(|b| b.load(Ordering::Relaxed)).collect(),
        }
    }
}

/// One exchange's counters, as a run reports them.
#[derive(Clone, Debug, Serialize)]
pub struct ExchangeSnapshot {
    /// `"producer -> consumer"` (logical operator names).
    pub name: String,
    /// Its scheduler.
    pub policy: Discipline,
    /// τ in ms.
    pub tau_ms: f64,
    /// Link capacity, tuples/s.
    pub capacity: u64,
    /// Outgoing queues (producer instances).
    pub queues: usize,
    /// Scheduling intervals run.
    pub ticks: u64,
    /// Tuples carried.
    pub sent: u64,
    /// The largest backlog (tuples) of any outgoing queue the scheduler saw at a tick.
    pub max_backlog: u64,
    /// The mean backlog of an outgoing queue at a tick.
    pub mean_backlog: f64,
    /// The mean over ticks of the largest queue's backlog (the paper's objective, averaged).
    pub mean_max_backlog: f64,
    /// Each outgoing queue's backlog at the last tick, by producer instance.
    pub backlogs: Vec<u64>,
}

// ---------------------------------------------------------------------------------------------
// The runtime.

struct Entry<T> {
    seq: u64,
    target: usize,
    message: Message<T>,
}

struct OutQueue<T> {
    entries: VecDeque<Entry<T>>,
    tuples: usize,
    /// Counts among its producer's full outputs now.
    full: bool,
}

struct LinkState<T> {
    queues: Vec<OutQueue<T>>,
    seq: u64,
}

/// The outgoing queues of all instances of one operator in front of a shared link.
pub struct Link<T> {
    state: Mutex<LinkState<T>>,
    producers: Vec<Arc<Signal>>,
    queue_capacity: usize,
}

impl<T: Send> Link<T> {
    /// A link in front of `producers` (one signal per producer instance), each with an outgoing
    /// queue of `queue_capacity` tuples.
    pub fn new(producers: Vec<Arc<Signal>>, queue_capacity: usize) -> Arc<Self> {
        let queues = producers.iter().map(|_| OutQueue { entries: VecDeque::new(), tuples: 0, full: false }).collect();
        Arc::new(Link {
            state: Mutex::new(LinkState { queues, seq: 0 }),
            producers,
            queue_capacity: queue_capacity.max(1),
        })
    }

    /// Tuples queued at each producer instance.
    pub fn backlogs(&self) -> Vec<usize> {
        lock(&self.state).queues.iter().map(|q| q.tuples).collect()
    }

    fn push(&self, producer: usize, target: usize, message: Message<T>) {
        let n = match &message {
            Message::Batch(b) => b.len(),
            _ => 0,
        };
        let mut state = lock(&self.state);
        let seq = state.seq;
        state.seq += 1;
        let q = &mut state.queues[producer];
        match (message, q.entries.back_mut()) {
            // Only the newest of consecutive watermarks to one consumer matters.
            (Message::Watermark(w), Some(Entry { target: t, message: Message::Watermark(last), .. }))
                if *t == target =>
            {
                *last = w
            }
            (message, _) => {
                q.tuples += n;
                q.entries.push_back(Entry { seq, target, message });
            }
        }
        if q.tuples >= self.queue_capacity && !q.full {
            q.full = true;
            self.producers[producer].hold();
        }
    }
}

/// What a producer instance's router sends into for one consumer instance of an exchange edge.
pub struct LinkSender<T> {
    link: Arc<Link<T>>,
    producer: usize,
    target: usize,
}

impl<T: Send> LinkSender<T> {
    /// The sender of producer instance `producer` (index among the link's producers) to consumer
    /// `target` (index among the link task's channels of that producer).
    pub fn new(link: Arc<Link<T>>, producer: usize, target: usize) -> Self {
        LinkSender { link, producer, target }
    }

    /// Queues `message` at the producer's outgoing queue, without waiting; when that fills the
    /// queue, the producer is blocked ([`Signal::is_blocked`]) until the link drains it to half.
    pub fn send(&self, message: Message<T>) -> Result<(), Closed> {
        self.link.push(self.producer, self.target, message);
        Ok(())
    }
}

/// The link: a task that every τ lets the scheduler pick which queued tuples cross, and sends
/// them on into the channels to the consumers.
pub struct LinkTask<T> {
    link: Arc<Link<T>>,
    /// Per producer, its channels to the consumers (the link is their producer).
    senders: Vec<Vec<Sender<T>>>,
    scheduler: Scheduler,
    tau_ns: u64,
    capacity: f64,
    /// Tuples the link may still send (fractions carry over between intervals).
    credit: f64,
    last_tick: u64,
    next_tick: u64,
    /// Ends passed on, and how many channels there are to end.
    ended: usize,
    channels: usize,
    signal: Arc<Signal>,
    metrics: Arc<ExchangeMetrics>,
}

impl<T: Send> LinkTask<T> {
    /// The link task over `link`, sending to `senders` (per producer, per consumer), woken by
    /// `signal` (the producer signal of those channels).
    pub fn new(
        link: Arc<Link<T>>,
        senders: Vec<Vec<Sender<T>>>,
        hone: &Hone,
        signal: Arc<Signal>,
        metrics: Arc<ExchangeMetrics>,
    ) -> Self {
        let now = now_ns();
        let tau_ns = (hone.tau.as_nanos() as u64).max(1);
        let channels = senders.iter().map(Vec::len).sum();
        LinkTask {
            link,
            senders,
            scheduler: Scheduler::new(hone.policy),
            tau_ns,
            capacity: hone.capacity as f64,
            credit: 0.0,
            last_tick: now,
            next_tick: now + tau_ns,
            ended: 0,
            channels,
            signal,
            metrics,
        }
    }

    /// One scheduling interval: returns what crossed, per producer, in queue order, and the
    /// producers whose queues drained to half (to wake).
    fn tick(&mut self, now: u64) -> (Vec<(usize, Entry<T>)>, Vec<usize>) {
        // A late tick (a busy machine) catches up at most two intervals: the link does not save
        // up capacity while it is held back.
        let dt = now.saturating_sub(self.last_tick).min(2 * self.tau_ns);
        self.credit =
            (self.credit + self.capacity * dt as f64 / 1e9).min(self.capacity * 2.0 * self.tau_ns as f64 / 1e9 + 1.0);
        let budget = self.credit.floor() as usize;
        let mut state = lock(&self.link.state);
        let view: Vec<Vec<(u64, usize)>> = state
            .queues
            .iter()
            .map(|q| {
                q.entries
                    .iter()
                    .filter_map(|e| match &e.message {
                        Message::Batch(b) => Some((e.seq, b.len())),
                        _ => None,
                    })
                    .collect()
            })
            .collect();
        let backlogs: Vec<usize> = state.queues.iter().map(|q| q.tuples).collect();
        let largest = backlogs.iter().copied().max().unwrap_or(0) as u64;
        let m = &self.metrics;
        m.ticks.fetch_add(1, Ordering::Relaxed);
        m.max_backlog.fetch_max(largest, Ordering::Relaxed);
        m.window_max.fetch_max(largest, Ordering::Relaxed);
        m.sum_backlog.fetch_add(backlogs.iter().sum::<usize>() as u64, Ordering::Relaxed);
        m.sum_max_backlog.fetch_add(largest, Ordering::Relaxed);
        for (gauge, &b) in m.backlogs.iter().zip(&backlogs) {
            gauge.store(b as u64, Ordering::Relaxed);
        }
        let alloc = self.scheduler.pick(&view, budget);
        let mut out = Vec::new();
        let mut wake = Vec::new();
        let mut sent = 0;
        for (i, (q, mut take)) in state.queues.iter_mut().zip(alloc).enumerate() {
            sent += take;
            while let Some(head) = q.entries.front_mut() {
                match &mut head.message {
                    Message::Batch(b) if take == 0 => {
                        if b.is_empty() {
                            q.entries.pop_front();
                            continue;
                        }
                        break;
                    }
                    Message::Batch(b) if b.len() > take => {
                        let part: Vec<_> = b.drain(..take).collect();
                        q.tuples -= take;
                        out.push((i, Entry { seq: head.seq, target: head.target, message: Message::Batch(part) }));
                        take = 0;
                    }
                    Message::Batch(b) => {
                        take -= b.len();
                        q.tuples -= b.len();
                        out.push((i, q.entries.pop_front().expect("a head")));
                    }
                    // Watermarks and ends cost nothing; they leave in order behind the tuples.
                    _ => out.push((i, q.entries.pop_front().expect("a head"))),
                }
            }
            if q.full && q.tuples <= self.link.queue_capacity / 2 {
                q.full = false;
                if self.link.producers[i].release() {
                    wake.push(i);
                }
            }
        }
        let empty = state.queues.iter().all(|q| q.tuples == 0);
        drop(state);
        m.sent.fetch_add(sent as u64, Ordering::Relaxed);
        self.credit -= sent as f64;
        if empty {
            // An idle link does not save up what it did not use.
            self.credit -= self.credit.floor();
        }
        (out, wake)
    }
}

impl<T: Send> Task for LinkTask<T> {
    fn step(&mut self) -> Step {
        if self.signal.is_blocked() {
            return Step::Blocked;
        }
        let now = now_ns();
        if now < self.next_tick {
            return Step::Idle { until: Some(self.next_tick) };
        }
        let (out, wake) = self.tick(now);
        for (i, entry) in out {
            if matches!(entry.message, Message::End) {
                self.ended += 1;
            }
            // A closed channel means the engine is aborting; what was in flight is dropped.
            let _ = self.senders[i][entry.target].send(entry.message);
        }
        for i in wake {
            self.link.producers[i].notify();
        }
        self.last_tick = now;
        self.next_tick = now + self.tau_ns;
        if self.ended >= self.channels {
            return Step::Finished;
        }
        if self.signal.is_blocked() {
            return Step::Blocked;
        }
        Step::Idle { until: Some(self.next_tick) }
    }

    fn has_input(&self) -> bool {
        // The link runs on its clock: it wakes at the next tick, never for an arrival.
        false
    }

    fn signal(&self) -> &Arc<Signal> {
        &self.signal
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn lbf_cuts_the_largest_down_first() {
        // 5,1,3 -> 4,1,3 -> 3,1,3 -> (a tie: the lower index) 2,1,3.
        assert_eq!(lbf(&[5, 1, 3], 3), vec![3, 0, 0]);
        assert_eq!(lbf(&[5, 1, 3], 100), vec![5, 1, 3]);
        assert_eq!(lbf(&[0, 0], 4), vec![0, 0]);
        assert_eq!(lbf(&[2, 2, 2], 2), vec![1, 1, 0]);
    }

    #[test]
    fn round_robin_keeps_its_turn() {
        let mut next = 0;
        assert_eq!(round_robin(&[5, 0, 5], 3, &mut next), vec![2, 0, 1]);
        assert_eq!(next, 1);
        assert_eq!(round_robin(&[3, 0, 4], 1, &mut next), vec![0, 0, 1]);
        assert_eq!(next, 0);
    }

    #[test]
    fn fifo_follows_sequence_numbers() {
        let q = vec![vec![(0, 2), (3, 5)], vec![(1, 4)], vec![(2, 1)]];
        assert_eq!(fifo(&q, 7), vec![2, 4, 1]);
        assert_eq!(fifo(&q, 9), vec![4, 4, 1]);
        assert_eq!(fifo(&q, 100), vec![7, 4, 1]);
    }

    #[test]
    fn settings_are_checked() {
        let tau = Duration::from_millis(10);
        assert!(Hone::lbf(tau).capacity(1000).validate().is_ok());
        assert!(Hone::lbf(tau).validate().unwrap_err().to_string().contains("capacity"));
        assert!(Hone::rr(Duration::ZERO).capacity(5).validate().unwrap_err().to_string().contains("tau"));
        assert!("lbfx".parse::<Discipline>().is_err());
    }
}

//! Tuples and the engine clock.
//!
//! Every tuple carries, besides its data, three instants on the engine clock (nanoseconds since
//! the process first read it):
//!
//! - `event_ns`: event time, what windows and joins order by. A source sets it (by default equal
//!   to the intended send time).
//! - `intended_ns`: when the external source *intended* to send the tuple. An open-loop source
//!   computes it from its rate, not from when it got round to sending, so a slow engine cannot hide
//!   its own delay (end-to-end latency = egress − intended).
//! - `ingress_ns`: when the tuple entered the engine (processing latency = egress − ingress).

use std::cell::Cell;
use std::sync::OnceLock;
use std::time::Instant;

/// Anything that can flow through a stream: moved between threads, copied to several consumers.
pub trait Data: Clone + Send + 'static {}
impl<T: Clone + Send + 'static> Data for T {}

/// One tuple of a stream: the data and its timestamps.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Tuple<T> {
    /// Event time in nanoseconds on the engine clock (or the source's own time axis).
    pub event_ns: u64,
    /// When the external source intended to send this tuple.
    pub intended_ns: u64,
    /// When this tuple (or the input it was derived from) entered the engine.
    pub ingress_ns: u64,
    /// The payload.
    pub data: T,
}

impl<T> Tuple<T> {
    /// A tuple with all three timestamps equal to `now_ns`.
    pub fn at(now_ns: u64, data: T) -> Self {
        Tuple { event_ns: now_ns, intended_ns: now_ns, ingress_ns: now_ns, data }
    }

    /// The same timestamps, other data: what `map` and most operators emit.
    #[inline]
    pub fn with<U>(&self, data: U) -> Tuple<U> {
        Tuple { event_ns: self.event_ns, intended_ns: self.intended_ns, ingress_ns: self.ingress_ns, data }
    }
}

fn epoch() -> Instant {
    static EPOCH: OnceLock<Instant> = OnceLock::new();
    *EPOCH.get_or_init(Instant::now)
}

/// Now, on the engine clock: nanoseconds since the process first read the clock (monotonic).
#[inline]
pub fn now_ns() -> u64 {
    epoch().elapsed().as_nanos() as u64
}

thread_local! {
    /// The engine clock as the operator step this thread runs began, while a pool worker steps
    /// one ([`set_step_clock`]).
    static STEP_CLOCK: Cell<Option<u64>> = const { Cell::new(None) };
}

/// A pool worker says when the step it is about to run began (`Some`), or that it runs none
/// (`None`). The worker reads the clock once per turn anyway (to charge CPU time), so stamping
/// the batches a step sends with this reading saves a clock reading (~25 ns) per hand-off.
pub(crate) fn set_step_clock(ns: Option<u64>) {
    STEP_CLOCK.with(|c| c.set(ns));
}

/// Now, or when the calling thread's current step began: for stamps that may be a step late and
/// are read in milliseconds (when a batch was queued, for the age of a channel's head). Outside a
/// pool worker's step (a dedicated thread), the clock.
#[inline]
pub(crate) fn step_now_ns() -> u64 {
    STEP_CLOCK.with(Cell::get).unwrap_or_else(now_ns)
}

/// Converts an instant on the engine clock back to a [`std::time::Instant`].
pub fn instant_of(ns: u64) -> Instant {
    epoch() + std::time::Duration::from_nanos(ns)
}

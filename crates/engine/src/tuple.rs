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

/// Converts an instant on the engine clock back to a [`std::time::Instant`].
pub fn instant_of(ns: u64) -> Instant {
    epoch() + std::time::Duration::from_nanos(ns)
}

//! The bounded channels between operators: each holds up to `channel_capacity` tuples, stamped
//! with their intended send time, ingress time and queueing time. A channel with no free slot
//! stops its producer (backpressure); a tuple's copies may overshoot it, as the engine's sends do.

use std::collections::VecDeque;

use crate::event::Nanos;

/// A tuple in a channel.
#[derive(Clone, Copy, Debug)]
pub(crate) struct Stamp {
    /// Intended send time.
    pub sent: Nanos,
    /// When a source took it in.
    pub ingress: Nanos,
    /// When it was queued in this channel.
    pub queued: Nanos,
}

/// A bounded channel between two operators (indices into the simulation's operators).
pub(crate) struct Channel {
    pub queue: VecDeque<Stamp>,
    /// Slots promised to steps in progress.
    pub reserved: usize,
    pub capacity: usize,
    pub from: usize,
    pub to: usize,
    pub pushed: u64,
    pub popped: u64,
}

impl Channel {
    /// Slots neither taken nor promised.
    pub(super) fn free(&self) -> usize {
        self.capacity.saturating_sub(self.queue.len() + self.reserved)
    }
}

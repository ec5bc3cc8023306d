//! The runtime of a physical operator: reading its input channels, tracking watermarks and the
//! end of the stream, firing timers, flushing when idle. Threading models drive tasks through
//! [`Task::step`]; they never see types or channels.

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;

use smallvec::SmallVec;

use crate::executor::ahead::{boxed_lines, spilled_lines};
use crate::metrics::OperatorMetrics;
use crate::operator::{Input, TwoInput};
use crate::sync::channel::{Message, Received, Receiver};
use crate::sync::Signal;
use crate::tuple::{now_ns, Tuple};

/// What one step of a task achieved.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Step {
    /// It moved data; step again.
    Worked,
    /// Nothing to do until an input arrives or, if given, this instant (a timer, a source's next
    /// send time).
    Idle {
        /// When to step again even if no input arrives, on the engine clock.
        until: Option<u64>,
    },
    /// Some output channel is full: do not step it again until its [`Signal`] is notified and
    /// [`Signal::is_blocked`] is false (the consumer drained the channel). What the step
    /// produced is already in the channels; nothing waits inside the task.
    Blocked,
    /// Its input has ended and it has passed the end on.
    Finished,
}

/// A physical operator, ready to run on any thread.
///
/// A step never blocks: sending into a full channel enqueues and marks the task blocked. A
/// threading model steps a task only while [`Signal::is_blocked`] is false, and only on one
/// thread at a time.
pub trait Task: Send {
    /// Runs one round: at most one message per input channel (a batch of a source), then timers,
    /// then a flush if no input is left queued.
    fn step(&mut self) -> Step;
    /// True if some input channel holds a message (checked before the thread sleeps).
    fn has_input(&self) -> bool;
    /// What wakes the task: its input channels, or a source's stop request.
    fn signal(&self) -> &Arc<Signal>;
    /// Adds the addresses of the memory apart from the task itself that a step touches first
    /// (its ports' and chain's allocations), for a pool to prefetch before it runs the task.
    fn touched(&self, _at: &mut Vec<usize>) {}
}

/// Watermarks and ends of the channels into one task (up to two inside the task itself).
#[derive(Debug)]
pub(crate) struct Progress {
    watermarks: SmallVec<[u64; 2]>,
    ended: SmallVec<[bool; 2]>,
    open: usize,
    current: u64,
}

impl Progress {
    pub(crate) fn new(channels: usize) -> Self {
        Progress {
            watermarks: smallvec::smallvec![0; channels],
            ended: smallvec::smallvec![false; channels],
            open: channels,
            current: 0,
        }
    }

    fn combined(&self) -> u64 {
        let open = self.watermarks.iter().zip(self.ended.iter()).filter(|&(_, &ended)| !ended);
        open.map(|(&w, _)| w).min().unwrap_or(u64::MAX)
    }

    /// Records a watermark of channel `c`; returns the task's watermark if it advanced.
    pub(crate) fn watermark(&mut self, c: usize, w: u64) -> Option<u64> {
        self.watermarks[c] = self.watermarks[c].max(w);
        self.advance()
    }

    /// Records the end of channel `c`; returns the task's watermark if it advanced.
    pub(crate) fn end(&mut self, c: usize) -> Option<u64> {
        if !self.ended[c] {
            self.ended[c] = true;
            self.open -= 1;
        }
        // When the last channel ends the watermark is not advanced to infinity here: `finish`
        // tells operators to flush everything.
        if self.open == 0 {
            None
        } else {
            self.advance()
        }
    }

    fn advance(&mut self) -> Option<u64> {
        let w = self.combined();
        (w > self.current).then(|| {
            self.current = w;
            w
        })
    }

    pub(crate) fn all_ended(&self) -> bool {
        self.open == 0
    }
}

/// The channels of one input port (one inside the port itself: at a low rate a tuple crosses a
/// long pipeline, and every allocation of an operator's own is one more cache line to fetch).
pub(crate) struct Port<T> {
    /// Per channel, its receiving end and the emptied vector of its last batch, handed back with
    /// the next receive (side by side: one sequence to walk per step).
    channels: SmallVec<[(Receiver<T>, Option<Vec<Tuple<T>>>); 1]>,
    /// Index of the first of these channels in the task's [`Progress`].
    base: usize,
}

/// What a port hands to its task.
enum Event<'a, T> {
    Batch(&'a mut Vec<Tuple<T>>),
    Watermark(u64),
}

/// What a poll of a port brought.
#[derive(Default)]
struct Polled {
    tuples: usize,
    /// Some channel still holds a message after this poll.
    more: bool,
}

impl Polled {
    fn and(self, other: Polled) -> Polled {
        Polled { tuples: self.tuples + other.tuples, more: self.more || other.more }
    }
}

impl<T: Send> Port<T> {
    pub(crate) fn new(receivers: Vec<Receiver<T>>, base: usize) -> Self {
        Port { channels: receivers.into_iter().map(|rx| (rx, None)).collect(), base }
    }

    /// Takes at most one message from each channel (a batch with the watermark behind it) and
    /// hands on, in channel order, each batch and each watermark that advances the task's.
    fn poll(&mut self, progress: &mut Progress, mut on: impl FnMut(Event<'_, T>)) -> Polled {
        let mut polled = Polled::default();
        for (i, (rx, spare)) in self.channels.iter_mut().enumerate() {
            let Some(Received { message, watermark, more }) = rx.try_recv_giving_back(spare) else { continue };
            polled.more |= more;
            let advanced = match message {
                Message::Batch(mut batch) => {
                    polled.tuples += batch.len();
                    on(Event::Batch(&mut batch));
                    // Drained by the chain; what a chain left in it is not handed on twice.
                    batch.clear();
                    *spare = Some(batch);
                    // The watermark that followed the batch, taken with it.
                    watermark.and_then(|w| progress.watermark(self.base + i, w))
                }
                Message::Watermark(w) => progress.watermark(self.base + i, w),
                Message::End => progress.end(self.base + i),
            };
            if let Some(w) = advanced {
                on(Event::Watermark(w));
            }
        }
        polled
    }

    fn has_input(&self) -> bool {
        self.channels.iter().any(|(rx, _)| rx.is_ready())
    }

    #[cold]
    fn touched(&self, at: &mut Vec<usize>) {
        spilled_lines(at, &self.channels);
    }
}

impl Progress {
    #[cold]
    fn touched(&self, at: &mut Vec<usize>) {
        spilled_lines(at, &self.watermarks);
        spilled_lines(at, &self.ended);
    }
}

/// The chain's memory: its head and what the head reaches.
#[cold]
fn chain_touched(head: &dyn crate::operator::Control, at: &mut Vec<usize>) {
    boxed_lines(at, head);
    head.touched(at);
}

/// Fires due timers; then, if no input is left queued, flushes and says until when to sleep.
/// A task whose outputs are full does neither: it reports [`Step::Blocked`].
///
/// A step that took the last queued messages flushes at once instead of stepping again to find
/// the input empty: at a low rate a tuple crosses each operator in one step, and a partial batch
/// goes on as soon as the producer has nothing more to add to it. The chain's timers are asked
/// once (a flush sets none: [`crate::operator::Control::flush`]).
fn finish_step(head: &mut dyn crate::operator::Control, polled: &Polled, signal: &Signal) -> Step {
    if signal.is_blocked() {
        return Step::Blocked;
    }
    let timer = head.next_timer();
    if let Some(t) = timer {
        let now = now_ns();
        if t <= now {
            head.tick(now);
            return Step::Worked;
        }
    }
    if polled.more {
        return Step::Worked;
    }
    head.flush();
    Step::Idle { until: timer }
}

/// A physical operator whose chain starts with a one-input operator or a sink.
pub(crate) struct OneInputTask<T> {
    pub(crate) port: Port<T>,
    pub(crate) head: Box<dyn Input<T>>,
    pub(crate) progress: Progress,
    pub(crate) signal: Arc<Signal>,
    pub(crate) metrics: Arc<OperatorMetrics>,
}

impl<T: Send> Task for OneInputTask<T> {
    fn step(&mut self) -> Step {
        let head = &mut self.head;
        let polled = self.port.poll(&mut self.progress, |event| match event {
            Event::Batch(b) => head.push_batch(b),
            Event::Watermark(w) => head.watermark(w),
        });
        OperatorMetrics::add(&self.metrics.tuples_in, polled.tuples);
        if self.progress.all_ended() {
            self.head.finish();
            return Step::Finished;
        }
        finish_step(&mut *self.head, &polled, &self.signal)
    }

    fn has_input(&self) -> bool {
        self.port.has_input()
    }

    fn signal(&self) -> &Arc<Signal> {
        &self.signal
    }

    #[cold]
    fn touched(&self, at: &mut Vec<usize>) {
        self.port.touched(at);
        self.progress.touched(at);
        chain_touched(&*self.head, at);
    }
}

/// A physical operator whose chain starts with a two-input operator.
pub(crate) struct TwoInputTask<L, R> {
    pub(crate) left: Port<L>,
    pub(crate) right: Port<R>,
    pub(crate) head: Box<dyn TwoInput<L, R>>,
    pub(crate) progress: Progress,
    pub(crate) signal: Arc<Signal>,
    pub(crate) metrics: Arc<OperatorMetrics>,
}

impl<L: Send, R: Send> Task for TwoInputTask<L, R> {
    fn step(&mut self) -> Step {
        let (head, mut watermark) = (&mut self.head, None);
        let left = self.left.poll(&mut self.progress, |event| match event {
            Event::Batch(b) => head.push_left(b),
            Event::Watermark(w) => watermark = Some(w),
        });
        let right = self.right.poll(&mut self.progress, |event| match event {
            Event::Batch(b) => head.push_right(b),
            Event::Watermark(w) => watermark = Some(w),
        });
        let polled = left.and(right);
        OperatorMetrics::add(&self.metrics.tuples_in, polled.tuples);
        if self.progress.all_ended() {
            self.head.finish();
            return Step::Finished;
        }
        // Watermarks are delivered after both ports were read: later is always safe, and the
        // combined watermark is the minimum over the channels of both ports.
        if let Some(w) = watermark {
            self.head.watermark(w);
        }
        finish_step(&mut *self.head, &polled, &self.signal)
    }

    fn has_input(&self) -> bool {
        self.left.has_input() || self.right.has_input()
    }

    fn signal(&self) -> &Arc<Signal> {
        &self.signal
    }

    #[cold]
    fn touched(&self, at: &mut Vec<usize>) {
        self.left.touched(at);
        self.right.touched(at);
        self.progress.touched(at);
        chain_touched(&*self.head, at);
    }
}

/// Asks sources to stop gracefully: each finishes its current batch and sends the end of the
/// stream, which then drains the whole query.
#[derive(Default)]
pub struct StopFlag {
    stop: AtomicBool,
    signals: std::sync::Mutex<Vec<Arc<Signal>>>,
}

impl StopFlag {
    pub(crate) fn register(&self, signal: Arc<Signal>) {
        crate::sync::lock(&self.signals).push(signal);
    }

    /// Requests the stop and wakes sleeping sources.
    pub fn request(&self) {
        self.stop.store(true, Ordering::SeqCst);
        for s in crate::sync::lock(&self.signals).iter() {
            s.notify();
        }
    }

    /// True once requested.
    pub fn is_requested(&self) -> bool {
        self.stop.load(Ordering::Relaxed)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::sync::channel::channel;

    fn port_of(channels: usize) -> Port<u64> {
        let rx = (0..channels)
            .map(|_| channel::<u64>(16, Arc::new(Signal::default()), Arc::new(Signal::default())).1)
            .collect();
        Port::new(rx, 0)
    }

    #[test]
    fn one_channel_in_keeps_the_port_and_progress_inside_the_task() {
        // A pipeline's operator: nothing of its port or progress has an allocation of its own,
        // so it adds no line for a pool to hint.
        let (port, progress) = (port_of(1), Progress::new(1));
        assert!(!port.channels.spilled());
        assert!(!progress.watermarks.spilled() && !progress.ended.spilled());
        let mut at = Vec::new();
        port.touched(&mut at);
        progress.touched(&mut at);
        assert!(at.is_empty(), "{at:?}");
        // A join's two channels still fit the progress; a port of three spills, and its
        // allocations are hinted.
        assert!(!Progress::new(2).watermarks.spilled());
        let (port, progress) = (port_of(3), Progress::new(3));
        port.touched(&mut at);
        progress.touched(&mut at);
        let line = |p: usize| p / 64 * 64;
        for first in
            [port.channels.as_ptr() as usize, progress.watermarks.as_ptr() as usize, progress.ended.as_ptr() as usize]
        {
            assert!(at.contains(&line(first)), "{first:#x} among {at:x?}");
        }
    }
}

//! The operator interface, and how operators are fused into chains.
//!
//! A user writes an [`Operator`] (or a [`TwoInputOperator`]): it sees tuples, watermarks,
//! processing-time timers and the end of its input, and emits through an [`Output`]. It never
//! touches a channel or a thread; the runtime owns execution.
//!
//! At run time a physical operator is a *chain*: each fused logical operator is a [`Link`] that
//! processes a batch and hands its output batch to the next link, and the last link hands it to
//! a router (to channels) or is a sink. Every link is an [`Input`].

use std::marker::PhantomData;

use crate::executor::ahead::{boxed_lines, heap_lines};
use crate::tuple::Tuple;

/// Everything a chain element receives besides tuples.
pub trait Control: Send {
    /// Event time has advanced: no tuple with `event_ns < watermark` follows.
    fn watermark(&mut self, watermark: u64);
    /// Processing time has advanced to `now_ns`: fire timers that are due.
    fn tick(&mut self, now_ns: u64);
    /// The earliest processing-time timer of this element or any downstream in the chain.
    fn next_timer(&self) -> Option<u64>;
    /// The producer is idle: send partial batches on so latency stays low. Sets or moves no
    /// timer ([`Control::next_timer`] answers the same after it).
    fn flush(&mut self);
    /// The input has ended: emit what is held, then pass the end on.
    fn finish(&mut self);
    /// Adds the addresses of the memory apart from the element itself that handing it a batch
    /// touches first (what it owns on the heap and the elements after it), for a pool to prefetch.
    fn touched(&self, _at: &mut Vec<usize>) {}
}

/// A chain element that takes tuples of type `T`.
pub trait Input<T>: Control {
    /// Processes `batch` and leaves it empty. The vector may be traded for another (one with
    /// room where there is one) instead of drained: a router can keep or send it as it is.
    fn push_batch(&mut self, batch: &mut Vec<Tuple<T>>);
}

/// Where an operator emits its tuples.
pub struct Output<'a, T> {
    buffer: &'a mut Vec<Tuple<T>>,
}

impl<T> Output<'_, T> {
    /// Emits a tuple. To keep the input's timestamps, build it with [`Tuple::with`].
    #[inline]
    pub fn emit(&mut self, tuple: Tuple<T>) {
        self.buffer.push(tuple);
    }
}

/// A one-input operator.
pub trait Operator<In, Out>: Send + 'static {
    /// Processes one tuple.
    fn process(&mut self, tuple: Tuple<In>, out: &mut Output<'_, Out>);
    /// Event time advanced (after all tuples before the watermark were processed).
    fn on_watermark(&mut self, _watermark: u64, _out: &mut Output<'_, Out>) {}
    /// Processing time reached `now_ns`, at or after [`Operator::next_timer`].
    fn on_timer(&mut self, _now_ns: u64, _out: &mut Output<'_, Out>) {}
    /// When this operator next wants [`Operator::on_timer`], on the engine clock.
    fn next_timer(&self) -> Option<u64> {
        None
    }
    /// The input ended; emit what is still held.
    fn on_end(&mut self, _out: &mut Output<'_, Out>) {}
}

/// A two-input operator (joins, co-processing). Both inputs run on one thread, so the state needs
/// no locking.
pub trait TwoInputOperator<L, R, Out>: Send + 'static {
    /// Processes one tuple of the left input (port 0).
    fn process_left(&mut self, tuple: Tuple<L>, out: &mut Output<'_, Out>);
    /// Processes one tuple of the right input (port 1).
    fn process_right(&mut self, tuple: Tuple<R>, out: &mut Output<'_, Out>);
    /// Event time advanced on both inputs (the minimum of the two).
    fn on_watermark(&mut self, _watermark: u64, _out: &mut Output<'_, Out>) {}
    /// Both inputs ended.
    fn on_end(&mut self, _out: &mut Output<'_, Out>) {}
}

/// A fused operator: runs `op` and hands its output to `down`.
pub struct Link<Op, In, Out> {
    op: Op,
    buffer: Vec<Tuple<Out>>,
    down: Box<dyn Input<Out>>,
    _input: PhantomData<fn(In)>,
}

impl<Op, In, Out> Link<Op, In, Out> {
    /// Fuses `op` in front of `down`.
    pub fn new(op: Op, down: Box<dyn Input<Out>>) -> Self {
        Link { op, buffer: Vec::new(), down, _input: PhantomData }
    }

    /// Runs `f` with an output into the buffer, then hands the buffer on.
    #[inline]
    fn emit_with(&mut self, f: impl FnOnce(&mut Op, &mut Output<'_, Out>)) {
        f(&mut self.op, &mut Output { buffer: &mut self.buffer });
        if !self.buffer.is_empty() {
            self.down.push_batch(&mut self.buffer);
        }
    }
}

impl<In, Out: Send, Op: Operator<In, Out>> Input<In> for Link<Op, In, Out> {
    fn push_batch(&mut self, batch: &mut Vec<Tuple<In>>) {
        self.emit_with(|op, out| batch.drain(..).for_each(|t| op.process(t, out)));
    }
}

impl<In, Out: Send, Op: Operator<In, Out>> Control for Link<Op, In, Out> {
    fn watermark(&mut self, watermark: u64) {
        self.emit_with(|op, out| op.on_watermark(watermark, out));
        self.down.watermark(watermark);
    }
    fn tick(&mut self, now_ns: u64) {
        if self.op.next_timer().is_some_and(|t| t <= now_ns) {
            self.emit_with(|op, out| op.on_timer(now_ns, out));
        }
        self.down.tick(now_ns);
    }
    fn next_timer(&self) -> Option<u64> {
        match (self.op.next_timer(), self.down.next_timer()) {
            (Some(a), Some(b)) => Some(a.min(b)),
            (a, b) => a.or(b),
        }
    }
    fn flush(&mut self) {
        self.down.flush();
    }
    fn finish(&mut self) {
        self.emit_with(|op, out| op.on_end(out));
        self.down.finish();
    }
    #[cold]
    fn touched(&self, at: &mut Vec<usize>) {
        heap_lines(at, &self.buffer);
        boxed_lines(at, &*self.down);
        self.down.touched(at);
    }
}

/// A two-input operator and its downstream: the head of a two-input physical operator.
pub struct TwoInputLink<Op, L, R, Out> {
    op: Op,
    buffer: Vec<Tuple<Out>>,
    down: Box<dyn Input<Out>>,
    _inputs: PhantomData<fn(L, R)>,
}

impl<Op, L, R, Out> TwoInputLink<Op, L, R, Out> {
    /// Puts `op` in front of `down`.
    pub fn new(op: Op, down: Box<dyn Input<Out>>) -> Self {
        TwoInputLink { op, buffer: Vec::new(), down, _inputs: PhantomData }
    }

    fn emit_with(&mut self, f: impl FnOnce(&mut Op, &mut Output<'_, Out>)) {
        f(&mut self.op, &mut Output { buffer: &mut self.buffer });
        if !self.buffer.is_empty() {
            self.down.push_batch(&mut self.buffer);
        }
    }
}

/// The head of a two-input chain, as its task drives it.
pub trait TwoInput<L, R>: Control {
    /// A batch of the left input.
    fn push_left(&mut self, batch: &mut Vec<Tuple<L>>);
    /// A batch of the right input.
    fn push_right(&mut self, batch: &mut Vec<Tuple<R>>);
}

impl<L, R, Out: Send, Op: TwoInputOperator<L, R, Out>> TwoInput<L, R> for TwoInputLink<Op, L, R, Out> {
    fn push_left(&mut self, batch: &mut Vec<Tuple<L>>) {
        self.emit_with(|op, out| batch.drain(..).for_each(|t| op.process_left(t, out)));
    }
    fn push_right(&mut self, batch: &mut Vec<Tuple<R>>) {
        self.emit_with(|op, out| batch.drain(..).for_each(|t| op.process_right(t, out)));
    }
}

impl<L, R, Out: Send, Op: TwoInputOperator<L, R, Out>> Control for TwoInputLink<Op, L, R, Out> {
    fn watermark(&mut self, watermark: u64) {
        self.emit_with(|op, out| op.on_watermark(watermark, out));
        self.down.watermark(watermark);
    }
    fn tick(&mut self, now_ns: u64) {
        self.down.tick(now_ns);
    }
    fn next_timer(&self) -> Option<u64> {
        self.down.next_timer()
    }
    fn flush(&mut self) {
        self.down.flush();
    }
    fn finish(&mut self) {
        self.emit_with(|op, out| op.on_end(out));
        self.down.finish();
    }
    #[cold]
    fn touched(&self, at: &mut Vec<usize>) {
        heap_lines(at, &self.buffer);
        boxed_lines(at, &*self.down);
        self.down.touched(at);
    }
}

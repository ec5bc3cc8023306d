//! The code of a logical operator with its types erased ([`NodeCode`], [`OutputCode`]): what
//! the query API records for each operator and the engine instantiates for each physical
//! operator — its tasks, chained links, channels, routers and Hone links.

use std::marker::PhantomData;
use std::sync::Arc;

use crate::cursor::{Cursor, SourceCursor};
use crate::erase::{down, input, AnyBox, AnyShared, TYPES};
use crate::exchange::{self, ExchangeMetrics, Hone, LinkSender, LinkTask};
use crate::graph::{LogicalEdge, LogicalNode, Partitioning};
use crate::metrics::{OperatorMetrics, SinkMetrics};
use crate::offered::Offered;
use crate::operator::{Input, Link, Operator, TwoInputLink, TwoInputOperator};
use crate::router::{KeyHash, Out, Route, Router};
use crate::sink::{SinkFn, SinkInput};
use crate::source::{Source, SourceTask};
use crate::sync::channel::{channel, Observe, Receiver, Sender};
use crate::sync::Signal;
use crate::task::{OneInputTask, Port, Progress, StopFlag, Task, TwoInputTask};
use crate::tuple::Data;
use crate::window::Window;
use crate::wire::WireCode;

/// What a logical operator is, as far as micro-batch execution cares.
#[derive(Clone, Copy, Debug, PartialEq)]
pub(crate) enum Role {
    Source,
    /// `map`, `filter` or `flat_map`.
    Stateless(&'static str),
    /// A custom one-input [`crate::Operator`].
    Process,
    Union,
    Window(Window),
    /// A keyed `process` or `operator`: per-key state in user code.
    Keyed(&'static str),
    Join,
    Sink,
}

/// What a node's code needs to instantiate itself for one physical operator.
pub(crate) struct InstanceContext {
    pub(crate) instance: usize,
    pub(crate) parallelism: usize,
    pub(crate) batch_size: usize,
    pub(crate) metrics: Arc<OperatorMetrics>,
    pub(crate) sink: Option<Arc<SinkMetrics>>,
    pub(crate) signal: Arc<Signal>,
    pub(crate) stop: Arc<StopFlag>,
    pub(crate) ramp: Option<(f64, std::time::Duration)>,
    /// The common start of the instances of this physical operator's head, when it is a source
    /// of parallelism > 1 (one cell per logical operator).
    pub(crate) source_start: Option<Arc<std::sync::atomic::AtomicU64>>,
    /// A source's timer slack ([`crate::slack`]), ns.
    pub(crate) source_slack_ns: u64,
}

/// The code of a logical operator, with its types erased.
pub(crate) trait NodeCode: Send {
    /// This operator as a link in front of `down` (a `Box<dyn Input<Out>>`, none for a sink);
    /// returns a `Box<dyn Input<In>>`.
    fn link(&self, ctx: &InstanceContext, down: Option<AnyBox>) -> AnyBox;
    /// This operator as the head of a physical operator, reading `receivers` (per input port, a
    /// `Receiver<In>` each).
    fn task(&self, ctx: &InstanceContext, receivers: Vec<Vec<AnyBox>>, down: Option<AnyBox>) -> Box<dyn Task>;
    /// The rate a source offers (none for other operators).
    fn offered(&self) -> Option<Offered> {
        None
    }
    /// A source as the head of a micro-batch map task feeding `head` (a `Box<dyn Input<Out>>`);
    /// none for other operators.
    fn source_cursor(&self, _instance: usize, _parallelism: usize, _head: AnyBox) -> Option<Box<dyn SourceCursor>> {
        None
    }
}

/// A route being assembled: partitioning, key hash and a `Sender<T>` per consumer instance.
pub(crate) struct RouteParts {
    pub(crate) partitioning: Partitioning,
    pub(crate) key_hash: Option<AnyShared>,
    pub(crate) senders: Vec<AnyBox>,
}

/// The output side of a logical operator: channels and routers of its output type.
pub(crate) trait OutputCode: Send {
    /// A channel of the output type: `(Sender<Out>, Receiver<Out>, observer)`.
    fn channel(
        &self,
        capacity: usize,
        consumer: Arc<Signal>,
        producer: Arc<Signal>,
    ) -> (AnyBox, AnyBox, Arc<dyn Observe>);
    /// A router over `routes`: a `Box<dyn Input<Out>>`.
    fn router(&self, routes: Vec<RouteParts>, batch_size: usize, metrics: Arc<OperatorMetrics>) -> AnyBox;
    /// A Hone exchange in front of `senders` (per producer instance, a `Sender<Out>` per consumer
    /// instance): per producer its route targets (`Out<Out>` each), and the link's task.
    fn exchange(
        &self,
        hone: &Hone,
        queue_capacity: usize,
        producers: Vec<Arc<Signal>>,
        senders: Vec<Vec<AnyBox>>,
        signal: Arc<Signal>,
        metrics: Arc<ExchangeMetrics>,
    ) -> (Vec<Vec<AnyBox>>, Box<dyn Task>);
}

fn receivers<T: 'static>(rx: Vec<AnyBox>) -> Vec<Receiver<T>> {
    rx.into_iter().map(|r| *r.downcast::<Receiver<T>>().expect(TYPES)).collect()
}

fn one_input_task<T: Data>(ctx: &InstanceContext, mut rx: Vec<Vec<AnyBox>>, head: Box<dyn Input<T>>) -> Box<dyn Task> {
    let rx = receivers::<T>(rx.pop().unwrap_or_default());
    Box::new(OneInputTask {
        progress: Progress::new(rx.len()),
        port: Port::new(rx, 0),
        head,
        signal: ctx.signal.clone(),
        metrics: ctx.metrics.clone(),
    })
}

pub(crate) struct Typed<T>(pub(crate) PhantomData<fn() -> T>);

impl<T: Data> OutputCode for Typed<T> {
    fn channel(
        &self,
        capacity: usize,
        consumer: Arc<Signal>,
        producer: Arc<Signal>,
    ) -> (AnyBox, AnyBox, Arc<dyn Observe>) {
        let (tx, rx) = channel::<T>(capacity, consumer, producer);
        let observer = rx.observer();
        (Box::new(tx), Box::new(rx), observer)
    }

    fn router(&self, routes: Vec<RouteParts>, batch_size: usize, metrics: Arc<OperatorMetrics>) -> AnyBox {
        let routes = routes
            .into_iter()
            .map(|r| {
                let key_hash = r.key_hash.map(|k| k.downcast_ref::<KeyHash<T>>().expect(TYPES).clone());
                let senders = r
                    .senders
                    .into_iter()
                    .map(|s| match s.downcast::<Sender<T>>() {
                        Ok(s) => Out::Channel(*s),
                        Err(s) => *s.downcast::<Out<T>>().expect(TYPES),
                    })
                    .collect();
                Route::with_outs(r.partitioning, key_hash, senders)
            })
            .collect();
        input::<T>(Box::new(Router::new(routes, batch_size, metrics)))
    }

    fn exchange(
        &self,
        hone: &Hone,
        queue_capacity: usize,
        producers: Vec<Arc<Signal>>,
        senders: Vec<Vec<AnyBox>>,
        signal: Arc<Signal>,
        metrics: Arc<ExchangeMetrics>,
    ) -> (Vec<Vec<AnyBox>>, Box<dyn Task>) {
        let link = exchange::Link::<T>::new(producers, queue_capacity);
        let senders: Vec<Vec<Sender<T>>> = senders
            .into_iter()
            .map(|s| s.into_iter().map(|s| *s.downcast::<Sender<T>>().expect(TYPES)).collect())
            .collect();
        let outs = senders
            .iter()
            .enumerate()
            .map(|(p, targets)| {
                (0..targets.len()).map(|j| Box::new(Out::Link(LinkSender::new(link.clone(), p, j))) as AnyBox).collect()
            })
            .collect();
        (outs, Box::new(LinkTask::new(link, senders, hone, signal, metrics)))
    }
}

/// A one-input operator made per instance by `make(instance)`.
pub(crate) struct OneInputCode<In, Out, Op, M> {
    pub(crate) make: M,
    pub(crate) _types: PhantomData<fn(In, Op) -> Out>,
}

impl<In: Data, Out: Data, Op: Operator<In, Out>, M: Fn(usize) -> Op + Send> NodeCode for OneInputCode<In, Out, Op, M> {
    fn link(&self, ctx: &InstanceContext, d: Option<AnyBox>) -> AnyBox {
        input::<In>(Box::new(Link::new((self.make)(ctx.instance), down::<Out>(d))))
    }
    fn task(&self, ctx: &InstanceContext, rx: Vec<Vec<AnyBox>>, d: Option<AnyBox>) -> Box<dyn Task> {
        one_input_task::<In>(ctx, rx, Box::new(Link::new((self.make)(ctx.instance), down::<Out>(d))))
    }
}

pub(crate) struct SinkCode<T, M> {
    pub(crate) make: M,
    pub(crate) _types: PhantomData<fn(T)>,
}

impl<T: Data, M: Fn(usize) -> SinkFn<T> + Send> SinkCode<T, M> {
    fn sink(&self, ctx: &InstanceContext) -> Box<dyn Input<T>> {
        let shared = ctx.sink.clone().expect("moirai bug: a sink without sink metrics");
        Box::new(SinkInput::new((self.make)(ctx.instance), shared, ctx.metrics.clone()))
    }
}

impl<T: Data, M: Fn(usize) -> SinkFn<T> + Send> NodeCode for SinkCode<T, M> {
    fn link(&self, ctx: &InstanceContext, _down: Option<AnyBox>) -> AnyBox {
        input::<T>(self.sink(ctx))
    }
    fn task(&self, ctx: &InstanceContext, rx: Vec<Vec<AnyBox>>, _down: Option<AnyBox>) -> Box<dyn Task> {
        one_input_task::<T>(ctx, rx, self.sink(ctx))
    }
}

pub(crate) struct SourceCode<T>(pub(crate) Source<T>);

impl<T: Data> NodeCode for SourceCode<T> {
    fn link(&self, _ctx: &InstanceContext, _down: Option<AnyBox>) -> AnyBox {
        unreachable!("moirai bug: a source is always the head of its physical operator")
    }
    fn task(&self, ctx: &InstanceContext, _rx: Vec<Vec<AnyBox>>, d: Option<AnyBox>) -> Box<dyn Task> {
        let mut source = self.0.clone();
        if let (Some((factor, over)), Offered::Constant(r)) = (ctx.ramp, source.offered) {
            source.offered = Offered::Ramp { from: r, to: r * factor, over };
        }
        let task = SourceTask::new(
            &source,
            ctx.instance,
            ctx.parallelism,
            down::<T>(d),
            ctx.batch_size,
            ctx.source_start.clone(),
            ctx.source_slack_ns,
            ctx.stop.clone(),
            ctx.signal.clone(),
            ctx.metrics.clone(),
        );
        Box::new(task)
    }
    fn offered(&self) -> Option<Offered> {
        Some(self.0.offered)
    }
    fn source_cursor(&self, instance: usize, parallelism: usize, head: AnyBox) -> Option<Box<dyn SourceCursor>> {
        Some(Box::new(Cursor::new(self.0.clone(), instance, parallelism, down::<T>(Some(head)))))
    }
}

pub(crate) struct TwoInputCode<L, R, Out, Op, M> {
    pub(crate) make: M,
    pub(crate) _types: PhantomData<fn(L, R, Op) -> Out>,
}

impl<L: Data, R: Data, Out: Data, Op: TwoInputOperator<L, R, Out>, M: Fn(usize) -> Op + Send> NodeCode
    for TwoInputCode<L, R, Out, Op, M>
{
    fn link(&self, _ctx: &InstanceContext, _down: Option<AnyBox>) -> AnyBox {
        unreachable!("moirai bug: a two-input operator is always the head of its physical operator")
    }
    fn task(&self, ctx: &InstanceContext, mut rx: Vec<Vec<AnyBox>>, d: Option<AnyBox>) -> Box<dyn Task> {
        let right = receivers::<R>(rx.pop().unwrap_or_default());
        let left = receivers::<L>(rx.pop().unwrap_or_default());
        let nl = left.len();
        Box::new(TwoInputTask {
            progress: Progress::new(nl + right.len()),
            left: Port::new(left, 0),
            right: Port::new(right, nl),
            head: Box::new(TwoInputLink::new((self.make)(ctx.instance), down::<Out>(d))),
            signal: ctx.signal.clone(),
            metrics: ctx.metrics.clone(),
        })
    }
}

pub(crate) struct NodeEntry {
    pub(crate) node: LogicalNode,
    pub(crate) code: Box<dyn NodeCode>,
    pub(crate) output: Option<Box<dyn OutputCode>>,
    /// What the operator is, for micro-batch execution's translation.
    pub(crate) role: Role,
    /// How its output crosses processes, when declared with [`Stream::serde`](crate::Stream::serde).
    pub(crate) wire: Option<Arc<dyn WireCode>>,
}

pub(crate) struct EdgeEntry {
    pub(crate) edge: LogicalEdge,
    /// `None`: forward if parallelisms are equal, else rebalance (decided at build).
    pub(crate) partitioning: Option<Partitioning>,
    pub(crate) key_hash: Option<AnyShared>,
}

//! Tumbling and sliding window aggregates per key, on event time or processing time.
//!
//! A window `[start, start + size)` starts at every multiple of `slide`; a tuple at time `ts`
//! belongs to the `size / slide` windows that contain it (one for a tumbling window). A window
//! fires when the watermark (event time) or the clock (processing time) reaches its end, or when
//! the input ends. Tuples for windows that already fired are late and dropped.

use std::collections::BTreeMap;
use std::hash::Hash;
use std::sync::Arc;
use std::time::Duration;

use rustc_hash::FxHashMap;
use serde::Serialize;

use crate::error::InvalidSetting;
use crate::operator::{Operator, Output};
use crate::tuple::{now_ns, Data, Tuple};

/// Which clock assigns tuples to windows.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum TimeDomain {
    /// The tuple's event time; windows fire on watermarks.
    Event,
    /// The operator's clock when the tuple is processed; windows fire on timers.
    Processing,
}

/// The shape of a window.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Window {
    /// Length of a window, ns.
    pub size_ns: u64,
    /// Distance between window starts, ns (= size for tumbling windows).
    pub slide_ns: u64,
    /// Event or processing time.
    pub domain: TimeDomain,
}

impl Window {
    /// Back-to-back windows of `size`, on event time.
    pub fn tumbling(size: Duration) -> Self {
        let size_ns = size.as_nanos() as u64;
        Window { size_ns, slide_ns: size_ns, domain: TimeDomain::Event }
    }

    /// Windows of `size` starting every `slide`, on event time.
    pub fn sliding(size: Duration, slide: Duration) -> Self {
        Window { size_ns: size.as_nanos() as u64, slide_ns: slide.as_nanos() as u64, domain: TimeDomain::Event }
    }

    /// The same windows on processing time.
    pub fn processing_time(mut self) -> Self {
        self.domain = TimeDomain::Processing;
        self
    }

    /// Checks the shape; the message says how to fix it.
    pub fn validate(&self) -> Result<(), InvalidSetting> {
        self.check().map_err(|message| InvalidSetting::new("window", message))
    }

    fn check(&self) -> Result<(), String> {
        if self.size_ns == 0 || self.slide_ns == 0 {
            return Err("window size and slide must be positive".into());
        }
        if self.slide_ns > self.size_ns {
            return Err(format!(
                "window slide ({} ns) is longer than its size ({} ns): tuples between windows would be lost; use a slide <= size",
                self.slide_ns, self.size_ns
            ));
        }
        Ok(())
    }

    /// Starts of the windows that contain `ts`, latest first.
    pub fn starts(&self, ts: u64) -> impl Iterator<Item = u64> + '_ {
        let last = ts - ts % self.slide_ns;
        (0..)
            .map(move |k| last.checked_sub(k * self.slide_ns))
            .take_while(move |s| s.is_some_and(|s| s + self.size_ns > ts))
            .flatten()
    }
}

/// An aggregation over the tuples of a window.
pub trait Aggregate<T>: Clone + Send + Sync + 'static {
    /// Running state.
    type Acc: Send + 'static;
    /// The result.
    type Out: Data;
    /// The state of an empty window.
    fn init(&self) -> Self::Acc;
    /// Adds a tuple.
    fn add(&self, acc: &mut Self::Acc, data: &T);
    /// The result of a window.
    fn result(&self, acc: &Self::Acc) -> Self::Out;
}

/// The built-in aggregations.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum AggKind {
    /// Number of tuples.
    Count,
    /// Sum of the values.
    Sum,
    /// Mean of the values.
    Avg,
    /// Smallest value.
    Min,
    /// Largest value.
    Max,
}

/// A built-in aggregation of a value drawn from each tuple.
pub struct Agg<T> {
    kind: AggKind,
    value: Arc<dyn Fn(&T) -> f64 + Send + Sync>,
}

impl<T> Clone for Agg<T> {
    fn clone(&self) -> Self {
        Agg { kind: self.kind, value: self.value.clone() }
    }
}

impl<T: 'static> Agg<T> {
    fn new(kind: AggKind, value: impl Fn(&T) -> f64 + Send + Sync + 'static) -> Self {
        Agg { kind, value: Arc::new(value) }
    }
    /// Counts tuples.
    pub fn count() -> Self {
        Self::new(AggKind::Count, |_| 1.0)
    }
    /// Sums `value`.
    pub fn sum(value: impl Fn(&T) -> f64 + Send + Sync + 'static) -> Self {
        Self::new(AggKind::Sum, value)
    }
    /// Averages `value`.
    pub fn avg(value: impl Fn(&T) -> f64 + Send + Sync + 'static) -> Self {
        Self::new(AggKind::Avg, value)
    }
    /// Smallest `value`.
    pub fn min(value: impl Fn(&T) -> f64 + Send + Sync + 'static) -> Self {
        Self::new(AggKind::Min, value)
    }
    /// Largest `value`.
    pub fn max(value: impl Fn(&T) -> f64 + Send + Sync + 'static) -> Self {
        Self::new(AggKind::Max, value)
    }
}

/// Running state of a built-in aggregation.
#[derive(Clone, Copy, Debug)]
pub struct AggAcc {
    count: u64,
    sum: f64,
    min: f64,
    max: f64,
}

impl<T: 'static> Aggregate<T> for Agg<T> {
    type Acc = AggAcc;
    type Out = f64;
    fn init(&self) -> AggAcc {
        AggAcc { count: 0, sum: 0.0, min: f64::INFINITY, max: f64::NEG_INFINITY }
    }
    fn add(&self, acc: &mut AggAcc, data: &T) {
        let v = (self.value)(data);
        acc.count += 1;
        acc.sum += v;
        acc.min = acc.min.min(v);
        acc.max = acc.max.max(v);
    }
    fn result(&self, acc: &AggAcc) -> f64 {
        match self.kind {
            AggKind::Count => acc.count as f64,
            AggKind::Sum => acc.sum,
            AggKind::Avg => acc.sum / acc.count.max(1) as f64,
            AggKind::Min => acc.min,
            AggKind::Max => acc.max,
        }
    }
}

/// What a window aggregate emits: one per key and window that had tuples.
#[derive(Clone, Debug, PartialEq, Serialize, serde::Deserialize)]
pub struct WindowResult<K, V> {
    /// The key.
    pub key: K,
    /// Window start, ns (inclusive).
    pub start_ns: u64,
    /// Window end, ns (exclusive).
    pub end_ns: u64,
    /// The aggregate.
    pub value: V,
}

struct Pane<A> {
    acc: A,
    /// Latest intended and ingress time among the window's tuples: a result is as late as the
    /// tuple that completed it.
    intended_ns: u64,
    ingress_ns: u64,
}

/// The window aggregate operator.
pub(crate) struct WindowAggregate<K, T, A: Aggregate<T>, KF: ?Sized> {
    window: Window,
    key: Arc<KF>,
    agg: A,
    /// Open windows by end time, then by key.
    open: BTreeMap<u64, FxHashMap<K, Pane<A::Acc>>>,
    /// Windows ending at or before this have fired.
    fired_until: u64,
    /// Tuples dropped because all their windows had fired.
    late: u64,
}

impl<K, T, A: Aggregate<T>, KF: ?Sized> WindowAggregate<K, T, A, KF> {
    pub(crate) fn new(window: Window, key: Arc<KF>, agg: A) -> Self {
        WindowAggregate { window, key, agg, open: BTreeMap::new(), fired_until: 0, late: 0 }
    }
}

impl<K, T, A, KF: ?Sized> WindowAggregate<K, T, A, KF>
where
    K: Hash + Eq + Clone + Send + 'static,
    A: Aggregate<T>,
{
    fn fire(&mut self, until: u64, out: &mut Output<'_, WindowResult<K, A::Out>>) {
        while let Some(entry) = self.open.first_entry() {
            let end = *entry.key();
            if end > until {
                break;
            }
            let panes = entry.remove();
            for (key, pane) in panes {
                out.emit(Tuple {
                    event_ns: end - 1,
                    intended_ns: pane.intended_ns,
                    ingress_ns: pane.ingress_ns,
                    data: WindowResult {
                        key,
                        start_ns: end - self.window.size_ns,
                        end_ns: end,
                        value: self.agg.result(&pane.acc),
                    },
                });
            }
        }
        self.fired_until = self.fired_until.max(until);
    }
}

impl<K, T, A, KF> Operator<T, WindowResult<K, A::Out>> for WindowAggregate<K, T, A, KF>
where
    K: Hash + Eq + Clone + Send + 'static,
    T: Send + 'static,
    A: Aggregate<T>,
    KF: Fn(&T) -> K + Send + Sync + ?Sized + 'static,
{
    fn process(&mut self, t: Tuple<T>, _out: &mut Output<'_, WindowResult<K, A::Out>>) {
        let ts = match self.window.domain {
            TimeDomain::Event => t.event_ns,
            TimeDomain::Processing => now_ns(),
        };
        let key = (self.key)(&t.data);
        let mut placed = false;
        for start in self.window.starts(ts) {
            let end = start + self.window.size_ns;
            if end <= self.fired_until {
                continue;
            }
            placed = true;
            let panes = self.open.entry(end).or_default();
            let pane = panes.entry(key.clone()).or_insert_with(|| Pane {
                acc: self.agg.init(),
                intended_ns: 0,
                ingress_ns: 0,
            });
            self.agg.add(&mut pane.acc, &t.data);
            pane.intended_ns = pane.intended_ns.max(t.intended_ns);
            pane.ingress_ns = pane.ingress_ns.max(t.ingress_ns);
        }
        if !placed {
            self.late += 1;
        }
    }

    fn on_watermark(&mut self, watermark: u64, out: &mut Output<'_, WindowResult<K, A::Out>>) {
        if self.window.domain == TimeDomain::Event {
            self.fire(watermark, out);
        }
    }

    fn on_timer(&mut self, now_ns: u64, out: &mut Output<'_, WindowResult<K, A::Out>>) {
        if self.window.domain == TimeDomain::Processing {
            self.fire(now_ns, out);
        }
    }

    fn next_timer(&self) -> Option<u64> {
        match self.window.domain {
            TimeDomain::Processing => self.open.keys().next().copied(),
            TimeDomain::Event => None,
        }
    }

    fn on_end(&mut self, out: &mut Output<'_, WindowResult<K, A::Out>>) {
        self.fire(u64::MAX, out);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn window_starts() {
        let ms = Duration::from_millis;
        let w = Window::tumbling(ms(10));
        assert_eq!(w.starts(25_000_000).collect::<Vec<_>>(), vec![20_000_000]);
        let w = Window::sliding(Duration::from_nanos(10), Duration::from_nanos(5));
        assert_eq!(w.starts(12).collect::<Vec<_>>(), vec![10, 5]);
        assert_eq!(w.starts(3).collect::<Vec<_>>(), vec![0]);
        let w = Window::sliding(Duration::from_nanos(9), Duration::from_nanos(3));
        assert_eq!(w.starts(9).collect::<Vec<_>>(), vec![9, 6, 3]);
    }

    #[test]
    fn bad_shapes_are_explained() {
        assert!(Window::tumbling(Duration::ZERO).validate().is_err());
        let e = Window::sliding(Duration::from_secs(1), Duration::from_secs(2)).validate().unwrap_err().to_string();
        assert!(e.contains("slide"), "{e}");
    }
}

//! Stateless and keyed operators: map, filter, flat_map, union, keyed process.

use std::hash::Hash;
use std::sync::Arc;

use rustc_hash::FxHashMap;

use crate::operator::{Operator, Output};
use crate::tuple::Tuple;

/// Applies a function to every tuple's data.
pub struct Map<F>(pub(crate) Arc<F>);

impl<In, Out, F: Fn(In) -> Out + Send + Sync + 'static> Operator<In, Out> for Map<F> {
    #[inline]
    fn process(&mut self, t: Tuple<In>, out: &mut Output<'_, Out>) {
        let Tuple { event_ns, intended_ns, ingress_ns, data } = t;
        out.emit(Tuple { event_ns, intended_ns, ingress_ns, data: (self.0)(data) });
    }
}

/// Keeps the tuples a predicate accepts.
pub struct Filter<F>(pub(crate) Arc<F>);

impl<T, F: Fn(&T) -> bool + Send + Sync + 'static> Operator<T, T> for Filter<F> {
    #[inline]
    fn process(&mut self, t: Tuple<T>, out: &mut Output<'_, T>) {
        if (self.0)(&t.data) {
            out.emit(t);
        }
    }
}

/// Emits zero or more tuples per input tuple, each with the input's timestamps.
pub struct FlatMap<F>(pub(crate) Arc<F>);

impl<In, Out, I, F> Operator<In, Out> for FlatMap<F>
where
    I: IntoIterator<Item = Out>,
    F: Fn(In) -> I + Send + Sync + 'static,
{
    fn process(&mut self, t: Tuple<In>, out: &mut Output<'_, Out>) {
        let Tuple { event_ns, intended_ns, ingress_ns, data } = t;
        for data in (self.0)(data) {
            out.emit(Tuple { event_ns, intended_ns, ingress_ns, data });
        }
    }
}

/// Passes tuples on unchanged: the operator behind `union`, whose inputs are simply several
/// streams into one port.
pub struct Identity;

impl<T: Send + 'static> Operator<T, T> for Identity {
    #[inline]
    fn process(&mut self, t: Tuple<T>, out: &mut Output<'_, T>) {
        out.emit(t);
    }
}

/// Stateful processing per key: `f(key, state, tuple, out)` with one state per key, created by
/// `init` on the key's first tuple.
pub struct KeyedProcess<K, S, KF: ?Sized, I, F> {
    pub(crate) key: Arc<KF>,
    pub(crate) init: Arc<I>,
    pub(crate) f: F,
    pub(crate) state: FxHashMap<K, S>,
}

impl<K, S, T, U, KF, I, F> Operator<T, U> for KeyedProcess<K, S, KF, I, F>
where
    K: Hash + Eq + Clone + Send + 'static,
    S: Send + 'static,
    KF: Fn(&T) -> K + Send + Sync + ?Sized + 'static,
    I: Fn(&K) -> S + Send + Sync + 'static,
    F: FnMut(&K, &mut S, Tuple<T>, &mut Output<'_, U>) + Send + 'static,
{
    fn process(&mut self, t: Tuple<T>, out: &mut Output<'_, U>) {
        let key = (self.key)(&t.data);
        let init = &self.init;
        let state = self.state.entry(key.clone()).or_insert_with(|| init(&key));
        (self.f)(&key, state, t, out);
    }
}

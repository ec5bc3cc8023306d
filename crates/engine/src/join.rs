//! The keyed interval join: pairs a left tuple `l` and a right tuple `r` with the same key when
//! `l.event + lower <= r.event <= l.event + upper` (event time, bounds inclusive, may be negative).
//!
//! Both sides are buffered per key; a watermark `w` drops left tuples with
//! `l.event + upper < w` and right tuples with `r.event - lower < w`, which no future tuple can
//! match. A result carries the later event time of the pair and the timestamps of the tuple that
//! completed it.

use std::hash::Hash;
use std::sync::Arc;

use rustc_hash::FxHashMap;

use crate::operator::{Output, TwoInputOperator};
use crate::tuple::Tuple;

/// The interval join operator.
pub(crate) struct IntervalJoin<K, L, R, LK: ?Sized, RK: ?Sized, F> {
    pub(crate) lower_ns: i64,
    pub(crate) upper_ns: i64,
    pub(crate) left_key: Arc<LK>,
    pub(crate) right_key: Arc<RK>,
    pub(crate) f: Arc<F>,
    pub(crate) left: FxHashMap<K, Vec<Tuple<L>>>,
    pub(crate) right: FxHashMap<K, Vec<Tuple<R>>>,
}

fn within(l: u64, r: u64, lower: i64, upper: i64) -> bool {
    let d = r as i128 - l as i128;
    d >= lower as i128 && d <= upper as i128
}

impl<K, L, R, U, LK, RK, F> TwoInputOperator<L, R, U> for IntervalJoin<K, L, R, LK, RK, F>
where
    K: Hash + Eq + Send + 'static,
    L: Send + 'static,
    R: Send + 'static,
    LK: Fn(&L) -> K + Send + Sync + ?Sized + 'static,
    RK: Fn(&R) -> K + Send + Sync + ?Sized + 'static,
    F: Fn(&K, &L, &R) -> U + Send + Sync + 'static,
{
    fn process_left(&mut self, l: Tuple<L>, out: &mut Output<'_, U>) {
        let key = (self.left_key)(&l.data);
        if let Some(rights) = self.right.get(&key) {
            for r in rights.iter().filter(|r| within(l.event_ns, r.event_ns, self.lower_ns, self.upper_ns)) {
                out.emit(Tuple { event_ns: l.event_ns.max(r.event_ns), ..l.with((self.f)(&key, &l.data, &r.data)) });
            }
        }
        self.left.entry(key).or_default().push(l);
    }

    fn process_right(&mut self, r: Tuple<R>, out: &mut Output<'_, U>) {
        let key = (self.right_key)(&r.data);
        if let Some(lefts) = self.left.get(&key) {
            for l in lefts.iter().filter(|l| within(l.event_ns, r.event_ns, self.lower_ns, self.upper_ns)) {
                out.emit(Tuple { event_ns: l.event_ns.max(r.event_ns), ..r.with((self.f)(&key, &l.data, &r.data)) });
            }
        }
        self.right.entry(key).or_default().push(r);
    }

    fn on_watermark(&mut self, w: u64, _out: &mut Output<'_, U>) {
        let w = w as i128;
        let (lower, upper) = (self.lower_ns as i128, self.upper_ns as i128);
        self.left.retain(|_, v| {
            v.retain(|l| l.event_ns as i128 + upper >= w);
            !v.is_empty()
        });
        self.right.retain(|_, v| {
            v.retain(|r| r.event_ns as i128 - lower >= w);
            !v.is_empty()
        });
    }
}

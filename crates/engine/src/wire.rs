//! Streams that cross processes (micro-batch execution): tuples encoded as JSON `[event_ns,
//! data]`, declared with [`crate::Stream::serde`].

use std::marker::PhantomData;
use std::sync::{Arc, Mutex};

use serde::de::DeserializeOwned;
use serde::Serialize;
use serde_json::Value;

use crate::erase::{input, AnyBox, AnyShared};
use crate::operator::{Control, Input};
use crate::router::{bucket, KeyHash};
use crate::sync::lock;
use crate::tuple::{Data, Tuple};

/// A tuple on the wire that does not decode into the stream's type.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
#[error("a tuple on the wire does not decode: {0}")]
pub struct WireError(pub String);

/// A tuple on the wire: `[event_ns, data]`.
pub(crate) fn encode<T: Serialize>(t: &Tuple<T>) -> Value {
    serde_json::to_value((t.event_ns, &t.data)).unwrap_or(Value::Null)
}

pub(crate) fn decode<T: DeserializeOwned>(v: Value) -> Result<Tuple<T>, WireError> {
    let (event_ns, data): (u64, T) = serde_json::from_value(v).map_err(|e| WireError(e.to_string()))?;
    Ok(Tuple::at(event_ns, data))
}

/// The event time of a tuple on the wire.
pub fn event_ns(v: &Value) -> Option<u64> {
    v.get(0).and_then(Value::as_u64)
}

pub(crate) type Buckets = Arc<Mutex<Vec<Vec<Value>>>>;

/// The typed code of a stream that crosses processes, with its type erased.
pub(crate) trait WireCode: Send + Sync {
    /// A chain's end that encodes tuples into `buckets`, by key hash when given (a `KeyHash<T>`).
    fn bucketer(&self, key_hash: Option<AnyShared>, buckets: Buckets) -> AnyBox;
    /// Decodes `values` and pushes them into `head` (a `Box<dyn Input<T>>`).
    fn push(&self, head: &mut AnyBox, values: Vec<Value>) -> Result<(), WireError>;
    /// `head`'s control interface.
    fn control<'a>(&self, head: &'a mut AnyBox) -> &'a mut dyn Control;
}

pub(crate) struct Wire<T>(PhantomData<fn() -> T>);

impl<T> Wire<T> {
    pub(crate) fn new() -> Self {
        Wire(PhantomData)
    }
}

const TYPES: &str = "moirai bug: a stream's type does not match its wire";

struct Bucketer<T> {
    key_hash: Option<KeyHash<T>>,
    buckets: Buckets,
}

impl<T: Serialize + Send> Input<T> for Bucketer<T> {
    fn push_batch(&mut self, batch: &mut Vec<Tuple<T>>) {
        let mut buckets = lock(&self.buckets);
        let n = buckets.len();
        for t in batch.drain(..) {
            let b = self.key_hash.as_ref().map_or(0, |h| bucket(h(&t.data), n));
            buckets[b].push(encode(&t));
        }
    }
}

impl<T: Send> Control for Bucketer<T> {
    fn watermark(&mut self, _watermark: u64) {}
    fn tick(&mut self, _now_ns: u64) {}
    fn next_timer(&self) -> Option<u64> {
        None
    }
    fn flush(&mut self) {}
    fn finish(&mut self) {}
}

impl<T: Data + Serialize + DeserializeOwned> WireCode for Wire<T> {
    fn bucketer(&self, key_hash: Option<AnyShared>, buckets: Buckets) -> AnyBox {
        let key_hash = key_hash.map(|k| k.downcast_ref::<KeyHash<T>>().expect(TYPES).clone());
        input::<T>(Box::new(Bucketer { key_hash, buckets }))
    }
    fn push(&self, head: &mut AnyBox, values: Vec<Value>) -> Result<(), WireError> {
        let head = head.downcast_mut::<Box<dyn Input<T>>>().expect(TYPES);
        let mut batch = values.into_iter().map(decode).collect::<Result<Vec<Tuple<T>>, WireError>>()?;
        head.push_batch(&mut batch);
        Ok(())
    }
    fn control<'a>(&self, head: &'a mut AnyBox) -> &'a mut dyn Control {
        &mut **head.downcast_mut::<Box<dyn Input<T>>>().expect(TYPES)
    }
}

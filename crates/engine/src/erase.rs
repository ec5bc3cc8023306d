//! Type erasure between the typed query API and the untyped engine: a logical operator's code
//! hands boxes around (`Box<dyn Any>`) that the same generic code downcasts again, so the engine
//! itself never sees user types.

use std::any::Any;
use std::sync::Arc;

use crate::operator::Input;

pub(crate) type AnyBox = Box<dyn Any + Send>;
pub(crate) type AnyShared = Arc<dyn Any + Send + Sync>;

pub(crate) const TYPES: &str = "moirai bug: a stream's type does not match its operator";

pub(crate) fn down<T: 'static>(down: Option<AnyBox>) -> Box<dyn Input<T>> {
    *down.expect("moirai bug: an operator without downstream").downcast::<Box<dyn Input<T>>>().expect(TYPES)
}

pub(crate) fn input<T: 'static>(input: Box<dyn Input<T>>) -> AnyBox {
    Box::new(input)
}

//! The policies moirai ships: QS, HR and FCFS ([`MetricPolicy`]), RANDOM, constant priorities,
//! user scripts, and grouping policies; [`PolicySpec`] builds any of them from a config.

mod constant;
mod grouping;
mod metric;
mod random;
mod script;
mod spec;

pub use constant::{ConstantKey, ConstantPolicy};
pub use grouping::{Combine, GroupBy, GroupPolicy, GroupPriority};
pub use metric::MetricPolicy;
pub use random::RandomPolicy;
pub use script::{ScriptPolicy, DEFAULT_MAX_OPERATIONS, DEFAULT_TIME_LIMIT};
pub use spec::PolicySpec;

//! [`PolicySpec`]: a policy as written in a config file, and how to build it. Keeps policy
//! construction in one place for the middleware, the engine and the simulator.

use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};

use super::{
    ConstantKey, ConstantPolicy, GroupBy, GroupPolicy, GroupPriority, MetricPolicy, RandomPolicy, ScriptPolicy,
};
use crate::metric::Metric;
use crate::policy::{Level, Policy, PolicyError};

/// A policy as configured, tagged by `type`, e.g. (TOML)
/// `{ type = "qs", level = "logical" }`, `{ type = "script", script = "queue_size * cost" }`,
/// `{ type = "groups", by = "query", priority = { metric = { metric = "queue_size", combine = "sum" } } }`.
/// Unknown fields are ignored here so that a config can flatten this into its own policy entry
/// (with name, period, scope, translator); such a config should reject unknown fields itself.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(tag = "type", rename_all = "snake_case")]
pub enum PolicySpec {
    /// QS: priority = `queue_size`.
    #[serde(alias = "qs")]
    QueueSize {
        /// Logical or physical operators (default physical).
        #[serde(default)]
        level: Level,
    },
    /// HR: priority = `highest_rate`.
    #[serde(alias = "hr")]
    HighestRate {
        /// Logical or physical operators.
        #[serde(default)]
        level: Level,
    },
    /// FCFS: priority = `head_wait`.
    Fcfs {
        /// Logical or physical operators.
        #[serde(default)]
        level: Level,
    },
    /// Priority = any metric.
    Metric {
        /// The metric.
        metric: Metric,
        /// Logical or physical operators.
        #[serde(default)]
        level: Level,
    },
    /// RANDOM: uniform priorities from a seeded generator.
    Random {
        /// The seed (default 0).
        #[serde(default)]
        seed: u64,
        /// Logical or physical operators.
        #[serde(default)]
        level: Level,
    },
    /// Constant priorities per operator or query name.
    Constant {
        /// What the names are.
        by: ConstantKey,
        /// Priority by name.
        #[serde(default)]
        values: BTreeMap<String, f64>,
        /// Priority of everything not named (default 0).
        #[serde(default)]
        default: f64,
        /// Logical or physical operators.
        #[serde(default)]
        level: Level,
    },
    /// A user script (see [`ScriptPolicy`]).
    Script {
        /// The Rhai expression or script.
        script: String,
        /// Logical or physical operators.
        #[serde(default)]
        level: Level,
        /// Operations limit per evaluation (default [`super::DEFAULT_MAX_OPERATIONS`]).
        #[serde(default)]
        max_operations: Option<u64>,
        /// Time limit of one round over all operators, in ms (default
        /// [`super::DEFAULT_TIME_LIMIT`]); a round over it is skipped and reported.
        #[serde(default)]
        time_limit_ms: Option<u64>,
    },
    /// A grouping schedule.
    Groups {
        /// How operators are grouped.
        by: GroupBy,
        /// Where group priorities come from.
        priority: GroupPriority,
    },
}

impl PolicySpec {
    /// Builds the policy, named `name`; fails on an invalid configuration (e.g. a script that
    /// does not compile).
    pub fn build(&self, name: &str) -> Result<Box<dyn Policy>, PolicyError> {
        Ok(match self {
            PolicySpec::QueueSize { level } => Box::new(MetricPolicy::queue_size(name, *level)),
            PolicySpec::HighestRate { level } => Box::new(MetricPolicy::highest_rate(name, *level)),
            PolicySpec::Fcfs { level } => Box::new(MetricPolicy::fcfs(name, *level)),
            PolicySpec::Metric { metric, level } => Box::new(MetricPolicy::new(name, *metric, *level)),
            PolicySpec::Random { seed, level } => Box::new(RandomPolicy::new(name, *seed, *level)),
            PolicySpec::Constant { by, values, default, level } => {
                Box::new(ConstantPolicy::new(name, *by, values.clone(), *default, *level)?)
            }
            PolicySpec::Script { script, level, max_operations, time_limit_ms } => Box::new(ScriptPolicy::with_limits(
                name,
                script,
                *level,
                max_operations.unwrap_or(super::DEFAULT_MAX_OPERATIONS),
                time_limit_ms.map_or(super::DEFAULT_TIME_LIMIT, std::time::Duration::from_millis),
            )?),
            PolicySpec::Groups { by, priority } => Box::new(GroupPolicy::new(name, *by, priority.clone())?),
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn parse(json: &str) -> PolicySpec {
        serde_json::from_str(json).unwrap_or_else(|e| panic!("{json}: {e}"))
    }

    #[test]
    fn parses_and_builds_every_kind() {
        let cases = [
            (r#"{"type": "qs", "level": "logical"}"#, vec![Metric::QueueSize]),
            (r#"{"type": "highest_rate"}"#, vec![Metric::HighestRate]),
            (r#"{"type": "hr"}"#, vec![Metric::HighestRate]),
            (r#"{"type": "fcfs"}"#, vec![Metric::HeadWait]),
            (r#"{"type": "metric", "metric": "rate_in"}"#, vec![Metric::RateIn]),
            (r#"{"type": "random", "seed": 3}"#, vec![]),
            (r#"{"type": "constant", "by": "query", "values": {"q1": 5}, "default": 1}"#, vec![]),
            (r#"{"type": "script", "script": "cost * 2", "max_operations": 50}"#, vec![Metric::Cost]),
            (
                r#"{"type": "groups", "by": "query", "priority": {"metric": {"metric": "queue_size", "combine": "sum"}}}"#,
                vec![Metric::QueueSize],
            ),
            (r#"{"type": "groups", "by": "spe", "priority": {"constant": {"values": {"flink": 2}}}}"#, vec![]),
        ];
        for (json, metrics) in cases {
            let p = parse(json).build("p").unwrap_or_else(|e| panic!("{json}: {e}"));
            assert_eq!(p.name(), "p");
            assert_eq!(p.metrics(), metrics, "{json}");
        }
        assert_eq!(parse(r#"{"type": "qs", "level": "logical"}"#), PolicySpec::QueueSize { level: Level::Logical });
    }

    #[test]
    fn bad_specs_are_clear_errors() {
        let err = serde_json::from_str::<PolicySpec>(r#"{"type": "shortest_job"}"#).unwrap_err();
        assert!(err.to_string().contains("unknown variant `shortest_job`"), "{err}");
        let err = serde_json::from_str::<PolicySpec>(r#"{"type": "metric", "metric": "queue"}"#).unwrap_err();
        assert!(err.to_string().contains("unknown variant `queue`"), "{err}");
        let spec = parse(r#"{"type": "script", "script": "queue_size +"}"#);
        assert!(matches!(spec.build("s"), Err(PolicyError::ScriptCompile { .. })));
    }
}

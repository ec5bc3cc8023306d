//! User-defined policies: a [Rhai](https://rhai.rs) expression or small script evaluated once per
//! operator, whose value is the operator's priority.
//!
//! Variables: every metric by its name (`queue_size`, `cost`, `highest_rate`, ... as floats), and
//! `name`, `query`, `spe`, `kind` (`"source"`, `"operator"` or `"sink"`), plus `instance` (the
//! replica index, an integer) for policies on physical operators. Examples:
//! `queue_size * cost`, `if query == "q1" { 100 } else { queue_size }`.
//!
//! The script is compiled once, in strict-variables mode, so a misspelt metric is an error at
//! compile time with its line and column. Which metrics it reads is derived from the script
//! itself (a metric is read if the script stops compiling without it), so the metric provider
//! computes exactly those. Evaluation is bounded by an operations limit and a round by a time
//! limit (over all operators), so a runaway loop fails with an error — the policy is skipped that
//! round — instead of hanging the middleware; the script has no I/O (printing is dropped, modules
//! cannot be imported).

use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use rhai::{Dynamic, Engine, EvalAltResult, ParseError, ParseErrorType, Position, Scope as RhaiScope, AST};

use crate::metric::Metric;
use crate::policy::{single_priority, Level, OperatorView, Policy, PolicyContext, PolicyError};
use crate::schedule::Schedule;

/// The operations limit of one evaluation unless configured otherwise: ample for arithmetic and
/// small loops, a few milliseconds at most for a runaway script.
pub const DEFAULT_MAX_OPERATIONS: u64 = 100_000;

/// The time one round of a script policy (every operator) may take unless configured otherwise.
pub const DEFAULT_TIME_LIMIT: Duration = Duration::from_millis(200);

/// The variables bound besides the metrics.
const CONTEXT_VARIABLES: [&str; 4] = ["name", "query", "spe", "kind"];

/// A policy whose priority is a user script.
pub struct ScriptPolicy {
    name: String,
    level: Level,
    engine: Engine,
    ast: AST,
    metrics: Vec<Metric>,
    time_limit: Duration,
    /// When the current round must end; checked as the script runs.
    deadline: Arc<Mutex<Instant>>,
}

impl std::fmt::Debug for ScriptPolicy {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ScriptPolicy")
            .field("name", &self.name)
            .field("level", &self.level)
            .field("metrics", &self.metrics)
            .finish()
    }
}

impl ScriptPolicy {
    /// Compiles `source` with the default operations limit.
    pub fn new(name: impl Into<String>, source: &str, level: Level) -> Result<ScriptPolicy, PolicyError> {
        ScriptPolicy::with_max_operations(name, source, level, DEFAULT_MAX_OPERATIONS)
    }

    /// Compiles `source`; each evaluation may run at most `max_operations` operations (≥ 1), a
    /// round at most [`DEFAULT_TIME_LIMIT`].
    pub fn with_max_operations(
        name: impl Into<String>,
        source: &str,
        level: Level,
        max_operations: u64,
    ) -> Result<ScriptPolicy, PolicyError> {
        ScriptPolicy::with_limits(name, source, level, max_operations, DEFAULT_TIME_LIMIT)
    }

    /// Compiles `source`; each evaluation may run at most `max_operations` operations (≥ 1), and
    /// a round over all operators at most `time_limit` (> 0).
    pub fn with_limits(
        name: impl Into<String>,
        source: &str,
        level: Level,
        max_operations: u64,
        time_limit: Duration,
    ) -> Result<ScriptPolicy, PolicyError> {
        let name = name.into();
        if max_operations == 0 {
            return Err(PolicyError::Config { policy: name, message: "max_operations must be at least 1".into() });
        }
        if time_limit.is_zero() {
            return Err(PolicyError::Config { policy: name, message: "time_limit_ms must be at least 1".into() });
        }
        if source.trim().is_empty() {
            return Err(PolicyError::Config {
                policy: name,
                message: "the script is empty; write an expression such as `queue_size`".into(),
            });
        }
        let deadline = Arc::new(Mutex::new(Instant::now()));
        let mut engine = sandboxed_engine(max_operations);
        let d = deadline.clone();
        // Reading the clock costs ~20 ns: every 1024 operations is plenty for a time limit.
        engine.on_progress(move |ops| {
            (ops % 1024 == 0 && Instant::now() > *d.lock().unwrap_or_else(|e| e.into_inner())).then_some(Dynamic::UNIT)
        });
        let ast = engine
            .compile_with_scope(&declarations(level, None), source)
            .map_err(|e| compile_error(&name, level, &e))?;
        // A metric is read iff the script no longer compiles when it is not declared.
        let metrics = Metric::ALL
            .into_iter()
            .filter(|&m| engine.compile_with_scope(&declarations(level, Some(m)), source).is_err())
            .collect();
        Ok(ScriptPolicy { name, level, engine, ast, metrics, time_limit, deadline })
    }

    fn evaluate(&self, op: &OperatorView<'_>) -> Result<f64, PolicyError> {
        let mut scope = RhaiScope::new();
        for &m in &self.metrics {
            scope.push(m.name(), op.metric(m)?);
        }
        scope.push("name", op.name().to_string());
        scope.push("query", op.query().to_string());
        scope.push("spe", op.spe().to_string());
        scope.push("kind", op.kind().as_str().to_string());
        if let Some(instance) = op.instance() {
            scope.push("instance", i64::try_from(instance).unwrap_or(i64::MAX));
        }
        let runtime = |position: Position, message: String| PolicyError::ScriptRuntime {
            policy: self.name.clone(),
            op: op.describe(),
            line: position.line().unwrap_or(0),
            column: position.position().unwrap_or(0),
            message,
        };
        let value: Dynamic = self.engine.eval_ast_with_scope(&mut scope, &self.ast).map_err(|e| {
            // The innermost error says what went wrong; its position (if any) where.
            let inner = e.unwrap_inner();
            let position = inner.position();
            let message = match inner {
                EvalAltResult::ErrorTooManyOperations(_) => "the script ran more than the limit of operations (a loop \
                                                             that does not end?); simplify it or raise max_operations"
                    .to_string(),
                EvalAltResult::ErrorTerminated(..) => format!(
                    "the policy ran over its time limit of {:?} this round (a loop that does not end?); it is skipped \
                     this round; simplify the script or raise time_limit_ms",
                    self.time_limit
                ),
                other => {
                    let text = other.to_string();
                    text.strip_suffix(&format!(" ({position})")).map_or(text.clone(), str::to_string)
                }
            };
            runtime(if position.is_none() { e.position() } else { position }, message)
        })?;
        let p = if let Ok(f) = value.as_float() {
            f
        } else if let Ok(i) = value.as_int() {
            i as f64
        } else {
            let shown = if value.is_unit() {
                "nothing (does the last statement end with ';'?)".to_string()
            } else {
                format!("a value of type {} ({value})", value.type_name())
            };
            return Err(runtime(Position::NONE, format!("the script returned {shown}; it must return a number")));
        };
        if !p.is_finite() {
            return Err(runtime(Position::NONE, format!("the script returned {p}; it must return a finite number")));
        }
        Ok(p)
    }
}

impl Policy for ScriptPolicy {
    fn name(&self) -> &str {
        &self.name
    }

    fn metrics(&self) -> Vec<Metric> {
        self.metrics.clone()
    }

    fn schedule(&mut self, ctx: &PolicyContext<'_>) -> Result<Schedule, PolicyError> {
        *self.deadline.lock().unwrap_or_else(|e| e.into_inner()) = Instant::now() + self.time_limit;
        single_priority(ctx, &self.name, self.level, |op| self.evaluate(op))
    }
}

/// An engine that cannot do I/O and cannot run away.
fn sandboxed_engine(max_operations: u64) -> Engine {
    let mut engine = Engine::new();
    engine
        .set_strict_variables(true)
        .set_max_operations(max_operations)
        .set_max_call_levels(32)
        .set_max_expr_depths(64, 32)
        .set_max_string_size(64 * 1024)
        .set_max_array_size(64 * 1024)
        .set_max_map_size(64 * 1024)
        .set_module_resolver(rhai::module_resolvers::DummyModuleResolver::new())
        .disable_symbol("eval")
        .on_print(|_| {})
        .on_debug(|_, _, _| {});
    engine
}

/// A scope declaring every variable a script may read at `level`, except `without`.
fn declarations(level: Level, without: Option<Metric>) -> RhaiScope<'static> {
    let mut scope = RhaiScope::new();
    for m in Metric::ALL.into_iter().filter(|&m| Some(m) != without) {
        scope.push(m.name(), 0.0_f64);
    }
    for v in CONTEXT_VARIABLES {
        scope.push(v, String::new());
    }
    if level == Level::Physical {
        scope.push("instance", 0_i64);
    }
    scope
}

fn compile_error(policy: &str, level: Level, e: &ParseError) -> PolicyError {
    let message = match e.err_type() {
        ParseErrorType::VariableUndefined(v) if v == "instance" && level == Level::Logical => {
            "`instance` is only defined for policies on physical operators (level = \"physical\")".to_string()
        }
        ParseErrorType::VariableUndefined(v) => {
            let metrics: Vec<_> = Metric::ALL.iter().map(|m| m.name()).collect();
            let mut context = CONTEXT_VARIABLES.join(", ");
            if level == Level::Physical {
                context += ", instance";
            }
            format!("unknown variable '{v}'; metrics are {} and the other variables {context}", metrics.join(", "))
        }
        other => other.to_string(),
    };
    let position = e.position();
    PolicyError::ScriptCompile {
        policy: policy.to_string(),
        line: position.line().unwrap_or(0),
        column: position.position().unwrap_or(0),
        message,
    }
}

#[cfg(test)]
#[path = "script_tests.rs"]
mod tests;

//! The policy threading model's settings (`--threading policy:NAME:N:batch=B:quantum=D`).

use std::fmt;
use std::time::Duration;

use moirai_contract::policies::{
    ActivationMode, ACTIVATION_LAG_RANGE, ACTIVATION_THRESHOLD_RANGE, DEFAULT_ACTIVATION_THRESHOLD,
};

use super::{available_cores, InvalidSetting, MAX_POOL_THREADS};

/// Steps per turn unless configured: as many as the FIFO pools take.
pub const DEFAULT_BATCH: usize = 8;

/// How often priorities are recomputed unless configured.
pub const DEFAULT_PERIOD: Duration = Duration::from_millis(100);
/// QBS takes a source every this many turns of a worker (STAFiLOS' setting on Linear Road:
/// every 5 internal actor iterations).
pub const QBS_SOURCE_EVERY: u32 = 5;

/// What `policy:` takes, with the policy names of [`moirai_contract::policies`].
fn help() -> String {
    let names: Vec<&str> = moirai_contract::policies::user_level().collect();
    format!(
        "policy:<name>[:N][:batch=B][:quantum=DURATION][:period=DURATION][:sources=K|off][:activation=auto|always]\
         [:activation-threshold=S][:activation-lag=DURATION], with <name> one of {}, metric:<metric>, script:\"<expression>\"",
        names.join(", ")
    )
}

/// The settings of the policy threading model.
#[derive(Clone, Debug, PartialEq)]
pub struct PolicyThreading {
    /// The policy: `qs`, `rr`, `script:queue_size * cost` (the expression unquoted), ...
    pub policy: String,
    /// Worker threads.
    pub threads: usize,
    /// Most steps (input batches) per turn.
    pub batch: usize,
    /// Longest turn, when set.
    pub quantum: Option<Duration>,
    /// How often priorities are recomputed.
    pub period: Duration,
    /// Sources are taken every this many turns of a worker, whatever their priority (STAFiLOS'
    /// QBS: every 5 internal iterations), and otherwise only when nothing else is ready; `None`:
    /// sources queue at their priority like every operator.
    pub source_every: Option<u32>,
    /// When the policy's priorities order the ready queue: [`ActivationMode::Auto`] (the
    /// default) only while the activation rule says scheduling can help — the machine saturated
    /// and the engine falling behind — and every operator at one level (the dynamic pool's FIFO)
    /// otherwise; [`ActivationMode::Always`] from the start.
    pub activation: ActivationMode,
    /// The activation rule's CPU threshold (0.5..=1.0).
    pub activation_threshold: f64,
    /// The activation rule's lag, how much input waiting counts as behind (in time at the input
    /// rate; 10 ms..=10 s); `None`: the rule's default (the middleware's `--activation-lag`).
    pub activation_lag: Option<Duration>,
}

impl PolicyThreading {
    /// A policy with the defaults: as many workers as cores, [`DEFAULT_BATCH`], no quantum
    /// (`rr` and `qbs`: their own quanta), [`DEFAULT_PERIOD`].
    pub fn new(policy: &str) -> PolicyThreading {
        let quantum = match policy {
            // STAFiLOS' best settings on Linear Road: RR 20-40 ms, QBS a basic quantum of 500 µs.
            "rr" => Some(Duration::from_millis(20)),
            "qbs" => Some(Duration::from_micros(500)),
            _ => None,
        };
        let batch = if quantum.is_some() { usize::MAX } else { DEFAULT_BATCH };
        PolicyThreading {
            policy: policy.to_string(),
            threads: available_cores(),
            batch,
            quantum,
            period: DEFAULT_PERIOD,
            source_every: (policy == "qbs").then_some(QBS_SOURCE_EVERY),
            activation: ActivationMode::Auto,
            activation_threshold: DEFAULT_ACTIVATION_THRESHOLD,
            activation_lag: None,
        }
    }

    /// Parses what follows `policy:`; `whole` is the full text, for errors.
    pub fn parse(params: &str, whole: &str) -> Result<PolicyThreading, InvalidSetting> {
        parse(params, whole).map_err(|message| InvalidSetting::new(whole, message))
    }
}

fn parse(params: &str, whole: &str) -> Result<PolicyThreading, String> {
    {
        let (policy, rest) = split_policy(params, whole)?;
        let mut c = PolicyThreading::new(&policy);
        let mut batch_given = false;
        for (i, part) in rest.split(':').map(str::trim).filter(|p| !p.is_empty()).enumerate() {
            let duration = |v: &str, what: &str| {
                humantime::parse_duration(v.trim())
                    .map_err(|e| format!("'{whole}': {what} '{v}': {e}; e.g. {what}=5ms"))
            };
            match part.split_once('=') {
                None if i == 0 => {
                    c.threads = match part.parse::<usize>() {
                        Ok(n) if (1..=MAX_POOL_THREADS).contains(&n) => n,
                        _ => {
                            return Err(format!(
                                "'{whole}': the thread count '{part}' must be a whole number from 1 to \
                                 {MAX_POOL_THREADS}; {}",
                                help()
                            ))
                        }
                    }
                }
                Some(("batch", v)) => {
                    c.batch = match v.trim().parse::<usize>() {
                        Ok(n) if n >= 1 => n,
                        _ => return Err(format!("'{whole}': batch '{v}' must be a whole number >= 1, e.g. batch=8")),
                    };
                    batch_given = true;
                }
                Some(("quantum", v)) => {
                    let q = duration(v, "quantum")?;
                    if q.is_zero() {
                        return Err(format!("'{whole}': quantum must be positive, e.g. quantum=5ms"));
                    }
                    c.quantum = Some(q);
                    if !batch_given {
                        c.batch = usize::MAX;
                    }
                }
                Some(("sources", v)) => {
                    c.source_every = match v.trim() {
                        "off" => None,
                        n => match n.parse::<u32>() {
                            Ok(k) if k >= 1 => Some(k),
                            _ => {
                                return Err(format!(
                                    "'{whole}': sources '{v}' must be a whole number of turns >= 1 (a source every \
                                     that many turns) or off, e.g. sources=5"
                                ))
                            }
                        },
                    };
                }
                Some(("activation", v)) => {
                    c.activation = v.trim().parse::<ActivationMode>().map_err(|e| format!("'{whole}': {e}"))?;
                }
                Some(("activation-threshold", v)) => {
                    c.activation_threshold = match v.trim().parse::<f64>() {
                        Ok(s) if ACTIVATION_THRESHOLD_RANGE.contains(&s) => s,
                        _ => {
                            return Err(format!(
                                "'{whole}': activation-threshold '{v}' must be the share of the machine's CPU at which \
                                 it counts as fully used, from {} to {}, e.g. activation-threshold=0.9",
                                ACTIVATION_THRESHOLD_RANGE.start(),
                                ACTIVATION_THRESHOLD_RANGE.end()
                            ))
                        }
                    };
                }
                Some(("activation-lag", v)) => {
                    let lag = duration(v, "activation-lag")?;
                    if !ACTIVATION_LAG_RANGE.contains(&lag) {
                        return Err(format!(
                            "'{whole}': activation-lag {v} is how much input waiting counts as behind, in time at \
                             the input rate, from {:?} to {:?}, e.g. activation-lag=25ms",
                            ACTIVATION_LAG_RANGE.start(),
                            ACTIVATION_LAG_RANGE.end()
                        ));
                    }
                    c.activation_lag = Some(lag);
                }
                Some(("period", v)) => {
                    c.period = duration(v, "period")?;
                    if c.period < Duration::from_millis(1) {
                        return Err(format!("'{whole}': period {v} is too short; use at least 1ms"));
                    }
                }
                _ => return Err(format!("'{whole}': unknown setting '{part}'; {}", help())),
            }
        }
        Ok(c)
    }
}

/// Splits `<name>[:settings]`, where the name may be `script:"<expression>"` (quoted, so the
/// expression may hold colons) or `metric:<metric>`.
fn split_policy(params: &str, whole: &str) -> Result<(String, String), String> {
    if let Some(quoted) = params.strip_prefix("script:") {
        let body = quoted
            .strip_prefix('"')
            .ok_or_else(|| format!("'{whole}': quote the script, e.g. policy:script:\"queue_size * cost\":2"))?;
        // Up to the first quote not escaped by a backslash; `\"` inside stands for `"`.
        let mut expression = String::new();
        let mut chars = body.char_indices();
        let end = loop {
            match chars.next() {
                Some((_, '\\')) => match chars.next() {
                    Some((_, '"')) => expression.push('"'),
                    Some((_, c)) => expression.extend(['\\', c]),
                    None => expression.push('\\'),
                },
                Some((i, '"')) => break i,
                Some((_, c)) => expression.push(c),
                None => return Err(format!("'{whole}': the script's closing quote is missing")),
            }
        };
        let expression = expression.trim();
        if expression.is_empty() {
            return Err(format!("'{whole}': the script is empty"));
        }
        return Ok((format!("script:{expression}"), body[end + 1..].trim_start_matches(':').to_string()));
    }
    let (name, rest) = params.split_once(':').unwrap_or((params, ""));
    if name == "metric" {
        let (metric, rest) = rest.split_once(':').unwrap_or((rest, ""));
        if metric.trim().is_empty() {
            return Err(format!("'{whole}': name the metric, e.g. policy:metric:queue_size"));
        }
        return Ok((format!("metric:{}", metric.trim()), rest.to_string()));
    }
    if !moirai_contract::policies::find(name).is_some_and(|p| p.user_level) {
        return Err(format!("'{whole}': unknown policy '{name}'; {}", help()));
    }
    Ok((name.to_string(), rest.to_string()))
}

impl fmt::Display for PolicyThreading {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self.policy.strip_prefix("script:") {
            Some(expression) => write!(f, "script:\"{}\":{}", expression.replace('"', "\\\""), self.threads)?,
            None => write!(f, "{}:{}", self.policy, self.threads)?,
        }
        let default = PolicyThreading::new(&self.policy);
        // A turn with a quantum takes as many steps as fit unless a batch is given.
        let default_batch = if self.quantum.is_some() { usize::MAX } else { DEFAULT_BATCH };
        if self.batch != default_batch {
            write!(f, ":batch={}", self.batch)?;
        }
        if let Some(q) = self.quantum.filter(|q| Some(*q) != default.quantum) {
            write!(f, ":quantum={}", humantime::format_duration(q))?;
        }
        if self.period != DEFAULT_PERIOD {
            write!(f, ":period={}", humantime::format_duration(self.period))?;
        }
        if self.source_every != default.source_every {
            match self.source_every {
                Some(k) => write!(f, ":sources={k}")?,
                None => write!(f, ":sources=off")?,
            }
        }
        if self.activation != ActivationMode::Auto {
            write!(f, ":activation={}", self.activation.as_str())?;
        }
        if self.activation_threshold != DEFAULT_ACTIVATION_THRESHOLD {
            write!(f, ":activation-threshold={}", self.activation_threshold)?;
        }
        if let Some(lag) = self.activation_lag {
            write!(f, ":activation-lag={}", humantime::format_duration(lag))?;
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn settings_round_trip() {
        for text in [
            "qs:2",
            "rr:1",
            "rr:2:quantum=40ms",
            "qbs:2",
            "hr:4:batch=1",
            "fcfs:2:quantum=5ms:batch=4",
            "script:\"queue_size * cost\":2",
            "script:\"if query == \\\"q1\\\" { 1 } else { 2 }\":1",
            "metric:rate_in:2:period=1s",
            "qs:2:activation=always",
            "qbs:2:activation-threshold=0.75",
            "qs:2:activation-lag=25ms",
        ] {
            let c = PolicyThreading::parse(text, text).unwrap_or_else(|e| panic!("{text}: {e}"));
            let again = PolicyThreading::parse(&c.to_string(), text).unwrap();
            assert_eq!(c, again, "{text} -> {c}");
        }
        let c = PolicyThreading::parse(r#"script:"if query == \"q1\" { 1 } else { 2 }":2"#, "x").unwrap();
        assert_eq!((c.policy.as_str(), c.threads), (r#"script:if query == "q1" { 1 } else { 2 }"#, 2));
        let c = PolicyThreading::parse("script:\"a:b\":3", "x").unwrap();
        assert_eq!((c.policy.as_str(), c.threads), ("script:a:b", 3));
        let rr = PolicyThreading::parse("rr", "rr").unwrap();
        assert_eq!((rr.quantum, rr.batch), (Some(Duration::from_millis(20)), usize::MAX));
    }

    #[test]
    fn bad_settings_are_explained() {
        for (text, expect) in [
            ("bogus:2", "unknown policy 'bogus'"),
            ("qs:0", "the thread count '0'"),
            ("qs:2:batch=0", "batch '0'"),
            ("qs:2:quantum=0ms", "quantum must be positive"),
            ("qs:2:quantum=fast", "quantum 'fast'"),
            ("qs:2:period=0s", "too short"),
            ("qs:2:speed=3", "unknown setting 'speed=3'"),
            ("script:queue_size", "quote the script"),
            ("script:\"queue_size", "closing quote"),
            ("script:\"\"", "the script is empty"),
            ("metric:", "name the metric"),
            ("qs:2:activation=sometimes", "use auto or always"),
            ("qs:2:activation-threshold=0.2", "from 0.5 to 1"),
            ("qs:2:activation-threshold=high", "activation-threshold 'high'"),
            ("qs:2:activation-lag=1ms", "from 10ms to 10s"),
            ("qs:2:activation-lag=soon", "activation-lag 'soon'"),
        ] {
            let e = PolicyThreading::parse(text, text).unwrap_err().to_string();
            assert!(e.contains(expect), "{text}: {e}");
        }
    }
}

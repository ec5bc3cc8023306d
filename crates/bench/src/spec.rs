//! What a sweep is asked to do: the offered rates and the configurations compared.
//!
//! Both are parsed from the command line into plain values here, with errors that say what was
//! wrong and how to write it, so that a typo fails at start-up and not an hour into a sweep.

use std::fmt;

use crate::BenchError;

/// Most rate points one sweep may have: a sweep of more points is almost surely a typo in STEP.
pub const MAX_RATE_POINTS: usize = 1000;

/// Middleware policies a configuration may name: the OS-level names of
/// [`moirai_contract::policies`] — the policies of the Lachesis evaluation (Queue-Size,
/// Highest-Rate, First-Come-First-Served, Random); `moirai schedule` checks the name again when it
/// starts.
pub fn known_policies() -> Vec<&'static str> {
    moirai_contract::policies::os_level().collect()
}

/// `moirai schedule` flags a configuration may set with `/NAME=VALUE` (`qs/translator=realtime`,
/// `flink:qs/translator=realtime/rt-threads=2`): they go to the middleware of that configuration,
/// not to the workload. The simulator reads `/translator=` the same way.
pub const MIDDLEWARE_ARGS: &[&str] = &[
    "translator",
    "rt-threads",
    "rt-class",
    "nice-best",
    "nice-worst",
    "autogroup-nice",
    "flink-queue",
    "source-queue",
    "period",
    "activation",
    "activation-threshold",
    "activation-lag",
    "activation-startup",
    "smoothing",
    // `qs/verbose`: every decision in the point's middleware log (`<out>/middleware-logs/`).
    "verbose",
];

/// Parses the offered rates of a sweep, in tuples/s, into an ascending list.
///
/// Two forms: `FROM:TO:STEP` (FROM, FROM+STEP, ... up to TO inclusive) and a comma list
/// `1000,2000,5000`. Numbers may carry a `k`, `M` or `G` suffix (×10³, ×10⁶, ×10⁹) and `_`
/// separators: `1M:9M:2M`, `250_000`.
///
/// ```
/// assert_eq!(moirai_bench::parse_rates("1k:3k:1k").unwrap(), vec![1000.0, 2000.0, 3000.0]);
/// assert_eq!(moirai_bench::parse_rates("5000,1000").unwrap(), vec![1000.0, 5000.0]);
/// assert!(moirai_bench::parse_rates("3000:1000:500").is_err());
/// ```
pub fn parse_rates(text: &str) -> Result<Vec<f64>, BenchError> {
    let bad = |why: String| BenchError::Rates { text: text.to_string(), why };
    let text_t = text.trim();
    if text_t.is_empty() {
        return Err(bad("it is empty".into()));
    }
    let mut rates = if text_t.contains(':') {
        let parts: Vec<&str> = text_t.split(':').collect();
        if parts.len() != 3 {
            return Err(bad("a range has three parts FROM:TO:STEP".into()));
        }
        let from = parse_rate(parts[0]).map_err(&bad)?;
        let to = parse_rate(parts[1]).map_err(&bad)?;
        let step = parse_rate(parts[2]).map_err(&bad)?;
        if from > to {
            return Err(bad(format!("FROM {} is above TO {}", fmt_rate(from), fmt_rate(to))));
        }
        let count = ((to - from) / step + 1e-9).floor() + 1.0;
        if count > MAX_RATE_POINTS as f64 {
            return Err(bad(format!("it makes {count} rate points, more than {MAX_RATE_POINTS}; use a larger STEP")));
        }
        // Multiply rather than accumulate, so that 0.1-style steps do not drift past TO.
        (0..count as usize).map(|i| from + step * i as f64).collect::<Vec<f64>>()
    } else {
        let mut list = Vec::new();
        for part in text_t.split(',') {
            list.push(parse_rate(part).map_err(&bad)?);
        }
        list
    };
    rates.sort_by(f64::total_cmp);
    if let Some(w) = rates.windows(2).find(|w| w[0] == w[1]) {
        return Err(bad(format!("rate {} is listed twice", fmt_rate(w[0]))));
    }
    if rates.len() > MAX_RATE_POINTS {
        return Err(bad(format!("{} rate points are more than {MAX_RATE_POINTS}", rates.len())));
    }
    Ok(rates)
}

/// One positive rate in tuples/s with an optional k/M/G suffix (`250000`, `250k`, `1.5M`).
pub fn parse_rate(part: &str) -> Result<f64, String> {
    let p = part.trim().replace('_', "");
    let (digits, scale) = match p.chars().last() {
        Some('k' | 'K') => (&p[..p.len() - 1], 1e3),
        Some('M' | 'm') => (&p[..p.len() - 1], 1e6),
        Some('G' | 'g') => (&p[..p.len() - 1], 1e9),
        _ => (p.as_str(), 1.0),
    };
    let value: f64 = digits
        .parse()
        .map_err(|_| format!("'{}' is not a number of tuples/s (e.g. 250000, 250k, 1.5M)", part.trim()))?;
    let value = value * scale;
    if !(value.is_finite() && value > 0.0) {
        return Err(format!("'{}' must be a positive number of tuples/s", part.trim()));
    }
    Ok(value)
}

/// Formats a rate compactly for tables and axes: `2.5M`, `250k`, `900`.
pub fn fmt_rate(rate: f64) -> String {
    let (v, suffix) = if rate.abs() >= 1e9 {
        (rate / 1e9, "G")
    } else if rate.abs() >= 1e6 {
        (rate / 1e6, "M")
    } else if rate.abs() >= 1e3 {
        (rate / 1e3, "k")
    } else {
        (rate, "")
    };
    let s = format!("{v:.3}");
    let s = s.trim_end_matches('0').trim_end_matches('.');
    format!("{s}{suffix}")
}

/// The stream processing system a configuration runs.
#[derive(Clone, Copy, Debug, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum System {
    /// moirai's own engine, as `moirai run <workload>`.
    Moirai,
    /// Apache Flink (1.20), running the workload's job of `integrations/flink` ([`crate::flink`]).
    Flink,
    /// Apache Flink 2.x (2.3), the same jobs built against it ([`crate::flink::FLINK2`]).
    Flink2,
    /// Apache Storm, running the workload's topology of `integrations/storm` ([`crate::storm`]).
    Storm,
}

impl System {
    /// Whether it is an SPE on the JVM, running a job of `integrations/`.
    pub fn is_jvm(self) -> bool {
        self.jvm().is_some()
    }

    /// What its jobs on the JVM are, for an SPE on the JVM.
    pub fn jvm(self) -> Option<&'static crate::jvm::JvmSystem> {
        match self {
            System::Moirai => None,
            System::Flink => Some(&crate::flink::FLINK),
            System::Flink2 => Some(&crate::flink::FLINK2),
            System::Storm => Some(&crate::storm::STORM),
        }
    }

    /// Its name in messages.
    pub fn name(self) -> &'static str {
        match self {
            System::Moirai => "moirai",
            System::Flink => "Flink",
            System::Flink2 => "Flink 2",
            System::Storm => "Storm",
        }
    }
}

/// Who decides which thread gets the CPU.
#[derive(Clone, Debug, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Scheduler {
    /// The Linux scheduler alone, no middleware: the baseline of the papers.
    Os,
    /// The middleware `moirai schedule --policy <name>` steers the Linux scheduler.
    Policy(String),
}

/// One configuration of a side-by-side comparison.
///
/// Written `[SYSTEM:]SCHEDULER[@THREADING][/NAME=VALUE...][#TAG]`: `os`, `qs`, `os@dynamic`,
/// `flink:qs`, `os#b`; `qs@policy:2` runs the policy at the user level instead (the engine's
/// policy executor with 2 workers, `--threading policy:qs:2`, no middleware), as do STAFiLOS'
/// `rr`, `qbs` and `rb`, which exist only there. SYSTEM is `moirai` (the default), `flink` or
/// `storm`, or `flink2` (the Flink jobs on Flink 2.3 instead of 1.20);
/// SCHEDULER is `os`, a middleware policy ([`known_policies`]) or `script:EXPR`, a priority
/// expression the middleware runs (`--script EXPR`, e.g. `flink:script:input_buffers`); THREADING is an engine
/// threading model passed as `--threading`; each `/NAME=VALUE` is a workload argument of this
/// configuration only, passed as `--NAME VALUE` (`/NAME` alone as `--NAME`): `os/exchange=lbf`
/// runs WordCount with Hone's LBF exchange ([`vary`] writes them for a swept parameter), except
/// the middleware's own flags ([`MIDDLEWARE_ARGS`], `qs/translator=realtime`), which go to
/// `moirai schedule`; TAG
/// only tells apart configurations that are otherwise the same (an A/A comparison shows the
/// noise of the machine).
#[derive(Clone, Debug, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub struct Configuration {
    /// The unique name used in tables, plots and files: as written, with `#2`, `#3`, ... added to
    /// repeats.
    pub label: String,
    /// The system that runs the workload.
    pub system: System,
    /// The scheduler in charge.
    pub scheduler: Scheduler,
    /// The engine's threading model, when not the engine's default.
    pub threading: Option<String>,
    /// Workload arguments of this configuration only (`/exchange=lbf` → `--exchange lbf`),
    /// passed before the sweep's own arguments after `--`.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub run_args: Vec<String>,
    /// Arguments of this configuration's middleware (`/translator=realtime` →
    /// `--translator realtime`), [`MIDDLEWARE_ARGS`] only.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub schedule_args: Vec<String>,
    /// Flink on a standalone cluster of this many TaskManagers, each in a network namespace of its
    /// own (`flink:qs/cluster=standalone:2`, [`crate::cluster_job`]); `None`: a MiniCluster in the
    /// job's JVM.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub cluster: Option<usize>,
}

/// Most TaskManagers of a `/cluster=standalone:N` configuration (each a JVM of ~1 GB on this
/// machine).
pub const MAX_TASKMANAGERS: usize = 4;

/// Takes `/cluster=standalone:N` out of a JVM configuration's `/NAME=VALUE` arguments, the only
/// one such a configuration takes: `N` TaskManagers, Flink only.
fn jvm_cluster(system: System, run_args: &[String]) -> Result<Option<usize>, String> {
    let usage = "write /cluster=standalone:N (N TaskManagers, 1..=4, each in a network namespace of its own)";
    match run_args {
        [] => Ok(None),
        [flag, value] if flag == "--cluster" => {
            if !matches!(system, System::Flink | System::Flink2) {
                return Err(format!("/cluster= runs Flink on a standalone cluster; {} has none", system.name()));
            }
            let n = value
                .strip_prefix("standalone:")
                .ok_or_else(|| format!("/cluster={value}: the only kind of cluster is standalone; {usage}"))?;
            match n.parse::<usize>() {
                Ok(n) if (1..=MAX_TASKMANAGERS).contains(&n) => Ok(Some(n)),
                _ => Err(format!(
                    "/cluster={value}: '{n}' is not a number of TaskManagers in 1..={MAX_TASKMANAGERS}; {usage}"
                )),
            }
        }
        _ => Err(format!(
            "/NAME=VALUE arguments are for moirai's engine; pass the {} job's after --{}",
            system.name(),
            if matches!(system, System::Flink | System::Flink2) {
                " (a Flink configuration takes only /cluster=standalone:N)"
            } else {
                ""
            }
        )),
    }
}

impl Configuration {
    /// Parses one configuration; `label` is set to the text itself.
    pub fn parse(text: &str) -> Result<Configuration, BenchError> {
        let bad = |why: String| BenchError::Configuration { text: text.to_string(), why };
        let t = text.trim();
        // The tag only makes the label unique; it changes nothing in how the point runs.
        let body = match t.split_once('#') {
            Some((b, tag)) if is_name(tag) => b,
            Some(_) => return Err(bad("the #TAG after '#' must be letters, digits, '-' or '_'".into())),
            None => t,
        };
        // Workload arguments after '/': neither a threading model nor a system has one.
        let (body, (run_args, schedule_args)) = match body.split_once('/') {
            Some((b, args)) => (b, parse_run_args(args).map_err(&bad)?),
            None => (body, (Vec::new(), Vec::new())),
        };
        // '@' first: a threading model may have ':' in it (os@dynamic:2), a system never '@'.
        let (head, threading) = match body.split_once('@') {
            Some((h, th)) if is_threading(th) => (h, Some(th.to_string())),
            Some((_, th)) => return Err(bad(format!("'{th}' after '@' is not a threading model name"))),
            None => (body, None),
        };
        let (system, sched) = match head.split_once(':') {
            Some(("moirai", r)) => (System::Moirai, r),
            Some(("flink", r)) => (System::Flink, r),
            Some(("flink2", r)) => (System::Flink2, r),
            Some(("storm", r)) => (System::Storm, r),
            Some(("script", _)) => (System::Moirai, head),
            Some((s, _)) => {
                return Err(bad(format!("unknown system '{s}'; known: moirai (default), flink, flink2, storm")))
            }
            None => (System::Moirai, head),
        };
        let user_level = threading.as_deref().is_some_and(|th| th.starts_with("policy"));
        let scheduler = match sched {
            "os" => Scheduler::Os,
            p if moirai_contract::policies::find(p).is_some_and(|n| n.os_level) => Scheduler::Policy(p.to_string()),
            // A user-defined priority through the middleware: `script:queue_size*cost`.
            p if p.strip_prefix("script:").is_some_and(|e| !e.trim().is_empty()) && !user_level => {
                Scheduler::Policy(p.to_string())
            }
            // STAFiLOS' schedulers exist only at the user level.
            p if user_level && moirai_contract::policies::find(p).is_some_and(|n| n.user_level) => {
                Scheduler::Policy(p.to_string())
            }
            "" => return Err(bad("it names no scheduler; write os or a policy".into())),
            other => {
                return Err(bad(format!(
                    "unknown scheduler '{other}'; write os (Linux alone) or a policy: {}",
                    known_policies().join(", ")
                )))
            }
        };
        if system.is_jvm() && threading.is_some() {
            return Err(bad(format!(
                "@THREADING names a threading model of moirai's engine, not of {}",
                system.name()
            )));
        }
        let cluster = if system.is_jvm() { jvm_cluster(system, &run_args).map_err(&bad)? } else { None };
        let run_args = if cluster.is_some() { Vec::new() } else { run_args };
        // `qs@policy:2`: the policy runs at the user level, in the engine's policy executor; no
        // middleware. `qs@policy` and `rr@policy` take the executor's defaults.
        if let Some(settings) = threading.as_deref().and_then(|th| th.strip_prefix("policy")) {
            if !(settings.is_empty() || settings.starts_with(':')) {
                return Err(bad(format!("'policy{settings}' is not a threading model name; e.g. qs@policy:2")));
            }
            let policy = match &scheduler {
                Scheduler::Policy(p) => p.clone(),
                Scheduler::Os => return Err(bad("@policy needs a policy before it, e.g. qs@policy:2".into())),
            };
            let threading = Some(format!("policy:{policy}{settings}"));
            if !schedule_args.is_empty() {
                return Err(bad(format!(
                    "{} are flags of the middleware, which @policy does not run",
                    schedule_args.iter().filter(|a| a.starts_with("--")).cloned().collect::<Vec<_>>().join(", ")
                )));
            }
            return Ok(Configuration {
                label: t.to_string(),
                system,
                scheduler: Scheduler::Os,
                threading,
                run_args,
                schedule_args,
                cluster: None,
            });
        }
        Ok(Configuration { label: t.to_string(), system, scheduler, threading, run_args, schedule_args, cluster })
    }

    /// The middleware policy, if the configuration runs one.
    pub fn policy(&self) -> Option<&str> {
        match &self.scheduler {
            Scheduler::Os => None,
            Scheduler::Policy(p) => Some(p),
        }
    }

    /// Whether this build of the lab can run the configuration; a clear error if not.
    ///
    /// The threading model is checked against the engine's own parser, so a model the engine
    /// gains is accepted here without a change. Whether `moirai schedule` exists is checked
    /// separately, against the binary that will run ([`crate::sweep::preflight`]); whether Flink
    /// has the workload and takes its flags, with the sweep ([`crate::SweepSpec::validate`]).
    pub fn check_implemented(&self) -> Result<(), BenchError> {
        let not = |why: String| BenchError::Unsupported { label: self.label.clone(), why };
        // `micro-batch[:…]` is not an engine threading model but the micro-batch execution of
        // `moirai run` (moirai-microbatch), whose settings `moirai run` itself checks.
        if let Some(th) = self.threading.as_ref().filter(|th| !th.starts_with("micro-batch")) {
            th.parse::<moirai_engine::Threading>().map_err(|e| not(e.to_string()))?;
        }
        // A standalone cluster's TaskManagers run in network namespaces of their own.
        if self.cluster.is_some() {
            if crate::requires::on_path("ip").is_none() {
                return Err(not("the cluster's network namespaces need `ip` (apt-get install iproute2)".into()));
            }
            if moirai_os::caps::euid() != 0 {
                return Err(not(
                    "the cluster's network namespaces need root (CAP_NET_ADMIN, CAP_SYS_ADMIN); run the lab as root"
                        .into(),
                ));
            }
        }
        Ok(())
    }
}

impl fmt::Display for Configuration {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.label)
    }
}

/// `exchange=lbf/tau=20ms/sentence-variance` → `--exchange lbf --tau 20ms --sentence-variance`;
/// the middleware's flags ([`MIDDLEWARE_ARGS`]) apart: (workload arguments, middleware arguments).
fn parse_run_args(text: &str) -> Result<(Vec<String>, Vec<String>), String> {
    let (mut run, mut schedule) = (Vec::new(), Vec::new());
    for part in text.split('/') {
        let (name, value) = match part.split_once('=') {
            Some((n, v)) => (n, Some(v)),
            None => (part, None),
        };
        if !is_flag_name(name) {
            return Err(format!(
                "'{part}' after '/' is not a workload argument; write /NAME=VALUE (e.g. os/exchange=lbf) or /NAME"
            ));
        }
        let args = if MIDDLEWARE_ARGS.contains(&name) { &mut schedule } else { &mut run };
        args.push(format!("--{name}"));
        match value {
            Some("") => return Err(format!("/{name}= has no value; write /{name}=VALUE or /{name}")),
            Some(v) => args.push(v.to_string()),
            None => {}
        }
    }
    Ok((run, schedule))
}

/// Crosses configurations with the values of swept workload parameters: every configuration
/// runs once per value, as `CONFIG/NAME=VALUE` (`--vary exchange=fifo,rr,lbf`). Several
/// parameters make every combination, the first parameter varying slowest.
///
/// ```
/// use moirai_bench::{parse_configurations, vary};
/// let configs = parse_configurations("os").unwrap();
/// let labels: Vec<String> =
///     vary(configs, &["exchange=fifo,lbf".to_string()]).unwrap().into_iter().map(|c| c.label).collect();
/// assert_eq!(labels, ["os/exchange=fifo", "os/exchange=lbf"]);
/// ```
pub fn vary(configurations: Vec<Configuration>, parameters: &[String]) -> Result<Vec<Configuration>, BenchError> {
    let mut out = configurations;
    for parameter in parameters {
        let bad = |why: &str| BenchError::Spec(format!("--vary {parameter}: {why}"));
        let (name, values) = parameter
            .split_once('=')
            .ok_or_else(|| bad("write NAME=VALUE,VALUE,... (e.g. --vary exchange=fifo,rr,lbf)"))?;
        if !is_flag_name(name) {
            return Err(bad(
                "NAME must be a `moirai run` flag without its -- (a letter, then letters, digits, '-' or '_')",
            ));
        }
        let values: Vec<&str> = values.split(',').map(str::trim).collect();
        if values.iter().any(|v| v.is_empty() || v.contains('/') || v.contains('#')) {
            return Err(bad("a value is empty or has '/' or '#' in it"));
        }
        let mut next = Vec::with_capacity(out.len() * values.len());
        for value in &values {
            for c in &out {
                if c.run_args.iter().chain(&c.schedule_args).any(|a| a == &format!("--{name}")) {
                    return Err(bad(&format!("configuration {} already sets /{name}", c.label)));
                }
                // Re-parse so that the label and the arguments stay one thing.
                let (base, tag) = match c.label.split_once('#') {
                    Some((b, t)) => (b, format!("#{t}")),
                    None => (c.label.as_str(), String::new()),
                };
                next.push(Configuration::parse(&format!("{base}/{name}={value}{tag}"))?);
            }
        }
        out = next;
    }
    Ok(out)
}

/// A threading model with its parameters: `dynamic:2`, `elastic:1-4:period=500ms`, `fused:a+b`.
fn is_threading(s: &str) -> bool {
    !s.is_empty() && s.chars().all(|c| c.is_ascii_alphanumeric() || "-_:+=.".contains(c))
}

/// A `moirai run` flag without its `--`: `exchange`, `link-capacity`.
fn is_flag_name(s: &str) -> bool {
    s.starts_with(|c: char| c.is_ascii_alphabetic()) && is_name(s)
}

fn is_name(s: &str) -> bool {
    !s.is_empty() && s.chars().all(|c| c.is_ascii_alphanumeric() || c == '-' || c == '_')
}

/// Parses `--compare A,B,...` into configurations with unique labels: a repeat of the same text
/// gets `#2`, `#3`, ... so that `os,os` is an A/A comparison.
pub fn parse_configurations(text: &str) -> Result<Vec<Configuration>, BenchError> {
    let mut out: Vec<Configuration> = Vec::new();
    for part in text.split(',') {
        if part.trim().is_empty() {
            return Err(BenchError::Configuration {
                text: text.to_string(),
                why: "an empty name in the list; write e.g. --compare os,qs".into(),
            });
        }
        let mut c = Configuration::parse(part)?;
        if out.iter().any(|o| o.label == c.label) {
            let base = c.label.clone();
            let mut n = 2;
            while out.iter().any(|o| o.label == format!("{base}#{n}")) {
                n += 1;
            }
            c.label = format!("{base}#{n}");
        }
        out.push(c);
    }
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ranges_include_both_ends() {
        assert_eq!(parse_rates("2000:6000:2000").unwrap(), vec![2000.0, 4000.0, 6000.0]);
        assert_eq!(parse_rates("1M:9M:2M").unwrap(), vec![1e6, 3e6, 5e6, 7e6, 9e6]);
        assert_eq!(parse_rates("1000:1000:1").unwrap(), vec![1000.0]);
        // TO need not be on the grid.
        assert_eq!(parse_rates("1000:2500:1000").unwrap(), vec![1000.0, 2000.0]);
        // Fractional steps do not drift past TO.
        assert_eq!(parse_rates("0.1:0.3:0.1").unwrap().len(), 3);
    }

    #[test]
    fn lists_are_sorted_and_accept_suffixes() {
        assert_eq!(parse_rates("5000, 1k,250_000").unwrap(), vec![1000.0, 5000.0, 250_000.0]);
        assert_eq!(parse_rates("1.5M").unwrap(), vec![1.5e6]);
    }

    #[test]
    fn bad_rates_say_what_is_wrong() {
        let msg = |s: &str| parse_rates(s).unwrap_err().to_string();
        assert!(msg("").contains("empty"));
        assert!(msg("6000:2000:1000").contains("FROM 6k is above TO 2k"));
        assert!(msg("1000:2000").contains("FROM:TO:STEP"));
        assert!(msg("1000:2000:0").contains("positive"));
        assert!(msg("-5:10:1").contains("positive"));
        assert!(msg("1000,abc").contains("'abc' is not a number"));
        assert!(msg("1000,1k").contains("listed twice"));
        assert!(msg("1:1000000:1").contains("more than"));
        assert!(msg("1000,,2000").contains("not a number"));
        assert!(msg("inf").contains("positive"));
    }

    #[test]
    fn formats_rates_compactly() {
        assert_eq!(fmt_rate(2_500_000.0), "2.5M");
        assert_eq!(fmt_rate(250_000.0), "250k");
        assert_eq!(fmt_rate(900.0), "900");
        assert_eq!(fmt_rate(1e9), "1G");
    }

    #[test]
    fn parses_configurations() {
        let c = Configuration::parse("os").unwrap();
        assert_eq!((c.system, c.scheduler, c.threading), (System::Moirai, Scheduler::Os, None));
        let c = Configuration::parse("qs").unwrap();
        assert_eq!(c.policy(), Some("qs"));
        let c = Configuration::parse("os@dynamic").unwrap();
        assert_eq!(c.threading.as_deref(), Some("dynamic"));
        let c = Configuration::parse("qs@elastic:1-2:period=500ms#e").unwrap();
        assert_eq!(
            (c.system, c.policy(), c.threading.as_deref()),
            (System::Moirai, Some("qs"), Some("elastic:1-2:period=500ms"))
        );
        let c = Configuration::parse("moirai:os@dynamic:2").unwrap();
        assert_eq!((c.system, c.threading.as_deref()), (System::Moirai, Some("dynamic:2")));
        assert!(Configuration::parse("os@fused:a+b").unwrap().check_implemented().is_ok());
        let c = Configuration::parse("flink:qs").unwrap();
        assert_eq!((c.system, c.policy()), (System::Flink, Some("qs")));
        // Flink 2.3: another build of the same jobs, the same middleware flag.
        let c = Configuration::parse("flink2:qs/flink-queue=records").unwrap();
        assert_eq!((c.system, c.policy()), (System::Flink2, Some("qs")));
        let (f1, f2) = (System::Flink.jvm().unwrap(), c.system.jvm().unwrap());
        assert_eq!((f2.module, f2.middleware_flag, f2.build_dir), (f1.module, f1.middleware_flag, "target/flink2"));
        assert_eq!(serde_json::to_string(&c.system).unwrap(), "\"flink2\"");
        let c = Configuration::parse("storm:hr").unwrap();
        assert_eq!((c.system, c.policy(), c.system.is_jvm()), (System::Storm, Some("hr"), true));
        let c = Configuration::parse("moirai:hr@dedicated#b").unwrap();
        assert_eq!(
            (c.label.as_str(), c.policy(), c.threading.as_deref()),
            ("moirai:hr@dedicated#b", Some("hr"), Some("dedicated"))
        );
        // A script through the middleware.
        let c = Configuration::parse("flink:script:input_buffers").unwrap();
        assert_eq!((c.system, c.policy()), (System::Flink, Some("script:input_buffers")));
        assert_eq!(Configuration::parse("script:queue_size*cost#x").unwrap().policy(), Some("script:queue_size*cost"));
        // The same policy at the user level: the engine's policy executor, no middleware.
        for (text, threading) in [
            ("qs@policy:2", "policy:qs:2"),
            ("qs@policy", "policy:qs"),
            ("rr@policy:2:quantum=40ms", "policy:rr:2:quantum=40ms"),
            ("qbs@policy", "policy:qbs"),
            ("rb@policy:1#x", "policy:rb:1"),
        ] {
            let c = Configuration::parse(text).unwrap();
            assert_eq!((c.scheduler.clone(), c.threading.as_deref()), (Scheduler::Os, Some(threading)), "{text}");
            assert!(c.check_implemented().is_ok(), "{text}");
        }
    }

    #[test]
    fn rejects_unknown_configurations() {
        let msg = |s: &str| Configuration::parse(s).unwrap_err().to_string();
        assert!(msg("xyz").contains("unknown scheduler 'xyz'"));
        assert!(msg("spark:os").contains("unknown system 'spark'; known: moirai (default), flink, flink2, storm"));
        assert!(msg("storm:qs@dynamic").contains("not of Storm"));
        assert!(msg("storm:os/exchange=lbf").contains("pass the Storm job's after --"));
        assert!(msg("os@").contains("threading"));
        assert!(msg("flink:os@dynamic").contains("not of Flink"));
        assert!(msg("os@policy:2").contains("needs a policy before it"));
        assert!(msg("rr").contains("unknown scheduler 'rr'"), "RR exists only at the user level");
        assert!(msg("qs@policyx").contains("not a threading model name"));
        assert!(msg("os#").contains("#TAG"));
        assert!(msg("script:").contains("unknown scheduler 'script:'"));
        assert!(parse_configurations("os,,qs").unwrap_err().to_string().contains("empty"));
    }

    #[test]
    fn flink_configurations_may_run_on_a_standalone_cluster() {
        for (text, system) in
            [("flink:qs/cluster=standalone:2", System::Flink), ("flink2:os/cluster=standalone:4", System::Flink2)]
        {
            let c = Configuration::parse(text).unwrap();
            assert_eq!(c.system, system);
            assert!(c.run_args.is_empty(), "{text}: not a workload argument");
            assert_eq!(c.label, text);
        }
        assert_eq!(Configuration::parse("flink:qs/cluster=standalone:2").unwrap().cluster, Some(2));
        assert_eq!(Configuration::parse("flink:qs").unwrap().cluster, None);
        assert_eq!(Configuration::parse("flink:qs/cluster=standalone:1/translator=realtime").unwrap().cluster, Some(1));
        let msg = |s: &str| Configuration::parse(s).unwrap_err().to_string();
        assert!(msg("flink:qs/cluster=standalone:0").contains("'0' is not a number of TaskManagers in 1..=4"));
        assert!(msg("flink:qs/cluster=standalone:5").contains("in 1..=4"));
        assert!(msg("flink:qs/cluster=standalone").contains("the only kind of cluster is standalone"));
        assert!(msg("flink:qs/cluster=yarn:2").contains("write /cluster=standalone:N"));
        assert!(msg("storm:qs/cluster=standalone:2").contains("Storm has none"));
        assert!(msg("flink:os/exchange=lbf").contains("takes only /cluster=standalone:N"));
        assert!(msg("flink:os/cluster=standalone:2/exchange=lbf").contains("takes only /cluster=standalone:N"));
    }

    #[test]
    fn configurations_carry_workload_arguments() {
        let c = Configuration::parse("os@dynamic:2/exchange=lbf/tau=20ms/sentence-variance#x").unwrap();
        assert_eq!(c.threading.as_deref(), Some("dynamic:2"));
        assert_eq!(c.run_args, ["--exchange", "lbf", "--tau", "20ms", "--sentence-variance"]);
        assert_eq!(c.label, "os@dynamic:2/exchange=lbf/tau=20ms/sentence-variance#x");
        let c = Configuration::parse("qs@policy:2/exchange=rr").unwrap();
        assert_eq!(c.threading.as_deref(), Some("policy:qs:2"));
        assert_eq!(c.run_args, ["--exchange", "rr"]);
        let msg = |s: &str| Configuration::parse(s).unwrap_err().to_string();
        assert!(msg("os/").contains("not a workload argument"));
        assert!(msg("os/exchange=").contains("has no value"));
        assert!(msg("os/--exchange=lbf").contains("not a workload argument"));
        assert!(msg("flink:os/exchange=lbf").contains("after --"));
    }

    #[test]
    fn the_middlewares_flags_go_to_the_middleware() {
        let c = Configuration::parse("qs/translator=realtime/rt-threads=2/exchange=lbf#rt").unwrap();
        assert_eq!(c.schedule_args, ["--translator", "realtime", "--rt-threads", "2"]);
        assert_eq!(c.run_args, ["--exchange", "lbf"]);
        let c = Configuration::parse("flink:qs/translator=realtime").unwrap();
        assert_eq!(c.system, System::Flink);
        assert_eq!(c.schedule_args, ["--translator", "realtime"]);
        assert!(c.run_args.is_empty());
        // Parsed for any scheduler; the sweep refuses them without a policy (the simulator too).
        assert_eq!(Configuration::parse("os/translator=cgroup").unwrap().schedule_args, ["--translator", "cgroup"]);
        let twice = vary(parse_configurations("qs/translator=nice").unwrap(), &["translator=realtime".into()]);
        assert!(twice.unwrap_err().to_string().contains("already sets /translator"));
    }

    #[test]
    fn configurations_carry_activation_and_period_to_the_middleware() {
        let c = Configuration::parse("qs/nice-best=0/ops=3/activation=always#b").unwrap();
        assert_eq!(c.schedule_args, ["--nice-best", "0", "--activation", "always"]);
        assert_eq!(c.run_args, ["--ops", "3"]);
        let c = Configuration::parse("storm:qs/period=1s/smoothing=0.5/activation-threshold=0.9").unwrap();
        assert_eq!(c.schedule_args, ["--period", "1s", "--smoothing", "0.5", "--activation-threshold", "0.9"]);
        assert!(c.run_args.is_empty());
        let c = Configuration::parse("flink:qs/activation-startup=45s").unwrap();
        assert_eq!(c.schedule_args, ["--activation-startup", "45s"]);
        let msg = Configuration::parse("qs@policy:2/period=1s").unwrap_err().to_string();
        assert!(msg.contains("--period are flags of the middleware, which @policy does not run"), "{msg}");
    }

    #[test]
    fn vary_crosses_configurations_with_values() {
        let configs = parse_configurations("os,qs@policy:2#b").unwrap();
        let varied = vary(configs, &["exchange=fifo,lbf".into(), "tau=5ms,20ms".into()]).unwrap();
        let labels: Vec<&str> = varied.iter().map(|c| c.label.as_str()).collect();
        assert_eq!(
            labels,
            [
                "os/exchange=fifo/tau=5ms",
                "qs@policy:2/exchange=fifo/tau=5ms#b",
                "os/exchange=lbf/tau=5ms",
                "qs@policy:2/exchange=lbf/tau=5ms#b",
                "os/exchange=fifo/tau=20ms",
                "qs@policy:2/exchange=fifo/tau=20ms#b",
                "os/exchange=lbf/tau=20ms",
                "qs@policy:2/exchange=lbf/tau=20ms#b",
            ]
        );
        assert_eq!(varied[3].run_args, ["--exchange", "lbf", "--tau", "5ms"]);
        let msg = |v: &str| vary(parse_configurations("os").unwrap(), &[v.into()]).unwrap_err().to_string();
        assert!(msg("exchange").contains("NAME=VALUE"));
        assert!(msg("exchange=lbf,,rr").contains("empty"));
        assert!(msg("--exchange=lbf").contains("NAME must be"));
        let twice = vary(parse_configurations("os/exchange=rr").unwrap(), &["exchange=lbf".into()]);
        assert!(twice.unwrap_err().to_string().contains("already sets /exchange"));
    }

    #[test]
    fn repeats_get_unique_labels() {
        let labels: Vec<String> = parse_configurations("os,os,qs,os").unwrap().into_iter().map(|c| c.label).collect();
        assert_eq!(labels, ["os", "os#2", "qs", "os#3"]);
        let labels: Vec<String> = parse_configurations("os#2,os,os").unwrap().into_iter().map(|c| c.label).collect();
        assert_eq!(labels, ["os#2", "os", "os#3"]);
    }

    #[test]
    fn unimplemented_configurations_fail_before_running() {
        assert!(Configuration::parse("os").unwrap().check_implemented().is_ok());
        assert!(Configuration::parse("os@dedicated").unwrap().check_implemented().is_ok());
        assert!(Configuration::parse("flink:qs").unwrap().check_implemented().is_ok());
        let th = Configuration::parse("os@nosuchmodel").unwrap().check_implemented().unwrap_err().to_string();
        assert!(th.contains("nosuchmodel"), "{th}");
        let th = Configuration::parse("os@dynamic:0").unwrap().check_implemented().unwrap_err().to_string();
        assert!(th.contains("out of range"), "{th}");
    }
}

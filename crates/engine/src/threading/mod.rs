//! Threading configuration as plain data: which threading model runs the engine's physical
//! operators, with its settings, parsed from and printed as the `--threading` text. Nothing here
//! runs anything: the executors ([`crate::executor`]) and the run-time controllers
//! ([`crate::control`]) read these.
//!
//! ```
//! use moirai_engine::Threading;
//!
//! let t: Threading = "dynamic:2".parse().unwrap();
//! assert_eq!(t, Threading::Dynamic { threads: 2 });
//! assert!("dynamic:0".parse::<Threading>().unwrap_err().to_string().contains("out of range"));
//! ```

mod elastic;
mod policy;

use std::fmt;

use serde::{Serialize, Serializer};

pub use elastic::ElasticConfig;
pub use policy::{PolicyThreading, DEFAULT_BATCH, DEFAULT_PERIOD, QBS_SOURCE_EVERY};

pub use crate::error::InvalidSetting;

/// The most worker threads a pool may have.
pub const MAX_POOL_THREADS: usize = 1024;

/// The threading models.
#[derive(Clone, Debug, Default, PartialEq)]
pub enum Threading {
    /// One OS thread per physical operator.
    #[default]
    Dedicated,
    /// A pool of `threads` workers; any worker runs any operator.
    Dynamic {
        /// Worker threads.
        threads: usize,
    },
    /// A dynamic pool whose thread level adapts to the throughput it observes.
    Elastic(ElasticConfig),
    /// Operators on named threads: those with a thread hint on the thread it names, all others
    /// on the first. `threads` is never empty.
    Fused {
        /// The threads' names.
        threads: Vec<String>,
    },
    /// A pool whose workers run the runnable operator a scheduling policy ranks highest
    /// ([`crate::user_level`]).
    Policy(PolicyThreading),
}

impl Threading {
    /// The name without parameters: `dedicated`, `dynamic`, `elastic` or `fused`.
    pub fn model(&self) -> &'static str {
        match self {
            Threading::Dedicated => "dedicated",
            Threading::Dynamic { .. } => "dynamic",
            Threading::Elastic(_) => "elastic",
            Threading::Fused { .. } => "fused",
            Threading::Policy(_) => "policy",
        }
    }

    /// True for the models where a thread runs many operators (nice on one of its threads
    /// affects every operator it runs).
    pub fn is_pool(&self) -> bool {
        *self != Threading::Dedicated
    }
}

impl fmt::Display for Threading {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Threading::Dedicated => f.write_str("dedicated"),
            Threading::Dynamic { threads } => write!(f, "dynamic:{threads}"),
            Threading::Elastic(c) => write!(f, "elastic:{c}"),
            Threading::Fused { threads } if threads.len() == 1 && threads[0] == "fused" => f.write_str("fused"),
            Threading::Fused { threads } => write!(f, "fused:{}", threads.join("+")),
            Threading::Policy(c) => write!(f, "policy:{c}"),
        }
    }
}

impl Serialize for Threading {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        s.collect_str(self)
    }
}

/// The cores this process may run on (its affinity mask), at least 1.
pub fn available_cores() -> usize {
    std::thread::available_parallelism().map_or(1, |n| n.get())
}

const THREADING_HELP: &str =
    "threading models: dedicated, dynamic[:N], elastic[:MIN-MAX][:start=N][:period=DURATION], \
fused[:NAME+NAME...], policy:NAME[:N][:batch=B][:quantum=DURATION][:period=DURATION]";

impl std::str::FromStr for Threading {
    type Err = InvalidSetting;
    fn from_str(s: &str) -> Result<Self, InvalidSetting> {
        parse(s).map_err(|message| InvalidSetting::new(s, message))
    }
}

fn parse(s: &str) -> Result<Threading, String> {
    {
        let (model, params) = match s.split_once(':') {
            Some((m, p)) => (m, Some(p)),
            None => (s, None),
        };
        let count = |what: &str, text: &str| -> Result<usize, String> {
            match text.trim().parse::<usize>() {
                Ok(n) if (1..=MAX_POOL_THREADS).contains(&n) => Ok(n),
                Ok(n) => Err(format!("'{s}': {what} {n} is out of range; use 1 to {MAX_POOL_THREADS}")),
                Err(_) => Err(format!("'{s}': {what} '{text}' is not a whole number; e.g. dynamic:2")),
            }
        };
        match (model, params) {
            ("dedicated", None) => Ok(Threading::Dedicated),
            ("dynamic", None) => Ok(Threading::Dynamic { threads: available_cores() }),
            ("dynamic", Some(n)) => Ok(Threading::Dynamic { threads: count("the thread count", n)? }),
            ("elastic", params) => {
                Ok(Threading::Elastic(ElasticConfig::parse(params.unwrap_or(""), s).map_err(|e| e.message)?))
            }
            ("fused", None) => Ok(Threading::Fused { threads: vec!["fused".into()] }),
            ("fused", Some(names)) => {
                let threads: Vec<String> = names.split('+').map(|n| n.trim().to_string()).collect();
                if threads.iter().any(|n| n.is_empty()) {
                    return Err(format!("'{s}': an empty thread name; name each thread, e.g. fused:io+work"));
                }
                let mut sorted = threads.clone();
                sorted.sort();
                if let Some(w) = sorted.windows(2).find(|w| w[0] == w[1]) {
                    return Err(format!("'{s}': thread '{}' is named twice", w[0]));
                }
                Ok(Threading::Fused { threads })
            }
            ("policy", Some(p)) => Ok(Threading::Policy(PolicyThreading::parse(p, s).map_err(|e| e.message)?)),
            ("policy", None) => Err(format!("'{s}': name a policy, e.g. policy:qs:2; {THREADING_HELP}")),
            ("dedicated", Some(_)) => Err(format!("'{s}': dedicated takes no parameters")),
            (other, _) => Err(format!("unknown threading model '{other}'; {THREADING_HELP}")),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn threading_names_round_trip() {
        for s in [
            "dedicated",
            "dynamic:3",
            "fused",
            "fused:a+b",
            "elastic:1-4:start=2:period=500ms",
            "elastic:3",
            "policy:qs:2",
            "policy:rr:1:quantum=5ms",
            "policy:script:\"queue_size * 2\":2:batch=4",
            "policy:qbs:2:sources=3",
            "policy:qbs:1:sources=off",
            "policy:qs:2:sources=4",
        ] {
            let t: Threading = s.parse().unwrap();
            assert_eq!(t.to_string().parse::<Threading>().unwrap(), t, "{s}");
        }
        assert_eq!("dynamic:2".parse::<Threading>().unwrap(), Threading::Dynamic { threads: 2 });
        assert_eq!(serde_json::to_value(Threading::Dynamic { threads: 2 }).unwrap(), "dynamic:2");
    }

    #[test]
    fn bad_threading_is_explained() {
        for (s, says) in [
            ("dynamic:0", "out of range"),
            ("dynamic:abc", "not a whole number"),
            ("dynamic:99999", "out of range"),
            ("elastic:4-2", "min 4 > max 2"),
            ("elastic:1-2:start=3", "start 3"),
            ("elastic:1-2:period=0s", "period"),
            ("elastic:1-2:speed=3", "unknown"),
            ("fused:a++b", "empty thread name"),
            ("fused:a+a", "named twice"),
            ("dedicated:2", "no parameters"),
            ("pool", "unknown threading model 'pool'"),
            ("policy", "name a policy"),
            ("policy:nope:2", "unknown policy 'nope'"),
            ("policy:qbs:2:sources=0", "sources '0' must be a whole number"),
        ] {
            let err = s.parse::<Threading>().unwrap_err().to_string();
            assert!(err.contains(says), "{s}: {err}");
        }
    }
}

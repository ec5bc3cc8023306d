//! One measured point of a sweep, and the run summary it is read from
//! ([`moirai_contract::summary`]: what `moirai run <workload> --json` prints on the last line of
//! its stdout in every execution mode).

use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};

pub use moirai_contract::summary::{Latency, QueueLen, RunSummary};

/// One (configuration, rate, repetition) of a sweep.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct Point {
    /// Label of the configuration.
    pub configuration: String,
    /// The swept offered rate, tuples/s.
    pub rate: f64,
    /// Repetition, from 1.
    pub rep: u32,
    /// Wall-clock time the point took, s (start-up and shutdown included).
    pub wall_s: f64,
    /// What went wrong, if the point failed; `None` for a measured point.
    pub failure: Option<String>,
    /// The engine's summary, if it printed one.
    pub run: Option<RunSummary>,
    /// CPU of the middleware during (approximately) the measured window, as a share of one
    /// core; `None` for configurations without middleware.
    pub middleware_cpu: Option<f64>,
    /// Share of (approximately) the measured window in which the middleware acted on the SPE
    /// (`crate::mw_state`), 0..=1; `None` for configurations without middleware.
    #[serde(default)]
    pub middleware_active_share: Option<f64>,
    /// When the middleware first acted on the SPE, in seconds after the SPE's start; `None` when
    /// it never did (or there is no middleware).
    #[serde(default)]
    pub middleware_first_active_s: Option<f64>,
    /// How many times the middleware (or the policy executor) started acting on the SPE, from
    /// its start to the window's end; `None` without one.
    #[serde(default)]
    pub middleware_activations: Option<u64>,
    /// How many times it turned idle on the SPE, by reason code (`no_gain`, `probing`, …), over
    /// the same time.
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub middleware_releases: BTreeMap<String, u64>,
    /// With one middleware per node (a standalone cluster, `crate::cluster_job`): each node's
    /// middleware CPU, in the order of the TaskManagers; `middleware_cpu` is their sum.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub middleware_cpu_nodes: Vec<f64>,
    /// How fast the machine was right before the point started ([`crate::speed`]); `None` where
    /// not probed (a simulated point, or `--speed-probes` other than `every-point`).
    #[serde(default)]
    pub speed: Option<crate::speed::Speed>,
}

impl Point {
    /// The engine's summary of a point that did not fail.
    pub fn measured(&self) -> Option<&RunSummary> {
        if self.failure.is_none() {
            self.run.as_ref()
        } else {
            None
        }
    }
}

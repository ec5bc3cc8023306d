//! The metric provider: Lachesis Algorithm 3.
//!
//! It is created from the metrics the active policies need ([`Requirement`]) and what each SPE's
//! driver can sample ([`Capabilities`]). Creation resolves, per SPE, where every needed metric
//! comes from — the driver, or a derivation whose dependencies can in turn be obtained — and fails
//! with an error naming the policy, the chain of metrics and the missing primitives. Each round,
//! [`MetricProvider::update`] takes the driver's [`Samples`] and computes the needed metrics
//! recursively, dependency first, each once (memoised), and nothing else. It keeps the previous
//! round's counters of every physical operator to difference them; operators that disappear are
//! forgotten, and an operator whose threads changed or whose counters went backwards (a restart)
//! starts over.

use std::collections::{BTreeMap, BTreeSet};
use std::time::Duration;

use crate::cluster::Cluster;
use crate::derive::{self, OpHistory, Round};
use crate::entity::OpRef;
use crate::metric::Metric;
use crate::values::MetricValues;

/// What the driver of one SPE can sample.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Capabilities {
    /// The SPE's name (as in [`SpeTopology::name`](crate::SpeTopology::name)).
    pub spe: String,
    /// The driver's name, for error messages (e.g. `"flink"`).
    pub driver: String,
    /// The metrics it samples: usually primitives; a derived metric listed here is taken from the
    /// driver instead of being computed.
    pub provides: BTreeSet<Metric>,
}

/// The metrics one policy needs.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Requirement {
    /// The policy's name, for error messages.
    pub policy: String,
    /// The metrics it reads.
    pub metrics: Vec<Metric>,
    /// The SPEs it governs, by name; `None` for all of them.
    pub spes: Option<BTreeSet<String>>,
}

/// A policy needs a metric that an SPE's driver cannot provide, directly or through dependencies.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
#[error("{}", self.message())]
pub struct MetricError {
    /// The policy.
    pub policy: String,
    /// The SPE.
    pub spe: String,
    /// Its driver.
    pub driver: String,
    /// From the metric the policy asked for down to the one that cannot be obtained; its
    /// dependencies (or, if it is primitive, itself) are what is missing.
    pub chain: Vec<Metric>,
    /// What the driver provides.
    pub provided: Vec<Metric>,
}

impl MetricError {
    fn message(&self) -> String {
        let mut s = format!("policy '{}' needs {}", self.policy, self.chain[0]);
        for m in &self.chain[1..] {
            s += &format!(", which needs {m}");
        }
        let last = self.chain[self.chain.len() - 1];
        if last.is_primitive() {
            s += ", a primitive metric only a driver can sample";
        } else {
            s += &format!(", which needs {}", last.describe_derivations());
        }
        let provided: Vec<_> = self.provided.iter().map(|m| m.name()).collect();
        let provided = if provided.is_empty() { "nothing".to_string() } else { provided.join(", ") };
        s + format!(
            "; the driver '{}' of SPE '{}' provides {provided}. Choose a policy whose metrics this driver can \
             serve, or restrict the policy to other SPEs",
            self.driver, self.spe
        )
        .as_str()
    }
}

/// Why a round's metrics could not be computed. The round should be skipped; the next may work.
#[derive(Clone, Debug, PartialEq, thiserror::Error)]
pub enum RoundError {
    /// The cluster has an SPE the provider was not created for.
    #[error("SPE '{0}' is not known to the metric provider; create the provider again with its driver's capabilities")]
    UnknownSpe(String),
    /// The samples were made for a different cluster.
    #[error("the samples are for {got} SPEs / operators but the cluster has {want} (SPE '{spe}'); make Samples from this round's cluster")]
    SamplesMismatch {
        /// The SPE where the shapes differ.
        spe: String,
        /// The cluster's count.
        want: usize,
        /// The samples' count.
        got: usize,
    },
    /// A driver claims a metric but gave no value for an operator.
    #[error("driver '{driver}' provides {metric} but gave no value for operator '{op}' of SPE '{spe}' (report 0 where it does not apply)")]
    MissingSample {
        /// The driver.
        driver: String,
        /// The SPE.
        spe: String,
        /// The physical operator.
        op: String,
        /// The metric.
        metric: Metric,
    },
    /// A sampled value is NaN, infinite or negative.
    #[error("driver '{driver}' reported {metric} = {value} for operator '{op}' of SPE '{spe}'; sampled metrics must be finite and non-negative")]
    BadSample {
        /// The driver.
        driver: String,
        /// The SPE.
        spe: String,
        /// The physical operator.
        op: String,
        /// The metric.
        metric: Metric,
        /// The value.
        value: f64,
    },
    /// The samples' time is not after the previous round's.
    #[error("samples of SPE '{spe}' are at {now:?}, not after the previous round ({before:?}); use a monotonic clock")]
    TimeNotAdvancing {
        /// The SPE.
        spe: String,
        /// The previous round's time.
        before: Duration,
        /// This round's time.
        now: Duration,
    },
}

/// The primitive values a driver sampled in one round, for every physical operator of a cluster.
#[derive(Clone, Debug)]
pub struct Samples {
    spes: Vec<SpeSamples>,
}

#[derive(Clone, Debug)]
struct SpeSamples {
    at: Duration,
    len: usize,
    values: BTreeMap<Metric, Vec<Option<f64>>>,
}

impl Samples {
    /// Empty samples for every physical operator of `cluster`, all taken at `at` (time since any
    /// fixed origin on a monotonic clock; only differences matter).
    pub fn new(cluster: &Cluster, at: Duration) -> Samples {
        let spes = cluster.spes().iter().map(|s| SpeSamples { at, len: s.physical_len(), values: BTreeMap::new() });
        Samples { spes: spes.collect() }
    }

    /// Sets when SPE `spe`'s samples were taken, if not at the time given to [`Samples::new`].
    pub fn set_time(&mut self, spe: usize, at: Duration) {
        self.spes[spe].at = at;
    }

    /// Records `metric = value` for physical operator `op`.
    ///
    /// # Panics
    /// If `op` is not an operator of the cluster the samples were made for.
    pub fn set(&mut self, op: OpRef, metric: Metric, value: f64) {
        let s = &mut self.spes[op.spe];
        assert!(op.op < s.len, "Samples::set: {op:?} is not in the cluster (SPE has {} operators)", s.len);
        s.values.entry(metric).or_insert_with(|| vec![None; s.len])[op.op] = Some(value);
    }
}

/// Where a metric comes from for one SPE.
#[derive(Clone, Copy, Debug)]
enum Source {
    Driver,
    Derived(&'static [Metric]),
}

#[derive(Clone, Debug)]
struct Plan {
    driver: String,
    /// The metrics the policies asked for, in registration order.
    registered: Vec<Metric>,
    /// How to obtain every metric needed, including dependencies.
    sources: BTreeMap<Metric, Source>,
}

/// Computes the metrics the policies need, once per round (Lachesis Algorithm 3).
#[derive(Clone, Debug)]
pub struct MetricProvider {
    plans: BTreeMap<String, Plan>,
    /// The previous round of each physical operator, by (SPE, query, operator) name: names
    /// survive a topology's re-indexing between rounds.
    history: BTreeMap<(String, String, String), OpHistory>,
    /// The previous round's time of each SPE.
    last_at: BTreeMap<String, Duration>,
}

impl MetricProvider {
    /// Resolves, for every SPE in `spes`, how to obtain every metric of every requirement that
    /// governs it. Fails with the first metric that cannot be obtained.
    pub fn new(requirements: &[Requirement], spes: &[Capabilities]) -> Result<MetricProvider, MetricError> {
        let mut plans = BTreeMap::new();
        for caps in spes {
            let mut plan = Plan { driver: caps.driver.clone(), registered: Vec::new(), sources: BTreeMap::new() };
            for req in requirements {
                if req.spes.as_ref().is_some_and(|s| !s.contains(&caps.spe)) {
                    continue;
                }
                for &m in &req.metrics {
                    resolve(m, &caps.provides, &mut plan.sources).map_err(|chain| MetricError {
                        policy: req.policy.clone(),
                        spe: caps.spe.clone(),
                        driver: caps.driver.clone(),
                        chain,
                        provided: caps.provides.iter().copied().collect(),
                    })?;
                    if !plan.registered.contains(&m) {
                        plan.registered.push(m);
                    }
                }
            }
            plans.insert(caps.spe.clone(), plan);
        }
        Ok(MetricProvider { plans, history: BTreeMap::new(), last_at: BTreeMap::new() })
    }

    /// The metrics that will be obtained for SPE `spe` each round (requested ones and their
    /// dependencies), sorted; `None` if the SPE is unknown.
    pub fn needed(&self, spe: &str) -> Option<Vec<Metric>> {
        self.plans.get(spe).map(|p| p.sources.keys().copied().collect())
    }

    /// Computes this round's metric values from the drivers' samples (Algorithm 3, `update`).
    /// On error nothing is remembered from this round.
    pub fn update(&mut self, cluster: &Cluster, samples: &Samples) -> Result<MetricValues, RoundError> {
        let mut values = MetricValues::with_spes(cluster.spes().len());
        let mut history = BTreeMap::new();
        let mut last_at = BTreeMap::new();
        if samples.spes.len() != cluster.spes().len() {
            let spe = cluster.spes().first().map_or(String::new(), |s| s.name().to_string());
            return Err(RoundError::SamplesMismatch { spe, want: cluster.spes().len(), got: samples.spes.len() });
        }
        for (i, spe) in cluster.spes().iter().enumerate() {
            let name = spe.name();
            let plan = self.plans.get(name).ok_or_else(|| RoundError::UnknownSpe(name.to_string()))?;
            let sampled = &samples.spes[i];
            if sampled.len != spe.physical_len() {
                let (want, got) = (spe.physical_len(), sampled.len);
                return Err(RoundError::SamplesMismatch { spe: name.to_string(), want, got });
            }
            if let Some(&before) = self.last_at.get(name) {
                if sampled.at <= before {
                    return Err(RoundError::TimeNotAdvancing { spe: name.to_string(), before, now: sampled.at });
                }
            }
            let prev = (0..spe.physical_len())
                .map(|op| {
                    let p = spe.physical(op);
                    let h = self.history.get(&(name.to_string(), p.query.clone(), p.name.clone()))?;
                    (h.threads == p.threads).then_some(h)
                })
                .collect();
            let round = Round { spe, at: sampled.at, prev };
            let mut cx =
                Compute { plan, spe_name: name, round: &round, sampled, cache: BTreeMap::new(), order: vec![] };
            for &m in &plan.registered {
                cx.compute(m)?;
            }
            let (cache, order) = (cx.cache, cx.order);
            for op in 0..spe.physical_len() {
                let p = spe.physical(op);
                let h = OpHistory {
                    threads: p.threads.clone(),
                    at: sampled.at,
                    counters: cache.iter().filter(|(m, _)| m.is_counter()).map(|(&m, v)| (m, v[op])).collect(),
                    selectivity: cache.get(&Metric::Selectivity).map(|v| v[op]),
                    cost: cache.get(&Metric::Cost).map(|v| v[op]),
                };
                history.insert((name.to_string(), p.query.clone(), p.name.clone()), h);
            }
            last_at.insert(name.to_string(), sampled.at);
            for (m, v) in cache {
                values.insert(cluster, i, m, v);
            }
            values.set_computed(i, order);
        }
        // Operators (and SPEs) absent from this round are dropped from the history here.
        self.history = history;
        self.last_at = last_at;
        Ok(values)
    }
}

/// Decides how to obtain `m` given what the driver provides, recording it (and its dependencies)
/// in `sources`. On failure returns the chain from `m` to the metric that cannot be obtained.
fn resolve(m: Metric, provides: &BTreeSet<Metric>, sources: &mut BTreeMap<Metric, Source>) -> Result<(), Vec<Metric>> {
    if sources.contains_key(&m) {
        return Ok(());
    }
    if provides.contains(&m) {
        sources.insert(m, Source::Driver);
        return Ok(());
    }
    let derivations = m.derivations();
    if derivations.is_empty() {
        return Err(vec![m]);
    }
    let mut first_failure = None;
    for deps in derivations {
        let mut trial = sources.clone();
        match deps.iter().try_for_each(|&d| resolve(d, provides, &mut trial)) {
            Ok(()) => {
                trial.insert(m, Source::Derived(deps));
                *sources = trial;
                return Ok(());
            }
            Err(chain) => {
                first_failure.get_or_insert(chain);
            }
        }
    }
    // With a single derivation, name the deeper metric that failed; with alternatives, stop here
    // so the message lists them all. A failing primitive is described by its dependent's
    // derivations, so it is not appended.
    match first_failure {
        Some(chain) if derivations.len() == 1 && !chain[chain.len() - 1].is_primitive() => {
            Err([vec![m], chain].concat())
        }
        _ => Err(vec![m]),
    }
}

/// One SPE's computation in one round: the per-driver cache of Algorithm 3.
struct Compute<'a> {
    plan: &'a Plan,
    spe_name: &'a str,
    round: &'a Round<'a>,
    sampled: &'a SpeSamples,
    cache: BTreeMap<Metric, Vec<f64>>,
    order: Vec<Metric>,
}

impl Compute<'_> {
    fn compute(&mut self, m: Metric) -> Result<(), RoundError> {
        if self.cache.contains_key(&m) {
            return Ok(()); // Algorithm 3, L10: already computed in this period.
        }
        let v = match self.plan.sources[&m] {
            Source::Driver => self.sampled_values(m)?,
            Source::Derived(deps) => {
                for &d in deps {
                    self.compute(d)?;
                }
                derive::derive(m, deps, &self.cache, self.round)
            }
        };
        self.cache.insert(m, v);
        self.order.push(m);
        Ok(())
    }

    fn sampled_values(&self, m: Metric) -> Result<Vec<f64>, RoundError> {
        let spe = self.round.spe;
        let column = self.sampled.values.get(&m);
        (0..spe.physical_len())
            .map(|op| {
                let op_name = || spe.physical(op).name.clone();
                match column.and_then(|c| c[op]) {
                    None => Err(RoundError::MissingSample {
                        driver: self.plan.driver.clone(),
                        spe: self.spe_name.to_string(),
                        op: op_name(),
                        metric: m,
                    }),
                    Some(value) if !value.is_finite() || value < 0.0 => Err(RoundError::BadSample {
                        driver: self.plan.driver.clone(),
                        spe: self.spe_name.to_string(),
                        op: op_name(),
                        metric: m,
                        value,
                    }),
                    Some(value) => Ok(value),
                }
            })
            .collect()
    }
}

#[cfg(test)]
#[path = "provider_tests.rs"]
mod tests;

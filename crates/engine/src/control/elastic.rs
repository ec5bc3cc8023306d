//! The elastic controller: every period, the throughput over all operators (tuples in per
//! second) → [`Elastic::update`] → the pool's thread level.

use std::sync::atomic::Ordering;
use std::sync::Arc;
use std::time::Duration;

use super::Controller;
use crate::elastic::{Elastic, SystemCpu};
use crate::executor::{LevelChange, Observed, ThreadLevel};
use crate::sync::lock;
use crate::threading::ElasticConfig;
use crate::tuple::now_ns;
use crate::view::EngineView;

/// Sizes an elastic pool by the throughput it measures (IBM Streams 4.2's trust and trend).
pub struct ElasticController {
    config: ElasticConfig,
    elastic: Elastic,
    pool: Arc<dyn ThreadLevel>,
    observed: Arc<Observed>,
    verbose: bool,
    cpu: Option<SystemCpu>,
    /// Tuples in and the time at the last round, and when the controller started (ns).
    last: (u64, u64),
    started_ns: u64,
}

impl ElasticController {
    /// A controller of `pool` by `config`; records its changes in `observed` and reports each
    /// decision at `info` level when `verbose`.
    pub fn new(
        config: ElasticConfig,
        pool: Arc<dyn ThreadLevel>,
        observed: Arc<Observed>,
        verbose: bool,
    ) -> ElasticController {
        ElasticController {
            elastic: Elastic::new(config.clone()),
            config,
            pool,
            observed,
            verbose,
            cpu: None,
            last: (0, 0),
            started_ns: 0,
        }
    }
}

/// Tuples taken in by every operator so far.
fn tuples_in(view: &EngineView) -> u64 {
    view.operators().iter().map(|m| m.tuples_in.load(Ordering::Relaxed)).sum()
}

impl Controller for ElasticController {
    fn name(&self) -> &'static str {
        "moirai-elastic"
    }

    fn period(&self) -> Duration {
        self.config.period
    }

    fn start(&mut self, view: &EngineView) {
        self.cpu = Some(SystemCpu::new());
        self.last = (tuples_in(view), now_ns());
        self.started_ns = self.last.1;
    }

    fn round(&mut self, view: &EngineView, _at: Duration) {
        if self.pool.is_done() {
            return;
        }
        let (tuples, now) = (tuples_in(view), now_ns());
        let (last_tuples, last_ns) = self.last;
        let throughput = (tuples - last_tuples) as f64 * 1e9 / (now - last_ns).max(1) as f64;
        self.last = (tuples, now);
        let busy = self.cpu.as_mut().and_then(SystemCpu::busy_share);
        let cpu_ok = busy.is_none_or(|busy| busy <= self.config.max_cpu_share());
        let from = self.elastic.level();
        let decision = self.elastic.update(throughput, cpu_ok);
        if decision.level != from {
            self.pool.set_level(decision.level);
            self.observed.thread_level.store(decision.level, Ordering::SeqCst);
        }
        let at_s = (now - self.started_ns) as f64 / 1e9;
        let change = LevelChange { at_s, from, to: decision.level, throughput, reason: decision.reason.into() };
        if self.verbose {
            tracing::info!(
                "elastic: at {:.1} s, {:.0} tuples/s at level {} -> level {} ({})",
                change.at_s,
                change.throughput,
                change.from,
                change.to,
                change.reason
            );
        }
        if decision.level != from {
            lock(&self.observed.level_changes).push(change);
        }
    }
}

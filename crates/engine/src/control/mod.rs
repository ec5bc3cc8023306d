//! Run-time controllers: threads that watch a running engine through its read-only view
//! ([`EngineView`]) and steer how it is run, every period — the elastic thread level
//! ([`ElasticController`], IBM Streams) and the user-level policy ([`PolicyController`], Haren,
//! STAFiLOS). One trait, [`Controller`]; [`for_threading`] picks a threading model's controllers
//! and [`start`] runs them, in one place.
//!
//! A controller decides; it does not run tasks. It acts through the narrow handles it was given:
//! a pool's [`ThreadLevel`], the operators' priority levels.

mod elastic;
mod policy;

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

pub use elastic::ElasticController;
pub use policy::{prioritizer, PolicyController};

use crate::executor::{Observed, ThreadLevel};
use crate::sync::Signal;
use crate::threading::Threading;
use crate::user_level::Prioritizer;
use crate::view::EngineView;

/// A run-time controller (see the module docs).
pub trait Controller: Send {
    /// The name of its thread (Linux keeps 15 bytes).
    fn name(&self) -> &'static str;
    /// How long between two rounds.
    fn period(&self) -> Duration;
    /// Called once, before the first period.
    fn start(&mut self, _view: &EngineView) {}
    /// One round, `at` after the controller started.
    fn round(&mut self, view: &EngineView, at: Duration);
}

/// The controllers of `threading`: the elastic controller for the elastic pool (`pools` from the
/// executor), the policy controller with `prioritizer` for the policy executor; none otherwise.
pub fn for_threading(
    threading: &Threading,
    pools: &[Arc<dyn ThreadLevel>],
    observed: &Arc<Observed>,
    prioritizer: Option<Box<dyn Prioritizer>>,
    verbose: bool,
) -> Vec<Box<dyn Controller>> {
    let mut controllers: Vec<Box<dyn Controller>> = Vec::new();
    match (threading, pools.first()) {
        (Threading::Elastic(config), Some(pool)) => {
            controllers.push(Box::new(ElasticController::new(config.clone(), pool.clone(), observed.clone(), verbose)));
        }
        (Threading::Policy(config), _) => {
            if let Some(p) = prioritizer {
                controllers.push(Box::new(PolicyController::new(p, config, pools.to_vec())));
            }
        }
        _ => {}
    }
    controllers
}

/// Controllers running on threads of their own, until [`Running::stop`] (or drop).
pub struct Running {
    done: Arc<AtomicBool>,
    wake: Arc<Signal>,
    threads: Vec<JoinHandle<()>>,
}

/// Starts every controller on a thread of its own: [`Controller::start`], then a round every
/// period until stopped.
pub fn start(controllers: Vec<Box<dyn Controller>>, view: Arc<EngineView>) -> std::io::Result<Running> {
    let mut running = Running { done: Arc::new(AtomicBool::new(false)), wake: Arc::default(), threads: Vec::new() };
    for mut c in controllers {
        let (done, wake, view) = (running.done.clone(), running.wake.clone(), view.clone());
        let thread = std::thread::Builder::new().name(c.name().into()).spawn(move || {
            let started = Instant::now();
            c.start(&view);
            let period = c.period();
            while !done.load(Ordering::SeqCst) {
                wake.wait_unless(Some(period), || done.load(Ordering::SeqCst));
                if done.load(Ordering::SeqCst) {
                    return;
                }
                c.round(&view, started.elapsed());
            }
        });
        match thread {
            Ok(t) => running.threads.push(t),
            Err(e) => {
                running.stop();
                return Err(e);
            }
        }
    }
    Ok(running)
}

impl Running {
    /// Stops the controllers and waits for them.
    pub fn stop(&mut self) {
        self.done.store(true, Ordering::SeqCst);
        self.wake.notify();
        for t in self.threads.drain(..) {
            let _ = t.join();
        }
    }
}

impl Drop for Running {
    fn drop(&mut self) {
        self.stop();
    }
}

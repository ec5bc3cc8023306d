//! Drivers: the bridge to one SPE each, through its public APIs only.
//!
//! Every round a driver reports the SPE's topology — rediscovered each time, since threads come
//! and go — and samples the primitive metrics it can provide.

pub mod flink;
pub mod jvm;
pub mod moirai;
pub mod storm;

use std::collections::BTreeSet;

use moirai_sched::Metric;
/// What a driver saw in one round: the controller's input.
pub use moirai_sched::Observation;

/// A driver.
pub trait Driver: Send {
    /// The SPE's configured name.
    fn spe(&self) -> &str;
    /// The driver's kind, e.g. `moirai`.
    fn kind(&self) -> &'static str;
    /// The primitive metrics it can sample.
    fn provides(&self) -> BTreeSet<Metric>;
    /// Reads topology and the `needed` metrics now. An error (the SPE is down, answers garbage)
    /// is reported and retried next round.
    fn observe(&mut self, needed: &[Metric]) -> Result<Observation, String>;
    /// Errors of the last [`observe`](Driver::observe) that did not fail it: the driver went on
    /// with what it knew (the last thread mapping when `/proc` could not be read). Each is
    /// logged and counted once.
    fn take_errors(&mut self) -> Vec<String> {
        Vec::new()
    }
}

/// The port of a loopback URL (`http://127.0.0.1:9464`, `http://localhost:8081/`, `http://[::1]:9464`);
/// `None` for any other host, or a URL without an explicit port.
pub fn loopback_port(url: &str) -> Option<u16> {
    let authority = url.split("://").nth(1)?.split('/').next()?;
    let (host, port) = authority.rsplit_once(':')?;
    if !matches!(host, "127.0.0.1" | "localhost" | "[::1]" | "0.0.0.0") {
        return None;
    }
    port.parse().ok()
}

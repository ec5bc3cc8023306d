//! Helpers shared by the integration tests: configurations, and waiting on an engine without
//! ever hanging the test run.
//!
//! Timeouts here only turn a hang into a failure; no test asserts how fast anything is.
#![allow(dead_code)]

use std::time::{Duration, Instant};

use moirai_engine::{Engine, EngineConfig, EngineError, RunTotals};

/// How long a run may take before the test calls it a hang. Generous: a loaded 2-core CI machine
/// runs many engines at once.
pub const HANG: Duration = Duration::from_secs(60);

/// A configuration with the given channel capacity, batch size and chaining.
pub fn config(channel_capacity: usize, batch_size: usize, chaining: bool) -> EngineConfig {
    EngineConfig { channel_capacity, batch_size, chaining, ..EngineConfig::default() }
}

/// Every threading model, with pools of one worker (where a blocking design would deadlock)
/// and of several, and an elastic pool whose level moves while the test runs.
pub const MODELS: [&str; 7] = [
    "dedicated",
    "dynamic:1",
    "dynamic:3",
    "elastic:1-3:period=20ms",
    "fused",
    "policy:qs:1:period=5ms",
    "policy:rr:2:quantum=1ms",
];

/// [`config`] under the threading model `threading` (one of [`MODELS`]).
pub fn config_in(threading: &str, channel_capacity: usize, batch_size: usize, chaining: bool) -> EngineConfig {
    EngineConfig {
        threading: threading.parse().expect("a valid threading model"),
        ..config(channel_capacity, batch_size, chaining)
    }
}

/// Waits for `engine` to finish and returns what [`Engine::wait`] returns; fails the test if it
/// has not finished after `timeout`. On a hang the engine is aborted and dropped on a detached
/// thread, so even an abort that does not help cannot hang the test itself.
pub fn wait_or_fail(engine: Engine, timeout: Duration) -> Result<RunTotals, EngineError> {
    let deadline = Instant::now() + timeout;
    while !engine.is_finished() {
        if Instant::now() > deadline {
            let summary = engine.totals();
            engine.abort();
            std::thread::spawn(move || drop(engine));
            panic!("the engine did not finish within {timeout:?} (a hang); operators: {:#?}", summary.operators);
        }
        std::thread::sleep(Duration::from_millis(2));
    }
    engine.wait()
}

/// Polls `condition` until it holds; fails the test after `timeout` with `what`.
pub fn wait_until(what: &str, timeout: Duration, mut condition: impl FnMut() -> bool) {
    let deadline = Instant::now() + timeout;
    while !condition() {
        assert!(Instant::now() < deadline, "gave up waiting for {what} after {timeout:?}");
        std::thread::sleep(Duration::from_millis(2));
    }
}

/// Runs `f` on its own thread and returns its result; fails the test if `f` has not returned
/// after `timeout` (the thread is left behind, blocked).
pub fn within<T: Send + 'static>(timeout: Duration, what: &str, f: impl FnOnce() -> T + Send + 'static) -> T {
    let (tx, rx) = std::sync::mpsc::channel();
    std::thread::spawn(move || {
        let _ = tx.send(std::panic::catch_unwind(std::panic::AssertUnwindSafe(f)));
    });
    match rx.recv_timeout(timeout) {
        Ok(Ok(v)) => v,
        Ok(Err(panic)) => std::panic::resume_unwind(panic),
        Err(_) => panic!("{what} did not return within {timeout:?} (a hang)"),
    }
}

/// Yields `items`, pausing 1 ms after every 40th. A source emits watermarks at most once per
/// millisecond of wall time, so without pauses a small data set would mostly be processed before
/// the second watermark, and windows and joins would fire and clean up only at the end; with
/// them, they also do so on watermarks mid-stream.
pub fn pausing<T: Send + 'static>(items: Vec<T>) -> impl Iterator<Item = T> + Send + 'static {
    items.into_iter().enumerate().map(|(k, item)| {
        if k % 40 == 39 {
            std::thread::sleep(Duration::from_millis(1));
        }
        item
    })
}

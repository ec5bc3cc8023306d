//! A small, bounded HTTP/1.1 server for read-only endpoints: the engine's metrics endpoint
//! (`/metrics`, `/topology`) and the middleware's own metrics and dashboard. What a path answers
//! is the caller's [`Handler`]; how connections are kept, read, bounded and timed out is this
//! crate's, the same for both.
//!
//! One thread of its own runs a `poll(2)` loop over the listener and every open connection, so
//! an idle client costs one descriptor and no thread, and nothing runs between requests. Bounds,
//! so that no client can take the endpoint — or the process serving it — down:
//!
//! - at most [`Limits::max_connections`] open connections, and never more than a quarter of the
//!   process's descriptor limit (`RLIMIT_NOFILE`), so the process keeps descriptors of its own; a
//!   new connection beyond closes the one idle longest or, when none is idle, the one whose
//!   request or response has been under way longest (a slow client holds its slot only until
//!   someone else needs it);
//! - a request head must arrive whole within [`Limits::head_timeout`] of its first byte and fit in
//!   [`Limits::max_head`] bytes (else `431`); a response must be taken by the client within
//!   [`Limits::write_timeout`]; a connection idle for [`Limits::idle_timeout`] — before its first
//!   request or between two — is closed: every message that stalls is timed out;
//! - when the process runs out of descriptors all the same (`EMFILE`/`ENFILE`), the loop lowers
//!   its cap below what is open, closes the connection idle longest or pauses accepting for a
//!   moment, and keeps serving; it reports that at most once a minute (with how many more times it
//!   happened), so a flood cannot fill a log;
//! - responses go out in one write (head and body together) with `TCP_NODELAY`, so keep-alive
//!   clients never wait for a delayed ACK.
//!
//! [`request`] parses heads and encodes responses (pure); [`server`] is the loop.
#![forbid(missing_docs)]
#![forbid(unsafe_code)]

pub mod request;
pub mod server;

pub use request::{Request, Response};
pub use server::{Limits, Server};

/// What answers requests: a path (with the method and headers) → a [`Response`]. Runs on the
/// server's thread, so it should be quick: the engine reads its counters, the middleware copies a
/// string it prepared.
pub trait Handler: Send + 'static {
    /// The response to `request`.
    fn handle(&self, request: &Request<'_>) -> Response;
}

impl<F: Fn(&Request<'_>) -> Response + Send + 'static> Handler for F {
    fn handle(&self, request: &Request<'_>) -> Response {
        self(request)
    }
}

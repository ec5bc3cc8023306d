//! `moirai schedule`: a middleware in the spirit of Lachesis (Middleware '21) that makes the Linux
//! scheduler follow a user's scheduling policy for the operator threads of running, unmodified
//! SPEs.
//!
//! A round (Algorithm 1): the [`driver`]s report each SPE's topology and primitive metrics; the
//! metric provider of [`moirai_sched`] derives what the due policies need; each policy's schedule
//! goes through a [`translate`]or (nice values per thread, or cpu cgroup weights) into Linux, via
//! [`moirai_os`], which records every original value first so that everything is put back on exit
//! or after a crash. [`daemon`] runs the loop: drivers, then the round of
//! [`moirai_sched::Controller`], then translators; [`config`] reads what to run and [`drivers`]
//! makes the drivers it names; [`observe`] reports the middleware's own cost and decisions;
//! [`dashboard`] shows them live. [`realtime`] is the real-time translator (Lachesis-RT) with its
//! [`watchdog`]; [`session`] says what nice values can do under `sched_autogroup` and sets an
//! SPE's session-group nice. [`activity`] decides, per SPE, whether the schedules are enforced now
//! (only while scheduling can help).
#![forbid(missing_docs)]
#![forbid(unsafe_code)]

pub mod activity;
pub mod config;
pub mod daemon;
pub mod dashboard;
pub mod driver;
pub mod drivers;
pub mod observe;
pub mod prometheus;
pub mod realtime;
pub mod session;
pub mod translate;
pub mod watchdog;

pub use config::{Config, DriverKind, FlinkQueue, PolicyConfig, SourceQueue, SpeConfig, TranslatorKind};
pub use daemon::{Daemon, DaemonError};

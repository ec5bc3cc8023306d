//! Why the activation rule is in its state ([`Reason`]), in words and as a stable code.

use std::fmt;
use std::time::Duration;

/// Why the rule is in its state, for logs, dashboards and metrics.
#[derive(Clone, Debug, PartialEq)]
pub enum Reason {
    /// Not enough rounds yet to judge (the first `confirm` window).
    Starting,
    /// Idle: the machine has room (mean busy share over the window).
    CpuRoom {
        /// Mean busy share.
        busy: f64,
        /// The level it was below: the CPU threshold when idle, the losing-ground level minus
        /// the hysteresis when it let go.
        threshold: f64,
        /// Below it in every round of the window (when it let go), or in at least one (idle:
        /// the machine was not busy in every round, whatever its mean).
        every_round: bool,
    },
    /// Idle: the SPE keeps up (the largest backlog of the window, in time at its input rate).
    KeepingUp {
        /// Largest lag of the window.
        lag: Duration,
    },
    /// Idle again: the SPE keeps up and its input fell below the rate at which it fell
    /// behind.
    RateFellBack {
        /// Input now, tuples/s.
        rate: f64,
        /// The rate at which they fell behind (the lower of the intake over the window that
        /// activated the rule and over its first release window of acting), tuples/s.
        behind_at: f64,
    },
    /// Active: the machine is saturated and the SPE falls behind.
    Behind {
        /// Mean busy share (`None`: unknown).
        busy: Option<f64>,
        /// Smallest lag of the window (`None`: no backlog reported).
        lag: Option<Duration>,
    },
    /// Active: the SPE keeps losing ground while the machine is nearly saturated.
    LosingGround {
        /// Mean busy share of the window.
        busy: f64,
        /// How much the backlog grew over the window, in time at its input rate.
        growth: Duration,
        /// The window.
        window: Duration,
    },
    /// Idle again, to see: the SPE kept up for the probe window while scheduled, with the
    /// machine busy and its input as high as when it fell behind; without the scheduler it may
    /// keep up too.
    Probing {
        /// How long it kept up while scheduled.
        kept_up: Duration,
        /// The probe window after this one, should the SPE fall behind again within
        /// [`PROBE_MEMORY`](super::PROBE_MEMORY) release windows.
        next: Duration,
    },
    /// Idle again: after the first `release` window of acting the SPE was still behind, and the
    /// scheduling had neither lowered its backlog nor raised its throughput; left to Linux for
    /// `hold` (and while that lasts, even when it falls behind).
    NoGain {
        /// How long it acted.
        acted: Duration,
        /// Tuples waiting at the verdict.
        backlog: f64,
        /// Tuples that would be waiting at the pace at which it fell behind (or, after a
        /// comparison, at the pace it kept under Linux).
        expected: f64,
        /// The SPE's throughput while it acted, tuples/s: its sources' intake less what its
        /// operators' queues grew by (after a comparison, the mean of the windows before and
        /// after the one under Linux).
        through: f64,
        /// Its throughput when it fell behind (or under Linux), tuples/s.
        through_before: f64,
        /// Whether the baseline was a window under Linux on the same load (a comparison), not
        /// the window that activated the rule.
        against_linux: bool,
        /// How long the rule leaves the SPE to Linux before it may act again.
        hold: Duration,
    },
    /// A comparison while behind: the SPE stayed behind while scheduled, so it is handed to
    /// Linux for a window (idle, `linux` unknown yet) and then scheduled again for another
    /// (active, `linux` known), and the two are judged against Linux's course.
    Comparing {
        /// The SPE's throughput over the window of acting before, tuples/s (as in
        /// [`Reason::NoGain`]).
        scheduled: f64,
        /// Its throughput under Linux, tuples/s (`None`: the window under Linux is under way).
        linux: Option<f64>,
        /// The length of each window.
        window: Duration,
    },
    /// Active, and staying so: no sign of room yet.
    Holding {
        /// Why it cannot let go yet.
        why: &'static str,
    },
}

impl Reason {
    /// A short, stable name of the kind of reason, for metric labels: `starting`, `cpu_room`,
    /// `keeping_up`, `rate_fell_back`, `probing`, `no_gain`, `comparing`, `behind`,
    /// `losing_ground`, `holding`.
    pub fn code(&self) -> &'static str {
        match self {
            Reason::Starting => "starting",
            Reason::CpuRoom { .. } => "cpu_room",
            Reason::KeepingUp { .. } => "keeping_up",
            Reason::RateFellBack { .. } => "rate_fell_back",
            Reason::Probing { .. } => "probing",
            Reason::NoGain { .. } => "no_gain",
            Reason::Comparing { .. } => "comparing",
            Reason::Behind { .. } => "behind",
            Reason::LosingGround { .. } => "losing_ground",
            Reason::Holding { .. } => "holding",
        }
    }
}

fn seconds(d: Duration) -> String {
    if d >= Duration::from_secs(1000) {
        "over 1000 s".into()
    } else {
        format!("{:.2} s", d.as_secs_f64())
    }
}

impl fmt::Display for Reason {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Reason::Starting => write!(f, "starting: watching the load for the first rounds"),
            Reason::CpuRoom { busy, threshold, every_round } => write!(
                f,
                "the machine has room ({:.0} % busy on average, below {:.0} % in {} round)",
                busy * 100.0,
                threshold * 100.0,
                if *every_round { "every" } else { "at least one" }
            ),
            Reason::KeepingUp { lag } => {
                write!(f, "the SPE keeps up (backlog at most {} of input)", seconds(*lag))
            }
            Reason::RateFellBack { rate, behind_at } => write!(
                f,
                "the SPE keeps up and its input ({rate:.0} tuples/s) fell below the {behind_at:.0} tuples/s at \
                 which it fell behind"
            ),
            Reason::Probing { kept_up, next } => write!(
                f,
                "the SPE kept up for {} while scheduled: handing it back to Linux to see whether it keeps up \
                 without (should it fall behind again soon, the next check waits {})",
                seconds(*kept_up),
                seconds(*next)
            ),
            Reason::NoGain { acted, backlog, expected, through, through_before, against_linux: false, hold } => write!(
                f,
                "scheduling did not help: after {} of it the SPE is still behind, {backlog:.0} tuples waiting \
                 (at the pace at which it fell behind, {expected:.0}) and {through:.0} tuples/s through it \
                 (against {through_before:.0}); not scheduling it for {}",
                seconds(*acted),
                seconds(*hold)
            ),
            Reason::NoGain { backlog, expected, through, through_before, against_linux: true, hold, .. } => write!(
                f,
                "scheduling did no better than Linux: the SPE is still behind, {backlog:.0} tuples waiting (on the \
                 course it kept under Linux just before, {expected:.0}) and {through:.0} tuples/s through it \
                 scheduled (against {through_before:.0} under Linux); not scheduling it for {}",
                seconds(*hold)
            ),
            Reason::Comparing { scheduled, linux: None, window } => write!(
                f,
                "the SPE stays behind while scheduled ({scheduled:.0} tuples/s through it): handing it back to \
                 Linux for {} to compare",
                seconds(*window)
            ),
            Reason::Comparing { scheduled, linux: Some(linux), window } => write!(
                f,
                "under Linux {linux:.0} tuples/s went through the SPE (against {scheduled:.0} scheduled before): \
                 scheduling it again for {} to compare",
                seconds(*window)
            ),
            Reason::Behind { busy, lag } => {
                write!(f, "the SPE falls behind")?;
                if let Some(lag) = lag {
                    write!(f, " (backlog {} of input, not draining)", seconds(*lag))?;
                }
                if let Some(busy) = busy {
                    write!(f, " while the machine is {:.0} % busy", busy * 100.0)?;
                }
                Ok(())
            }
            Reason::LosingGround { busy, growth, window } => write!(
                f,
                "the SPE loses ground (its backlog grew by {} of input over {}) while the machine is {:.0} % busy",
                seconds(*growth),
                seconds(*window),
                busy * 100.0
            ),
            Reason::Holding { why } => write!(f, "still needed: {why}"),
        }
    }
}

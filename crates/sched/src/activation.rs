//! When scheduling can help: the activation rule ("do no harm").
//!
//! Priorities only matter when threads compete for the CPU and the SPE cannot keep up; below
//! that, every runnable thread gets a core soon anyway, and priorities only delay the threads
//! they put last (measured: queue-size nice values at 80 % of the Linux scheduler's saturation
//! point raised the end-to-end p99 3.5× on moirai's engine and 10× on Storm). So a caller keeps
//! one [`Activation`] per SPE, feeds it one [`LoadSample`] per round, and enforces the policies'
//! schedules on that SPE's threads only while it is [active](Activation::is_active); when it
//! turns idle, the caller hands every thread back its original value.
//!
//! The rule, with the thresholds of [`ActivationConfig`]:
//!
//! - **Idle → active** when, over the last [`confirm`](ActivationConfig::confirm) window, the
//!   machine was busy at or above [`cpu_threshold`](ActivationConfig::cpu_threshold) in every
//!   round *and* the SPE was behind in every round, the one that opens the window too — the
//!   tuples waiting in it (its sources' backlog, the external queue, its operators' queues)
//!   were at least [`lag`](ActivationConfig::lag) of input, at the rate the sources took tuples
//!   in over the window — and the backlog did not shrink over the window. Both together mean
//!   that the SPE uses all the CPU it can get and still falls behind: what it gets must be
//!   shared better. A burst that the SPE drains within the window does not count.
//! - **Idle → active** also when the SPE **loses ground** with some CPU left idle: over the last
//!   [`losing_ground`](ActivationConfig::losing_ground) window the machine was busy on average
//!   at or above the threshold minus [`LOSING_GROUND_MARGIN`], the SPE was behind in every
//!   round, and its backlog grew by at least another `lag` of input. This is where the Linux
//!   scheduler leaves room: a pipeline whose bottleneck runs dry while the operators that feed it
//!   wait for the CPU behind lighter ones keeps the machine 85–87 % busy and falls further behind
//!   every second (measured on Flink: queue-size priorities took it from 84 % to 93 % of its CPU
//!   bound). A single bottleneck thread on an otherwise idle machine stays below the level: nice
//!   cannot help it.
//! - **Active → idle** when it has been active for at least [`release`](ActivationConfig::release)
//!   and, over the last `release` window, the sources were never behind *and* there was room:
//!   the machine below the losing-ground level (the threshold minus [`LOSING_GROUND_MARGIN`],
//!   minus [`CPU_HYSTERESIS`]) in every round, or the sources' input below
//!   [`RATE_MARGIN`] of the rate at which they fell behind (the rate has fallen back; an SPE
//!   whose idle threads spin keeps the CPU busy at any rate, so CPU alone cannot tell). That rate
//!   is the lower of the intake over the window that activated the rule and over its first
//!   `release` window of acting: a source that catches up on what it owes takes in more than its
//!   input's rate (measured on Storm: spouts catching up as the topology started took in
//!   40–100k tuples/s for a few seconds at a steady 30k, their tuples moving into the operators'
//!   queues without the backlog shrinking), and the lower figure errs towards acting (a source
//!   held back takes in less, which only makes a fall harder to see). An input that falls
//!   within the first window of acting is left to the probe below. The fall must also be more
//!   than the SPE's counters can tell: counters refreshed every
//!   [`counter_period`](ActivationConfig::counter_period) give a rate over a window `W` only to
//!   within `counter_period / W` of it either way, so the fall must hold with both rates taken
//!   at the edges of their uncertainty least favourable to it (Storm's reporter writes its
//!   counters once a second, and a round reads them a refresh old or new). Before both, the rule
//!   let go of Storm topologies it kept up past their saturation point, the load unchanged.
//!   A scheduler that works keeps the sources up to date, so "not behind" alone would switch it
//!   off exactly when it helps; that is why room is needed as well. "Never
//!   behind" here, and "kept up" below, mean below [`keep_up`](ActivationConfig::keep_up) of
//!   input on average over the window (over each `confirm` window for the probe), which may
//!   be more than `lag` (an SPE that holds between the two counts as behind while idle and as
//!   keeping up while acted on: it is acted on, then handed back to see, the probes doubling as
//!   below): a queue that holds more for a round and drains is not behind (under
//!   queue-size priorities at 80–90 % busy, moirai's engine had such rounds every few seconds,
//!   and a rule that wanted every round below the level never handed it back).
//! - **Active → idle, to see** ([`Reason::Probing`]) when the SPE, with a backlog figure, has
//!   kept up for the probe window without room on the machine nor a fall of its input: it may
//!   keep up without the scheduler too (a backlog that built while the SPE started and has
//!   drained since; measured on Storm, which keeps the CPU busy whatever its rate, the rule acted
//!   on such a start-up backlog and then held on to a scheduler that only raised its latency for
//!   the rest of the run). If the SPE falls behind again within [`PROBE_MEMORY`], the check
//!   failed and the next probe window is twice as long (from `release` up to
//!   2^[`PROBE_DOUBLINGS`] × `release`); a probe that stays idle longer resets it.
//! - **Active → idle, no gain** ([`Reason::NoGain`]) when, after its first `release` window
//!   of acting, the SPE is still behind and scheduling has not changed its course: the tuples
//!   waiting are not at least [`BACKLOG_GAIN`] below where the pace at which it fell behind
//!   would have brought them, and the SPE takes less than [`THROUGHPUT_GAIN`] more through
//!   than it did then — its throughput being its sources' intake less what its operators'
//!   queues grew by, since sources favoured by the scheduling may take in more only to fill
//!   the queues behind them (measured on Storm with Linear Road past saturation: its bolts'
//!   queues held 60 % more while scheduled, and a comparison by intake found 77.3k tuples/s
//!   scheduled against 70.9k under Linux where 74.6k against 75.0k went through). Priorities
//!   that neither drain the backlog nor raise the throughput only reorder the work, and the threads they put last wait longer (measured on Storm at its CPU
//!   bound: the p50 rose 6–10× while both took in the same). The rule then leaves the SPE to
//!   Linux for twice `release` before it may act again, twice as long after each such verdict
//!   in a row (up to 2^[`PROBE_DOUBLINGS`] × `release`), so that a load that changes gets
//!   another try. The verdict is taken once per activation, on the window that begins with it:
//!   what scheduling gains is a change of course (a lower backlog, or a higher intake), which
//!   later windows no longer show against the same baseline. Where that baseline is another
//!   load's, no verdict is taken: when the sources take in less than then (below
//!   [`RATE_MARGIN`] of it, beyond what the counters can tell) and their own backlog did not
//!   rise by a `lag` of input above its lowest in the window, they had less to take (the
//!   window that activated the rule held a source catching up on what it owed, or the input
//!   fell), where sources held back by the scheduling would have fallen behind by what they did
//!   not take in (measured on Storm at 30k tuples/s: spouts catching up took in 78.6k tuples/s
//!   over the window that activated the rule, 29.9k while it acted, and a verdict against the
//!   78.6k let go of a topology that needed the scheduler).
//! - **Active → idle, to compare** ([`Reason::Comparing`]) when, [`COMPARE_AFTER`] release
//!   windows after it became active, the SPE is still behind and loses ground (its backlog grew
//!   by at least another `lag` of input over the last `release` window) and takes in
//!   [`COMPARE_FALL`] less than when the scheduling last showed a gain (its first window of
//!   acting, or the last comparison it won; a first window judged against a baseline from the
//!   SPE's [start-up](ActivationConfig::startup) shows none, so the first comparison does not
//!   wait for a fall). A gain found once may not last: a load whose cost
//!   per tuple grows as a run goes on (measured on Flink with Linear Road: 3.2 µs of CPU per
//!   tuple in the first minute, 6.4 µs later) ends up behind whatever runs it, and the verdict
//!   above compared the first window of acting with a baseline of the past; a gain that holds
//!   (the intake does not fall) is not paid for again. So the rule hands the SPE to Linux
//!   for one `release` window, takes it back for another, and judges that second window as
//!   above, against the course the SPE kept under Linux just before (its throughput, and its
//!   backlog extrapolated at the pace it grew under Linux), with the throughput of the windows
//!   scheduled before and after Linux's averaged, so that a steady drift of the load favours
//!   neither. No
//!   gain: idle, and held as above; a gain: it stays active and compares again after twice as
//!   long at the earliest (up to 2^[`PROBE_DOUBLINGS`] × that), once its intake fell
//!   [`COMPARE_FALL`] below that comparison's. Should the SPE keep up under Linux, the
//!   comparison ends there, idle.
//!
//! Without a backlog (the SPE's sources report none), the backlog conditions are left out and
//! the rule follows the CPU alone; without a CPU figure, the backlog alone. A sample with
//! neither changes nothing (and an SPE without a backlog figure is never probed: nothing would
//! tell that it keeps up). The decision is a pure function of the samples: time is passed in,
//! nothing is read, slept or logged, so the middleware, the simulator and the engine's
//! user-level executor can share it.
//!
//! ```
//! use std::time::Duration;
//! use moirai_sched::activation::{Activation, ActivationConfig, LoadSample};
//!
//! let mut rule = Activation::new(ActivationConfig::default());
//! let ms = Duration::from_millis;
//! // 20k tuples/s come in; the machine is saturated and the backlog grows by 5k tuples a second.
//! for i in 0..=10u64 {
//!     let at = ms(200 * i);
//!     let sample = LoadSample {
//!         at,
//!         cpu_busy: Some(0.99),
//!         backlog: Some(4_000.0 + 1_000.0 * i as f64),
//!         source_backlog: Some(0.0),
//!         ingested: Some(4_000.0 * i as f64),
//!     };
//!     rule.update(sample);
//!     if rule.is_active() {
//!         break; // later rounds say why it stays active ("still needed: …")
//!     }
//! }
//! assert!(rule.is_active());
//! assert!(rule.reason().to_string().contains("behind"));
//! ```

use std::collections::VecDeque;
use std::time::Duration;

/// What the rule is told about one SPE (and the machine it runs on) in one round.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct LoadSample {
    /// When it was taken, on the caller's monotonic clock.
    pub at: Duration,
    /// The share of the machine's CPU time that was busy since the previous sample (0..=1),
    /// e.g. from `/proc/stat`; `None` when unknown.
    pub cpu_busy: Option<f64>,
    /// Tuples waiting in the SPE now: its sources' backlog, the external queue (Kafka's lag, an
    /// open-loop source's arrears), plus the input queues of its other operators where the
    /// caller counts them (an SPE with deep queues falls behind there first); `None` when the
    /// SPE reports neither.
    pub backlog: Option<f64>,
    /// The part of `backlog` waiting at the sources (their backlog, the external queue);
    /// `None` when the sources report none. It tells a source held back by the scheduling (its
    /// backlog grows by what it did not take in) from a source whose input fell (see the
    /// no-gain verdict in the [module docs](self)).
    pub source_backlog: Option<f64>,
    /// Tuples the SPE's sources have taken in so far (a cumulative counter); `None` when
    /// unknown.
    pub ingested: Option<f64>,
}

/// The thresholds of the rule (see the [module docs](self)).
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct ActivationConfig {
    /// The share of the machine's CPU (0..=1) at or above which it counts as fully used.
    pub cpu_threshold: f64,
    /// How long the signs of saturation must last before the rule activates.
    pub confirm: Duration,
    /// The least time active, and how long the signs of room must last before it is idle again.
    pub release: Duration,
    /// How much input waiting counts as behind, in time at the input rate.
    pub lag: Duration,
    /// How little input waiting counts as keeping up (on average over a window), in time at the
    /// input rate; at least `lag`.
    pub keep_up: Duration,
    /// How long an SPE must lose ground (behind in every round, the backlog growing by at least
    /// another `lag` of input) before the rule acts on a machine that is not quite saturated.
    pub losing_ground: Duration,
    /// How often the SPE refreshes the counters of its sources' intake (zero: they are read
    /// live): a rate taken over a window `W` is then off by up to `counter_period / W` of it.
    pub counter_period: Duration,
    /// How long after the SPE's sources first report their intake (or after a counter of theirs
    /// went backwards: a restart) it counts as starting: a gain found against a window that began
    /// then does not hold the comparison with Linux back (see the [module docs](self), "to
    /// compare"). Zero: an SPE that takes in at full speed from its first round.
    pub startup: Duration,
}

/// The accepted range of [`ActivationConfig::cpu_threshold`]: below half the machine, an SPE is
/// not short of CPU whatever it runs; 1.0 is a machine that is never idle.
pub const CPU_THRESHOLD_RANGE: std::ops::RangeInclusive<f64> = 0.5..=1.0;

/// The accepted range of [`ActivationConfig::lag`]: below 10 ms a queue of one batch counts as
/// behind; above 10 s the rule acts on backlogs that take seconds to drain.
pub const LAG_RANGE: std::ops::RangeInclusive<Duration> = Duration::from_millis(10)..=Duration::from_secs(10);

/// The accepted range of [`ActivationConfig::startup`]: none, up to 10 minutes (a JVM whose job
/// takes longer to reach its speed is better started before the middleware).
pub const STARTUP_RANGE: std::ops::RangeInclusive<Duration> = Duration::ZERO..=Duration::from_secs(600);

/// The share of the rate at which the sources fell behind below which the input counts as
/// fallen back (room, for an SPE whose CPU use does not follow its input).
pub const RATE_MARGIN: f64 = 0.9;

/// The margin below the CPU threshold that counts as room (so that a machine hovering at the
/// threshold does not count as both saturated and free).
pub const CPU_HYSTERESIS: f64 = 0.05;

/// How far below the CPU threshold the machine may be, on average, while an SPE that keeps
/// losing ground still counts as short of CPU (0.75 with the default threshold 0.9): Flink with
/// one bottleneck operator fell behind at 85–87 % busy under the Linux scheduler, while one
/// bottleneck thread on a 2-core machine leaves it about 55 % busy.
pub const LOSING_GROUND_MARGIN: f64 = 0.15;

/// How long after a probe (see the [module docs](self)) acting again counts as the probe having
/// failed, in release windows (30 s with the default 10 s).
pub const PROBE_MEMORY: u32 = 3;

/// How many times the probe window doubles after failed probes, at most (up to 16 × `release`,
/// 160 s with the defaults): an SPE that needs the scheduler loses at most one probe's backlog
/// in that long.
pub const PROBE_DOUBLINGS: u32 = 4;

/// How far below its extrapolation the backlog must be after the first `release` window of
/// acting for the scheduling to count as a gain (a share of the extrapolation: the backlog at
/// activation plus its growth since, at the pace at which the SPE fell behind).
pub const BACKLOG_GAIN: f64 = 0.1;

/// How many release windows of acting (behind all along at the end) pass before the rule first
/// compares the scheduling with Linux's course on the same load (see the [module docs](self)).
pub const COMPARE_AFTER: u32 = 2;

/// How far the intake while acting must fall below what it was when the scheduling last showed a
/// gain (its first window of acting, or the last comparison it won) for a comparison with Linux
/// to begin, beyond what the counters can tell: a gain that does not wear off is not paid for
/// again with a window of Linux. Measured on moirai's engine with Linear Road at 1.8M tuples/s,
/// where every comparison found 1.69–1.70M scheduled against 1.34–1.36M under Linux, and each
/// left a backlog of 2.5 s of input behind it.
pub const COMPARE_FALL: f64 = 0.05;

/// How much more the SPE must take through while acting than when it fell behind (or under
/// Linux, in a comparison) for the scheduling to count as a gain (a share of that throughput:
/// the sources' intake less what the operators' queues grew by): an SPE with bounded queues
/// cannot show a gain in its backlog when its sources read from a queue of their own that it
/// does not report.
pub const THROUGHPUT_GAIN: f64 = 0.03;

impl Default for ActivationConfig {
    /// Measured on this project's 2-core machine (docs/schedule.md, "When it acts").
    fn default() -> Self {
        ActivationConfig {
            cpu_threshold: 0.9,
            confirm: Duration::from_secs(1),
            release: Duration::from_secs(10),
            lag: Duration::from_millis(100),
            keep_up: Duration::from_millis(100),
            // Longer than `confirm`: a growing backlog is the only sign then.
            losing_ground: Duration::from_secs(3),
            counter_period: Duration::ZERO,
            startup: Duration::ZERO,
        }
    }
}

impl ActivationConfig {
    /// The mean busy share at or above which an SPE that loses ground counts as short of CPU:
    /// the threshold minus [`LOSING_GROUND_MARGIN`].
    pub fn losing_ground_level(&self) -> f64 {
        self.cpu_threshold - LOSING_GROUND_MARGIN
    }

    /// The busy share below which every round must stay for the machine to count as having
    /// room again: the losing-ground level minus [`CPU_HYSTERESIS`].
    pub fn room_level(&self) -> f64 {
        self.losing_ground_level() - CPU_HYSTERESIS
    }

    /// How far off a rate taken over `span` may be, as a share of it (at most 1), from counters
    /// refreshed every [`counter_period`](ActivationConfig::counter_period).
    pub fn rate_uncertainty(&self, span: Duration) -> f64 {
        if span.is_zero() {
            return 1.0;
        }
        (self.counter_period.as_secs_f64() / span.as_secs_f64()).min(1.0)
    }

    /// Whether the rate `now` (tuples/s, taken over its span) is below [`RATE_MARGIN`] of the
    /// rate `then` with both at the edges of their [uncertainty](Self::rate_uncertainty) least
    /// favourable to a fall: the input fell, beyond what the counters can tell.
    pub fn rate_fell(&self, now: (f64, Duration), then: (f64, Duration)) -> bool {
        self.rate_below(now, then, RATE_MARGIN)
    }

    /// Whether the rate `now` is below `share` of the rate `then`, both at the edges of their
    /// uncertainty least favourable to a fall (see [`rate_fell`](Self::rate_fell)).
    fn rate_below(&self, now: (f64, Duration), then: (f64, Duration), share: f64) -> bool {
        let highest_now = now.0 * (1.0 + self.rate_uncertainty(now.1));
        let lowest_then = then.0 * (1.0 - self.rate_uncertainty(then.1));
        then.0 > 0.0 && highest_now < share * lowest_then
    }

    /// These thresholds with `lag` as the lag, the keep-up level raised to it where it was lower.
    pub fn with_lag(self, lag: Duration) -> ActivationConfig {
        ActivationConfig { lag, keep_up: self.keep_up.max(lag), ..self }
    }

    /// Checks the values: the CPU threshold within [`CPU_THRESHOLD_RANGE`], the lag within
    /// [`LAG_RANGE`], positive windows.
    pub fn validate(&self) -> Result<(), String> {
        if !CPU_THRESHOLD_RANGE.contains(&self.cpu_threshold) {
            return Err(format!(
                "activation threshold {} is out of range: give the share of the machine's CPU at which it counts as \
                 fully used, from {} to {} (e.g. 0.9)",
                self.cpu_threshold,
                CPU_THRESHOLD_RANGE.start(),
                CPU_THRESHOLD_RANGE.end()
            ));
        }
        if !LAG_RANGE.contains(&self.lag) {
            return Err(format!(
                "activation lag {:?} is out of range: give how much input waiting counts as behind, in time at the \
                 input rate, from {:?} to {:?} (e.g. 100ms)",
                self.lag,
                LAG_RANGE.start(),
                LAG_RANGE.end()
            ));
        }
        if !STARTUP_RANGE.contains(&self.startup) {
            return Err(format!(
                "activation start-up {:?} is out of range: give how long an SPE counts as starting after its sources \
                 first report an intake, from 0s to {:?} (e.g. 20s)",
                self.startup,
                STARTUP_RANGE.end()
            ));
        }
        if self.keep_up < self.lag {
            return Err(format!(
                "the activation rule's keep-up level {:?} is below its lag {:?}: an SPE that holds between the two \
                 would never count as keeping up once acted on, and never be handed back",
                self.keep_up, self.lag
            ));
        }
        if self.confirm.is_zero() || self.release.is_zero() || self.losing_ground.is_zero() {
            return Err("the activation windows (confirm, release, losing_ground) must be positive".into());
        }
        Ok(())
    }
}

pub use reason::Reason;

/// A state change, from [`Activation::update`].
#[derive(Clone, Debug, PartialEq)]
pub struct Transition {
    /// Whether the rule is active now.
    pub active: bool,
    /// Why.
    pub reason: Reason,
}

/// The activation rule of one SPE; see the [module docs](self).
#[derive(Clone, Debug)]
pub struct Activation {
    config: ActivationConfig,
    active: bool,
    /// When it became active (or idle).
    since: Duration,
    reason: Reason,
    /// The SPE's pace over the window that activated it.
    before: Pace,
    /// The input rate a fall is measured against, and the time it was taken over, where the
    /// first `release` window of acting took in less than the window that activated the rule
    /// (`None`: that window's, in `before`).
    fell_behind_at: Option<(f64, Duration)>,
    /// While active: whether the no-gain verdict is still to be taken (once per activation).
    verdict_due: bool,
    /// No-gain verdicts in a row (each doubles the hold after the next).
    no_gains: u32,
    /// After a no-gain verdict: the rule does not act before this, and why.
    held: Option<(Duration, Reason)>,
    /// The samples of the longest window (release, or the losing-ground window) and one before.
    samples: VecDeque<LoadSample>,
    /// State changes so far.
    transitions: u64,
    /// While active: since when every sample has shown the SPE keeping up (its backlog below
    /// `lag` of input over the confirm window).
    kept_up_since: Option<Duration>,
    /// When the last probe handed the SPE back, while that can still count as failed.
    probed_at: Option<Duration>,
    /// Probes failed in a row (each doubles the probe window, up to [`PROBE_DOUBLINGS`]).
    probes_failed: u32,
    /// While active: when the next comparison with Linux may begin.
    compare_due: Duration,
    /// Comparisons the scheduling won in a row in this activation (each doubles the wait).
    compare_wins: u32,
    /// During a comparison: the intake and the throughput over the window of acting before it,
    /// tuples/s.
    comparing: Option<(f64, f64)>,
    /// While active: the intake (tuples/s, and the time it was taken over) when the scheduling
    /// last showed a gain — its first window of acting (unless the window that activated the rule
    /// began while the SPE was [starting](ActivationConfig::startup)), or the last comparison it
    /// won.
    gained_at: Option<(f64, Duration)>,
    /// When the SPE's sources first reported their intake, or last reset their counters.
    started: Option<Duration>,
}

/// How an SPE fell behind: measured over the window that activated the rule.
#[derive(Clone, Copy, Debug, Default)]
struct Pace {
    /// The sources' intake, tuples/s.
    rate: f64,
    /// The SPE's throughput, tuples/s (the [`Window`]'s).
    through: f64,
    /// The time `rate` was measured over.
    rate_span: Duration,
    /// Tuples waiting at activation (`None`: no backlog reported).
    backlog: Option<f64>,
    /// How fast the backlog grew, tuples/s.
    growth: f64,
    /// Whether the window began while the SPE was [starting](ActivationConfig::startup).
    in_startup: bool,
}

impl Activation {
    /// An idle rule.
    pub fn new(config: ActivationConfig) -> Activation {
        Activation {
            config,
            active: false,
            since: Duration::ZERO,
            reason: Reason::Starting,
            before: Pace::default(),
            fell_behind_at: None,
            verdict_due: false,
            no_gains: 0,
            held: None,
            samples: VecDeque::new(),
            transitions: 0,
            kept_up_since: None,
            probed_at: None,
            probes_failed: 0,
            compare_due: Duration::ZERO,
            compare_wins: 0,
            comparing: None,
            gained_at: None,
            started: None,
        }
    }

    /// Its thresholds.
    pub fn config(&self) -> &ActivationConfig {
        &self.config
    }

    /// Sets how often the SPE refreshes its counters, as its driver measured it (a reporter's
    /// period read from what it wrote): the rates of the windows taken from now on allow for it.
    pub fn set_counter_period(&mut self, period: Duration) {
        self.config.counter_period = period;
    }

    /// Whether scheduling can help now: enforce the policies' schedules on this SPE.
    pub fn is_active(&self) -> bool {
        self.active
    }

    /// Why it is in its state.
    pub fn reason(&self) -> &Reason {
        &self.reason
    }

    /// When the current state began (on the samples' clock).
    pub fn since(&self) -> Duration {
        self.since
    }

    /// How many times it changed state.
    pub fn transitions(&self) -> u64 {
        self.transitions
    }

    /// How long the SPE must keep up while active before the rule hands it back to see
    /// ([`Reason::Probing`]): `release`, doubled for each probe that failed in a row.
    pub fn probe_window(&self) -> Duration {
        self.probe_window_after(self.probes_failed)
    }

    /// The probe window after `failed` probes failed in a row.
    fn probe_window_after(&self, failed: u32) -> Duration {
        self.config.release * (1u32 << failed.min(PROBE_DOUBLINGS))
    }

    /// Takes one round's sample; returns the state change it caused, if any. Samples must come
    /// in time order (an older one is ignored).
    pub fn update(&mut self, sample: LoadSample) -> Option<Transition> {
        if self.samples.back().is_some_and(|last| sample.at <= last.at) {
            return None;
        }
        // An intake counter below the last: reset (a restart, or subtasks that finished leaving
        // the sum). Across it nothing would seem taken in; the windows start again here instead.
        if self.samples.back().and_then(|l| l.ingested).zip(sample.ingested).is_some_and(|(a, b)| b < a) {
            self.samples.clear();
            self.started = Some(sample.at);
        }
        if sample.ingested.is_some() {
            self.started.get_or_insert(sample.at);
        }
        self.samples.push_back(sample);
        let keep = self.config.confirm.max(self.config.release).max(self.config.losing_ground);
        // Keep one sample at or before `now - keep`: the start of the longest window.
        while self.samples.len() > 2 && self.samples[1].at + keep <= sample.at {
            self.samples.pop_front();
        }
        let now = sample.at;
        if self.active {
            self.note_keeping_up(now);
            self.consider_release(now)
        } else if let Some((_, scheduled)) = self.comparing {
            self.follow_linux(now, scheduled)
        } else {
            self.consider_activation(now)
        }
    }

    /// Follows, while active, since when the SPE has kept up in every round.
    /// Whether the SPE keeps up for the probe: on average over the last `confirm` window below
    /// the keep-up level (a queue that holds more for one round and drains is not behind; one
    /// that grows raises the mean).
    fn note_keeping_up(&mut self, now: Duration) {
        let keep_up = self.config.keep_up.as_secs_f64();
        let keeping_up = self.window(now, self.config.confirm).and_then(|w| w.lag_mean).is_some_and(|m| m < keep_up);
        self.kept_up_since = if keeping_up { Some(self.kept_up_since.unwrap_or(now)) } else { None };
    }

    fn change(&mut self, now: Duration, active: bool, reason: Reason) -> Option<Transition> {
        let changed = active != self.active;
        self.reason = reason.clone();
        if !changed {
            return None;
        }
        self.active = active;
        self.since = now;
        self.transitions += 1;
        self.kept_up_since = None;
        if let Reason::Comparing { .. } = reason {
            // A comparison's windows: the probes, holds and verdicts of the activation go on.
            self.verdict_due = active;
            return Some(Transition { active, reason });
        }
        self.comparing = None;
        if active {
            self.compare_due = now + self.config.release * COMPARE_AFTER;
            self.compare_wins = 0;
            self.gained_at = None;
            // Acting again soon after a probe: the probe failed; later, the load has changed.
            let failed = self.probed_at.is_some_and(|p| now <= p + self.config.release * PROBE_MEMORY);
            self.probes_failed = if failed { self.probes_failed.saturating_add(1) } else { 0 };
            self.probed_at = None;
            self.verdict_due = true;
            self.fell_behind_at = None;
            // Acting long after the last hold ended: the load has changed; the verdicts start over.
            if self.held.take().is_some_and(|(until, _)| now > until + self.config.release * PROBE_MEMORY) {
                self.no_gains = 0;
            }
        } else if matches!(reason, Reason::Probing { .. }) {
            self.probed_at = Some(now);
            self.no_gains = 0;
        } else {
            self.probes_failed = 0;
            self.probed_at = None;
            if !matches!(reason, Reason::NoGain { .. }) {
                self.no_gains = 0;
            }
        }
        Some(Transition { active, reason })
    }

    fn consider_activation(&mut self, now: Duration) -> Option<Transition> {
        let Some(w) = self.window(now, self.config.confirm) else {
            self.reason = Reason::Starting;
            return None;
        };
        let lag_on = self.config.lag.as_secs_f64();
        let behind = w.lag.map(|(min, _)| min >= lag_on && w.growth.is_some_and(|g| g >= 0.0));
        let busy = w.all_busy;
        let act = match (busy, behind) {
            (Some(b), Some(l)) => b && l,
            (Some(b), None) => b,
            (None, Some(l)) => l,
            (None, None) => false,
        };
        let way_in = if act {
            let lag = w.lag.map(|(min, _)| duration(min));
            Some((Reason::Behind { busy: w.busy_mean, lag }, w.pace()))
        } else {
            self.losing_ground(now)
        };
        if let Some((reason, pace)) = way_in {
            // After a no-gain verdict, Linux keeps the SPE for the hold, behind or not.
            if let Some((_, why)) = self.held.as_ref().filter(|(until, _)| now < *until) {
                self.reason = why.clone();
                return None;
            }
            let opened = now.saturating_sub(pace.rate_span);
            let startup = self.config.startup;
            let in_startup = !startup.is_zero() && self.started.is_some_and(|at| opened < at + startup);
            self.before = Pace { in_startup, ..pace };
            return self.change(now, true, reason);
        }
        // Not both: say what is missing — room on the machine first (then priorities cannot
        // help whatever the backlog), else that the SPE keeps up.
        let reason = match (busy, w.busy_mean) {
            (Some(false), Some(mean)) => {
                Reason::CpuRoom { busy: mean, threshold: self.config.cpu_threshold, every_round: false }
            }
            _ => Reason::KeepingUp { lag: duration(w.lag.map_or(0.0, |(_, max)| max)) },
        };
        self.change(now, false, reason)
    }

    /// The second way in: behind in every round of the longer window, the backlog grown by at
    /// least another `lag` of input, and the machine nearly saturated on average; with the pace
    /// over that window.
    fn losing_ground(&self, now: Duration) -> Option<(Reason, Pace)> {
        let span = self.config.losing_ground;
        let w = self.window(now, span)?;
        let (busy, rate, (min_lag, _), growth) = (w.busy_mean?, w.rate?, w.lag?, w.growth?);
        let lag_on = self.config.lag.as_secs_f64();
        let nearly_saturated = busy >= self.config.losing_ground_level();
        let grew = rate > 0.0 && growth / rate >= lag_on;
        if !(nearly_saturated && min_lag >= lag_on && grew) {
            return None;
        }
        Some((Reason::LosingGround { busy, growth: duration(growth / rate), window: span }, w.pace()))
    }

    fn consider_release(&mut self, now: Duration) -> Option<Transition> {
        if now < self.since + self.config.release {
            self.reason = Reason::Holding { why: "active for less than the release window" };
            return None;
        }
        let Some(w) = self.window(now, self.config.release) else {
            self.reason = Reason::Holding { why: "active for less than the release window" };
            return None;
        };
        let keeping_up = w.lag_mean.is_none_or(|m| m < self.config.keep_up.as_secs_f64());
        // The first window of acting shows whether it changed the SPE's course.
        let verdict_due = std::mem::take(&mut self.verdict_due);
        let compared = self.comparing.take().filter(|_| verdict_due);
        if verdict_due {
            // The lower of the two measures of the input it fell behind at.
            self.fell_behind_at = w.rate.filter(|&r| r < self.before.rate).map(|r| (r, w.span));
        }
        if !keeping_up {
            if verdict_due {
                match self.no_gain(now, &w, compared) {
                    Verdict::NoGain(reason) => return self.change(now, false, reason),
                    Verdict::LoadChanged => {
                        self.reason = Reason::Holding {
                            why: "the SPE is behind, and its sources took in less while scheduled without falling \
                                  behind (a source done catching up, or less input): nothing to judge the scheduling \
                                  against",
                        };
                        return None;
                    }
                    Verdict::Gain if compared.is_some() => {
                        self.compared_with_gain(now, w.rate.map(|r| (r, w.span)));
                        self.reason =
                            Reason::Holding { why: "the SPE is behind, and does better scheduled than under Linux" };
                        return None;
                    }
                    // What a comparison waits for the intake to fall below; nothing, where the
                    // gain was found against the SPE's start-up.
                    Verdict::Gain => self.gained_at = w.rate.filter(|_| !self.before.in_startup).map(|r| (r, w.span)),
                }
            } else if let Some(transition) = self.compare_if_due(now) {
                return Some(transition);
            }
            self.reason = Reason::Holding { why: "the SPE is behind" };
            return None;
        }
        if compared.is_some() {
            // Behind under Linux, keeping up scheduled.
            self.compared_with_gain(now, w.rate.map(|r| (r, w.span)));
        }
        if w.all_room == Some(true) {
            let reason = Reason::CpuRoom {
                busy: w.busy_mean.unwrap_or(0.0),
                threshold: self.config.room_level(),
                every_round: true,
            };
            return self.change(now, false, reason);
        }
        // The rate can only tell when there is a backlog figure (an SPE that reports none is
        // judged by its CPU alone).
        if let (Some(rate), Some(_)) = (w.rate, w.lag) {
            let (behind_at, then_span) = self.fell_behind_at.unwrap_or((self.before.rate, self.before.rate_span));
            if self.config.rate_fell((rate, w.span), (behind_at, then_span)) {
                return self.change(now, false, Reason::RateFellBack { rate, behind_at });
            }
        }
        // Kept up for the probe window with the machine busy and the input as high: it may keep
        // up without the scheduler too; hand it back and see.
        if let Some(since) = self.kept_up_since {
            let kept_up = now.saturating_sub(since);
            if kept_up >= self.probe_window() {
                let next = self.probe_window_after(self.probes_failed.saturating_add(1));
                return self.change(now, false, Reason::Probing { kept_up, next });
            }
        }
        self.reason = Reason::Holding {
            why: if w.busy_mean.is_some() {
                "the machine is still busy and the input has not fallen back"
            } else {
                "the input has not fallen back"
            },
        };
        None
    }
}

fn duration(seconds: f64) -> Duration {
    Duration::try_from_secs_f64(seconds).unwrap_or(Duration::MAX)
}

#[path = "activation_reason.rs"]
mod reason;

#[path = "activation_compare.rs"]
mod compare;

#[path = "activation_verdict.rs"]
mod verdict;
use verdict::Verdict;

#[path = "activation_window.rs"]
mod window;
use window::Window;

#[cfg(test)]
#[path = "activation_tests.rs"]
mod tests;

//! How fast the machine is, probed at a sweep's start, before each of its points and at its end.
//!
//! A virtual machine does not run at one speed: its host, its neighbours there, and the host it is
//! started on next time all differ. On this project's 2-core VM one build of the raw 5-operator
//! pipeline (`moirai run syn --ops 5 --cost-ns 0 --rate 0 --chaining`, built from `c261269`)
//! took in 76–81 M tuples/s on 2026-12-01 and 30–31 M on 2026-12-04 (another start of the VM),
//! and Storm's and Flink's CPU per tuple moved by 2× between sweeps. Interleaved configurations
//! still compare within a sweep; figures of sweeps run hours apart may not. So the lab probes the
//! machine when a sweep starts, before each point and when it ends; records them in
//! `results.json` (`machine.speed`, each point's `speed`) and `results.csv` (`speed_compute_ns`,
//! `speed_memory_ns`: a point that ran on a slower machine than its neighbours shows there);
//! prints them and shows them in `report.html`; and says so when they differ by more than
//! [`DRIFT`]. [`Probing`] (`--speed-probes`) probes the ends only, or never, for sweeps of many
//! short points.
//!
//! Two probes, each the best of a few runs in thread CPU time (so that being preempted does not
//! count), about half a second in all:
//! - `compute_ns`: one step of a dependent multiply-add chain, kept in memory between steps as the
//!   workloads' calibrated busy loop does (`--cost-ns`): the CPU's clock and its share of a core
//!   it may split with a neighbour;
//! - `memory_ns`: one load of a random walk over 8 MiB (past a core's L2: what a pipeline whose
//!   operators' memory is out of the caches pays a miss, and what neighbours on the host's memory
//!   and last-level cache change).

use serde::{Deserialize, Serialize};

/// The probes' figures at one moment.
#[derive(Clone, Copy, Debug, PartialEq, Serialize, Deserialize)]
pub struct Speed {
    /// Nanoseconds of CPU a step of a dependent multiply-add chain takes.
    pub compute_ns: f64,
    /// Nanoseconds of CPU a load of a random walk over [`WALK_BYTES`] takes.
    pub memory_ns: f64,
}

/// When the lab probes the machine (`moirai bench --speed-probes`).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize)]
#[serde(rename_all = "kebab-case")]
pub enum Probing {
    /// At the sweep's start and end and before each point (about half a second a point).
    #[default]
    EveryPoint,
    /// At the sweep's start and end only: a point that ran on a slower machine than its
    /// neighbours does not show.
    Ends,
    /// Never: nothing says whether the machine's speed changed during the sweep.
    Off,
}

impl Probing {
    /// The values `moirai bench --speed-probes` takes.
    pub const NAMES: &'static str = "every-point, ends, off";

    /// Whether the sweep's start and end are probed.
    pub fn at_ends(self) -> bool {
        self != Probing::Off
    }

    /// Whether each point is probed before it starts.
    pub fn before_points(self) -> bool {
        self == Probing::EveryPoint
    }
}

impl std::str::FromStr for Probing {
    type Err = String;

    fn from_str(s: &str) -> Result<Self, String> {
        match s {
            "every-point" => Ok(Probing::EveryPoint),
            "ends" => Ok(Probing::Ends),
            "off" => Ok(Probing::Off),
            _ => Err(format!(
                "'{s}' is not a choice of when to probe the machine's speed; use one of {}",
                Probing::NAMES
            )),
        }
    }
}

/// The probes before and after a sweep.
#[derive(Clone, Copy, Debug, PartialEq, Serialize)]
pub struct SpeedProbes {
    /// When the sweep started.
    pub before: Speed,
    /// When it ended.
    pub after: Speed,
}

/// A change between the probes above which the summary warns (+/- 25 %: a quiet machine's
/// probes, one after another, spread by up to 15 % in the walk and 3 % in the chain).
pub const DRIFT: f64 = 0.25;

/// The memory the walk covers.
pub const WALK_BYTES: usize = 8 << 20;

const COMPUTE_STEPS: u64 = 2_000_000;
const RUNS: usize = 5;

/// Probes the machine now (about half a second).
pub fn probe() -> Speed {
    Speed { compute_ns: compute_ns(), memory_ns: memory_ns() }
}

/// The least thread CPU time of `RUNS` runs of `f`, over `n`.
fn best_ns_per(n: u64, mut f: impl FnMut()) -> f64 {
    (0..RUNS)
        .map(|_| {
            let start = moirai_os::proc::current_thread_cpu_ns();
            f();
            moirai_os::proc::current_thread_cpu_ns().saturating_sub(start)
        })
        .min()
        .map_or(f64::NAN, |ns| ns as f64 / n as f64)
}

fn lcg(x: u64) -> u64 {
    x.wrapping_mul(6364136223846793005).wrapping_add(1442695040888963407)
}

fn compute_ns() -> f64 {
    best_ns_per(COMPUTE_STEPS, || {
        let mut x = 1u64;
        for _ in 0..COMPUTE_STEPS {
            x = std::hint::black_box(lcg(x));
        }
        std::hint::black_box(x);
    })
}

/// A random cyclic permutation of `0..n` (Sattolo's algorithm): following `next[i]` from any
/// index visits all `n` before it comes back, so a walk never settles in a short cycle that
/// fits the caches.
fn one_cycle(n: usize) -> Vec<u32> {
    let mut next: Vec<u32> = (0..n as u32).collect();
    let mut x = 0x9e37_79b9_7f4a_7c15u64;
    for i in (1..n).rev() {
        x = lcg(x);
        next.swap(i, ((x >> 33) % i as u64) as usize);
    }
    next
}

fn memory_ns() -> f64 {
    let next = one_cycle(WALK_BYTES / std::mem::size_of::<u32>());
    // A quarter of the cycle a run: the walk goes on where the last run left it.
    let loads = next.len() as u64 / 4;
    let mut at = 0u32;
    let mut walk = || {
        for _ in 0..loads {
            at = next[at as usize];
        }
        std::hint::black_box(at);
    };
    walk(); // the caches and the TLB as a walk leaves them
    best_ns_per(loads, walk)
}

impl SpeedProbes {
    /// The largest relative change of a probe between the sweep's start and any later probe
    /// (its points', `points`, and its end): 0.2 = 20 %.
    pub fn drift(&self, points: &[Speed]) -> f64 {
        let change = |a: f64, b: f64| if a > 0.0 { (b - a).abs() / a } else { 0.0 };
        points.iter().chain([&self.after]).fold(0.0, |most: f64, s| {
            most.max(change(self.before.compute_ns, s.compute_ns)).max(change(self.before.memory_ns, s.memory_ns))
        })
    }

    /// The lines the lab prints after its table: the probes (those before each point, `points`,
    /// as a range), and a warning past [`DRIFT`].
    pub fn lines(&self, points: &[Speed]) -> Vec<String> {
        let range = |f: fn(&Speed) -> f64, digits: usize| {
            let (lo, hi) = points.iter().map(f).fold((f64::MAX, f64::MIN), |(lo, hi), x| (lo.min(x), hi.max(x)));
            if points.is_empty() {
                String::new()
            } else {
                format!(" (before the points {lo:.digits$}–{hi:.digits$})")
            }
        };
        let mut lines = vec![format!(
            "machine speed (probed at the sweep's start and end): compute {:.2} → {:.2} ns a step{}, memory {:.1} → {:.1} ns a load{} (random walk over {} MiB)",
            self.before.compute_ns,
            self.after.compute_ns,
            range(|s| s.compute_ns, 2),
            self.before.memory_ns,
            self.after.memory_ns,
            range(|s| s.memory_ns, 1),
            WALK_BYTES >> 20,
        )];
        let drift = self.drift(points);
        if drift > DRIFT {
            lines.push(format!(
                "warning: the machine's speed changed by up to {:.0} % during the sweep (others on its host?): compare configurations within a repetition (interleaved pairs), not figures from far apart; results.csv has each point's probe",
                100.0 * drift
            ));
        }
        lines
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn probing_is_read_from_its_names_and_says_what_it_takes() {
        for (name, p) in [("every-point", Probing::EveryPoint), ("ends", Probing::Ends), ("off", Probing::Off)] {
            assert_eq!(name.parse::<Probing>(), Ok(p));
            assert!(Probing::NAMES.contains(name), "{name}");
        }
        let e = "sometimes".parse::<Probing>().unwrap_err();
        assert!(e.contains("'sometimes'") && e.contains(Probing::NAMES), "{e}");
        assert_eq!(Probing::default(), Probing::EveryPoint);
        assert!(Probing::EveryPoint.before_points() && Probing::EveryPoint.at_ends());
        assert!(!Probing::Ends.before_points() && Probing::Ends.at_ends());
        assert!(!Probing::Off.before_points() && !Probing::Off.at_ends());
    }

    #[test]
    fn the_walk_is_one_cycle_through_every_index() {
        for n in [2, 3, 10, 1000, 4096] {
            let next = one_cycle(n);
            let (mut at, mut steps) = (0u32, 0);
            loop {
                at = next[at as usize];
                steps += 1;
                if at == 0 {
                    break;
                }
                assert!(steps <= n, "n = {n}: a walk from 0 did not come back within n steps");
            }
            assert_eq!(steps, n, "n = {n}: the cycle through 0 misses indices");
        }
    }

    #[test]
    fn a_probe_gives_finite_positive_figures() {
        let s = probe();
        assert!(s.compute_ns.is_finite() && s.compute_ns > 0.0, "{s:?}");
        assert!(s.memory_ns.is_finite() && s.memory_ns > 0.0, "{s:?}");
    }

    #[test]
    fn a_change_past_the_drift_is_warned_about() {
        let at = |c, m| Speed { compute_ns: c, memory_ns: m };
        let steady = SpeedProbes { before: at(1.6, 100.0), after: at(1.65, 110.0) };
        assert!((steady.drift(&[]) - 0.10).abs() < 1e-9);
        assert_eq!(steady.lines(&[]).len(), 1, "{:?}", steady.lines(&[]));
        let slower = SpeedProbes { before: at(1.6, 100.0), after: at(1.6, 140.0) };
        let lines = slower.lines(&[]);
        assert_eq!(lines.len(), 2);
        assert!(lines[1].contains("40 %"), "{lines:?}");
        let faster = SpeedProbes { before: at(2.0, 100.0), after: at(1.4, 100.0) };
        assert!((faster.drift(&[]) - 0.3).abs() < 1e-9);
        assert_eq!(faster.lines(&[]).len(), 2);
        // A slow spell in the middle of a sweep counts too, and the points' range is shown.
        let spell = [at(1.6, 105.0), at(1.6, 150.0), at(1.6, 98.0)];
        assert!((steady.drift(&spell) - 0.5).abs() < 1e-9);
        let lines = steady.lines(&spell);
        assert_eq!(lines.len(), 2, "{lines:?}");
        assert!(lines[0].contains("(before the points 98.0–150.0)"), "{lines:?}");
        assert!(lines[1].contains("50 %"), "{lines:?}");
    }
}

//! Hone's simulation (Li et al., TPDS 2021, §4.4, the "−83.3 %" of its abstract): N queues share
//! one link; time is cut into slots of 100 µs, one tuple crosses per slot, tuples arrive at every
//! queue as a Poisson process of the same rate (the input rate split evenly: the paper's 500 to
//! 5000 tuples/s against a link of 10 000 tuples/s), 10 000 slots per run. Largest Backlog First
//! (LBF) is compared with round robin (RRB) by the largest backlog of any queue at any slot.
//!
//! The decisions are the engine's own ([`moirai_engine::exchange::simulate`], which runs
//! [`lbf`](moirai_engine::exchange::lbf) and [`round_robin`](moirai_engine::exchange::round_robin)
//! on the paper's slotted model); this module draws the arrivals and checks LBF's competitive
//! bound, `3 + ⌈log₂ N⌉` times the offline optimum (Theorem 1), against a lower bound of that
//! optimum: at every slot the optimum holds at least the backlog a work-conserving schedule holds
//! in all, spread evenly, `⌈C(t) / N⌉` — a check stricter than the theorem's.

use moirai_engine::exchange::{simulate, Discipline};

/// One setting of the paper's simulation.
#[derive(Clone, Copy, Debug, PartialEq, serde::Serialize)]
pub struct Setting {
    /// Queues (parallel tasks), N.
    pub queues: usize,
    /// Input rate over all queues, tuples/s (each queue gets `rate / queues`).
    pub rate: f64,
    /// Slots simulated (10 000 in the paper).
    pub slots: usize,
    /// Length of a slot, s (100 µs in the paper).
    pub slot_s: f64,
    /// Tuples the link carries per slot (1 in the paper).
    pub budget: usize,
    /// Seed of the arrivals.
    pub seed: u64,
}

impl Setting {
    /// The paper's setting for `queues` queues and an input rate of `rate` tuples/s.
    pub fn paper(queues: usize, rate: f64, seed: u64) -> Setting {
        Setting { queues, rate, slots: 10_000, slot_s: 100e-6, budget: 1, seed }
    }
}

/// What one setting gave.
#[derive(Clone, Debug, PartialEq, serde::Serialize)]
pub struct Outcome {
    /// The setting.
    pub setting: Setting,
    /// LBF's largest backlog.
    pub lbf: usize,
    /// The engine's round robin's largest backlog (one tuple from each *non-empty* queue in turn:
    /// work-conserving).
    pub rr: usize,
    /// The paper's RRB: slot t serves queue `t mod N`, empty or not.
    pub rrb: usize,
    /// `1 − lbf / rrb`: how much LBF reduces the largest backlog against the paper's baseline
    /// (the paper: up to 83.3 %).
    pub reduction: f64,
    /// A lower bound of the offline optimum's largest backlog, `max_t ⌈C(t) / N⌉`.
    pub optimum_at_least: usize,
    /// LBF's competitive ratio, `3 + ⌈log₂ N⌉`.
    pub bound: usize,
    /// Whether LBF stayed within `bound × optimum_at_least` (so within the theorem's bound).
    pub within_bound: bool,
}

/// Poisson arrivals of `mean` tuples per slot at each of `queues` queues, for `slots` slots.
pub fn arrivals(queues: usize, mean: f64, slots: usize, rng: &mut fastrand::Rng) -> Vec<Vec<usize>> {
    let limit = (-mean).exp();
    let mut draw = || {
        // Knuth's method: fine for the small means of a 100 µs slot.
        let (mut k, mut p) = (0, rng.f64());
        while p > limit {
            k += 1;
            p *= rng.f64();
        }
        k
    };
    (0..slots).map(|_| (0..queues).map(|_| draw()).collect()).collect()
}

/// Runs LBF and round robin on the same arrivals.
pub fn run(setting: Setting) -> Outcome {
    let mut rng = fastrand::Rng::with_seed(setting.seed);
    let mean = setting.rate / setting.queues.max(1) as f64 * setting.slot_s;
    let a = arrivals(setting.queues, mean, setting.slots, &mut rng);
    let lbf = simulate(Discipline::Lbf, &a, setting.budget).max_backlog;
    let rr = simulate(Discipline::Rr, &a, setting.budget).max_backlog;
    let rrb = strict_round_robin(&a, setting.budget);
    // The total backlog of a work-conserving schedule, slot by slot.
    let (mut total, mut optimum_at_least) = (0usize, 0usize);
    for slot in &a {
        total += slot.iter().sum::<usize>();
        total -= total.min(setting.budget);
        optimum_at_least = optimum_at_least.max(total.div_ceil(setting.queues.max(1)));
    }
    let bound = 3 + (setting.queues.max(1) as f64).log2().ceil() as usize;
    Outcome {
        setting,
        lbf,
        rr,
        rrb,
        reduction: if rrb == 0 { 0.0 } else { 1.0 - lbf as f64 / rrb as f64 },
        optimum_at_least,
        bound,
        within_bound: lbf <= bound * optimum_at_least.max(1),
    }
}

/// The paper's RRB (§4.4): "if queue q_i is selected at time slot t, then the queue selected at
/// t+1 is q_(i+1) mod N", starting with q_1 — a slot given to an empty queue is lost. Returns
/// the largest backlog at the end of any slot.
pub fn strict_round_robin(arrivals: &[Vec<usize>], budget: usize) -> usize {
    let n = arrivals.iter().map(Vec::len).max().unwrap_or(0);
    let (mut backlog, mut next, mut max) = (vec![0usize; n], 0usize, 0usize);
    for slot in arrivals {
        for (b, &a) in backlog.iter_mut().zip(slot) {
            *b += a;
        }
        for _ in 0..budget {
            backlog[next] = backlog[next].saturating_sub(1);
            next = (next + 1) % n;
        }
        max = max.max(backlog.iter().copied().max().unwrap_or(0));
    }
    max
}

/// The paper's Fig. 6a sweep: N = 10 queues, input rates 500 to 5000 tuples/s.
pub fn figure_6a(seed: u64) -> Vec<Outcome> {
    (1..=10).map(|k| run(Setting::paper(10, 500.0 * k as f64, seed))).collect()
}

/// The paper's Fig. 6b sweep: an input rate of `rate` tuples/s, N from 5 to 50.
pub fn figure_6b(rate: f64, seed: u64) -> Vec<Outcome> {
    (1..=10).map(|k| run(Setting::paper(5 * k, rate, seed))).collect()
}

/// A table of outcomes: N, rate, LBF, RR, reduction, the optimum's lower bound, the bound.
pub fn table(outcomes: &[Outcome]) -> String {
    let mut s =
        String::from("    N  input rate   LBF max   RR max  RRB max  reduction vs RRB  OPT >=  LBF <= bound x OPT\n");
    for o in outcomes {
        s += &format!(
            "{:>5}  {:>10}  {:>8}  {:>7}  {:>7}  {:>15.1} %  {:>6}  {} (bound {})\n",
            o.setting.queues,
            o.setting.rate,
            o.lbf,
            o.rr,
            o.rrb,
            o.reduction * 100.0,
            o.optimum_at_least,
            if o.within_bound { "yes" } else { "NO" },
            o.bound
        );
    }
    s
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn arrivals_have_the_poisson_mean() {
        let mut rng = fastrand::Rng::with_seed(1);
        let a = arrivals(10, 0.3, 20_000, &mut rng);
        let mean = a.iter().flatten().sum::<usize>() as f64 / 200_000.0;
        assert!((mean - 0.3).abs() < 0.005, "{mean}");
    }

    #[test]
    fn lbf_beats_round_robin_and_never_breaks_its_bound() {
        for seed in 0..3 {
            for o in figure_6a(seed).into_iter().chain(figure_6b(2000.0, seed)) {
                assert!(o.within_bound, "{o:?}");
                assert!(o.lbf <= o.rr && o.rr <= o.rrb, "LBF <= work-conserving RR <= strict RRB: {o:?}");
            }
        }
        // The paper's figure: LBF reduces the largest backlog by up to 83.3 % against RRB.
        let best = figure_6a(0).iter().map(|o| o.reduction).fold(0.0, f64::max);
        assert!((best - 0.833).abs() <= 0.05, "best reduction {best}, the paper's 0.833");
        println!("{}", table(&figure_6a(0)));
        println!("{}", table(&figure_6b(2000.0, 0)));
    }
}

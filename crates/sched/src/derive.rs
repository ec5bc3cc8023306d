//! The formulas of the derived metrics (documented on [`Metric`]'s variants), as pure functions of
//! one SPE's graph, this round's values and the previous round's counters.
//!
//! Every function returns finite values: divisions by zero are resolved as the metric's docs say,
//! and anything that would still overflow is clamped by [`finite`].

use std::collections::BTreeMap;
use std::time::Duration;

use crate::cluster::Spe;
use crate::entity::ThreadRef;
use crate::metric::Metric;

/// What the provider remembers of a physical operator from the previous round.
#[derive(Clone, Debug, Default)]
pub(crate) struct OpHistory {
    /// Its threads then: if they changed, the operator was restarted and its counters reset.
    pub threads: Vec<ThreadRef>,
    /// When the sample was taken.
    pub at: Duration,
    /// Counter values (`tuples_in`, `tuples_out`, `cpu_ns`) of that round, when sampled.
    pub counters: BTreeMap<Metric, f64>,
    /// Its last selectivity, kept through rounds without input.
    pub selectivity: Option<f64>,
    /// Its last cost, kept through rounds without input.
    pub cost: Option<f64>,
}

/// Inputs of one SPE's derivations.
pub(crate) struct Round<'a> {
    /// The SPE's graph.
    pub spe: &'a Spe,
    /// When this round's samples were taken.
    pub at: Duration,
    /// The previous round of each physical operator, if it has one and its threads are unchanged.
    pub prev: Vec<Option<&'a OpHistory>>,
}

impl Round<'_> {
    /// The previous value of a counter of operator `op`, if it exists and the counter did not go
    /// backwards since (which would mean the operator restarted).
    fn prev_counter(&self, op: usize, metric: Metric, now: f64) -> Option<(f64, &OpHistory)> {
        let h = self.prev[op]?;
        let before = *h.counters.get(&metric)?;
        (before <= now).then_some((before, h))
    }

    /// Δcounter since the previous round, or the counter's total when there is no usable previous
    /// value (the counters are cumulative since the operator started).
    fn delta(&self, op: usize, metric: Metric, now: f64) -> f64 {
        now - self.prev_counter(op, metric, now).map_or(0.0, |(before, _)| before)
    }
}

/// Replaces non-finite results (only reachable with absurd inputs, e.g. products overflowing)
/// so that NaN or infinity never reach a policy: NaN becomes 0, ±∞ the largest finite value.
pub(crate) fn finite(v: f64) -> f64 {
    if v.is_nan() {
        0.0
    } else {
        v.clamp(f64::MIN, f64::MAX)
    }
}

/// Computes derived metric `metric` from the dependency set `deps` (one of its derivations),
/// whose values are in `values`.
pub(crate) fn derive(metric: Metric, deps: &[Metric], values: &BTreeMap<Metric, Vec<f64>>, round: &Round) -> Vec<f64> {
    let get = |m: Metric| -> &[f64] { &values[&m] };
    let n = round.spe.physical_len();
    let out: Vec<f64> = match metric {
        Metric::RateIn | Metric::RateOut | Metric::Busy | Metric::Backpressured | Metric::Idle => {
            // Per second of the round: tuples for the rates, seconds (a share) for the times.
            let (counter, unit) = match metric {
                Metric::RateIn => (Metric::TuplesIn, 1.0),
                Metric::RateOut => (Metric::TuplesOut, 1.0),
                Metric::Busy => (Metric::BusyNs, 1e-9),
                Metric::Backpressured => (Metric::BackpressuredNs, 1e-9),
                _ => (Metric::IdleNs, 1e-9),
            };
            let now = get(counter);
            (0..n)
                .map(|op| match round.prev_counter(op, counter, now[op]) {
                    Some((before, h)) if round.at > h.at => (now[op] - before) * unit / (round.at - h.at).as_secs_f64(),
                    _ => 0.0,
                })
                .collect()
        }
        Metric::QueueSize if deps == [Metric::QueueLen] => get(Metric::QueueLen).to_vec(),
        Metric::QueueSize => queue_size_from_counters(round.spe, get(Metric::TuplesIn), get(Metric::TuplesOut)),
        Metric::Selectivity => {
            let (tin, tout) = (get(Metric::TuplesIn), get(Metric::TuplesOut));
            (0..n)
                .map(|op| {
                    let din = round.delta(op, Metric::TuplesIn, tin[op]);
                    let dout = round.delta(op, Metric::TuplesOut, tout[op]);
                    if din > 0.0 {
                        dout / din
                    } else {
                        round.prev[op].and_then(|h| h.selectivity).unwrap_or(1.0)
                    }
                })
                .collect()
        }
        Metric::Cost => {
            let (cpu, tin) = (get(Metric::CpuNs), get(Metric::TuplesIn));
            (0..n)
                .map(|op| {
                    let din = round.delta(op, Metric::TuplesIn, tin[op]);
                    let dcpu = round.delta(op, Metric::CpuNs, cpu[op]);
                    if din > 0.0 {
                        dcpu / din
                    } else {
                        round.prev[op].and_then(|h| h.cost).unwrap_or(0.0)
                    }
                })
                .collect()
        }
        Metric::GlobalSelectivity => {
            let sel = get(Metric::Selectivity);
            from_sinks(round.spe, |op, down: &[f64]| sel[op] * mean_or_one(down))
        }
        Metric::GlobalAverageCost => {
            let (cost, sel) = (get(Metric::Cost), get(Metric::Selectivity));
            from_sinks(round.spe, |op, down: &[f64]| {
                cost[op] + if down.is_empty() { 0.0 } else { sel[op] * mean_or_one(down) }
            })
        }
        Metric::HighestRate => {
            let (gsel, gcost) = (get(Metric::GlobalSelectivity), get(Metric::GlobalAverageCost));
            (0..n).map(|op| if gcost[op] > 0.0 { gsel[op] / gcost[op] } else { 0.0 }).collect()
        }
        Metric::TuplesIn
        | Metric::TuplesOut
        | Metric::QueueLen
        | Metric::HeadWait
        | Metric::CpuNs
        | Metric::BusyNs
        | Metric::BackpressuredNs
        | Metric::IdleNs
        | Metric::InputBuffers => {
            unreachable!("primitive metric {metric} is never derived (the provider's plan ensures it)")
        }
    };
    out.into_iter().map(finite).collect()
}

/// The Lachesis queue-size fallback: what the upstream operators sent this operator minus what it
/// took, from cumulative counters. An upstream operator's output is split evenly over its
/// downstream operators (exact with per-channel `tuples_out` and even partitioning).
fn queue_size_from_counters(spe: &Spe, tuples_in: &[f64], tuples_out: &[f64]) -> Vec<f64> {
    (0..spe.physical_len())
        .map(|op| {
            let sent: f64 = spe.upstream(op).iter().map(|&u| tuples_out[u] / spe.downstream(u).len() as f64).sum();
            if spe.upstream(op).is_empty() {
                0.0
            } else {
                (sent - tuples_in[op]).max(0.0)
            }
        })
        .collect()
}

/// Computes a metric from the sinks backwards: `f(op, values of op's downstream operators)`.
fn from_sinks(spe: &Spe, mut f: impl FnMut(usize, &[f64]) -> f64) -> Vec<f64> {
    let mut out = vec![0.0; spe.physical_len()];
    let mut down = Vec::new();
    for &op in spe.topological_order().iter().rev() {
        down.clear();
        down.extend(spe.downstream(op).iter().map(|&d| out[d]));
        out[op] = finite(f(op, &down));
    }
    out
}

fn mean_or_one(values: &[f64]) -> f64 {
    if values.is_empty() {
        1.0
    } else {
        values.iter().sum::<f64>() / values.len() as f64
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::cluster::Cluster;
    use crate::fixtures::*;

    fn round(spe: &Spe) -> Round<'_> {
        Round { spe, at: Duration::from_secs(1), prev: vec![None; spe.physical_len()] }
    }

    fn values(pairs: &[(Metric, Vec<f64>)]) -> BTreeMap<Metric, Vec<f64>> {
        pairs.iter().cloned().collect()
    }

    #[test]
    fn queue_size_fallback_on_a_pipeline() {
        let c = Cluster::new(vec![pipeline("s", "q")]).unwrap();
        let v = values(&[(Metric::TuplesIn, vec![100.0, 90.0, 50.0]), (Metric::TuplesOut, vec![100.0, 60.0, 50.0])]);
        let qs = derive(Metric::QueueSize, &[Metric::TuplesIn, Metric::TuplesOut], &v, &round(c.spe(0)));
        // source: 0; map: 100 sent - 90 taken; sink: 60 sent - 50 taken.
        assert_eq!(qs, vec![0.0, 10.0, 10.0]);
    }

    #[test]
    fn queue_size_fallback_splits_fan_out_and_clamps() {
        let c = Cluster::new(vec![fused_and_replicated("s", "q")]).unwrap();
        // The source sent 100 tuples over two channels (50 each); replica 1 took 45, replica 2 took 60
        // (counters lag: clamped at 0).
        let v = values(&[
            (Metric::TuplesIn, vec![100.0, 45.0, 60.0, 30.0]),
            (Metric::TuplesOut, vec![100.0, 20.0, 20.0, 30.0]),
        ]);
        let qs = derive(Metric::QueueSize, &[Metric::TuplesIn, Metric::TuplesOut], &v, &round(c.spe(0)));
        assert_eq!(qs, vec![0.0, 5.0, 0.0, 10.0]);
    }

    #[test]
    fn global_metrics_on_a_diamond() {
        let c = Cluster::new(vec![diamond("s", "q")]).unwrap();
        // source duplicates every tuple to both branches (per-channel count: selectivity 2);
        // left keeps half, right all.
        let v =
            values(&[(Metric::Selectivity, vec![2.0, 0.5, 1.0, 1.0]), (Metric::Cost, vec![10.0, 100.0, 40.0, 5.0])]);
        let r = round(c.spe(0));
        let gsel = derive(Metric::GlobalSelectivity, &[Metric::Selectivity], &v, &r);
        // One source tuple reaches the sink 0.5 + 1 = 1.5 times.
        assert_eq!(gsel, vec![1.5, 0.5, 1.0, 1.0]);
        let gcost = derive(Metric::GlobalAverageCost, &[Metric::Cost, Metric::Selectivity], &v, &r);
        // left: 100 + 0.5*5; right: 40 + 5; source: 10 + one copy to each branch.
        assert_eq!(gcost, vec![10.0 + 102.5 + 45.0, 102.5, 45.0, 5.0]);
        let mut v = v;
        v.insert(Metric::GlobalSelectivity, gsel.clone());
        v.insert(Metric::GlobalAverageCost, gcost.clone());
        let hr = derive(Metric::HighestRate, &[Metric::GlobalSelectivity, Metric::GlobalAverageCost], &v, &r);
        for op in 0..4 {
            assert_eq!(hr[op], gsel[op] / gcost[op]);
        }
        // The cheap, productive branch has the higher rate.
        assert!(hr[2] > hr[1]);
    }

    #[test]
    fn zero_cost_gives_zero_rate_not_infinity() {
        let c = Cluster::new(vec![pipeline("s", "q")]).unwrap();
        let v = values(&[(Metric::GlobalSelectivity, vec![1.0; 3]), (Metric::GlobalAverageCost, vec![0.0, 2.0, 0.0])]);
        let hr =
            derive(Metric::HighestRate, &[Metric::GlobalSelectivity, Metric::GlobalAverageCost], &v, &round(c.spe(0)));
        assert_eq!(hr, vec![0.0, 0.5, 0.0]);
    }

    #[test]
    fn selectivity_and_cost_without_input_keep_the_previous_value() {
        let c = Cluster::new(vec![pipeline("s", "q")]).unwrap();
        let spe = c.spe(0);
        let h = OpHistory {
            at: Duration::from_secs(1),
            counters: [(Metric::TuplesIn, 10.0), (Metric::TuplesOut, 10.0), (Metric::CpuNs, 500.0)].into(),
            selectivity: Some(0.25),
            cost: Some(7.0),
            ..OpHistory::default()
        };
        let r = Round { spe, at: Duration::from_secs(2), prev: vec![Some(&h), Some(&h), None] };
        // op 0: no new input; op 1: 10 more in, 5 more out, 100 ns more; op 2: no history, from totals (0 in).
        let v = values(&[
            (Metric::TuplesIn, vec![10.0, 20.0, 0.0]),
            (Metric::TuplesOut, vec![10.0, 15.0, 0.0]),
            (Metric::CpuNs, vec![500.0, 600.0, 0.0]),
        ]);
        let sel = derive(Metric::Selectivity, &[Metric::TuplesIn, Metric::TuplesOut], &v, &r);
        assert_eq!(sel, vec![0.25, 0.5, 1.0]);
        let cost = derive(Metric::Cost, &[Metric::CpuNs, Metric::TuplesIn], &v, &r);
        assert_eq!(cost, vec![7.0, 10.0, 0.0]);
        let rate = derive(Metric::RateIn, &[Metric::TuplesIn], &v, &r);
        assert_eq!(rate, vec![0.0, 10.0, 0.0]);
    }

    #[test]
    fn time_shares_are_the_counters_nanoseconds_per_second_of_the_round() {
        let c = Cluster::new(vec![pipeline("s", "q")]).unwrap();
        let h = OpHistory {
            at: Duration::from_millis(1000),
            counters: [(Metric::BusyNs, 1e9), (Metric::IdleNs, 3e9)].into(),
            ..OpHistory::default()
        };
        let r = Round { spe: c.spe(0), at: Duration::from_millis(1500), prev: vec![Some(&h), Some(&h), None] };
        // op 0 was busy 0.4 s of the 0.5 s round; op 1's counter went backwards (a restart); op 2
        // has no history.
        let v = values(&[(Metric::BusyNs, vec![1.4e9, 0.2e9, 9e9]), (Metric::IdleNs, vec![3.1e9, 3.5e9, 0.0])]);
        let busy = derive(Metric::Busy, &[Metric::BusyNs], &v, &r);
        assert!((busy[0] - 0.8).abs() < 1e-9 && busy[1..] == [0.0, 0.0], "{busy:?}");
        let idle = derive(Metric::Idle, &[Metric::IdleNs], &v, &r);
        assert!((idle[0] - 0.2).abs() < 1e-9 && (idle[1] - 1.0).abs() < 1e-9 && idle[2] == 0.0, "{idle:?}");
    }

    #[test]
    fn non_finite_results_are_clamped() {
        assert_eq!(finite(f64::NAN), 0.0);
        assert_eq!(finite(f64::INFINITY), f64::MAX);
        assert_eq!(finite(-1.5), -1.5);
    }
}

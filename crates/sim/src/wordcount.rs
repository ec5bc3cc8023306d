//! WordCount ([`moirai_workloads::wordcount`]) as a model: the workload's own query, planned by
//! the engine's planner with chaining off as `moirai run wordcount` runs it, with selectivities
//! from the workload's sentence generator and what each operator costs on the lab's machine.
//!
//! ```text
//! sentences ─shuffle→ split → group ─key_by(route)→ count → partials [─key_by(word)→ merge → totals] → sink
//! ```
//!
//! **Selectivities** follow from the generator's distribution ([`word_stats`]): split emits the
//! mean words per sentence; a count instance emits one result per window, `partials` flattens it
//! into the distinct words the instance counted, and `merge` one total per distinct word of the
//! window. With `N` words per window and word `r` drawn with probability `pᵣ`, the expected distinct
//! words of a window are `Σᵣ 1 − (1 − pᵣ)^N`; the (word, count instance) pairs are as many under
//! key grouping, `P · Σᵣ 1 − (1 − pᵣ/P)^N` under shuffle over `P` instances, and under partial key
//! grouping a word seen twice or more reaches its second instance too unless both hashes name one
//! (probability `1/P`).
//!
//! **What is not simulated**: windows close by event time in the engine and emit their results at
//! once; the model spreads them over the window's tuples (a per-tuple selectivity), so the load
//! is the same but not its bursts, and the latency of a result (which in the engine includes the
//! wait for its window to close) is a hop's. A straggler split instance and the Hone exchange are
//! refused: the model has one cost per logical operator and the exchange is simulated only alone
//! (`moirai sim hone`).

use moirai_engine::graph::NodeKind;
use moirai_workloads::wordcount::{self, word_stats, Grouping, WordCountConfig};

use crate::event::Nanos;
use crate::model::{Model, NodeCost, Rate};
use crate::SimError;

/// Per logical operator of WordCount: CPU per tuple taken in (ns) and per word (ns) — a
/// sentence's words for `sentences` and `split`, the words emitted for `partials` — so that the
/// cost follows the sentence length and the vocabulary. Measured on the lab's 2-core VM (release
/// build) as Linear Road's were: at an unlimited rate, where batches are full, each operator's
/// thread CPU over the tuples it took in, less the per-tuple overhead and the wake-ups the model
/// charges (`moirai sim --from-engine` does this arithmetic; `docs/sim.md`, "WordCount"):
///
/// ```sh
/// moirai run wordcount --rate 0 --duration 30s --metrics-addr 127.0.0.1:9465 &
/// sleep 5; moirai sim --from-engine http://127.0.0.1:9465 --sample-for 15s --duration 2s --out /tmp/wc
/// ```
///
/// and the same with `--sentence-variance` (4.55 instead of 16.5 words per sentence), one after the
/// other on a quiet machine (load average below 3.5; 236k and 844k sentences/s taken in):
/// sentences 1400 and 495 ns, split 2057 and 591 ns per sentence give base and per-word cost of
/// each; group 93/94, count 101/110, merge 92/122, sink 71/87 ns per tuple (mean taken); partials
/// 453/558 µs per window result of 7497 words (60/74 ns per word; most of its thread's CPU is its
/// timed waits, subtracted); totals 0/0. Script and output:
/// `docs/results/2026-11-25/wordcount-costs.sh`, `wordcount-costs.txt`.
pub const WORDCOUNT_COSTS: [(&str, Nanos, Nanos); 8] = [
    ("sentences", 150, 76),
    ("split", 33, 123),
    ("group", 94, 0),
    ("count", 106, 0),
    ("partials", 0, 67),
    ("merge", 107, 0),
    ("totals", 0, 0),
    ("sink", 79, 0),
];

/// Expected selectivities of WordCount's operators at `rate` sentences/s (see the module docs).
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct WordCountSelectivity {
    /// Words per sentence (split).
    pub split: f64,
    /// Window results per word (count): one per instance and window.
    pub count: f64,
    /// Distinct words per window result (partials).
    pub partials: f64,
    /// Totals per (word, partial count) (merge); 1 under key grouping, which has no merge.
    pub merge: f64,
}

/// The selectivities of `config`'s operators at its rate (which must be above 0).
pub fn selectivity(config: &WordCountConfig) -> Result<WordCountSelectivity, SimError> {
    if config.rate.is_nan() || config.rate <= 0.0 {
        return Err(SimError::Model(
            "WordCount is simulated at an offered rate (its windows' outputs depend on it); give --rates above 0"
                .into(),
        ));
    }
    let stats = word_stats(config).map_err(|e| SimError::Model(e.to_string()))?;
    let p = config.parallelism as f64;
    let words_per_window = config.rate * stats.words_per_sentence * config.window_ms as f64 / 1e3;
    let n = words_per_window.max(1.0);
    let seen = |q: f64| 1.0 - (1.0 - q).powf(n);
    let distinct: f64 = stats.word_probabilities.iter().map(|&q| seen(q)).sum();
    let pairs: f64 = match config.grouping {
        Grouping::Key => distinct,
        Grouping::Shuffle => p * stats.word_probabilities.iter().map(|&q| seen(q / p)).sum::<f64>(),
        Grouping::PartialKey => (stats.word_probabilities.iter())
            .map(|&q| {
                let twice = seen(q) - n * q * (1.0 - q).powf(n - 1.0);
                seen(q) + (1.0 - 1.0 / p) * twice.max(0.0)
            })
            .sum(),
    };
    Ok(WordCountSelectivity {
        split: stats.words_per_sentence,
        count: (p / n).min(1.0),
        partials: pairs / p,
        merge: if config.grouping == Grouping::Key { 1.0 } else { distinct / pairs },
    })
}

impl Model {
    /// WordCount as `moirai run wordcount` runs it with `config` (chaining off), at `config.rate`
    /// sentences/s in total, with the measured [`WORDCOUNT_COSTS`] and the selectivities of
    /// [`selectivity`].
    pub fn wordcount(config: &WordCountConfig) -> Result<Model, SimError> {
        if config.exchange.is_some() {
            return Err(SimError::Model(
                "wordcount --exchange is not simulated: a Hone exchange is simulated only alone (`moirai sim hone`); \
                 drop --exchange to simulate WordCount over ordinary channels"
                    .into(),
            ));
        }
        if config.straggler.is_some() {
            return Err(SimError::Model(
                "wordcount --straggler is not simulated: the model has one cost per logical operator, not per \
                 instance; drop --straggler"
                    .into(),
            ));
        }
        let s = selectivity(config)?;
        let (queries, _handle) = wordcount::queries(config).map_err(|e| SimError::Model(e.to_string()))?;
        let per_instance = Rate::Constant(config.rate / config.parallelism as f64);
        Model::new(&queries, false, |_, name, kind| {
            let &(_, base, per_word) = WORDCOUNT_COSTS
                .iter()
                .find(|(n, ..)| *n == name)
                .ok_or_else(|| SimError::Model(format!("WordCount has an operator '{name}' with no measured cost")))?;
            let (selectivity, words) = match name {
                "sentences" => (1.0, s.split),
                "split" => (s.split, s.split),
                "count" => (s.count, 0.0),
                "partials" => (s.partials, s.partials),
                "merge" => (s.merge, 0.0),
                _ => (1.0, 0.0),
            };
            let cost_ns = (base as f64 + per_word as f64 * words).round() as Nanos;
            let rate = if kind == NodeKind::Source { per_instance } else { Rate::Unlimited };
            Ok(NodeCost { cost_ns, selectivity, block: None, rate })
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_model_has_the_engines_operators_and_the_generators_selectivity() {
        let config = WordCountConfig { rate: 1000.0, ..WordCountConfig::default() };
        let model = Model::wordcount(&config).unwrap();
        let (queries, _) = wordcount::queries(&config).unwrap();
        let plan = moirai_engine::plan::PhysicalPlan::new(queries[0].graph(), false);
        let names: Vec<&str> = plan.operators.iter().map(|p| p.name.as_str()).collect();
        assert_eq!(model.topology.physical.iter().map(|p| p.name.as_str()).collect::<Vec<_>>(), names);
        let split = names.iter().position(|n| n.starts_with("split")).unwrap();
        assert!((model.operators[split].selectivity - 16.5).abs() < 1e-9, "uniform 1..=32 words");
        let variance = WordCountConfig { sentence_variance: true, ..config.clone() };
        assert!((selectivity(&variance).unwrap().split - 4.55).abs() < 1e-9);
    }

    #[test]
    fn distinct_words_grow_with_the_rate_and_stay_below_the_vocabulary() {
        let at = |rate: f64, grouping: Grouping| {
            selectivity(&WordCountConfig { rate, grouping, ..WordCountConfig::default() }).unwrap()
        };
        let (low, high) = (at(100.0, Grouping::Key), at(100_000.0, Grouping::Key));
        // Key grouping: every word in one instance, so the partials of both instances are the distinct words.
        assert!(low.partials * 2.0 < high.partials && high.partials * 2.0 <= 10_000.0 + 1e-6, "{low:?} {high:?}");
        let (pkg, shuffle) = (at(10_000.0, Grouping::PartialKey), at(10_000.0, Grouping::Shuffle));
        assert!(pkg.merge > shuffle.merge && pkg.merge < 1.0 && shuffle.merge >= 0.5 - 1e-9, "{pkg:?} {shuffle:?}");
    }

    #[test]
    fn the_exchange_and_a_straggler_are_refused() {
        let hone =
            moirai_engine::Hone::new(moirai_engine::exchange::Discipline::Lbf, std::time::Duration::from_millis(10))
                .capacity(20_000);
        let e = Model::wordcount(&WordCountConfig { exchange: Some(hone), ..WordCountConfig::default() });
        assert!(e.unwrap_err().to_string().contains("--exchange is not simulated"));
        let e = Model::wordcount(&WordCountConfig { straggler: Some(4.0), ..WordCountConfig::default() });
        assert!(e.unwrap_err().to_string().contains("--straggler"));
    }
}

//! WordCount, the workload of Hone (TPDS'21): sentences are split into words and the words
//! counted, with shuffle, key or **partial key grouping** (PKG, Nasir et al. ICDE'15) in front of
//! the counters.
//!
//! ```text
//! sentences ─shuffle→ split → group ─key_by(route)→ count → partials [─key_by(word)→ merge] → sink
//! ```
//!
//! - **Input**: seeded sentences of 1–`max_words` words (Hone's Wikipedia sentences had 1–32)
//!   drawn from a Zipf vocabulary, or the lines of a text file replayed in a loop.
//! - **Grouping**: the `group` operator, fused behind `split`, picks the count instance of every
//!   word: at random ([`Grouping::Shuffle`]), by the word's hash ([`Grouping::Key`], exactly where
//!   `key_by(word)` would send it) or by PKG ([`Grouping::PartialKey`]): of the two instances two
//!   hash functions name, the one this sender has sent fewer tuples so far. The engine has no
//!   custom partitioning, so `group` tags each word with a *route key*, a `u64` that the engine's
//!   own key partitioning ([`moirai_engine::router::bucket`] of [`moirai_engine::query::key_hash`])
//!   maps onto exactly the chosen instance ([`route_keys`]); `key_by(route)` then delivers it
//!   there, through the engine's ordinary keyed channels.
//! - **Hone** ([`WordCountConfig::exchange`]): the words the split instances emit cross a shared
//!   link of limited capacity, a Hone exchange in front of the counters (`group → count`), whose
//!   scheduler (LBF, RR or FIFO) decides every τ whose outgoing words go next. With
//!   [`WordCountConfig::sentence_variance`] sentence lengths vary widely (most 1–2 words, one in
//!   ten `max_words`), so the split instances emit unequal numbers of words, as Hone's Wikipedia
//!   sentences made them; [`WordCountConfig::straggler`] slows split instance 0 down.
//! - **Counting**: each count instance counts its words per tumbling event-time window and emits
//!   its partial counts when the window closes. With key grouping a word's count is complete in one
//!   instance; with shuffle or PKG it is split over several (at most two with PKG), so a `merge`
//!   stage keyed by word sums the partial counts of each window.
//!
//! The [`WordCountHandle`] collects the final counts and the tuples each count instance received
//! (its load, what PKG balances), and for finite runs compares the counts with a naive count of
//! the same sentences ([`WordCountHandle::check`]).

use std::collections::HashMap;
use std::path::PathBuf;
use std::sync::{Arc, Mutex, MutexGuard};
use std::time::Duration;

use moirai_engine::query::key_hash;
use moirai_engine::router::bucket;
use moirai_engine::{
    Aggregate, BuildError, BuiltQuery, Hone, Operator, Output, Query, Source, Tuple, Window, WindowResult,
};
use rustc_hash::{FxHashMap, FxHashSet};

/// How words are spread over the count instances.
#[derive(Clone, Copy, Debug, PartialEq, Eq, serde::Serialize)]
#[serde(rename_all = "kebab-case")]
pub enum Grouping {
    /// A random instance per word (Storm's shuffle grouping); counts need merging.
    Shuffle,
    /// One instance per word, by hash (Storm's fields grouping).
    Key,
    /// Partial key grouping: the less loaded of two instances per word; counts need merging.
    PartialKey,
}

impl std::str::FromStr for Grouping {
    type Err = String;
    fn from_str(s: &str) -> Result<Self, String> {
        match s {
            "shuffle" => Ok(Grouping::Shuffle),
            "key" => Ok(Grouping::Key),
            "pkg" | "partial-key" => Ok(Grouping::PartialKey),
            _ => Err(format!("unknown grouping '{s}': use shuffle, key or pkg")),
        }
    }
}

/// Parameters of a WordCount run.
#[derive(Clone, Debug, PartialEq, serde::Serialize)]
pub struct WordCountConfig {
    /// Offered sentences per second in total; 0 = as fast as possible.
    pub rate: f64,
    /// Seed of the vocabulary, the sentences and shuffle grouping.
    pub seed: u64,
    /// Instances of every stage but the sink (source, split + group, count, merge).
    pub parallelism: usize,
    /// Sentences in total; 0 = endless.
    pub sentences: u64,
    /// Words per generated sentence are uniform in `1..=max_words`.
    pub max_words: usize,
    /// Distinct words of the generated vocabulary.
    pub vocabulary: usize,
    /// Zipf exponent `s` of word frequencies (rank `r` has weight `1/r^s`; 0 = uniform).
    pub zipf_exponent: f64,
    /// Read sentences from this file (one per line, replayed in a loop) instead of generating them.
    pub text: Option<PathBuf>,
    /// Grouping in front of the counters.
    pub grouping: Grouping,
    /// Length of the tumbling counting windows, ms.
    pub window_ms: u64,
    /// A Hone exchange between the split instances and the counters (none: ordinary channels).
    pub exchange: Option<Hone>,
    /// Sentence lengths with a high variance: 90 % of 1–2 words, 10 % of `max_words` words.
    pub sentence_variance: bool,
    /// Split instance 0 is a straggler: it takes this many times as long per sentence.
    pub straggler: Option<f64>,
}

impl Default for WordCountConfig {
    fn default() -> Self {
        WordCountConfig {
            rate: 5_000.0,
            seed: 0,
            parallelism: 2,
            sentences: 0,
            max_words: 32,
            vocabulary: 10_000,
            zipf_exponent: 1.0,
            text: None,
            grouping: Grouping::PartialKey,
            window_ms: 1_000,
            exchange: None,
            sentence_variance: false,
            straggler: None,
        }
    }
}

impl WordCountConfig {
    /// Checks every parameter; the error says which and how to fix it.
    pub fn validate(&self) -> Result<(), BuildError> {
        let bad = |m: String| Err(BuildError::Config(m));
        crate::check::rate("rate", self.rate).map_err(BuildError::Config)?;
        crate::check::parallelism("parallelism", self.parallelism, 1024).map_err(BuildError::Config)?;
        if !(1..=1024).contains(&self.max_words) {
            return bad(format!("max_words {} must be in 1..=1024 (Hone's sentences had up to 32)", self.max_words));
        }
        if !(1..=10_000_000).contains(&self.vocabulary) {
            return bad(format!("vocabulary {} must be in 1..=10000000 words", self.vocabulary));
        }
        if !(self.zipf_exponent.is_finite() && self.zipf_exponent >= 0.0) {
            return bad(format!(
                "Zipf exponent {} must be >= 0 (0 = uniform, ~1 for natural text)",
                self.zipf_exponent
            ));
        }
        crate::check::window_ms("window_ms", self.window_ms, "e.g. 1000").map_err(BuildError::Config)?;
        if let Some(h) = &self.exchange {
            h.validate().map_err(|e| BuildError::Config(e.to_string()))?;
        }
        if let Some(f) = self.straggler {
            if !(f.is_finite() && (1.0..=1000.0).contains(&f)) {
                return bad(format!(
                    "straggler factor {f} must be in 1..=1000 (4 = one split instance four times slower)"
                ));
            }
        }
        Ok(())
    }
}

/// Why the output of a run does not check out.
#[derive(Debug, thiserror::Error)]
pub enum CheckError {
    /// An endless run has no reference to compare with.
    #[error("the run was endless (sentences = 0); set a number of sentences to check its counts")]
    Endless,
    /// Counts differ from the naive count.
    #[error("{differing} of {words} words have wrong counts, e.g. '{word}': counted {got}, expected {expected}")]
    Mismatch {
        /// Words whose counts differ (in either map).
        differing: usize,
        /// Distinct words in the reference.
        words: usize,
        /// One of them.
        word: String,
        /// Its count in the run.
        got: u64,
        /// Its count in the reference.
        expected: u64,
    },
}

/// Zipf-distributed words: the vocabulary and its cumulative weights.
struct ZipfWords {
    words: Vec<Arc<str>>,
    cumulative: Vec<f64>,
}

impl ZipfWords {
    /// `vocabulary` distinct lowercase words of 2–10 letters, drawn from `seed`; rank `r` (from 1)
    /// has weight `1/r^s`.
    fn new(vocabulary: usize, s: f64, seed: u64) -> Self {
        let mut rng = fastrand::Rng::with_seed(seed ^ 0x5745_4f52_4453);
        let mut seen = FxHashSet::default();
        let mut words = Vec::with_capacity(vocabulary);
        while words.len() < vocabulary {
            let len = rng.usize(2..=10);
            let word: String = (0..len).map(|_| rng.lowercase()).collect();
            if seen.insert(word.clone()) {
                words.push(Arc::from(word));
            }
        }
        let mut total = 0.0;
        let cumulative = (1..=vocabulary)
            .map(|r| {
                total += (r as f64).powf(-s);
                total
            })
            .collect();
        ZipfWords { words, cumulative }
    }

    fn sample(&self, rng: &mut fastrand::Rng) -> &str {
        let u = rng.f64() * self.cumulative[self.cumulative.len() - 1];
        let rank = self.cumulative.partition_point(|&c| c <= u).min(self.words.len() - 1);
        &self.words[rank]
    }
}

/// Where sentences come from.
enum Corpus {
    Zipf(ZipfWords),
    Lines(Vec<String>),
}

impl Corpus {
    fn load(config: &WordCountConfig) -> Result<Self, BuildError> {
        let Some(path) = &config.text else {
            return Ok(Corpus::Zipf(ZipfWords::new(config.vocabulary, config.zipf_exponent, config.seed)));
        };
        let text = std::fs::read_to_string(path).map_err(|e| {
            BuildError::Config(format!(
                "cannot read the WordCount text file {}: {e}; give a readable UTF-8 text file, one sentence per line",
                path.display()
            ))
        })?;
        let lines: Vec<String> = text.lines().map(str::trim).filter(|l| !l.is_empty()).map(String::from).collect();
        if lines.is_empty() {
            return Err(BuildError::Config(format!(
                "the WordCount text file {} has no words; give a text file with one sentence per line",
                path.display()
            )));
        }
        Ok(Corpus::Lines(lines))
    }
}

/// Sentences `instance` of `parallelism` source instances produces: its share of the total, from
/// its own seeded generator (or every `parallelism`-th line of the file, in a loop).
struct Sentences {
    corpus: Arc<Corpus>,
    rng: fastrand::Rng,
    max_words: usize,
    variance: bool,
    /// Next line of the file.
    line: usize,
    stride: usize,
    remaining: Option<u64>,
}

impl Sentences {
    fn new(corpus: Arc<Corpus>, config: &WordCountConfig, instance: usize, parallelism: usize) -> Self {
        let (n, i) = (parallelism as u64, instance as u64);
        let remaining = (config.sentences > 0).then(|| config.sentences / n + u64::from(i < config.sentences % n));
        Sentences {
            corpus,
            rng: fastrand::Rng::with_seed(config.seed.wrapping_add(i.wrapping_mul(0x9e37_79b9_7f4a_7c15))),
            max_words: config.max_words,
            variance: config.sentence_variance,
            line: instance,
            stride: parallelism,
            remaining,
        }
    }
}

impl Iterator for Sentences {
    type Item = String;
    fn next(&mut self) -> Option<String> {
        if let Some(r) = &mut self.remaining {
            *r = r.checked_sub(1)?;
        }
        Some(match &*self.corpus {
            Corpus::Zipf(zipf) => {
                let mut sentence = String::new();
                let words = if !self.variance {
                    self.rng.usize(1..=self.max_words)
                } else if self.rng.f64() < 0.1 {
                    self.max_words
                } else {
                    self.rng.usize(1..=2.min(self.max_words))
                };
                for k in 0..words {
                    if k > 0 {
                        sentence.push(' ');
                    }
                    sentence.push_str(zipf.sample(&mut self.rng));
                }
                sentence
            }
            Corpus::Lines(lines) => {
                let line = lines[self.line % lines.len()].clone();
                self.line = (self.line + self.stride) % lines.len();
                line
            }
        })
    }
}

/// For each instance `i` of `n`, a `u64` that `key_by` sends to instance `i`: the smallest `k`
/// with `bucket(key_hash(&k), n) == i`. This is how a grouping the engine does not have reaches an
/// instance of its choice through the engine's own key partitioning.
pub fn route_keys(n: usize) -> Result<Vec<u64>, BuildError> {
    let mut keys = vec![None; n];
    let mut missing = n;
    // Hashes of consecutive integers spread evenly, so ~n·ln(n) tries fill every instance.
    for k in 0..(n as u64).saturating_mul(100_000) {
        let slot = &mut keys[bucket(key_hash(&k), n)];
        if slot.is_none() {
            *slot = Some(k);
            missing -= 1;
            if missing == 0 {
                return Ok(keys.into_iter().flatten().collect());
            }
        }
    }
    Err(BuildError::Config(format!("no route key reaches each of {n} instances: the key hash is degenerate")))
}

/// A word and the route key of the count instance it goes to.
#[derive(Clone, Debug)]
pub struct Routed {
    /// Route key ([`route_keys`]).
    pub route: u64,
    /// The word.
    pub word: String,
}

/// A second hash, independent of the first for bucketing: splitmix64's finaliser over it.
fn second_hash(h: u64) -> u64 {
    let mut z = h ^ 0x9e37_79b9_7f4a_7c15;
    z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
    z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
    z ^ (z >> 31)
}

/// Splits sentences into words; a straggler takes `factor` times as long: after splitting it
/// busy-waits `factor − 1` times what the split took, counted as at least 1 µs per word (splitting
/// itself takes well below that, which would make a straggler of any factor invisible).
struct Split {
    straggler: Option<f64>,
}

impl Operator<String, String> for Split {
    fn process(&mut self, t: Tuple<String>, out: &mut Output<'_, String>) {
        let start = std::time::Instant::now();
        let mut words = 0u32;
        for w in t.data.split_whitespace() {
            out.emit(t.with(w.to_string()));
            words += 1;
        }
        if let Some(f) = self.straggler {
            let took = start.elapsed().max(Duration::from_micros(1) * words);
            let until = start + took + took.mul_f64(f - 1.0);
            while std::time::Instant::now() < until {
                std::hint::spin_loop();
            }
        }
    }
}

/// The sender side of the grouping: picks each word's count instance.
struct Group {
    grouping: Grouping,
    route_keys: Arc<[u64]>,
    /// Tuples this sender has sent to each instance: PKG's local load estimate.
    sent: Vec<u64>,
    rng: fastrand::Rng,
}

impl Operator<String, Routed> for Group {
    fn process(&mut self, t: Tuple<String>, out: &mut Output<'_, Routed>) {
        let n = self.route_keys.len();
        let target = match self.grouping {
            Grouping::Shuffle => self.rng.usize(..n),
            Grouping::Key => bucket(key_hash(&t.data), n),
            Grouping::PartialKey => {
                let h = key_hash(&t.data);
                let (a, b) = (bucket(h, n), bucket(second_hash(h), n));
                if self.sent[b] < self.sent[a] {
                    b
                } else {
                    a
                }
            }
        };
        self.sent[target] += 1;
        out.emit(t.with(Routed { route: self.route_keys[target], word: t.data.clone() }));
    }
}

/// One count instance's output for one window: how many words it counted, and their counts.
#[derive(Clone, Debug)]
pub struct PartialCounts {
    /// Word tuples the instance received in the window.
    pub tuples: u64,
    /// Count per word.
    pub counts: Vec<(String, u64)>,
}

/// Counts words per window (the pane of a count instance is its route key).
#[derive(Clone)]
struct CountWords;

impl Aggregate<Routed> for CountWords {
    type Acc = (u64, FxHashMap<String, u64>);
    type Out = PartialCounts;
    fn init(&self) -> Self::Acc {
        (0, FxHashMap::default())
    }
    fn add(&self, acc: &mut Self::Acc, data: &Routed) {
        acc.0 += 1;
        match acc.1.get_mut(&data.word) {
            Some(c) => *c += 1,
            None => {
                acc.1.insert(data.word.clone(), 1);
            }
        }
    }
    fn result(&self, acc: &Self::Acc) -> PartialCounts {
        PartialCounts { tuples: acc.0, counts: acc.1.iter().map(|(w, c)| (w.clone(), *c)).collect() }
    }
}

/// Sums partial counts of one word per window.
#[derive(Clone)]
struct SumCounts;

impl Aggregate<(String, u64)> for SumCounts {
    type Acc = u64;
    type Out = u64;
    fn init(&self) -> u64 {
        0
    }
    fn add(&self, acc: &mut u64, data: &(String, u64)) {
        *acc += data.1;
    }
    fn result(&self, acc: &u64) -> u64 {
        *acc
    }
}

fn lock<T>(m: &Mutex<T>) -> MutexGuard<'_, T> {
    // A panicking operator poisons nothing we cannot still read: the maps stay consistent.
    m.lock().unwrap_or_else(|e| e.into_inner())
}

/// Access to a WordCount run's output, during and after the run.
#[derive(Clone)]
pub struct WordCountHandle {
    config: WordCountConfig,
    corpus: Arc<Corpus>,
    counts: Arc<Mutex<FxHashMap<String, u64>>>,
    loads: Arc<Mutex<Vec<u64>>>,
}

impl WordCountHandle {
    /// Final count per word (of the windows closed so far).
    pub fn counts(&self) -> HashMap<String, u64> {
        lock(&self.counts).iter().map(|(w, c)| (w.clone(), *c)).collect()
    }

    /// Word tuples each count instance received (of the windows closed so far), by instance.
    pub fn instance_loads(&self) -> Vec<u64> {
        lock(&self.loads).clone()
    }

    /// All sentences of a finite run, instance by instance; `None` for an endless run.
    pub fn sentences(&self) -> Option<impl Iterator<Item = String>> {
        if self.config.sentences == 0 {
            return None;
        }
        let (corpus, config, n) = (self.corpus.clone(), self.config.clone(), self.config.parallelism);
        Some((0..n).flat_map(move |i| Sentences::new(corpus.clone(), &config, i, n)))
    }

    /// The sentences source instance `instance` (of the configuration's `parallelism`) produces,
    /// in order; endless for an endless run. The micro-batch executors rebuild their input from it
    /// (`moirai-microbatch`), as every replay of the same configuration yields the same sentences.
    pub fn instance_sentences(&self, instance: usize) -> impl Iterator<Item = String> {
        Sentences::new(self.corpus.clone(), &self.config, instance, self.config.parallelism)
    }

    /// The naive count: every whitespace-separated word of [`Self::sentences`], in one map.
    pub fn reference(&self) -> Result<HashMap<String, u64>, CheckError> {
        let mut counts = HashMap::new();
        for sentence in self.sentences().ok_or(CheckError::Endless)? {
            for word in sentence.split_whitespace() {
                *counts.entry(word.to_string()).or_insert(0) += 1;
            }
        }
        Ok(counts)
    }

    /// Compares [`Self::counts`] with [`Self::reference`]; call it after the run ended.
    pub fn check(&self) -> Result<(), CheckError> {
        let expected = self.reference()?;
        let got = self.counts();
        let mut wrong: Vec<&String> =
            expected.keys().chain(got.keys()).filter(|w| expected.get(*w) != got.get(*w)).collect();
        wrong.sort();
        wrong.dedup();
        match wrong.first() {
            None => Ok(()),
            Some(word) => Err(CheckError::Mismatch {
                differing: wrong.len(),
                words: expected.len(),
                word: word.to_string(),
                got: got.get(*word).copied().unwrap_or(0),
                expected: expected.get(*word).copied().unwrap_or(0),
            }),
        }
    }
}

/// What the sentences of a configuration are made of, for a model of the query
/// (`moirai_sim`'s WordCount): the mean words per sentence, and how often each distinct word occurs.
#[derive(Clone, Debug, PartialEq)]
pub struct WordStats {
    /// Mean words per sentence: split's selectivity.
    pub words_per_sentence: f64,
    /// Probability of each distinct word per word drawn, most frequent first (sums to 1).
    pub word_probabilities: Vec<f64>,
}

/// The [`WordStats`] of `config`'s sentences, from the generator's distribution (sentence length
/// uniform in `1..=max_words`, or the variance mix; Zipf word ranks) or, for a text file, from its
/// lines as the sources replay them (every line once per pass).
pub fn word_stats(config: &WordCountConfig) -> Result<WordStats, BuildError> {
    config.validate()?;
    match Corpus::load(config)? {
        Corpus::Zipf(zipf) => {
            let max = config.max_words as f64;
            let uniform = |hi: f64| (1.0 + hi) / 2.0;
            let words_per_sentence =
                if config.sentence_variance { 0.9 * uniform(max.min(2.0)) + 0.1 * max } else { uniform(max) };
            let total = zipf.cumulative[zipf.cumulative.len() - 1];
            let mut last = 0.0;
            let word_probabilities = (zipf.cumulative.iter())
                .map(|&c| {
                    let p = (c - last) / total;
                    last = c;
                    p
                })
                .collect();
            Ok(WordStats { words_per_sentence, word_probabilities })
        }
        Corpus::Lines(lines) => {
            let mut counts: FxHashMap<&str, u64> = FxHashMap::default();
            let mut words = 0u64;
            for w in lines.iter().flat_map(|l| l.split_whitespace()) {
                *counts.entry(w).or_insert(0) += 1;
                words += 1;
            }
            let mut word_probabilities: Vec<f64> = counts.values().map(|&c| c as f64 / words as f64).collect();
            word_probabilities.sort_by(|a, b| b.total_cmp(a));
            Ok(WordStats { words_per_sentence: words as f64 / lines.len() as f64, word_probabilities })
        }
    }
}

/// Builds the WordCount query `wordcount` and the handle to its output.
pub fn queries(config: &WordCountConfig) -> Result<(Vec<BuiltQuery>, WordCountHandle), BuildError> {
    config.validate()?;
    let p = config.parallelism;
    let corpus = Arc::new(Corpus::load(config)?);
    let keys: Arc<[u64]> = route_keys(p)?.into();
    let handle = WordCountHandle {
        config: config.clone(),
        corpus: corpus.clone(),
        counts: Arc::default(),
        loads: Arc::new(Mutex::new(vec![0; p])),
    };
    let window = Window::tumbling(Duration::from_millis(config.window_ms));

    let query = Query::new("wordcount");
    let generator = {
        let (corpus, config) = (corpus.clone(), config.clone());
        move |i, n| Sentences::new(corpus.clone(), &config, i, n)
    };
    let (grouping, seed, group_keys, straggler) = (config.grouping, config.seed, keys.clone(), config.straggler);
    let instance_of: FxHashMap<u64, usize> = keys.iter().enumerate().map(|(i, k)| (*k, i)).collect();
    let loads = handle.loads.clone();
    let partials = query
        .source("sentences", Source::new(generator).rate(config.rate))
        .parallelism(p)
        .shuffle()
        .process("split", move |i| Split { straggler: straggler.filter(|_| i == 0) })
        .parallelism(p)
        .process("group", move |i| Group {
            grouping,
            route_keys: group_keys.clone(),
            sent: vec![0; group_keys.len()],
            rng: fastrand::Rng::with_seed(seed ^ 0x0047_524f_5550 ^ i as u64),
        })
        .parallelism(p);
    let keyed = partials.key_by(|r: &Routed| r.route);
    let keyed = match &config.exchange {
        Some(hone) => keyed.exchange(hone.clone()),
        None => keyed,
    };
    let partials = keyed
        .window("count", window, CountWords)
        .parallelism(p)
        .flat_map("partials", move |r: WindowResult<u64, PartialCounts>| {
            if let Some(&i) = instance_of.get(&r.key) {
                lock(&loads)[i] += r.value.tuples;
            }
            r.value.counts
        })
        .parallelism(p);
    let counted = match config.grouping {
        Grouping::Key => partials,
        Grouping::Shuffle | Grouping::PartialKey => partials
            .key_by(|(word, _): &(String, u64)| word.clone())
            .window("merge", window, SumCounts)
            .parallelism(p)
            .map("totals", |r: WindowResult<String, u64>| (r.key, r.value))
            .parallelism(p),
    };
    let counts = handle.counts.clone();
    counted.sink("sink", move |t: Tuple<(String, u64)>| {
        let (word, n) = t.data;
        *lock(&counts).entry(word).or_insert(0) += n;
    });
    Ok((vec![query.build()?], handle))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn route_keys_reach_exactly_their_instance() {
        for n in 1..=64 {
            let keys = route_keys(n).unwrap();
            for (i, k) in keys.iter().enumerate() {
                assert_eq!(bucket(key_hash(k), n), i, "route key {k} of instance {i}/{n}");
            }
        }
    }

    #[test]
    fn zipf_words_follow_their_ranks() {
        let zipf = ZipfWords::new(1000, 1.2, 3);
        let mut rng = fastrand::Rng::with_seed(1);
        let mut counts: FxHashMap<&str, u64> = FxHashMap::default();
        for _ in 0..100_000 {
            *counts.entry(zipf.sample(&mut rng)).or_insert(0) += 1;
        }
        // Rank 1 has weight 1/H(1000, 1.2) ≈ 0.22, rank 2 half of that·2^-0.2 ≈ 0.095.
        let first = counts[&*zipf.words[0]] as f64 / 1e5;
        let second = counts[&*zipf.words[1]] as f64 / 1e5;
        let h: f64 = (1..=1000).map(|r| (r as f64).powf(-1.2)).sum();
        assert!((first - 1.0 / h).abs() < 0.01, "{first} vs {}", 1.0 / h);
        assert!((second - 2f64.powf(-1.2) / h).abs() < 0.01, "{second}");
        assert_eq!(zipf.words.iter().collect::<FxHashSet<_>>().len(), 1000, "words are distinct");
    }

    #[test]
    fn sentences_are_seeded_split_and_bounded() {
        let config = WordCountConfig { sentences: 10, max_words: 4, ..WordCountConfig::default() };
        let corpus = Arc::new(Corpus::load(&config).unwrap());
        let a: Vec<String> = Sentences::new(corpus.clone(), &config, 1, 3).collect();
        let b: Vec<String> = Sentences::new(corpus.clone(), &config, 1, 3).collect();
        assert_eq!(a, b);
        assert_eq!(a.len(), 3, "instance 1 of 3 gets 3 of 10 sentences");
        assert_eq!(Sentences::new(corpus.clone(), &config, 0, 3).count(), 4);
        assert!(a.iter().all(|s| (1..=4).contains(&s.split(' ').count())));
        assert_ne!(a, Sentences::new(corpus, &config, 2, 3).collect::<Vec<_>>());
    }

    #[test]
    fn word_stats_agree_with_the_sentences_drawn() {
        for variance in [false, true] {
            let config =
                WordCountConfig { sentences: 20_000, sentence_variance: variance, ..WordCountConfig::default() };
            let stats = word_stats(&config).unwrap();
            let (_, handle) = queries(&config).unwrap();
            let sentences: Vec<String> = handle.sentences().unwrap().collect();
            let words: Vec<&str> = sentences.iter().flat_map(|s| s.split(' ')).collect();
            let mean = words.len() as f64 / sentences.len() as f64;
            // Standard error of the mean over 20 000 sentences: 0.07 words with variance (sd 9.2),
            // 0.07 without (sd 9.2 too: uniform 1..=32); 0.25 is more than 3 of them.
            assert!((mean - stats.words_per_sentence).abs() < 0.25, "{mean} vs {}", stats.words_per_sentence);
            let zipf = ZipfWords::new(config.vocabulary, config.zipf_exponent, config.seed);
            let first = words.iter().filter(|w| **w == &*zipf.words[0]).count() as f64 / words.len() as f64;
            assert!((first - stats.word_probabilities[0]).abs() < 0.01, "{first} vs {}", stats.word_probabilities[0]);
            assert!((stats.word_probabilities.iter().sum::<f64>() - 1.0).abs() < 1e-9);
        }
    }

    #[test]
    fn a_missing_text_file_is_explained() {
        let config = WordCountConfig { text: Some("/nonexistent/book.txt".into()), ..WordCountConfig::default() };
        match queries(&config) {
            Err(BuildError::Config(m)) => assert!(m.contains("/nonexistent/book.txt") && m.contains("readable"), "{m}"),
            _ => panic!("a missing file must be a configuration error"),
        }
    }
}

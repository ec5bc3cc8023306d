//! WordCount cut into micro-batches by hand (with a map-side combiner), as map-side and reduce-side
//! tasks that every executor can run because it rebuilds the same input from the workload's
//! description (its configuration: seed, sentences, vocabulary…).
//!
//! - **Micro-batches are event-time intervals of the open-loop source.** Source partition `m` of
//!   `n` offers its `k`-th sentence at the intended send time the continuous engine's source
//!   would give it (`k·n/rate` seconds after the start at a constant rate, later on a ramp's
//!   schedule, [`Offered::intended`]); micro-batch `b` holds the sentences whose intended
//!   send time falls in `[b·I, (b+1)·I)`, `I` the batch interval. A paced run starts a
//!   micro-batch's map tasks when its interval has passed on the wall clock (its data "has
//!   arrived"), so the data, not the scheduler, sets the pace.
//! - **Map task** (micro-batch, source partition): split the sentences into words and count them
//!   per tumbling window of the event time (a combiner), then hash-partition the counts into one
//!   bucket per reduce partition.
//! - **Reduce task** (micro-batch, reduce partition): add the buckets of every map partition to
//!   the partition's open windows (its *state*), and emit the windows that the micro-batch closes
//!   (window end ≤ micro-batch end; every window at the last micro-batch).
//!
//! Everything is deterministic (sorted outputs, a fixed hash), so the replay of a micro-batch
//! from a checkpoint produces exactly the output the first run produced.

use std::collections::BTreeMap;
use std::hash::{Hash, Hasher};
use std::time::Duration;

use moirai_engine::source::Offered;
use moirai_workloads::wordcount::{self, WordCountConfig, WordCountHandle};
use rustc_hash::{FxHashMap, FxHasher};
use serde_json::Value;

use crate::bounds::{self, WordCountShape};
use crate::job::{Job, OutputBounds};
use crate::Error;

/// A word's count in one window: (window start in ms since the run's start, word, count).
pub type WindowCount = (u64, String, u64);

/// A reduce partition's open windows: window start (ms) → word → count.
pub type PartitionState = BTreeMap<u64, BTreeMap<String, u64>>;

/// WordCount as micro-batch tasks, with the input cursor of each source partition.
pub struct WordCountJob {
    config: WordCountConfig,
    /// Each source partition's schedule of intended send times.
    offered: Offered,
    interval_ms: u64,
    batches: u64,
    handle: WordCountHandle,
    cursors: Vec<Cursor>,
    /// Map tasks count per window and send straight to the sink: no shuffle, no reduce stage.
    single_stage: bool,
    /// State of the reduce partitions this process runs.
    states: FxHashMap<usize, PartitionState>,
    /// What bounds its outputs (the highest rate, the corpus' words).
    shape: WordCountShape,
}

/// Where a source partition's generator stands.
struct Cursor {
    sentences: Box<dyn Iterator<Item = String> + Send>,
    /// Index of the sentence `sentences` yields next.
    next: u64,
}

impl WordCountJob {
    /// The job of `config`, cut into micro-batches of `interval`; an endless input runs for
    /// `duration`. Errors name the setting to fix.
    pub fn new(config: WordCountConfig, interval: Duration, duration: Option<Duration>) -> Result<Self, Error> {
        Self::with_ramp(config, interval, duration, None)
    }

    /// The same, with the offered rate ramping linearly from `config.rate` to `ramp.0` tuples/s
    /// over `ramp.1`, then staying there (`--ramp-to`, as the continuous engine ramps).
    pub fn with_ramp(
        config: WordCountConfig,
        interval: Duration,
        duration: Option<Duration>,
        ramp: Option<(f64, Duration)>,
    ) -> Result<Self, Error> {
        config.validate().map_err(|e| Error::Config(e.to_string()))?;
        if config.rate <= 0.0 {
            return Err(Error::Config(
                "micro-batch execution needs an offered rate (--rate > 0): micro-batches are intervals of the \
                 source's intended send times"
                    .into(),
            ));
        }
        crate::check_interval(interval)?;
        if config.exchange.is_some() || config.straggler.is_some() {
            return Err(Error::Unsupported(
                "WordCount's Hone exchange and straggler are operators of the continuous engine; run micro-batch \
                 without --exchange and --straggler"
                    .into(),
            ));
        }
        let interval_ms = interval.as_millis() as u64;
        let (_, handle) = wordcount::queries(&config).map_err(|e| Error::Config(e.to_string()))?;
        let n = config.parallelism;
        let offered = match ramp {
            None => Offered::Constant(config.rate),
            Some((to, over)) => Offered::Ramp { from: config.rate, to, over },
        };
        offered.validate().map_err(|e| Error::Config(format!("--rate/--ramp-to: {e}")))?;
        let offered = offered.split(n);
        let batches = if config.sentences > 0 {
            (0..n)
                .map(|m| {
                    let count = config.sentences / n as u64 + u64::from((m as u64) < config.sentences % n as u64);
                    count.checked_sub(1).map_or(0, |last| event_ms(&offered, last) / interval_ms + 1)
                })
                .max()
                .unwrap_or(0)
        } else {
            let Some(d) = duration else {
                return Err(Error::Config(
                    "an endless input (--sentences 0) needs a --duration in micro-batch mode".into(),
                ));
            };
            (d.as_millis() as u64).div_ceil(interval_ms)
        };
        if batches == 0 {
            return Err(Error::Config("the input has no sentences: give --sentences > 0 or a --duration".into()));
        }
        let cursors = (0..n).map(|m| Cursor { sentences: Box::new(handle.instance_sentences(m)), next: 0 }).collect();
        let (max_words, distinct_words, word_bytes) = corpus_shape(&config)?;
        let shape = WordCountShape {
            rate: ramp.map_or(config.rate, |(to, _)| to.max(config.rate)),
            partitions: n,
            interval_ms,
            window_ms: config.window_ms,
            max_words,
            distinct_words,
            word_bytes,
            single_stage: false,
        };
        Ok(WordCountJob {
            config,
            offered,
            interval_ms,
            batches,
            handle,
            cursors,
            single_stage: false,
            states: FxHashMap::default(),
            shape,
        })
    }

    /// The same job as a single stage: map tasks count words per window and their counts go
    /// straight to the sink (no shuffle, no reduce stage): Drizzle's single-stage job (Fig. 4).
    pub fn single_stage(mut self) -> Self {
        self.single_stage = true;
        self.shape.single_stage = true;
        self
    }

    /// Micro-batches of the run.
    pub fn batches(&self) -> u64 {
        self.batches
    }

    /// The batch interval, ms.
    pub fn interval_ms(&self) -> u64 {
        self.interval_ms
    }

    /// Source partitions: the map tasks of each micro-batch.
    pub fn map_partitions(&self) -> usize {
        self.config.parallelism
    }

    /// Reduce partitions: the reduce tasks of each micro-batch (0 for a single stage).
    pub fn reduce_partitions(&self) -> usize {
        if self.single_stage {
            0
        } else {
            self.config.parallelism
        }
    }

    /// Compares counts per word with a naive count of the whole input; the error describes the
    /// first difference.
    pub fn check(&self, counts: &BTreeMap<String, u64>) -> Result<(), String> {
        let reference = self.handle.reference().map_err(|e| e.to_string())?;
        let words = reference.keys().chain(counts.keys());
        match words.filter(|w| reference.get(*w) != counts.get(*w)).min() {
            None => Ok(()),
            Some(w) => Err(format!(
                "word '{w}': counted {}, the input has {}",
                counts.get(w).copied().unwrap_or(0),
                reference.get(w).copied().unwrap_or(0)
            )),
        }
    }

    /// Sentences the run's micro-batches hold, over all source partitions.
    pub fn sentences_total(&self) -> u64 {
        let last = self.first_sentence(self.batches);
        (0..self.config.parallelism).map(|m| last.min(self.sentences_of(m))).sum()
    }

    /// The offered rate, sentences/s.
    pub fn rate(&self) -> f64 {
        self.config.rate
    }

    /// Index of the first sentence of a source partition in micro-batch `batch`: the first
    /// whose intended send time is at or after the micro-batch's start.
    fn first_sentence(&self, batch: u64) -> u64 {
        let start_ms = batch * self.interval_ms;
        // Intended times are monotone in k: search for the first at or after the start.
        let (mut lo, mut hi) = (0u64, self.offered.due(start_ms * 1_000_000).saturating_add(1));
        while lo < hi {
            let mid = lo + (hi - lo) / 2;
            if event_ms(&self.offered, mid) < start_ms {
                lo = mid + 1;
            } else {
                hi = mid;
            }
        }
        lo
    }

    /// Sentences of source partition `partition` in total (`u64::MAX` when endless).
    fn sentences_of(&self, partition: usize) -> u64 {
        let (s, n) = (self.config.sentences, self.config.parallelism as u64);
        if s == 0 {
            return u64::MAX;
        }
        s / n + u64::from((partition as u64) < s % n)
    }

    /// Sentences `[from, to)` of `partition`, regenerated from the start when asked for earlier
    /// ones (a replay after recovery).
    fn sentences(&mut self, partition: usize, from: u64, to: u64) -> Vec<String> {
        if self.cursors[partition].next > from {
            self.cursors[partition] =
                Cursor { sentences: Box::new(self.handle.instance_sentences(partition)), next: 0 };
        }
        let cursor = &mut self.cursors[partition];
        let skip = (from - cursor.next) as usize;
        if skip > 0 {
            cursor.sentences.nth(skip - 1);
        }
        let out: Vec<String> = cursor.sentences.by_ref().take((to - from) as usize).collect();
        cursor.next = from + out.len() as u64;
        out
    }

    /// Runs map task (`batch`, `partition`): one bucket of window counts per reduce partition,
    /// each sorted.
    pub fn map(&mut self, batch: u64, partition: usize) -> Vec<Vec<WindowCount>> {
        let end = self.sentences_of(partition);
        let (from, to) = (self.first_sentence(batch).min(end), self.first_sentence(batch + 1).min(end));
        let sentences = self.sentences(partition, from, to);
        let r = self.reduce_partitions().max(1);
        let window_ms = self.config.window_ms;
        let mut buckets: Vec<FxHashMap<(u64, &str), u64>> = vec![FxHashMap::default(); r];
        for (k, sentence) in (from..).zip(&sentences) {
            let t = event_ms(&self.offered, k);
            let window = t - t % window_ms;
            for word in sentence.split_whitespace() {
                *buckets[reduce_partition(word, r)].entry((window, word)).or_insert(0) += 1;
            }
        }
        buckets
            .into_iter()
            .map(|b| {
                let mut v: Vec<WindowCount> = b.into_iter().map(|((w, word), c)| (w, word.to_string(), c)).collect();
                v.sort_unstable();
                v
            })
            .collect()
    }

    /// Runs reduce task `batch` of a partition over `state`: adds `inputs` (the buckets of every
    /// map partition) and emits, sorted, the windows this micro-batch closes.
    pub fn reduce<'a>(
        &self,
        batch: u64,
        state: &mut PartitionState,
        inputs: impl IntoIterator<Item = &'a Vec<WindowCount>>,
    ) -> Vec<WindowCount> {
        for input in inputs {
            for (window, word, count) in input {
                *state.entry(*window).or_default().entry(word.clone()).or_insert(0) += count;
            }
        }
        let closed_before = if batch + 1 >= self.batches {
            u64::MAX
        } else {
            ((batch + 1) * self.interval_ms).saturating_sub(self.config.window_ms - 1)
        };
        // Windows starting before `closed_before` end at or before the micro-batch's end.
        let open = state.split_off(&closed_before);
        let closed = std::mem::replace(state, open);
        closed.into_iter().flat_map(|(w, words)| words.into_iter().map(move |(word, c)| (w, word, c))).collect()
    }
}

fn value<T: serde::Serialize>(t: &T) -> Value {
    serde_json::to_value(t).unwrap_or(Value::Null)
}

fn from_value<T: serde::de::DeserializeOwned>(v: Value, what: &str) -> Result<T, Error> {
    serde_json::from_value(v).map_err(|e| Error::Protocol(format!("a malformed {what}: {e}")))
}

impl Job for WordCountJob {
    fn batches(&self) -> u64 {
        self.batches
    }

    fn interval_ms(&self) -> u64 {
        self.interval_ms
    }

    fn map_partitions(&self) -> usize {
        self.map_partitions()
    }

    fn reduce_partitions(&self) -> usize {
        self.reduce_partitions()
    }

    fn map(&mut self, batch: u64, partition: usize) -> Result<Vec<Value>, Error> {
        Ok(WordCountJob::map(self, batch, partition).iter().map(value).collect())
    }

    fn reduce(&mut self, batch: u64, partition: usize, inputs: Vec<Value>) -> Result<Value, Error> {
        let inputs: Vec<Vec<WindowCount>> =
            inputs.into_iter().map(|v| from_value(v, "map output")).collect::<Result<_, _>>()?;
        let mut state = self.states.remove(&partition).unwrap_or_default();
        let output = WordCountJob::reduce(self, batch, &mut state, &inputs);
        self.states.insert(partition, state);
        Ok(value(&output))
    }

    fn checkpoint(&mut self, partition: usize) -> Value {
        self.states.get(&partition).map_or(Value::Null, value)
    }

    fn restore(&mut self, states: Vec<(usize, Value)>) -> Result<(), Error> {
        self.states.clear();
        for (partition, state) in states {
            let state = if state.is_null() { PartitionState::new() } else { from_value(state, "checkpoint")? };
            self.states.insert(partition, state);
        }
        Ok(())
    }

    fn output_bounds(&self) -> OutputBounds {
        bounds::wordcount(self.shape)
    }
}

/// The words a WordCount input can hold: most words in a sentence, distinct words, the longest
/// word as JSON text. The generator's words are 2–10 lowercase letters of its vocabulary; a text
/// file's are read from it.
fn corpus_shape(config: &WordCountConfig) -> Result<(u64, u64, u64), Error> {
    let Some(path) = &config.text else {
        return Ok((config.max_words as u64, config.vocabulary as u64, 12));
    };
    let text = std::fs::read_to_string(path)
        .map_err(|e| Error::Config(format!("cannot read the WordCount text file {}: {e}", path.display())))?;
    let (mut most, mut longest, mut words) = (1u64, 2u64, std::collections::HashSet::new());
    for line in text.lines() {
        let mut count = 0;
        for word in line.split_whitespace() {
            count += 1;
            longest = longest.max(serde_json::to_string(word).map_or(6 * word.len() as u64 + 2, |j| j.len() as u64));
            words.insert(word);
        }
        most = most.max(count);
    }
    Ok((most, words.len().max(1) as u64, longest))
}

/// Intended send time (ms since the start) of sentence `k` of a source partition whose schedule
/// is `offered`: the continuous engine's event time of the sentence, in whole ms.
fn event_ms(offered: &Offered, k: u64) -> u64 {
    offered.intended(k) / 1_000_000
}

/// The reduce partition of a word: the same in every process (FxHash has no random seed).
pub fn reduce_partition(word: &str, partitions: usize) -> usize {
    let mut h = FxHasher::default();
    word.hash(&mut h);
    (h.finish() % partitions as u64) as usize
}

#[cfg(test)]
mod tests {
    use super::*;

    fn config() -> WordCountConfig {
        WordCountConfig {
            rate: 1000.0,
            sentences: 500,
            parallelism: 2,
            window_ms: 100,
            max_words: 4,
            vocabulary: 50,
            ..WordCountConfig::default()
        }
    }

    #[test]
    fn micro_batches_partition_the_input_and_reduce_counts_every_word() {
        let mut job = WordCountJob::new(config(), Duration::from_millis(30), None).unwrap();
        // 250 sentences per partition at 500/s each: the last at 498 ms → micro-batches 0..=16.
        assert_eq!(job.batches(), 17);
        let mut states = vec![PartitionState::new(); 2];
        let mut total: FxHashMap<String, u64> = FxHashMap::default();
        for b in 0..job.batches() {
            let outputs: Vec<Vec<Vec<WindowCount>>> = (0..2).map(|m| job.map(b, m)).collect();
            for (r, state) in states.iter_mut().enumerate() {
                let inputs: Vec<&Vec<WindowCount>> = outputs.iter().map(|o| &o[r]).collect();
                for (w, word, c) in job.reduce(b, state, inputs) {
                    assert!(w + 100 <= (b + 1) * 30 || b + 1 == job.batches(), "window {w} emitted at batch {b}");
                    assert_eq!(reduce_partition(&word, 2), r);
                    *total.entry(word).or_insert(0) += c;
                }
            }
        }
        assert!(states.iter().all(BTreeMap::is_empty), "the last micro-batch closes every window");
        let reference = job.handle.reference().unwrap();
        assert_eq!(total.into_iter().collect::<std::collections::HashMap<_, _>>(), reference);
    }

    #[test]
    fn on_a_ramp_micro_batches_follow_the_engines_schedule_and_grow() {
        // 1000 → 5000 sentences/s over 1 s, then 5000/s: the engine's intended send times.
        let over = Duration::from_secs(1);
        let mut job = WordCountJob::with_ramp(
            WordCountConfig { sentences: 6000, ..config() },
            Duration::from_millis(100),
            None,
            Some((5000.0, over)),
        )
        .unwrap();
        let offered = Offered::Ramp { from: 1000.0, to: 5000.0, over }.split(2);
        let mut next = 0;
        let mut sizes = Vec::new();
        for b in 0..job.batches() {
            let (from, to) = (job.first_sentence(b), job.first_sentence(b + 1).min(job.sentences_of(0)));
            assert_eq!(from, next, "micro-batch {b} starts where the previous ended");
            for k in from..to {
                let ms = offered.intended(k) / 1_000_000;
                assert!((b * 100..(b + 1) * 100).contains(&ms), "sentence {k} at {ms} ms is in micro-batch {b}");
            }
            sizes.push(to - from);
            next = to;
        }
        assert_eq!(next, job.sentences_of(0), "every sentence of the partition in some micro-batch");
        assert!(sizes[0] < sizes[5] && sizes[5] < sizes[10], "micro-batches grow with the rate: {sizes:?}");
        assert_eq!(sizes[12], 250, "after the ramp 2500/s per partition: {sizes:?}");
        // Each partition's map tasks see every one of its sentences once.
        let words: u64 = (0..job.batches()).flat_map(|b| job.map(b, 1)).flatten().map(|(_, _, c)| c).sum();
        assert!(words >= 3000, "partition 1's 3000 sentences hold at least a word each: {words}");
        let e = WordCountJob::with_ramp(config(), Duration::from_millis(10), None, Some((-1.0, over)));
        assert!(e.err().unwrap().to_string().contains("--ramp-to"), "a bad ramp names the flag");
    }

    #[test]
    fn a_replayed_map_task_produces_the_same_output() {
        let mut job = WordCountJob::new(config(), Duration::from_millis(50), None).unwrap();
        let first: Vec<_> = (0..5).map(|b| job.map(b, 1)).collect();
        let again: Vec<_> = (2..5).map(|b| job.map(b, 1)).collect();
        assert_eq!(&first[2..], &again[..]);
        assert!(first.iter().flatten().any(|bucket| !bucket.is_empty()));
    }

    #[test]
    fn bad_settings_are_refused_with_the_setting_named() {
        let e = |c: WordCountConfig, i: u64| {
            WordCountJob::new(c, Duration::from_millis(i), None).err().unwrap().to_string()
        };
        assert!(e(WordCountConfig { rate: 0.0, ..config() }, 10).contains("--rate"));
        assert!(e(config(), 0).contains("--batch-interval"));
        assert!(e(WordCountConfig { sentences: 0, ..config() }, 10).contains("--duration"));
        assert!(e(WordCountConfig { straggler: Some(2.0), ..config() }, 10).contains("--straggler"));
    }
}

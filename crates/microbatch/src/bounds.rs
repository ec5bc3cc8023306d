//! The [`OutputBounds`] of the two kinds of job, as pure functions of their settings: the most
//! JSON a task can produce at the job's highest rate, from which the wire's message limits are
//! derived ([`crate::limits`]).
//!
//! - **WordCount** is bounded exactly by its input: a map task sees at most the sentences its
//!   source partition offers in one batch interval, each of at most `max_words` words of a known
//!   vocabulary (the generator's, or the words of the text file); every output entry is one
//!   `[window, word, count]`, and a window holds at most one entry per distinct word.
//! - **A query** is bounded by its source's rate and a **sample** of its map side, taken when the
//!   job is built (the same in every process): output tuples per input tuple (at least one) and
//!   the largest output tuple (twice it, for tuples the sample did not meet). A reduce
//!   partition's state is the input of its open windows — at most the whole stream over a
//!   window, a slide, a batch interval and the source's out-of-orderness (read off the sample)
//!   plus a second — and merged checkpoints hold at most twice that plus [`crate::query`]'s
//!   threshold; window results are taken to be no larger than the input they summarise.

use crate::job::OutputBounds;

/// JSON bytes of one `[window, word, count]` entry, or one `"word":count` of a checkpoint,
/// besides the word itself: two numbers of up to 20 digits and punctuation.
const ENTRY: f64 = 48.0;
/// Bytes per window of a checkpoint besides its words (its key).
const WINDOW: f64 = 32.0;

/// What bounds a WordCount job's outputs.
#[derive(Clone, Copy, Debug)]
pub(crate) struct WordCountShape {
    /// The highest offered rate, sentences/s over all source partitions.
    pub rate: f64,
    /// Source (and reduce) partitions.
    pub partitions: usize,
    /// Batch interval and window, ms.
    pub interval_ms: u64,
    pub window_ms: u64,
    /// Most words in a sentence.
    pub max_words: u64,
    /// Distinct words the input can hold.
    pub distinct_words: u64,
    /// Longest word as JSON text (quotes and escapes included).
    pub word_bytes: u64,
    /// Map tasks send to the sink (no reduce stage).
    pub single_stage: bool,
}

fn bytes(x: f64) -> u64 {
    if x.is_finite() {
        x.ceil().min(u64::MAX as f64) as u64
    } else {
        u64::MAX
    }
}

/// WordCount's bounds.
pub(crate) fn wordcount(s: WordCountShape) -> OutputBounds {
    let (n, interval, window) = (s.partitions.max(1) as f64, s.interval_ms as f64, s.window_ms.max(1) as f64);
    let entry = s.word_bytes as f64 + ENTRY;
    let words = s.max_words as f64;
    let distinct = s.distinct_words as f64;
    // A map task: its partition's sentences of one interval; entries per window and word.
    let sentences = (s.rate / n * interval / 1e3).ceil() + 1.0;
    let windows_per_batch = (interval / window).ceil() + 1.0;
    let map_entries = (sentences * words).min(distinct * windows_per_batch);
    let map_output = map_entries * entry + 2.0;
    // A window of any reduce partition: at most every word of the whole stream over the window.
    let window_words = ((s.rate * window / 1e3).ceil() + n) * words;
    let per_window = distinct.min(window_words) * entry + WINDOW;
    // A reduce task closes the windows its interval ends, the last one also the open one.
    let sink_output = if s.single_stage { map_output } else { (windows_per_batch + 1.0) * per_window + 2.0 };
    // The state between micro-batches: the open window (two, where an interval ends mid-way).
    let checkpoint = 2.0 * per_window + 2.0;
    OutputBounds { map_output: bytes(map_output), sink_output: bytes(sink_output), checkpoint: bytes(checkpoint) }
}

/// What a query job's map side produced on a sample of its input.
#[derive(Clone, Copy, Debug, Default)]
pub(crate) struct Sample {
    /// Input tuples the sample covered, and output tuples they gave.
    pub input: u64,
    pub output: u64,
    /// The largest output tuple, JSON bytes.
    pub largest: u64,
    /// Event time of the latest output tuple less the watermark after it: the source's
    /// out-of-orderness, as far as the sample shows it.
    pub out_of_order_ns: u64,
}

/// What bounds a query job's outputs.
#[derive(Clone, Copy, Debug)]
pub(crate) struct QueryShape {
    /// The source's rate, tuples/s over all partitions.
    pub rate: f64,
    pub map_partitions: usize,
    /// A single stage: map outputs go to the sink.
    pub single_stage: bool,
    pub interval_ns: u64,
    /// The reduce side's window: size and slide, ns.
    pub window_ns: (u64, u64),
    /// The fewest tuples a whole checkpoint holds.
    pub min_whole: u64,
    pub sample: Sample,
}

/// A query's bounds.
pub(crate) fn query(s: QueryShape) -> OutputBounds {
    // A tuple the sample did not see may be larger: twice the largest it saw, and never less
    // than 1 KiB when it saw none.
    let tuple = if s.sample.output == 0 { 1024.0 } else { 2.0 * s.sample.largest as f64 + 2.0 };
    let fan_out = (s.sample.output as f64 / s.sample.input.max(1) as f64).max(1.0);
    let per_map = s.rate / s.map_partitions.max(1) as f64;
    let task_tuples = (per_map * s.interval_ns as f64 / 1e9).ceil() + 1.0;
    let map_output = task_tuples * fan_out * tuple + 64.0;
    let span_ns = s.window_ns.0 + s.window_ns.1 + s.interval_ns + s.sample.out_of_order_ns + 1_000_000_000;
    let state = (s.rate * span_ns as f64 / 1e9).ceil() * fan_out;
    let checkpoint = (2.0 * state + s.min_whole as f64) * tuple + 256.0;
    let sink_output = if s.single_stage { map_output } else { checkpoint };
    OutputBounds { map_output: bytes(map_output), sink_output: bytes(sink_output), checkpoint: bytes(checkpoint) }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn shape() -> WordCountShape {
        WordCountShape {
            rate: 20_000.0,
            partitions: 2,
            interval_ms: 10,
            window_ms: 50,
            max_words: 32,
            distinct_words: 10_000,
            word_bytes: 12,
            single_stage: false,
        }
    }

    #[test]
    fn wordcount_bounds_follow_rate_interval_and_vocabulary() {
        let b = wordcount(shape());
        // 101 sentences of up to 32 words of at most 60 bytes each.
        assert_eq!(b.map_output, 101 * 32 * 60 + 2);
        let faster = wordcount(WordCountShape { rate: 40_000.0, ..shape() });
        assert!(faster.map_output > b.map_output, "more per interval at a higher rate");
        // The vocabulary caps what a window can hold, however fast the input.
        let small = WordCountShape { distinct_words: 50, ..shape() };
        assert_eq!(wordcount(small).checkpoint, wordcount(WordCountShape { rate: 1e9, ..small }).checkpoint);
        assert_eq!(wordcount(WordCountShape { single_stage: true, ..shape() }).sink_output, b.map_output);
    }

    #[test]
    fn query_bounds_follow_the_sample_and_the_window() {
        let s = QueryShape {
            rate: 10_000.0,
            map_partitions: 2,
            single_stage: false,
            interval_ns: 100_000_000,
            window_ns: (1_000_000_000, 1_000_000_000),
            min_whole: 4096,
            sample: Sample { input: 300, output: 100, largest: 40, out_of_order_ns: 0 },
        };
        let b = query(s);
        // 501 tuples per map task, at least one output each, 82 bytes.
        assert_eq!(b.map_output, 501 * 82 + 64);
        let later = query(QueryShape { sample: Sample { out_of_order_ns: 5_000_000_000, ..s.sample }, ..s });
        assert!(later.checkpoint > b.checkpoint, "out-of-order input keeps windows open longer");
        let blind = query(QueryShape { sample: Sample::default(), ..s });
        assert_eq!(blind.map_output, 501 * 1024 + 64, "no output seen: 1 KiB a tuple");
    }
}

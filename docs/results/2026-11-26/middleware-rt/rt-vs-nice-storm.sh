#!/usr/bin/env bash
# Real-time classes against nice values on Apache Storm, with parking executors (--wait-strategy
# park:1000; the realtime translator refuses Storm's default, spinning executors): the Lachesis SYN,
# queue-size scheduling through nice values (storm:qs) and through the realtime translator
# (storm:qs/translator=realtime: the same nice values, plus SCHED_RR for the one executor QS ranks
# highest), Linux alone (storm:os) for reference; 5 interleaved repetitions of 20 s per point
# around storm:os's saturation (16-18k here). Writes rt-vs-nice-storm.csv and .txt beside this script.
# Run from the repository root after `cargo build --release -p moirai-cli`:
#   (alone on the machine) bash docs/results/2026-11-26/middleware-rt/rt-vs-nice-storm.sh
set -euo pipefail
here=$(dirname "$(readlink -f "$0")")
OUT=${OUT:-/tmp/moirai-results/rt-vs-nice-storm}
RATES=${RATES:-10k,14k,18k}
target/release/moirai bench syn --rates "$RATES" --duration 20s --reps 5 \
  --compare storm:os,storm:qs,storm:qs/translator=realtime --out "$OUT" \
  -- --lachesis --wait-strategy park:1000 2>&1 | tee "$here/rt-vs-nice-storm.txt"
cp "$OUT/results.csv" "$here/rt-vs-nice-storm.csv"

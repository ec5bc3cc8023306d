#!/usr/bin/env bash
# Real-time classes against nice values on Apache Flink: the Lachesis SYN as a real Flink 1.20 job
# (integrations/flink), Linux alone (flink:os), queue-size scheduling through nice values
# (flink:qs) and through the realtime translator (flink:qs/translator=realtime: the same nice
# values, plus SCHED_RR for the one thread QS ranks highest); 5 interleaved repetitions of 20 s per
# point at and around flink:os's saturation (~35-40k tuples/s here). Writes rt-vs-nice-flink.csv
# and .txt beside this script; the lab's full output goes to $OUT.
# Run from the repository root after `cargo build --release -p moirai-cli`:
#   (alone on the machine) bash docs/results/2026-11-26/middleware-rt/rt-vs-nice-flink.sh
set -euo pipefail
here=$(dirname "$(readlink -f "$0")")
OUT=${OUT:-/tmp/moirai-results/rt-vs-nice-flink}
RATES=${RATES:-30k,35k,40k,45k}
target/release/moirai bench syn --rates "$RATES" --duration 20s --reps 5 \
  --compare flink:os,flink:qs,flink:qs/translator=realtime --out "$OUT" -- --lachesis 2>&1 | tee "$here/rt-vs-nice-flink.txt"
cp "$OUT/results.csv" "$here/rt-vs-nice-flink.csv"

#!/usr/bin/env bash
# Real-time classes against nice values on moirai's engine: the Lachesis SYN (20 queries x 3
# operators), Linux alone (os), queue-size scheduling through nice values (qs) and through the
# realtime translator (qs/translator=realtime: the same nice values, plus SCHED_RR for the one
# thread QS ranks highest, the default --rt-threads on 2 cores); 5 interleaved repetitions of 10 s
# per point at and around os's saturation (~34-38.6k tuples/s here). Writes rt-vs-nice-moirai.csv
# and .txt (the lab's table) beside this script; the lab's full output goes to $OUT.
# Run from the repository root after `cargo build --release -p moirai-cli`:
#   (alone on the machine) bash docs/results/2026-11-26/middleware-rt/rt-vs-nice-moirai.sh
set -euo pipefail
here=$(dirname "$(readlink -f "$0")")
OUT=${OUT:-/tmp/moirai-results/rt-vs-nice-moirai}
RATES=${RATES:-30k,34k,38.6k,45k,51.4k}
target/release/moirai bench syn --rates "$RATES" --duration 10s --reps 5 \
  --compare os,qs,qs/translator=realtime --out "$OUT" -- --lachesis 2>&1 | tee "$here/rt-vs-nice-moirai.txt"
cp "$OUT/results.csv" "$here/rt-vs-nice-moirai.csv"

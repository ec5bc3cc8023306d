#!/usr/bin/env bash
# Storm as users run it under CPU contention: the Lachesis SYN (20 queries x 3 operators, 100
# executors) with idle executors parking 1 ms per turn (--wait-strategy park:1000, chosen in
# storm-wait-strategy-*.csv), Linux alone (storm:os) against queue-size scheduling by the
# middleware (storm:qs), the same strategy for both; 5 interleaved repetitions of 20 s per point
# from ~50 % of os's saturation to ~1.4x it. Writes $NAME.csv and $NAME.txt (the lab's table)
# beside this script (NAME=storm-os-qs by default); the lab's full output goes to $OUT.
# The second sweep, above: NAME=storm-os-qs-high RATES=18k,20k,22k.
# Run from the repository root after `cargo build --release -p moirai-cli`:
#   (alone on the machine) bash docs/results/2026-11-26/middleware-rt/storm-os-qs.sh
set -euo pipefail
here=$(dirname "$(readlink -f "$0")")
NAME=${NAME:-storm-os-qs}
OUT=${OUT:-/tmp/moirai-results/$NAME}
RATES=${RATES:-6k,10k,12k,14k,16k}
target/release/moirai bench syn --rates "$RATES" --duration 20s --reps 5 --compare storm:os,storm:qs \
  --out "$OUT" -- --lachesis --wait-strategy park:1000 2>&1 | tee "$here/$NAME.txt"
cp "$OUT/results.csv" "$here/$NAME.csv"

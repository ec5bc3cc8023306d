#!/usr/bin/env bash
# Storm past its saturation point measured in steady state (issue 23): the 40 s runs of the
# earlier sweeps spend their first seconds on the spouts catching up and the JVM warming, and
# their p99 spread 4-17x within one configuration. Here `storm:os` against `storm:qs` (with the
# middleware's -v log kept) at RATES, REPS interleaved repetitions of 150 s of which the first
# 40 % (60 s) is discarded, the Lachesis SYN with parking executors. Run alone, from the
# repository's root; ~28 min for 30k x 5, ~34 min for 24k,27k x 3.
# usage: bash docs/results/2026-12-02/storm-long/run.sh OUT [RATES] [REPS] [NAME]
#   (results.csv, table.txt and ratios.md land here as NAME-*, default "30k")
set -euo pipefail
here=$(dirname "$(readlink -f "$0")")
out=${1:?usage: run.sh OUT [RATES] [REPS] [NAME]}
rates=${2:-30k}
reps=${3:-5}
name=${4:-30k}
cargo build --release -p moirai-cli
target/release/moirai bench syn --rates "$rates" --duration 150s --warmup 0.4 --reps "$reps" \
  --compare storm:os,storm:qs/verbose --out "$out" -- --lachesis --wait-strategy park:1000 2>&1 | tee "$here/$name-table.txt"
cp "$out/results.csv" "$here/$name-results.csv"
python3 docs/results/2026-11-26/middleware-rt/ratios.py "$here/$name-results.csv" storm:os storm:qs/verbose > "$here/$name-ratios.md"

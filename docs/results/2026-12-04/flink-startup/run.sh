#!/usr/bin/env bash
# Would a start-up (the 20 s Storm gets) cost Flink's heavy-operator pipeline, where scheduling
# gains and the rule acts from the job's first seconds? `flink:os`, `flink:qs` at its defaults
# (no start-up for Flink) and `flink:qs/activation-startup=20s`, interleaved, 150 s points with
# the first 40 % discarded, the middlewares' -v logs kept. Run alone, from the repository's root.
# usage: bash docs/results/2026-12-04/flink-startup/run.sh OUT [RATES] [REPS]   (~17 min for 44k x 2)
set -euo pipefail
here=${RESULTS:-$(dirname "$(readlink -f "$0")")}
out=${1:?usage: run.sh OUT [RATES] [REPS]}
rates=${2:-44k}
reps=${3:-2}
cargo build --release -p moirai-cli
target/release/moirai bench syn --rates "$rates" --duration 150s --warmup 0.4 --reps "$reps" \
  --compare 'flink:os,flink:qs/verbose,flink:qs/activation-startup=20s/verbose' --out "$out" \
  -- --ops 5 --cost-ns 5000 --heavy-op 3 --heavy-factor 4 2>&1 | tee "$here/table.txt"
cp "$out/results.csv" "$here/results.csv"
python3 docs/results/2026-11-26/middleware-rt/ratios.py "$here/results.csv" flink:os flink:qs/verbose \
  flink:qs/activation-startup=20s/verbose > "$here/ratios.md"

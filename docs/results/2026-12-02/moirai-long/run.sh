#!/usr/bin/env bash
# moirai's engine past its saturation point in steady state (issue 23), as
# ../storm-long/ for Storm: `os` (Linux alone) against `qs` (`moirai schedule --policy qs`, the
# default activation rule) on the Lachesis SYN, 150 s points of which the first 40 % (60 s) is
# discarded, REPS interleaved repetitions at RATES. Run alone, from the repository's root;
# ~31 min for 33k,43k x 3.
# usage: bash docs/results/2026-12-02/moirai-long/run.sh OUT [RATES] [REPS]
set -euo pipefail
here=$(dirname "$(readlink -f "$0")")
out=${1:?usage: run.sh OUT [RATES] [REPS]}
rates=${2:-33k,43k}
reps=${3:-3}
cargo build --release -p moirai-cli
target/release/moirai bench syn --rates "$rates" --duration 150s --warmup 0.4 --reps "$reps" \
  --compare os,qs --out "$out" -- --lachesis 2>&1 | tee "$here/table.txt"
cp "$out/results.csv" "$here/results.csv"
python3 docs/results/2026-11-26/middleware-rt/ratios.py "$here/results.csv" os qs > "$here/ratios.md"

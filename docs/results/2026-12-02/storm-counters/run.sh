#!/usr/bin/env bash
# The activation rule on Storm past its saturation point, after its rate check learned that
# Storm's counters refresh once a second and that a source catches up after the start (issue 23):
# `storm:os` against `storm:qs`, 5 interleaved repetitions of 40 s at 26k and 30k tuples/s, the
# Lachesis SYN with parking executors. Run alone, from the repository's root; ~18 min.
# usage: bash docs/results/2026-12-02/storm-counters/run.sh [OUT]
set -euo pipefail
here=$(dirname "$(readlink -f "$0")")
out=${1:-/tmp/moirai-results/storm-counters}
cargo build --release -p moirai-cli
target/release/moirai bench syn --rates 26k,30k --duration 40s --reps 5 --compare storm:os,storm:qs \
  --out "$out" -- --lachesis --wait-strategy park:1000 2>&1 | tee "$here/table.txt"
cp "$out/results.csv" "$here/results.csv"
python3 docs/results/2026-11-26/middleware-rt/ratios.py "$here/results.csv" storm:os storm:qs > "$here/ratios.md"
# One verbose run, for the rule's decisions round by round:
#   target/release/moirai bench syn --rates 30k --duration 40s --reps 1 --compare storm:qs/verbose \
#     --out /tmp/v -- --lachesis --wait-strategy park:1000
#   grep "SPE 'storm'" /tmp/v/middleware-logs/*.log

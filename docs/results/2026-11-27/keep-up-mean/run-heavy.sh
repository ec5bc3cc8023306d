#!/usr/bin/env bash
# Issue 23: the activation lag on a pipeline whose queues hold tens of milliseconds of input
# without anything being wrong — one query of 3 operators at 200 µs a tuple (the overload test's
# engine in crates/cli/tests/schedule_activation.rs): 25 ms of input is 65 tuples at 2 600/s.
# Linux alone, the rule at 100 ms and at 25 ms, 3 repetitions (rotated), 20 s points. Usage (from
# the repository root, after a release build, under the benchmark lock):
#   bash docs/results/2026-11-27/keep-up-mean/run-heavy.sh OUT_DIR [REPS]
#   python3 docs/results/2026-11-27/activation-lag/summary.py OUT_DIR/results.csv   (summary.md here)
set -eu
OUT=${1:?out dir}; REPS=${2:-3}
target/release/moirai bench syn --rates 2600,3000 --duration 20s --reps "$REPS" \
  --compare os,qs,qs/activation-lag=25ms \
  --out "$OUT" -- --queries 1 --ops 3 --cost-ns 200000

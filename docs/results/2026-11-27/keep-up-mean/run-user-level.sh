#!/usr/bin/env bash
# Issue 23: the activation lag of the engine's user-level policy executor (policy:qs:2), 100 ms
# (its default) against 25 ms, beside the dynamic pool, past the pool's saturation point,
# 3 repetitions (rotated), 20 s points, Lachesis SYN. Usage (from the repository root, after a
# release build, under the benchmark lock):
#   bash docs/results/2026-11-27/keep-up-mean/run-user-level.sh OUT_DIR [REPS]
#   python3 docs/results/2026-11-27/activation-lag/summary.py OUT_DIR/results.csv   (summary.md here)
set -eu
OUT=${1:?out dir}; REPS=${2:-3}
target/release/moirai bench syn --rates 56000,64000 --duration 20s --reps "$REPS" \
  --compare os@dynamic:2,qs@policy:2,qs@policy:2:activation-lag=25ms \
  --out "$OUT" -- --lachesis

#!/usr/bin/env bash
# Issue 23: the activation rule on moirai's engine after "kept up" became the window's mean lag
# (commit e0e40d7), measured again: Linux alone (`os`), the rule at its default lag (100 ms), at
# 25 ms, and acting all along, 4 repetitions with the lab's rotation (each configuration runs in
# every position once), 20 s points, Lachesis SYN. Usage (from the repository root, after a
# release build, under the benchmark lock):
#   bash docs/results/2026-11-27/keep-up-mean/run.sh OUT_DIR [REPS]
#   python3 docs/results/2026-11-27/activation-lag/summary.py OUT_DIR/results.csv   (summary.md here)
# 28k: ~88 % of the machine busy under `os`; 38k and 45k: 1.2x and 1.4x os's saturation point.
set -eu
OUT=${1:?out dir}; REPS=${2:-4}
target/release/moirai bench syn --rates 28000,38000,45000 --duration 20s --reps "$REPS" \
  --compare os,qs,qs/activation-lag=25ms,qs/activation=always \
  --out "$OUT" -- --lachesis

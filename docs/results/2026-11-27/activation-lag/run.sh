#!/usr/bin/env bash
# Issue 23: the activation rule's lag on moirai's engine (how much input waiting counts as
# behind): Linux alone (`os`), the rule at the lag it had (100 ms), at 50 and 25 ms, and acting
# all along, side by side, 5 interleaved repetitions, equal durations, Lachesis SYN. Usage (from
# the repository root, after a release build, under the benchmark lock):
#   bash docs/results/2026-11-27/activation-lag/run.sh OUT_DIR [REPS]
#   python3 docs/results/2026-11-27/activation-lag/summary.py OUT_DIR/results.csv
# 28k: ~88 % of the machine busy under `os` (below os's saturation point, 32k); 38k and 45k:
# 1.2x and 1.4x it (45k is 99 % of the engine's CPU bound).
set -eu
OUT=${1:?out dir}; REPS=${2:-5}
target/release/moirai bench syn --rates 28000,38000,45000 --duration 20s --reps "$REPS" \
  --compare os,qs/activation-lag=100ms,qs/activation-lag=50ms,qs/activation-lag=25ms,qs/activation=always \
  --out "$OUT" -- --lachesis

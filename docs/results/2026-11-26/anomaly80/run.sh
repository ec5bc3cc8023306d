#!/usr/bin/env bash
# The "80 % anomaly" on moirai's engine measured again with more pairs: Lachesis SYN at 26k
# tuples/s (~80 % of `os`'s saturation point, 32k, in docs/results/2026-11-26/middleware-defaults),
# Linux alone (`os`) against the middleware at its defaults (`qs`, --activation auto), REPS
# interleaved pairs of 10 s, as in syn-moirai.sh there.
# Usage (from the repository root, under the benchmark lock, after a release build):
#   bash docs/results/2026-11-26/anomaly80/run.sh OUT_DIR [REPS]
set -eu
OUT=${1:?out dir}; REPS=${2:-10}
target/release/moirai bench syn --rates 26000 --duration 10s --reps "$REPS" \
  --compare "os,qs" --out "$OUT" -- --lachesis

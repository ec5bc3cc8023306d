#!/usr/bin/env bash
# Issue 23 on Apache Storm with 5 interleaved pairs: Lachesis SYN, Linux alone (`storm:os`) against
# the middleware at its defaults (`storm:qs`: nice 0..19, smoothing 0.5, period 1 s,
# --activation auto, thread dumps over the JVM's attach socket), both with the parking wait
# strategy (`--wait-strategy park:1000`), 20 s points at ~50 %, 80 %, 100 % and 120 % of
# storm:os's saturation point (19k sustainable in docs/results/2026-11-26/middleware-defaults).
# Usage (from the repository root, under the benchmark lock, after a release build):
#   bash docs/results/2026-11-26/storm-pairs/run.sh OUT_DIR [REPS] [RATES]
set -eu
OUT=${1:?out dir}; REPS=${2:-5}; RATES=${3:-10000,15000,19000,22000}
target/release/moirai bench syn --rates "$RATES" --duration 20s --reps "$REPS" \
  --compare "storm:os,storm:qs" --out "$OUT" -- --lachesis --wait-strategy park:1000

#!/usr/bin/env bash
# Issue 23's campaign on Apache Storm, Lachesis SYN, both with the wait strategy Storm users
# would choose under CPU contention (`--wait-strategy park:1000`: idle executors park instead of
# spinning): Linux alone (`storm:os`) against the middleware at its defaults (`storm:qs`: nice
# 0..19, smoothing 0.5, period 1 s, --activation auto) and the real-time translator,
# interleaved, REPS repetitions of 20 s at ~60 %, ~90 %, ~110 % and ~130 % of storm:os's
# saturation point (~17k tuples/s here with park:1000: its p99 passes 1 s between 16k and 18k).
# Usage (from the repository root):
#   cargo build --release -p moirai-cli && mvn -q -B -f integrations/storm/pom.xml -DskipTests package
#   bash docs/results/2026-11-26/middleware-defaults/syn-storm.sh OUT_DIR [REPS] [RATES]
set -eu
OUT=${1:?out dir}; REPS=${2:-5}; RATES=${3:-10000,15000,19000,22000}
target/release/moirai bench syn --rates "$RATES" --duration 20s --reps "$REPS" \
  --compare "storm:os,storm:qs,storm:qs/translator=realtime" \
  --out "$OUT" -- --lachesis --wait-strategy park:1000

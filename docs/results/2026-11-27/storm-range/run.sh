#!/usr/bin/env bash
# Issue 23 on Apache Storm: does a narrower nice range keep QS from hurting when it acts?
# Lachesis SYN with `--wait-strategy park:1000`, `storm:os` against `storm:qs` at the defaults
# (nice 0..19, --activation auto) and `storm:qs/nice-worst=5` (nice 0..5: at most 3x the CPU
# weight between two executors), REPS interleaved repetitions of 20 s near and at saturation.
# Usage (from the repository root):
#   cargo build --release -p moirai-cli && mvn -q -B -f integrations/storm/pom.xml -DskipTests package
#   bash docs/results/2026-11-27/storm-range/run.sh OUT_DIR [REPS] [RATES]
set -eu
OUT=${1:?out dir}; REPS=${2:-5}; RATES=${3:-19000,22000}
target/release/moirai bench syn --rates "$RATES" --duration 20s --reps "$REPS" \
  --compare "storm:os,storm:qs,storm:qs/nice-worst=5" --out "$OUT" -- --lachesis --wait-strategy park:1000

#!/usr/bin/env bash
# Issue 23's campaign on Apache Flink, Lachesis SYN: Linux alone (`flink:os`) against the
# middleware at its defaults (`flink:qs`: nice 0..19, smoothing 0.5, period 1 s, --activation
# auto), the former mapping (`nice-best=-20/smoothing=1`, still with the activation rule) and
# the real-time translator, interleaved, REPS repetitions of 20 s at ~80 %, ~100 % and ~120 % of
# flink:os's saturation point (~40k tuples/s here: its p99 passes 1 s between 30k and 40k).
# Usage (from the repository root):
#   cargo build --release -p moirai-cli && mvn -q -B -f integrations/flink/pom.xml -DskipTests package
#   bash docs/results/2026-11-26/middleware-defaults/syn-flink.sh OUT_DIR [REPS] [RATES]
set -eu
OUT=${1:?out dir}; REPS=${2:-5}; RATES=${3:-32000,40000,48000}
target/release/moirai bench syn --rates "$RATES" --duration 20s --reps "$REPS" \
  --compare "flink:os,flink:qs,flink:qs/nice-best=-20/smoothing=1,flink:qs/translator=realtime" \
  --out "$OUT" -- --lachesis

#!/usr/bin/env bash
# Issue 26 item 3: the same Flink jobs (FLIP-27 open-loop source, Sink v2 sink) on Flink 1.20.3
# (`flink:`) and 2.3.0 (`flink2:`), Linux alone and under the middleware at its defaults (QS),
# Lachesis SYN, interleaved, REPS repetitions of 20 s at RATES (tuples/s).
# Usage (from the repository root):
#   cargo build --release -p moirai-cli
#   mvn -q -B -f integrations/flink/pom.xml -DskipTests package
#   mvn -q -B -f integrations/flink/pom.xml -Pflink2 -DskipTests package
#   bash docs/results/2026-11-26/flink2/syn-versions.sh OUT_DIR [REPS] [RATES]
set -eu
OUT=${1:?out dir}; REPS=${2:-3}; RATES=${3:-32000,48000}
target/release/moirai bench syn --rates "$RATES" --duration 20s --reps "$REPS" \
  --compare "flink:os,flink2:os,flink:qs,flink2:qs" \
  --out "$OUT" -- --lachesis

#!/usr/bin/env bash
# Issue 23: the activation rule's second way in ("losing ground": the backlog grows for 3 s while
# the machine is at least 75 % busy). Flink 1.20 (MiniCluster) on a SYN pipeline with one heavy
# operator, where the Linux scheduler leaves CPU idle (the machine ~85 % busy at its saturation
# point): Linux alone (`flink:os`) against the middleware at its defaults (`flink:qs`,
# `--activation auto`) and acting from the start (`flink:qs/activation=always`); REPS
# interleaved repetitions of 20 s.
# Usage (from the repository root):
#   cargo build --release -p moirai-cli && mvn -q -B -f integrations/flink/pom.xml -DskipTests package
#   bash docs/results/2026-11-27/losing-ground/run.sh OUT_DIR [REPS] [RATES] [CONFIGS]
set -eu
OUT=${1:?out dir}; REPS=${2:-5}; RATES=${3:-30000,40000,46000}
CONFIGS=${4:-flink:os,flink:qs,flink:qs/activation=always}
target/release/moirai bench syn --rates "$RATES" --duration 20s --reps "$REPS" \
  --compare "$CONFIGS" --out "$OUT" -- --ops 5 --cost-ns 5000 --heavy-op 3 --heavy-factor 4

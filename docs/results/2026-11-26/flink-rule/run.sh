#!/usr/bin/env bash
# Issue 23 on Apache Flink (1.20 MiniCluster), Lachesis SYN, now that the middleware reads Flink
# from its Prometheus reporter (the lab passes one to every flink:qs run): Linux alone
# (`flink:os`) against the middleware at its defaults (`flink:qs`: nice 0..19, smoothing 0.5,
# period 1 s, --activation auto), REPS interleaved pairs of 20 s at 50 %, 80 %, 100 %, 120 % and
# 140 % of flink:os's saturation point (~40k tuples/s on this machine).
# Usage (from the repository root):
#   cargo build --release -p moirai-cli && mvn -q -B -f integrations/flink/pom.xml -DskipTests package
#   bash docs/results/2026-11-26/flink-rule/run.sh OUT_DIR [REPS] [RATES] [CONFIGS]
# Run 1 (results.csv, summary.txt; thread dumps by jcmd):   OUT 5
# Run 2 (run2/; dumps over the attach socket, and a 250 ms period beside the default 1 s):
#   OUT 5 20000,24000,32000,40000,48000 flink:os,flink:qs,flink:qs/period=250ms
set -eu
OUT=${1:?out dir}; REPS=${2:-5}; RATES=${3:-20000,32000,40000,48000,56000}; CONFIGS=${4:-flink:os,flink:qs}
target/release/moirai bench syn --rates "$RATES" --duration 20s --reps "$REPS" \
  --compare "$CONFIGS" --out "$OUT" -- --lachesis

#!/usr/bin/env bash
# The Lachesis SYN on a standalone Flink cluster of two "nodes" (TaskManagers in network
# namespaces, one middleware per node) beside the MiniCluster, interleaved. Run from the checkout's
# root under the benchmark lock, after a release build:
#   /work/bin/lowprio cargo build --release -p moirai-cli
#   /work/bin/benchlock bash docs/results/2026-11-26/flink-cluster/bench.sh calibrate|syn|policy|lr
# Raw output (results.json, report.html, logs) goes to $OUT (default /work/data/cluster2/...);
# results.csv and summary.txt are copied here.
set -euo pipefail
HERE=docs/results/2026-11-26/flink-cluster
OUT=${OUT:-/work/data/cluster2}
M=./target/release/moirai
piece=${1:?calibrate, syn, policy or lr}
copy() { mkdir -p "$HERE/$1"; cp "$OUT/$1/results.csv" "$HERE/$1/"; [ -f "$OUT/$1/summary.txt" ] && cp "$OUT/$1/summary.txt" "$HERE/$1/" || true; }
case $piece in
calibrate)
    # Where does the cluster saturate? One rep, os only.
    $M bench syn --rates 10k,20k,30k --duration 15s --reps 1 \
        --compare flink:os,flink:os/cluster=standalone:2 \
        --out "$OUT/syn-calibrate" -- --lachesis --parallelism 2 2>&1 | tee "$OUT/syn-calibrate.txt"
    cp "$OUT/syn-calibrate.txt" "$OUT/syn-calibrate/summary.txt"; copy syn-calibrate ;;
syn|syn2)
    RATES=${RATES:?e.g. RATES=12k,16k,20k}
    $M bench syn --rates "$RATES" --duration 20s --reps 3 \
        --compare flink:os/cluster=standalone:2,flink:qs/cluster=standalone:2,flink:os,flink:qs \
        --out "$OUT/$piece" -- --lachesis --parallelism 2 2>&1 | tee "$OUT/$piece.txt"
    cp "$OUT/$piece.txt" "$OUT/$piece/summary.txt"; copy $piece ;;
policy)
    # The policy's effect on the cluster: the middleware acting from its first round
    # (activation=always), near and past the cluster's saturation (~20k), cluster only.
    RATES=${RATES:?e.g. RATES=16k,20k,24k}
    $M bench syn --rates "$RATES" --duration 20s --reps 3 \
        --compare flink:os/cluster=standalone:2,flink:qs/cluster=standalone:2/activation=always \
        --out "$OUT/policy" -- --lachesis --parallelism 2 2>&1 | tee "$OUT/policy.txt"
    cp "$OUT/policy.txt" "$OUT/policy/summary.txt"; copy policy ;;
lr)
    RATES=${RATES:?e.g. RATES=20k,30k}
    $M bench linear-road --rates "$RATES" --duration 20s --reps 3 \
        --compare flink:os/cluster=standalone:2,flink:qs/cluster=standalone:2,flink:os,flink:qs \
        --out "$OUT/lr" -- --shape lachesis --parallelism 2 2>&1 | tee "$OUT/lr.txt"
    cp "$OUT/lr.txt" "$OUT/lr/summary.txt"; copy lr ;;
esac

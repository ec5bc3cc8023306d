#!/usr/bin/env bash
# The latency cases again, with more repetitions (the first sweep's 4 left p99 to the noise).
# usage: latency.sh BASE NEW OUTDIR  (absolute paths; alone on the machine; ~6 min)
set -u
cd "$(dirname "$0")/../../../.." || exit 1
m=docs/results/2026-12-01/sampler/multi.sh
b="base=$1 new=$2"
out=$3; mkdir -p "$out"
bash $m "$out/3x500ns-0.9M-dynamic2.csv" 8 "$b" --ops 3 --cost-ns 500 --rate 900000 --duration 10s --threading dynamic:2
bash $m "$out/3x500ns-0.5M-dynamic2.csv" 6 "$b" --ops 3 --cost-ns 500 --rate 500000 --duration 10s --threading dynamic:2

#!/usr/bin/env bash
# The hand-off and the low rate, BASE and NEW alternating within each repetition (multi.sh), and
# the latency and raw cases beside them to show nothing else moved. Run alone, from the
# repository's root. usage: run.sh BASE NEW OUTDIR   (~25 min)
set -u
base=$1; new=$2; out=$3
mkdir -p "$out"
m=docs/results/2026-12-01/sampler/multi.sh
b="base=$base new=$new"
bash $m "$out/10000x100-dynamic2.csv" 8 "$b" --ops 10000 --cost-ns 0 --rate 100 --duration 8s --threading dynamic:2
bash $m "$out/10000x10-dynamic2.csv" 6 "$b" --ops 10000 --cost-ns 0 --rate 10 --duration 8s --threading dynamic:2
bash $m "$out/1000x1000-dynamic2.csv" 6 "$b" --ops 1000 --cost-ns 0 --rate 1000 --duration 8s --threading dynamic:2
bash $m "$out/low-rate-dynamic2.csv" 6 "$b" --ops 5 --cost-ns 0 --rate 1000 --duration 8s --threading dynamic:2
bash $m "$out/low-rate-dedicated.csv" 4 "$b" --ops 5 --cost-ns 0 --rate 1000 --duration 8s --threading dedicated
bash $m "$out/3x500ns-0.9M-dynamic2.csv" 6 "$b" --ops 3 --cost-ns 500 --rate 900000 --duration 10s --threading dynamic:2
bash $m "$out/raw5-dynamic2.csv" 4 "$b" --ops 5 --cost-ns 0 --rate 0 --duration 8s --threading dynamic:2
bash $m "$out/raw5-chaining.csv" 4 "$b" --ops 5 --cost-ns 0 --rate 0 --duration 8s --chaining

#!/usr/bin/env bash
# Fewer locked instructions in a pool hop (issue 27): BASE and NEW alternating within each
# repetition, on the hop at 10 and 100 tuples/s, the low-rate CPU, the latency case and the raw
# pipeline. Run alone, from the repository's root. ~11 min.
# usage: run.sh BASE NEW OUTDIR  (absolute paths)
set -u
base=$1; new=$2; out=$3
mkdir -p "$out"
m=docs/results/2026-12-01/sampler/multi.sh
b="base=$base new=$new"
bash $m "$out/10000x10-dynamic2.csv" 8 "$b" --ops 10000 --cost-ns 0 --rate 10 --duration 8s --threading dynamic:2
bash $m "$out/10000x100-dynamic2.csv" 6 "$b" --ops 10000 --cost-ns 0 --rate 100 --duration 8s --threading dynamic:2
bash $m "$out/low-rate-dynamic2.csv" 6 "$b" --ops 5 --cost-ns 0 --rate 1000 --duration 8s --threading dynamic:2
bash $m "$out/3x500ns-0.9M-dynamic2.csv" 4 "$b" --ops 3 --cost-ns 500 --rate 900000 --duration 10s --threading dynamic:2
bash $m "$out/raw5-dynamic2.csv" 6 "$b" --ops 5 --cost-ns 0 --rate 0 --duration 8s --threading dynamic:2

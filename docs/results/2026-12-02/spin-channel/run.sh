#!/usr/bin/env bash
# A spin lock for the channels (issue 27; tried and dropped): BASE and NEW alternating within each repetition.
# usage: run.sh BASE NEW OUTDIR (absolute paths; from the repository's root; alone; ~16 min)
set -u
base=$1; new=$2; out=$3
mkdir -p "$out"
m=docs/results/2026-12-01/sampler/multi.sh
b="base=$base new=$new"
bash $m "$out/10000x10-dynamic2.csv" 8 "$b" --ops 10000 --cost-ns 0 --rate 10 --duration 8s --threading dynamic:2
bash $m "$out/10000x100-dynamic2.csv" 6 "$b" --ops 10000 --cost-ns 0 --rate 100 --duration 8s --threading dynamic:2
bash $m "$out/raw5-dynamic2.csv" 6 "$b" --ops 5 --cost-ns 0 --rate 0 --duration 8s --threading dynamic:2
bash $m "$out/raw5-dedicated.csv" 6 "$b" --ops 5 --cost-ns 0 --rate 0 --duration 8s --threading dedicated
bash $m "$out/3x500ns-0.9M-dynamic2.csv" 6 "$b" --ops 3 --cost-ns 500 --rate 900000 --duration 10s --threading dynamic:2
bash $m "$out/3x500ns-0.5M-dedicated.csv" 4 "$b" --ops 3 --cost-ns 500 --rate 500000 --duration 10s --threading dedicated

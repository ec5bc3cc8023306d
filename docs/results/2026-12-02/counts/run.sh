#!/usr/bin/env bash
# The run's per-second timeline reading counts instead of a full snapshot (issue 27, the hop's
# CPU outside the workers), BASE and NEW alternating within each repetition, with the low-rate
# and latency cases beside them. Run alone, from the repository's root. ~10 min.
# usage: run.sh BASE NEW OUTDIR
set -u
base=$1; new=$2; out=$3
mkdir -p "$out"
m=docs/results/2026-12-01/sampler/multi.sh
b="base=$base new=$new"
bash $m "$out/10000x10-dynamic2.csv" 6 "$b" --ops 10000 --cost-ns 0 --rate 10 --duration 8s --threading dynamic:2
bash $m "$out/10000x100-dynamic2.csv" 6 "$b" --ops 10000 --cost-ns 0 --rate 100 --duration 8s --threading dynamic:2
bash $m "$out/low-rate-dynamic2.csv" 6 "$b" --ops 5 --cost-ns 0 --rate 1000 --duration 8s --threading dynamic:2
bash $m "$out/3x500ns-0.9M-dynamic2.csv" 4 "$b" --ops 3 --cost-ns 500 --rate 900000 --duration 10s --threading dynamic:2

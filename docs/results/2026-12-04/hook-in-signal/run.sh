#!/usr/bin/env bash
# The state word in the signal and one wake hook per pool (issue 27): BASE and NEW alternating in
# each repetition on the 10 000-operator hop at 10 and 100 tuples/s, 12 repetitions each (the
# first sweep of this change was ../../2026-12-02/locked-ops/run.sh BASE NEW first/).
# Run alone, from the repository's root; ~10 min.
# usage: run.sh BASE NEW OUTDIR   (absolute paths)
set -u
base=$1; new=$2; out=$3
mkdir -p "$out"
m=docs/results/2026-12-01/sampler/multi.sh
b="base=$base new=$new"
bash $m "$out/10000x10-dynamic2.csv" 12 "$b" --ops 10000 --cost-ns 0 --rate 10 --duration 8s --threading dynamic:2
bash $m "$out/10000x100-dynamic2.csv" 12 "$b" --ops 10000 --cost-ns 0 --rate 100 --duration 8s --threading dynamic:2

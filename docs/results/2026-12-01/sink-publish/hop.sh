#!/usr/bin/env bash
# The pool hand-off and the low-rate CPU, BASE and NEW alternating within each repetition: the
# 10 000-operator pipeline at 100 tuples/s under dynamic:2 (CPU per operator per tuple = cores /
# 1e6) and 7 tasks at 1 000 tuples/s under dynamic:2. Run alone, from the repository's root.
# usage: hop.sh BASE NEW OUTDIR   (~6 min)
set -u
base=$1; new=$2; out=$3
mkdir -p "$out"
pairs=docs/results/2026-11-27/hop-profile/pairs.sh
bash $pairs "$base" "$new" "$out/10000x100-dynamic2.csv" 8 --ops 10000 --cost-ns 0 --rate 100 --duration 8s --threading dynamic:2
bash $pairs "$base" "$new" "$out/low-rate-dynamic2.csv" 4 --ops 5 --cost-ns 0 --rate 1000 --duration 8s --threading dynamic:2
python3 docs/results/2026-11-28/prefetch/summary.py "$out"/*.csv

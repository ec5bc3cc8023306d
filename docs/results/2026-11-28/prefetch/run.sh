#!/usr/bin/env bash
# Prefetch hints along a long pipeline (issue 27, item 2): BASE and NEW side by side, alternating
# within each repetition, on the 10 000-operator pipeline at 100 tuples/s (dynamic:2, dynamic:1)
# and on three cases whose operators fit the caches (no hints there: nothing may change).
# Run alone on the machine, from the repository's root, after `cargo build --release -p moirai-cli`.
# usage: run.sh BASE_BINARY NEW_BINARY OUTDIR   (~15 min)
set -u
base=$1; new=$2; out=$3
pairs=docs/results/2026-11-27/hop-profile/pairs.sh
mkdir -p "$out"
bash $pairs "$base" "$new" "$out/10000x100-dynamic2.csv" 6 --ops 10000 --cost-ns 0 --rate 100 --duration 8s --threading dynamic:2
bash $pairs "$base" "$new" "$out/10000x10-dynamic2.csv" 3 --ops 10000 --cost-ns 0 --rate 10 --duration 8s --threading dynamic:2
bash $pairs "$base" "$new" "$out/10000x100-dynamic1.csv" 4 --ops 10000 --cost-ns 0 --rate 100 --duration 8s --threading dynamic:1
bash $pairs "$base" "$new" "$out/1000x1000-dynamic2.csv" 4 --ops 1000 --cost-ns 0 --rate 1000 --duration 8s --threading dynamic:2
bash $pairs "$base" "$new" "$out/3x500ns-0.9M-dynamic2.csv" 4 --ops 3 --cost-ns 500 --rate 900000 --duration 8s --threading dynamic:2
bash $pairs "$base" "$new" "$out/raw5-dynamic2.csv" 4 --ops 5 --cost-ns 0 --rate 0 --duration 5s --threading dynamic:2
python3 "$(dirname "$0")/summary.py" "$out"/*.csv

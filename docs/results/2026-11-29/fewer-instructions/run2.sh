#!/usr/bin/env bash
# The second step of fewer instructions per pool turn (a router of one route to one consumer appends
# without routing each tuple; a port's receivers and spare vectors side by side): BASE and NEW side
# by side, alternating within each repetition, on the cases of run.sh that a turn's instructions
# decide, and the latency and raw cases that must not move.
# Run alone on the machine, from the repository's root, after `cargo build --release -p moirai-cli`.
# usage: run2.sh BASE_BINARY NEW_BINARY OUTDIR   (~19 min)
set -u
base=$1; new=$2; out=$3
pairs=docs/results/2026-11-27/hop-profile/pairs.sh
mkdir -p "$out"
bash $pairs "$base" "$new" "$out/10000x100-dynamic2.csv" 8 --ops 10000 --cost-ns 0 --rate 100 --duration 8s --threading dynamic:2
bash $pairs "$base" "$new" "$out/10000x100-dynamic1.csv" 4 --ops 10000 --cost-ns 0 --rate 100 --duration 8s --threading dynamic:1
bash $pairs "$base" "$new" "$out/1000x1000-dynamic1.csv" 8 --ops 1000 --cost-ns 0 --rate 1000 --duration 6s --threading dynamic:1
bash $pairs "$base" "$new" "$out/3x500ns-0.9M-dynamic2.csv" 6 --ops 3 --cost-ns 500 --rate 900000 --duration 8s --threading dynamic:2
bash $pairs "$base" "$new" "$out/raw5-dynamic2.csv" 3 --ops 5 --cost-ns 0 --rate 0 --duration 5s --threading dynamic:2
bash $pairs "$base" "$new" "$out/raw5-chaining.csv" 3 --ops 5 --cost-ns 0 --rate 0 --duration 5s --chaining
# The raw pipeline's runs fall into a fast or a slow mode: more pairs, to compare like with like.
bash $pairs "$base" "$new" "$out/raw5-dynamic2-more.csv" 6 --ops 5 --cost-ns 0 --rate 0 --duration 5s --threading dynamic:2
python3 docs/results/2026-11-28/prefetch/summary.py "$out"/*.csv

#!/usr/bin/env bash
# Fewer instructions per pool turn (issue 27, item 2): BASE and NEW side by side, alternating within
# each repetition — the whole suite of the fewer-lines notes (~20 min), then more pairs of the two
# cases this change is for: the 10 000-operator pipeline at 100 tuples/s under dynamic:2 (CPU per
# operator per tuple) and 1 000 operators at 1 000 tuples/s under dynamic:1, whose memory fits the
# caches (its e2e p50 is a tuple's 1 000 hops one after another on one worker: a hop's wall time).
# Run alone on the machine, from the repository's root, after `cargo build --release -p moirai-cli`.
# usage: run.sh BASE_BINARY NEW_BINARY OUTDIR   (~30 min)
set -u
base=$1; new=$2; out=$3
pairs=docs/results/2026-11-27/hop-profile/pairs.sh
bash docs/results/2026-11-29/fewer-lines/run.sh "$base" "$new" "$out"
bash $pairs "$base" "$new" "$out/10000x100-dynamic2-more.csv" 8 --ops 10000 --cost-ns 0 --rate 100 --duration 8s --threading dynamic:2
bash $pairs "$base" "$new" "$out/1000x1000-dynamic1.csv" 10 --ops 1000 --cost-ns 0 --rate 1000 --duration 6s --threading dynamic:1
python3 docs/results/2026-11-28/prefetch/summary.py "$out"/*.csv

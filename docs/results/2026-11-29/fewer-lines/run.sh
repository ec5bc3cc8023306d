#!/usr/bin/env bash
# Fewer cache lines and cheaper bookkeeping per pool turn (issue 27, item 2): BASE and NEW side by
# side, alternating within each repetition — the cases of the inline-queue notes (the 10 000-operator
# pipeline at 100 and 10 tuples/s under dynamic:2 and dynamic:1, 1 000 operators at 1 000
# tuples/s, 3 x 500 ns at 0.9 M tuples/s, the raw pipeline under dynamic:2 and dedicated) and the
# low-rate case (7 tasks at 1 000 tuples/s, dynamic:2).
# Run alone on the machine, from the repository's root, after `cargo build --release -p moirai-cli`.
# usage: run.sh BASE_BINARY NEW_BINARY OUTDIR   (~20 min)
set -u
base=$1; new=$2; out=$3
bash docs/results/2026-11-29/inline-queue/run.sh "$base" "$new" "$out"
bash docs/results/2026-11-27/hop-profile/pairs.sh "$base" "$new" "$out/low-rate-dynamic2.csv" 4 \
  --ops 5 --cost-ns 0 --rate 1000 --duration 8s --threading dynamic:2
python3 docs/results/2026-11-28/prefetch/summary.py "$out/low-rate-dynamic2.csv"

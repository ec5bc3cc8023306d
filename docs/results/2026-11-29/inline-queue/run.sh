#!/usr/bin/env bash
# The channel's first two entries inline (issue 27, item 2: a cheaper hop): BASE and NEW side by
# side, alternating within each repetition — the cases of the prefetch notes (the 10 000-operator
# pipeline at 100 and 10 tuples/s under dynamic:2 and dynamic:1, 1 000 operators, 3 x 500 ns at
# 0.9 M tuples/s, the raw pipeline under dynamic:2), and the raw pipeline under dedicated (every
# threading model uses the channel).
# Run alone on the machine, from the repository's root, after `cargo build --release -p moirai-cli`.
# usage: run.sh BASE_BINARY NEW_BINARY OUTDIR   (~17 min)
set -u
base=$1; new=$2; out=$3
bash docs/results/2026-11-28/prefetch/run.sh "$base" "$new" "$out"
bash docs/results/2026-11-27/hop-profile/pairs.sh "$base" "$new" "$out/raw5-dedicated.csv" 3 \
  --ops 5 --cost-ns 0 --rate 0 --duration 5s --threading dedicated
python3 docs/results/2026-11-28/prefetch/summary.py "$out/raw5-dedicated.csv"

#!/usr/bin/env bash
# Measurements behind the simulator's costs (docs/sim.md, "Calibrating against this machine").
# Each line of the output is one run of sim-validation-measure.py: the engine's report plus the
# operator threads' wake-ups (voluntary context switches) and CPU from /proc.
# Usage: MOIRAI=target/release/moirai docs/results/2026-11-24/sim-validation-measure.sh > out.jsonl
set -euo pipefail
M=${MOIRAI:-target/release/moirai}
D=${D:-6}
here=$(dirname "$0")
run() { python3 "$here/sim-validation-measure.py" "$M" "$@"; }
# A hop without work, one tuple per wake-up (low rate) and many (unlimited rate).
for r in 2000 20000 100000; do run "pipe5-$r" "$D" -- --ops 5 --cost-ns 0 --rate "$r"; done
run pipe5-unlimited "$D" -- --ops 5 --cost-ns 0 --rate 0
run pipe20-2000 "$D" -- --ops 20 --cost-ns 0 --rate 2000
# The Lachesis SYN under the OS scheduler, from light load to past saturation.
for r in 5000 15000 25000 32000 38600 45000; do run "lachesis-$r" "$D" -- --lachesis --rate "$r"; done
# Linear Road's Lachesis shape: per-operator CPU per tuple at an unlimited rate (full batches),
# and under os at a rate below saturation.
run lr-unlimited "$D" -- linear-road --shape lachesis --rate 0
run lr-800000 "$D" -- linear-road --shape lachesis --rate 800000

#!/usr/bin/env bash
# Issue 12's validation: the simulator against the engine on this machine.
#   1. the costs: sim-validation-measure.sh (engine runs, /proc counters) -> sim-validation-measure.jsonl
#   2. the model run by run against those runs: sim-validation-calibrate.py
#   3. the Lachesis SYN sweep measured (moirai bench, two halves of < 10 min each) and simulated
#      (moirai sim), side by side: sim-validation-table.py
#   4. Linear Road's Lachesis shape under os, simulated (measured: lr-moirai, lr-moirai-high)
# Run from the repository root with the release binary built. Benchmarks need a quiet machine.
set -euo pipefail
M=${MOIRAI:-target/release/moirai}
R=docs/results/2026-11-24
CONFIGS=os,qs,os@dynamic:2,qs@policy:2
MOIRAI=$M $R/sim-validation-measure.sh > $R/sim-validation-measure.jsonl
python3 $R/sim-validation-calibrate.py "$M" $R/sim-validation-measure.jsonl "${TMPDIR:-/tmp}/sim-validation-calibrate" \
  > $R/sim-validation-calibrate.md
$M bench syn --rates 30000,34000,38600 --duration 8s --reps 2 --compare $CONFIGS --out $R/sim-validation-bench-low -- --lachesis
$M bench syn --rates 45000,51400,57900 --duration 8s --reps 2 --compare $CONFIGS --out $R/sim-validation-bench-high -- --lachesis
$M sim syn --rates 30000,34000,38600,45000,51400,57900 --compare $CONFIGS --cores 2 --duration 10s --reps 2 \
  --out $R/sim-validation-sim -- --lachesis
python3 $R/sim-validation-table.py $R/sim-validation-bench-low,$R/sim-validation-bench-high $R/sim-validation-sim \
  > $R/sim-validation-table.md
$M sim syn --rates 30000,34000,38600,45000,51400,57900 --compare $CONFIGS --cores 2 --duration 10s --reps 2 \
  --scheduler eevdf --out $R/sim-validation-sim-eevdf -- --lachesis
python3 $R/sim-validation-table.py $R/sim-validation-bench-low,$R/sim-validation-bench-high $R/sim-validation-sim-eevdf \
  > $R/sim-validation-table-eevdf.md
$M sim linear-road --rates 1000000,1200000,1400000,1600000,1800000,2000000 --compare os,qs --cores 2 --duration 8s \
  --out $R/sim-validation-lr -- --shape lachesis
python3 $R/sim-validation-table.py $R/lr-moirai,$R/lr-moirai-high $R/sim-validation-lr > $R/sim-validation-lr-table.md

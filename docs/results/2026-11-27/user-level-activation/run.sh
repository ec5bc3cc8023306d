#!/usr/bin/env bash
# The engine's policy executor with and without the activation rule, beside the dynamic pool:
# Linear Road (Lachesis shape) and Lachesis SYN, from below to past saturation, 5 interleaved
# repetitions of 10 s per point.
#   bash docs/results/2026-11-27/user-level-activation/run.sh MOIRAI_BIN OUT
# then: python3 docs/results/2026-11-27/user-level-activation/summary.py OUT
set -euo pipefail
bin=${1:?the moirai binary (target/release/moirai)}
out=${2:?an output directory}
mkdir -p "$out"
configs=os@dynamic:2,qs@policy:2,qs@policy:2:activation=always
"$bin" bench linear-road --rates 900000,1200000,1400000,1700000 --duration 10s --reps 5 \
  --compare "$configs" --out "$out/lr" -- --shape lachesis
"$bin" bench syn --rates 40000,50000,56000,64000 --duration 10s --reps 5 \
  --compare "$configs" --out "$out/syn" -- --lachesis
# Past saturation (the engine kept up at 64k in the run above).
"$bin" bench syn --rates 72000,80000 --duration 10s --reps 5 \
  --compare "$configs" --out "$out/syn-high" -- --lachesis

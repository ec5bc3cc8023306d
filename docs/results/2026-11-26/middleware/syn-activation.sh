#!/usr/bin/env bash
# Issue 23's campaign, one piece: moirai's engine on the Lachesis SYN, Linux alone (`os`) against
# the middleware's queue-size policy with the activation rule (`qs/activation=auto`, every
# other setting at its default: nice, period 1 s, threshold 0.9), side by side (os qs os qs ...),
# at ~50 % and ~80 % of os's saturation point (~36k tuples/s on this machine, from earlier sweeps
# of 30k–38.6k) and past it.
# Usage (from the repository root):
#   cargo build --release -p moirai-cli
#   bash docs/results/2026-11-26/middleware/syn-activation.sh OUT_DIR [REPS]
set -eu
OUT=${1:?out dir}; REPS=${2:-5}
target/release/moirai bench syn --rates 18000,29000,36000,45000 --duration 10s --reps "$REPS" \
  --compare "os,qs/activation=auto" --out "$OUT" -- --lachesis

#!/usr/bin/env bash
# Issue 23's campaign on moirai's engine, Lachesis SYN: Linux alone (`os`) against the middleware
# at its defaults (`qs`: nice 0..19, smoothing 0.5, period 200 ms, --activation auto) and the same
# through the real-time translator (`qs/translator=realtime`), interleaved (os qs rt os qs rt ...),
# 5 repetitions of 10 s at 50 %, 80 %, 100 %, ~120 % and ~140 % of os's saturation point (~32k
# tuples/s on this machine: the p99 passes 1 s between 31k and 36k).
# Usage (from the repository root):
#   cargo build --release -p moirai-cli
#   bash docs/results/2026-11-26/middleware-defaults/syn-moirai.sh OUT_DIR [REPS]
set -eu
OUT=${1:?out dir}; REPS=${2:-5}
target/release/moirai bench syn --rates 16000,26000,32000,38000,45000 --duration 10s --reps "$REPS" \
  --compare "os,qs,qs/translator=realtime" --out "$OUT" -- --lachesis

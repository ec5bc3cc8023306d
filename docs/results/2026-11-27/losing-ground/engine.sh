#!/usr/bin/env bash
# Issue 23, do no harm with the activation rule's second way in: moirai's engine on the Lachesis
# SYN, Linux alone (`os`) against the middleware at its defaults (`qs`, `--activation auto`),
# REPS interleaved repetitions of 10 s from 50 % to 1.4x of os's saturation point (~27k
# tuples/s on this machine, its CPU bound ~27.7k).
# Usage (from the repository root):
#   cargo build --release -p moirai-cli
#   bash docs/results/2026-11-27/losing-ground/engine.sh OUT_DIR [REPS] [RATES]
set -eu
OUT=${1:?out dir}; REPS=${2:-5}; RATES=${3:-14000,22000,26000,30000,38000}
target/release/moirai bench syn --rates "$RATES" --duration 10s --reps "$REPS" \
  --compare "os,qs" --out "$OUT" -- --lachesis

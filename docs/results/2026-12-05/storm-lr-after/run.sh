#!/usr/bin/env bash
# Storm, Linear Road (Lachesis shape) at RATE tuples/s (60k by default; past saturation on 2026-12-04), storm:os against
# storm:qs/verbose, REPS interleaved repetitions of 150 s, with the worker's executors (nice
# value, policy, CPU) and Storm's queue gauges sampled every 2 s beside it (sample.py).
# Run alone, from the repository's root; ~5.5 min a pair.
# usage: run.sh OUT [REPS] [RATE]
set -euo pipefail
out=${1:?usage: run.sh OUT [REPS] [RATE]}
reps=${2:-1}
rate=${3:-60k}
here=$(dirname "$(readlink -f "$0")")
mkdir -p "$out"
cargo build --release -p moirai-cli
python3 "$here/sample.py" "$out/samples.jsonl" & sampler=$!
trap 'kill $sampler' EXIT
target/release/moirai bench linear-road --rates "$rate" --duration 150s --warmup 0.4 --reps "$reps" \
  --compare storm:os,storm:qs/verbose --out "$out" -- --shape lachesis --wait-strategy park:1000

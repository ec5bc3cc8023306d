#!/usr/bin/env bash
# Storm, Linear Road (Lachesis shape) at 60k tuples/s (past saturation), storm:os against
# storm:qs/verbose, REPS interleaved repetitions of 150 s, with the worker JVM's CPU per thread
# sampled beside it (thread-cpu.py). Run alone, from the repository's root; ~5.5 min a pair.
# usage: run.sh OUT [REPS]
set -euo pipefail
out=${1:?usage: run.sh OUT [REPS]}
reps=${2:-2}
here=$(dirname "$(readlink -f "$0")")
mkdir -p "$out"
cargo build --release -p moirai-cli
python3 "$here/thread-cpu.py" "$out/thread-cpu.txt" & sampler=$!
trap 'kill $sampler' EXIT
target/release/moirai bench linear-road --rates 60k --duration 150s --warmup 0.4 --reps "$reps" \
  --compare storm:os,storm:qs/verbose --out "$out" -- --shape lachesis --wait-strategy park:1000
python3 "$here/thread-cpu.py" --summary "$out/thread-cpu.txt" "$out/results.csv" | tee "$here/thread-cpu.md"
cp "$out/results.csv" "$here/results.csv"

#!/usr/bin/env bash
# Storm, Linear Road (Lachesis shape) at 90k tuples/s, storm:os against storm:qs/verbose, 2
# interleaved repetitions of 90 s, with the worker JVM's context switches sampled beside it.
# Run alone, from the repository's root; ~8 min.  usage: ctx-switches.sh OUT
set -euo pipefail
out=${1:?usage: ctx-switches.sh OUT}
here=$(dirname "$(readlink -f "$0")")
mkdir -p "$out"
cargo build --release -p moirai-cli
python3 "$here/ctx-switches.py" "$out/ctx-switches.txt" & sampler=$!
trap 'kill $sampler' EXIT
target/release/moirai bench linear-road --rates 90k --duration 90s --warmup 0.4 --reps 2 \
  --compare storm:os,storm:qs/verbose --out "$out" -- --shape lachesis --wait-strategy park:1000
python3 "$here/ctx-switches.py" --summary "$out/ctx-switches.txt" "$out/results.csv"

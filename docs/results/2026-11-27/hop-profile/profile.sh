#!/usr/bin/env bash
# Where a pool hand-off's nanoseconds go (issue 27, item 2): the 10 000-operator SYN pipeline at
# 100 tuples/s (batches of one tuple) under a pool model, sampled by `perf record` (flat, user
# and kernel) for 5 s in the middle of a 14 s run, and the symbols put into groups by
# categorize.py, each as ns of CPU per task turn (the run's cpu_cores over tuples/s × tasks).
# Run alone on the machine, as root (perf), after `cargo build --release -p moirai-cli`.
# usage: profile.sh MOIRAI_BINARY OUTDIR [THREADING ...]   (default: dynamic:1 dynamic:2)
set -u
bin=$1; out=$2; shift 2
models=("$@"); [ ${#models[@]} -eq 0 ] && models=(dynamic:1 dynamic:2)
here=$(dirname "$0")
mkdir -p "$out"
for m in "${models[@]}"; do
  tag=${m//:/}
  "$bin" run syn --ops 10000 --cost-ns 0 --rate 100 --duration 14s --threading "$m" --json \
    > "$out/$tag.json" 2>/dev/null &
  pid=$!
  sleep 6
  perf record -F 5000 -p "$pid" -o "$out/$tag.perf" -- sleep 5 > /dev/null 2>&1
  wait $pid
  perf report -i "$out/$tag.perf" --no-children --sort sym --stdio 2> /dev/null > "$out/$tag.txt"
  python3 "$here/categorize.py" "$out/$tag.txt" "$out/$tag.json" "$m"
done

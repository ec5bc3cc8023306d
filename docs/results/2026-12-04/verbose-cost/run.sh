#!/usr/bin/env bash
# What `-v` costs the middleware: two builds (BASE, NEW), each quiet and with -v, interleaved in
# every repetition, on round-cost.sh's one-engine setup (100 operator threads, every round
# translating, 200 ms period, 20 s measured). Run alone, from the repository's root; ~5 min a
# repetition. Appends rep,build,log,ms_per_round to OUT.csv.
# usage: run.sh BASE NEW OUT.csv [REPS]   (absolute paths to release builds of moirai)
set -u
base=$1; new=$2; out=$3; reps=${4:-3}
[ -f "$out" ] || echo "rep,build,log,ms_per_round" > "$out"
for r in $(seq 1 "$reps"); do
  for b in base new; do
    bin=$base; [ $b = new ] && bin=$new
    for v in quiet verbose; do
      flag=""; [ $v = verbose ] && flag="-v"
      line=$(M=$bin bash docs/results/2026-11-26/middleware/round-cost.sh one 200ms 20 $flag 2>&1 | grep "middleware (with")
      echo "$r,$b,$v,$(echo "$line" | grep -o '[0-9.]* ms CPU per round' | cut -d' ' -f1)" | tee -a "$out"
    done
  done
done

#!/usr/bin/env bash
# The floor under the 10 000-operator pipeline's hop at 10 and 100 tuples/s (issue 27's
# "≤ 150 ns at 10–100 tuples/s"): floor.rs walking 5 000 operators (one worker's segment under
# dynamic:2) of 17 cache lines each (what moirai's pool counts for a SYN operator's turn:
# 16–18) at the same rates, and of 8 and 4 lines to show how the cost scales with the lines;
# beside it moirai's own pipeline, all interleaved in each repetition.
# Run alone on the machine, from the repository's root, after `cargo build --release -p moirai-cli`.
# usage: run.sh MOIRAI_BINARY OUTDIR [REPS]   (~1 min a repetition)
set -u
bin=$1; out=$2; reps=${3:-5}
here=$(dirname "$0")
mkdir -p "$out"
rustc -O "$here/floor.rs" -o "$out/floor" || exit 1
csv="$out/floor.csv"
echo "rep,case,rate,ns_per_op" > "$csv"
for rep in $(seq 1 "$reps"); do
  for rate in 10 100; do
    for lines in 17 8 4; do
      [ "$rate" = 100 ] && [ "$lines" != 17 ] && continue
      ns=$("$out/floor" 5000 "$lines" "$rate" 8 | awk '/ns_per_op/ {print $2}')
      echo "$rep,floor-$lines-lines,$rate,$ns" | tee -a "$csv"
    done
    ns=$("$bin" run syn --ops 10000 --cost-ns 0 --rate "$rate" --duration 8s --threading dynamic:2 --json 2>/dev/null \
      | tail -1 | python3 -c "import json, sys; d = json.load(sys.stdin); print('%.1f' % (d['cpu_cores'] / (10000 * $rate) * 1e9))")
    echo "$rep,moirai-dynamic2,$rate,$ns" | tee -a "$csv"
  done
done

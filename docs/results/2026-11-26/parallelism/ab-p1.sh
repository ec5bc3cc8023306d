#!/usr/bin/env bash
# Parallelism 1 before (BASE, 86014d4) and after (NEW) the change: the raw 5-operator pipeline
# under dynamic:2 and dedicated, PAIRS interleaved pairs of 4 s (both modes are bimodal on this
# machine, so more repetitions than run.sh); ORDER=abba swaps the order within every other pair
# (base first on odd pairs, new first on even ones), so that a drift of the machine's load does
# not always favour the same binary. Usage: BASE=... NEW=... OUT=... benchlock bash ab-p1.sh
set -u
BASE=${BASE:?moirai of 86014d4}; NEW=${NEW:?moirai to compare}; OUT=${OUT:?directory}
mkdir -p "$OUT"
PAIRS=${PAIRS:-10}; ORDER=${ORDER:-ab}
for i in $(seq 1 "$PAIRS"); do
  order="base new"; [ "$ORDER" = abba ] && [ $((i % 2)) = 0 ] && order="new base"
  for th in dynamic:2 dedicated; do
    for v in $order; do
      bin=$BASE; [ $v = new ] && bin=$NEW
      "$bin" run syn --ops 5 --cost-ns 0 --rate 0 --duration 4s --threading $th --json | tail -1 > "$OUT/ab-${th/:/}-$v-$i.json"
    done
  done
done

#!/usr/bin/env bash
# The engine before (BASE: commit 5ec4dd5) and after (NEW) the one-seam re-layering (issue 25,
# engine part), side by side, interleaved A B A B:
#  - raw: 5 operators, no cost, as fast as possible (`--rate 0`), under dedicated, dedicated
#    with --chaining and dynamic:2; 5 repetitions of 6 s each;
#  - lachesis: the Lachesis evaluation's SYN (20 x 3, drawn costs) at 36k and 45k tuples/s under
#    os, qs (the middleware), os@dynamic:2 and qs@policy:2 (the user-level policy executor), one
#    `moirai bench` sweep per binary and repetition, 3 repetitions.
# Build both binaries first (`cargo build --release -p moirai-cli`, BASE in a checkout of 5ec4dd5)
# and run this under (alone on the machine) (one benchmark at a time). Needs root for qs.
set -u
BASE=${BASE:?path of the moirai binary of 5ec4dd5}; NEW=${NEW:-target/release/moirai}; OUT=${OUT:-/tmp/seam-bench}
PART=${PART:-all}
mkdir -p "$OUT"
if [ "$PART" = all ] || [ "$PART" = raw ]; then
  for i in 1 2 3 4 5; do
    for v in base new; do
      bin=$BASE; [ $v = new ] && bin=$NEW
      for th in dedicated chaining dynamic2; do
        case $th in
          dedicated) extra=();;
          chaining) extra=(--chaining);;
          dynamic2) extra=(--threading dynamic:2);;
        esac
        "$bin" run syn --ops 5 --cost-ns 0 --rate 0 --duration 6s "${extra[@]}" --json | tail -1 > "$OUT/raw-$th-$v-$i.json"
      done
    done
  done
fi
if [ "$PART" = all ] || [ "$PART" = lachesis ]; then
  for i in 1 2 3; do
    for v in base new; do
      bin=$BASE; [ $v = new ] && bin=$NEW
      "$bin" bench syn --rates 36000,45000 --duration 10s --reps 1 --compare os,qs,os@dynamic:2,qs@policy:2 \
        --out "$OUT/lachesis-$v-$i" -- --lachesis > "$OUT/lachesis-$v-$i.log" 2>&1
    done
  done
fi

#!/usr/bin/env bash
# Parallelism 1, latency: 3 operators x 500 ns at 0.9 M tuples/s under dynamic:2, BASE (86014d4)
# vs NEW, PAIRS pairs of 6 s in ABBA order. Usage: BASE=... NEW=... OUT=... benchlock bash ab-latency.sh
set -u
BASE=${BASE:?}; NEW=${NEW:?}; OUT=${OUT:?}; PAIRS=${PAIRS:-6}
mkdir -p "$OUT"
for i in $(seq 1 "$PAIRS"); do
  order="base new"; [ $((i % 2)) = 0 ] && order="new base"
  for v in $order; do
    bin=$BASE; [ $v = new ] && bin=$NEW
    "$bin" run syn --ops 3 --cost-ns 500 --rate 900000 --duration 6s --threading dynamic:2 --json | tail -1 > "$OUT/lat-$v-$i.json"
  done
done

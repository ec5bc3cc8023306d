#!/usr/bin/env bash
# Data parallelism of one query (issue 27, item 1): `moirai run syn --parallelism N`.
#  - raw: the 5-operator zero-cost pipeline as fast as possible (`--ops 5 --cost-ns 0 --rate 0`),
#    5 s per run, with --parallelism 1 and 2 under --chaining (dedicated, one thread per
#    instance), dedicated, dynamic:2, dynamic:2 --chaining and elastic:2-2 (a pool of 2 without
#    worker affinity, for comparison); plus the binary before the change (BASE, parallelism 1
#    only: it has no --parallelism) under --chaining, dedicated and dynamic:2;
#  - latency: 3 operators x 500 ns at 0.9 M tuples/s, 10 s per run, e2e p50/p99, BASE vs NEW at
#    parallelism 1 under dynamic:2 and dedicated, and NEW at parallelism 2 under dynamic:2.
# Every repetition runs every configuration once, in the same order (interleaved A B A B).
# Build both binaries first (`cargo build --release -p moirai-cli`; BASE in a checkout of 86014d4),
# then: BASE=... NEW=... OUT=... /work/bin/benchlock bash run.sh; python3 summarise.py OUT
set -u
BASE=${BASE:?path of the moirai binary of 86014d4}; NEW=${NEW:-target/release/moirai}; OUT=${OUT:-/tmp/parallelism-bench}
REPS=${REPS:-5}; PART=${PART:-all}
mkdir -p "$OUT"
raw() { # name binary args...
  local name=$1 bin=$2; shift 2
  "$bin" run syn --ops 5 --cost-ns 0 --rate 0 --duration 5s "$@" --json | tail -1 > "$OUT/raw-$name-$i.json"
}
lat() { # name binary args...
  local name=$1 bin=$2; shift 2
  "$bin" run syn --ops 3 --cost-ns 500 --rate 900000 --duration 10s "$@" --json | tail -1 > "$OUT/lat-$name-$i.json"
}
for i in $(seq 1 "$REPS"); do
  if [ "$PART" = all ] || [ "$PART" = raw ]; then
    for p in 1 2; do
      raw "chaining-p$p" "$NEW" --chaining --parallelism $p
      raw "dedicated-p$p" "$NEW" --parallelism $p
      raw "dynamic2-p$p" "$NEW" --threading dynamic:2 --parallelism $p
      raw "dynamic2chaining-p$p" "$NEW" --threading dynamic:2 --chaining --parallelism $p
      raw "elastic22-p$p" "$NEW" --threading elastic:2-2 --parallelism $p
    done
    raw "chaining-base" "$BASE" --chaining
    raw "dedicated-base" "$BASE"
    raw "dynamic2-base" "$BASE" --threading dynamic:2
  fi
  if [ "$PART" = all ] || [ "$PART" = latency ]; then
    lat "dynamic2-base" "$BASE" --threading dynamic:2
    lat "dynamic2-p1" "$NEW" --threading dynamic:2
    lat "dedicated-base" "$BASE"
    lat "dedicated-p1" "$NEW"
    lat "dynamic2-p2" "$NEW" --threading dynamic:2 --parallelism 2
  fi
done

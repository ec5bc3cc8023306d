#!/usr/bin/env bash
# Issue 23, the no-gain verdict (`moirai_sched::activation`, Reason::NoGain): Linux alone (`os`)
# against the middleware at its defaults (`qs`, --activation auto, with the verdict) and acting
# all along (`qs/activation=always`: what the rule did at these points before the verdict, when it
# acted from its first seconds to the end of every run), 5 interleaved repetitions, equal
# durations. Usage (from the repository root, after a release build, under the benchmark lock):
#   [RATES=N] bash docs/results/2026-11-27/no-gain/run.sh storm|moirai|flink OUT_DIR [REPS]
# (RATES: Storm's rate, default 22000.)
set -eu
WHAT=${1:?storm, moirai or flink}; OUT=${2:?out dir}; REPS=${3:-5}
M=target/release/moirai
case "$WHAT" in
  # Storm at its CPU bound (~22.4k tuples/s in docs/results/2026-11-26/storm-pairs) and past it:
  # 40 s points so that the verdict (~14 s in) and what follows it fall inside the measured window.
  storm) $M bench syn --rates ${RATES:-22000} --duration 40s --reps "$REPS" \
           --compare storm:os,storm:qs,storm:qs/activation=always --out "$OUT" \
           -- --lachesis --wait-strategy park:1000 ;;
  # moirai's engine at 1.2x and 1.4x os's saturation point (32k): QS lowered the p99 to
  # 0.27-0.39x there (docs/results/2026-11-26/middleware-defaults/syn-moirai.txt).
  moirai) $M bench syn --rates 38000,45000 --duration 20s --reps "$REPS" \
           --compare os,qs,qs/activation=always --out "$OUT" -- --lachesis ;;
  # Flink, the pipeline with one heavy operator, where queue-size priorities gained ~1.1x
  # intake (docs/results/2026-11-27/losing-ground).
  flink) $M bench syn --rates 46000 --duration 40s --reps "$REPS" \
           --compare flink:os,flink:qs,flink:qs/activation=always --out "$OUT" \
           -- --ops 5 --cost-ns 5000 --heavy-op 3 --heavy-factor 4 ;;
  *) echo "usage: $0 storm|moirai|flink OUT_DIR [REPS]" >&2; exit 2 ;;
esac

#!/usr/bin/env bash
# The real-time translator below saturation on every SPE (issue 23): Linux alone against
# `*:qs/verbose/translator=realtime`, interleaved pairs of 150 s points (60 s discarded), at the
# below-saturation rates of ../../2026-12-04/below-saturation/ (Storm SYN 16k, Flink SYN 32k) and
# of ../../2026-12-04/rt-below/ (moirai SYN 26k). Run alone, from the repository's root;
# ~30 min for each JVM SPE at 5 pairs, ~42 min for moirai at 8.
# usage: bash docs/results/2026-12-05/rt-below/run.sh OUT [JVM_PAIRS] [MOIRAI_PAIRS]
set -euo pipefail
out=${1:?usage: run.sh OUT [JVM_PAIRS] [MOIRAI_PAIRS]}
jvm=${2:-5}
own=${3:-8}
here=$(dirname "$(readlink -f "$0")")
steady=docs/results/2026-12-02/steady/run.sh
export RESULTS=$here
OTHER=storm:qs/verbose/translator=realtime bash "$steady" "$out/storm" storm syn 16k "$jvm" 16k-rt
OTHER=flink:qs/verbose/translator=realtime bash "$steady" "$out/flink" flink syn 32k "$jvm" 32k-rt
OTHER=qs/verbose/translator=realtime bash "$steady" "$out/moirai" moirai syn 26k "$own" 26k-rt-8pairs

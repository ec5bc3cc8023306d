#!/usr/bin/env bash
# The middleware's CPU per round after the cheaper Flink and Storm reads (commit 5a787b1):
# Flink's REST client sets its socket timeouts once a request, Storm's metrics directory is listed
# only when it changed and its files stay open, thread CPU clocks stay open. Each SPE alone and
# the three together, 1 s (Flink's and Storm's default period), acting always (the dearest case),
# Storm parking so that it has a steady state.
#   cargo build --release -p moirai-cli   # and both Maven jobs (integrations/*/target)
#   bash docs/results/2026-11-26/middleware-defaults/round-cost-run4.sh [OUT] [SECONDS]
set -u
cd "$(git rev-parse --show-toplevel)"
H=docs/results/2026-11-26/middleware
OUT=${1:-docs/results/2026-11-26/middleware-defaults/round-cost-4.txt}
S=${2:-60}
: > "$OUT"
for mode in flink storm three one; do
  echo "== round-cost.sh $mode 1s $S (--activation always; Storm --wait-strategy park:1000), $(git rev-parse --short HEAD), $(date -u +%FT%TZ)" | tee -a "$OUT"
  STORM_ARGS="--wait-strategy park:1000" bash $H/round-cost.sh "$mode" 1s "$S" 2>&1 | grep -v '^\[' | tee -a "$OUT"
done

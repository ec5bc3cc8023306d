#!/usr/bin/env bash
# The middleware's CPU per round after the engine's cheaper scrape (?name[]= families, thread
# CPU clocks), at the new default period on moirai's engine (200 ms), and the three-SPE setup
# with Storm's idle executors parking (--wait-strategy park:1000) so that it has a steady state.
# Each acting always (--activation always: every round translates, the dearest case).
#   cargo build --release -p moirai-cli
#   bash docs/results/2026-11-26/middleware-defaults/round-cost-run3.sh [OUT]
set -u
cd "$(git rev-parse --show-toplevel)"
H=docs/results/2026-11-26/middleware
OUT=${1:-docs/results/2026-11-26/middleware-defaults/round-cost-3.txt}
: > "$OUT"
for spec in "one 200ms 60" "one 1s 60" "three 1s 60"; do
  set -- $spec
  echo "== round-cost.sh $1 $2 $3 (--activation always; Storm --wait-strategy park:1000), $(date -u +%FT%TZ)" | tee -a "$OUT"
  STORM_ARGS="--wait-strategy park:1000" bash $H/round-cost.sh "$1" "$2" "$3" 2>&1 | tee -a "$OUT"
done

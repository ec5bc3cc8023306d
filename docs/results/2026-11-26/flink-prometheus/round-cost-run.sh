#!/usr/bin/env bash
# The middleware's CPU per round on Flink, reading the subtasks' counters from the REST API (one
# request per job vertex: 10 jobs x 5 vertices here) or from one scrape of the TaskManager's
# Prometheus reporter, side by side: Flink alone and the three SPEs (moirai engine + Flink job +
# Storm topology parking), 1 s (Flink's default period), acting always (the dearest case),
# REPS interleaved pairs of SECONDS each. Flink's CPU answering is counted separately (its REST
# server, metric fetcher and reporter threads, with the middleware minus without).
#   cargo build --release -p moirai-cli   # and the Maven jobs (integrations/*/target)
#   /work/bin/benchlock bash docs/results/2026-11-26/flink-prometheus/round-cost-run.sh [OUT] [SECONDS] [REPS]
set -u
cd "$(git rev-parse --show-toplevel)"
H=docs/results/2026-11-26/flink-prometheus
OUT=${1:-$H/round-cost.txt}
S=${2:-30}
REPS=${3:-2}
: > "$OUT"
for rep in $(seq "$REPS"); do
  for mode in flink three; do
    for read in rest prometheus; do
      echo "== rep $rep: round-cost.sh $mode 1s $S, Flink read by $read (--activation always; Storm --wait-strategy park:1000), $(git rev-parse --short HEAD), $(date -u +%FT%TZ)" | tee -a "$OUT"
      FLINK_READ=$read STORM_ARGS="--wait-strategy park:1000" bash $H/round-cost.sh "$mode" 1s "$S" 2>&1 | grep -v '^\[' | tee -a "$OUT"
    done
  done
done

#!/usr/bin/env bash
# Flink past its saturation point in steady state (issue 23), as ../storm-long/ for Storm:
# `flink:os` (Linux alone) against `flink:qs/verbose` (`moirai schedule --policy qs` at its
# defaults, its -v log kept) on WORKLOAD, 150 s points of which the first 40 % (60 s) is
# discarded, REPS interleaved repetitions at RATES. Flink 1.20 MiniCluster with its Prometheus
# reporter (the lab's `flink:` configurations). Run alone, from the repository's root.
#   heavy: the SYN pipeline with one heavy operator the issue names
#          (--ops 5 --cost-ns 5000 --heavy-op 3 --heavy-factor 4); ~50 min for 36k,40k,44k x 3
#   lr:    Linear Road, the Lachesis shape; ~35 min for 300k,500k x 3
# usage: bash docs/results/2026-12-02/flink-long/run.sh OUT WORKLOAD RATES [REPS] [NAME]
#   (results.csv, table.txt and ratios.md land here, or in $RESULTS when set, as
#   WORKLOAD-NAME-*, NAME by default the rates, e.g. heavy-36k-44k-results.csv for 36k,40k,44k)
set -euo pipefail
here=${RESULTS:-$(dirname "$(readlink -f "$0")")}
usage="usage: run.sh OUT heavy|lr RATES [REPS] [NAME]"
out=${1:?$usage}
workload=${2:?$usage}
rates=${3:?$usage}
reps=${4:-3}
name=$workload-${5:-$(echo "$rates" | sed 's/,.*,/,/; s/,/-/')}
case "$workload" in
  heavy) bench=(syn); args=(--ops 5 --cost-ns 5000 --heavy-op 3 --heavy-factor 4) ;;
  lr) bench=(linear-road); args=(--shape lachesis) ;;
  *) echo "unknown workload '$workload'; $usage" >&2; exit 2 ;;
esac
cargo build --release -p moirai-cli
target/release/moirai bench "${bench[@]}" --rates "$rates" --duration 150s --warmup 0.4 --reps "$reps" \
  --compare flink:os,flink:qs/verbose --out "$out" -- "${args[@]}" 2>&1 | tee "$here/$name-table.txt"
cp "$out/results.csv" "$here/$name-results.csv"
python3 docs/results/2026-11-26/middleware-rt/ratios.py "$here/$name-results.csv" flink:os flink:qs/verbose > "$here/$name-ratios.md"

#!/usr/bin/env bash
# The second hold of the benchmark lock, on the final code (the reporter without the labels nobody
# reads, one pass over a sample's labels):
#   /work/bin/benchlock bash docs/results/2026-11-26/flink-prometheus/all-2.sh
set -u
cd "$(git rev-parse --show-toplevel)"
H=docs/results/2026-11-26/flink-prometheus
bash $H/round-cost-run.sh $H/round-cost-2.txt 30 2
: > $H/saturation-2.txt
for read in prometheus rest; do bash $H/saturation.sh $read 48000 40 2>&1 | tee -a $H/saturation-2.txt; done

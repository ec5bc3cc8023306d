#!/usr/bin/env bash
# Lachesis at scale, simulated (docs/sim.md, "Lachesis at scale"): QS against the OS scheduler on
# the Lachesis SYN (5-operator pipelines: source, 3 operators, sink; drawn costs around 1 µs,
# ×5 variance), with the middleware's nice translator (qs) and its cgroup translator
# (qs/translator=cgroup: a cpu cgroup per operator, cpu.weight log-normalised, as Lachesis §6.4
# ran SYN with cpu.shares).
#   1. one machine of 176 cores, one middleware, 1000 queries (5000 threads, ~28 per core);
#   2. 128 nodes of 4 cores, a middleware each, 20 queries per node (2560 queries, the Lachesis
#      SYN on every node), queries placed round-robin.
# Each sweep's points are listed in two halves (the rates first swept did not reach saturation on
# 176 cores, and were all past it on 128 nodes). Each sweep stays under ~10 minutes of wall time on the lab's 2-core machine. The policy runs
# every second (Lachesis' period); 4 s simulated per point, the first second discarded.
# Run from the repository root with the release binary built.
set -euo pipefail
M=${MOIRAI:-target/release/moirai}
R=$(dirname "$0")
CONFIGS=os,qs,qs/translator=cgroup
$M sim syn --rates 1.6M:2.4M:200k --cores 176 --duration 4s --warmup 0.25 --compare $CONFIGS \
  --out "$R/sim-lachesis-176" -- --lachesis --queries 1000 > "$R/sim-lachesis-176.txt"
$M sim syn --rates 2.6M,2.8M --cores 176 --duration 4s --warmup 0.25 --compare $CONFIGS \
  --out "$R/sim-lachesis-176-high" -- --lachesis --queries 1000 > "$R/sim-lachesis-176-high.txt"
$M sim syn --rates 3.84M,5.12M,6.4M --nodes 128 --cores 4 --duration 4s --warmup 0.25 --compare $CONFIGS \
  --out "$R/sim-lachesis-128-nodes-low" -- --lachesis --queries 2560 > "$R/sim-lachesis-128-nodes-low.txt"
$M sim syn --rates 7.68M:11.52M:1.28M --nodes 128 --cores 4 --duration 4s --warmup 0.25 --compare $CONFIGS \
  --out "$R/sim-lachesis-128-nodes" -- --lachesis --queries 2560 > "$R/sim-lachesis-128-nodes.txt"
(cd "$R" && python3 lachesis-at-scale-table.py sim-lachesis-176/results.csv sim-lachesis-176-high/results.csv \
  sim-lachesis-128-nodes-low/results.csv sim-lachesis-128-nodes/results.csv > lachesis-at-scale-tables.md)

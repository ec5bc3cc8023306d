#!/usr/bin/env bash
# `moirai sim --from-engine` against a live engine: SYN, 2 queries × 2 operators of 20 µs with
# selectivity 0.5, at 2000 tuples/s, sampled for 5 s, then simulated at the measured rate and at
# higher ones (where the engine is not). Output: fromengine-syn.txt and fromengine-syn/.
set -euo pipefail
M=${MOIRAI:-target/release/moirai}
R=$(dirname "$0")
$M run syn --queries 2 --ops 2 --cost-ns 20000 --selectivity 0.5 --rate 2000 --duration 60s \
  --metrics-addr 127.0.0.1:19480 > /dev/null 2>&1 & PID=$!
trap 'kill $PID 2>/dev/null || true' EXIT
sleep 2
echo "load average: $(cat /proc/loadavg)"
$M sim --from-engine http://127.0.0.1:19480 --sample-for 5s --rates 2000,40000,60000,80000,100000 \
  --compare os,qs --duration 5s --out "$R/fromengine-syn"

#!/usr/bin/env bash
# `moirai sim --from-engine` on the Lachesis SYN (20 queries × 3 operators, 100 threads): the engine
# sampled at 20k tuples/s for 10 s, the sampled model simulated at the rates of 2026-11-24's
# validation sweep, side by side with that day's measured sweep (os, qs) and with the model built
# from the workload's description (sim-validation-sim). Output: fromengine-lachesis.txt,
# fromengine-lachesis/, fromengine-lachesis-table.md.
set -euo pipefail
M=${MOIRAI:-target/release/moirai}
R=$(dirname "$0")
V=$R/../2026-11-24
$M run syn --lachesis --rate 20000 --duration 60s --metrics-addr 127.0.0.1:19481 > /dev/null 2>&1 & PID=$!
trap 'kill $PID 2>/dev/null || true' EXIT
sleep 3
echo "load average: $(cat /proc/loadavg)"
$M sim --from-engine http://127.0.0.1:19481 --sample-for 10s --rates 30000,34000,38600,45000,51400,57900 \
  --compare os,qs --duration 10s --reps 2 --out "$R/fromengine-lachesis"
python3 "$V/sim-validation-table.py" "$V/sim-validation-bench-low,$V/sim-validation-bench-high" "$R/fromengine-lachesis" \
  > "$R/fromengine-lachesis-table.md"

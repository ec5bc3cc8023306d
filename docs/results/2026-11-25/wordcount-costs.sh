#!/usr/bin/env bash
# WordCount's per-operator costs (crates/sim/src/wordcount.rs, WORDCOUNT_COSTS): the engine at an
# unlimited rate, sampled by `moirai sim --from-engine` (thread CPU over tuples in, less the hop
# costs the model adds), with the default sentences (16.5 words) and with --sentence-variance
# (4.55 words), so that sentences' and split's costs split into a base and a per-word part.
# Needs a quiet machine; prints the load average before each run.
set -euo pipefail
M=${MOIRAI:-target/release/moirai}
for v in "" "--sentence-variance"; do
  echo "load average: $(cat /proc/loadavg)  (wordcount $v)"
  $M run wordcount --rate 0 $v --duration 30s --metrics-addr 127.0.0.1:19465 > /dev/null 2>&1 & PID=$!
  sleep 5
  $M sim --from-engine http://127.0.0.1:19465 --sample-for 15s --duration 2s --out "${TMPDIR:-/tmp}/wordcount-costs" 2>&1 \
    | sed -n 2,12p
  kill $PID; wait $PID 2>/dev/null || true
done

#!/usr/bin/env bash
# Real-time classes against nice values on Apache Storm past its saturation point (issue 23: "RT vs
# nice on the same points"; the 2026-11-26 campaign was interrupted before these rates): the
# Lachesis SYN with parking executors (--wait-strategy park:1000; the realtime translator refuses
# Storm's default, spinning ones), Linux alone (storm:os), queue-size scheduling through nice
# values (storm:qs) and through the realtime translator (storm:qs/translator=realtime: the same nice
# values, plus SCHED_RR for the one executor QS ranks highest), both with the default activation
# rule; 5 interleaved repetitions of 40 s at 26k and 30k tuples/s (storm:os saturates at ~22-24k
# here). Writes results.csv, table.txt and ratios.md beside this script (~33 min).
# Run alone on the machine, from the repository root, after `cargo build --release -p moirai-cli`
# and `mvn -q -B -f integrations/storm/pom.xml -DskipTests package`:
#   bash docs/results/2026-11-29/storm-rt/run.sh
set -euo pipefail
here=$(dirname "$(readlink -f "$0")")
OUT=${OUT:-/tmp/moirai-results/storm-rt}
target/release/moirai bench syn --rates 26k,30k --duration 40s --reps 5 \
  --compare storm:os,storm:qs,storm:qs/translator=realtime --out "$OUT" \
  -- --lachesis --wait-strategy park:1000 2>&1 | tee "$here/table.txt"
cp "$OUT/results.csv" "$here/results.csv"
python3 docs/results/2026-11-26/middleware-rt/ratios.py "$here/results.csv" storm:os storm:qs \
  storm:qs/translator=realtime > "$here/ratios.md"

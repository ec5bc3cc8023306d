#!/usr/bin/env bash
# Issue 23: what the check costs where the scheduler is needed. Flink's heavy-operator pipeline
# at 40k tuples/s (its saturation point under Linux alone on this machine), 60 s points:
# `flink:os` and `flink:qs` with NEW_BIN's middleware, `flink:qs` with BASE_BIN's (no check),
# REPS interleaved repetitions (one lab run per binary and repetition). ORDER `base-first`: each
# repetition runs BASE's `flink:qs`, then NEW's `flink:os` and `flink:qs`; `new-first`: NEW's
# `flink:qs`, then BASE's `flink:os` and `flink:qs` (the point after another JVM's run starts
# differently: run both orders).
# Usage (from the repository root, nothing else running):
#   mvn -q -B -f integrations/flink/pom.xml -DskipTests package
#   bash docs/results/2026-11-27/probe/flink.sh BASE_BIN NEW_BIN OUT_DIR [REPS] [RATE] [ORDER]
set -eu
BASE=${1:?base binary}; NEW=${2:?new binary}; OUT=${3:?out dir}; REPS=${4:-3}; RATE=${5:-40000}
ORDER=${6:-base-first}
ARGS=(-- --ops 5 --cost-ns 5000 --heavy-op 3 --heavy-factor 4)
point() { # BIN SIDE REP CONFIGURATIONS
  "$1" bench syn --rates "$RATE" --duration 60s --reps 1 --compare "$4" --out "$OUT/$2-$3" "${ARGS[@]}"
}
for rep in $(seq 1 "$REPS"); do
  if [ "$ORDER" = new-first ]; then
    point "$NEW" new "$rep" flink:qs/verbose
    point "$BASE" base "$rep" flink:os,flink:qs/verbose
  else
    point "$BASE" base "$rep" flink:qs/verbose
    point "$NEW" new "$rep" flink:os,flink:qs/verbose
  fi
done
python3 - "$OUT" "$REPS" <<'PY'
import csv, statistics, sys
out, reps = sys.argv[1], int(sys.argv[2])
rows = {}
for rep in range(1, reps + 1):
    for side in ('base', 'new'):
        for r in csv.DictReader(open(f'{out}/{side}-{rep}/results.csv')):
            name = r['configuration'] if r['configuration'] == 'flink:os' else f"{r['configuration']} ({side})"
            rows.setdefault(name, []).append(r)
for name, rs in rows.items():
    med = lambda k: statistics.median(float(r[k]) for r in rs if r[k])
    act = [r['middleware_active_share'] for r in rs if r['middleware_active_share']]
    print(f"{name:28} n={len(rs)} ingress {med('ingress_tps'):.0f}  e2e p50 {med('e2e_p50_ms'):.0f} ms  "
          f"p99 {med('e2e_p99_ms'):.0f} ms  per run p99 {[round(float(r['e2e_p99_ms'])) for r in rs]}  "
          f"acting {[round(float(a), 2) for a in act]}")
PY

#!/usr/bin/env bash
# The floor under the low-rate CPU (issue 27's "≤ 0.02 cores at 1 000 tuples/s under dynamic:2"):
# a thread that only sleeps and wakes 1 000 times a second (floor.rs), side by side with moirai's
# 7-task SYN at 1 000 tuples/s under dynamic:2, dedicated and dynamic:2 with --source-slack 1ms.
# Run alone on the machine, from the repository's root, after `cargo build --release -p moirai-cli`;
# ~1 min a repetition.
# usage: run.sh MOIRAI_BINARY OUTDIR [REPS]
set -u
bin=$1; out=$2; reps=${3:-5}
here=$(dirname "$0")
mkdir -p "$out"
rustc -O "$here/floor.rs" -o "$out/floor" || exit 1
csv="$out/floor.csv"
echo "rep,case,cpu_cores,wakes_per_s,e2e_p50_ms,e2e_p99_ms" > "$csv"
# Voluntary context switches of all threads of process $1 (a thread that sleeps and is woken
# counts one).
switches() { cat /proc/"$1"/task/*/status 2>/dev/null | awk '/^voluntary_ctxt_switches/ {s += $2} END {print s}'; }
moirai() {  # rep case args...
  local rep=$1 case=$2; shift 2
  local json="$out/$case-$rep.json"
  "$bin" run syn --ops 5 --rate 1000 --duration 10s --json "$@" > "$json" 2>/dev/null &
  local pid=$!
  sleep 3; local a; a=$(switches $pid)
  sleep 5; local b; b=$(switches $pid)
  wait $pid
  python3 - "$json" "$rep" "$case" "$(( (b - a) / 5 ))" >> "$csv" <<'PY'
import json, sys
f, rep, case, wakes = sys.argv[1:]
try:
    d = json.loads(open(f).read().strip().splitlines()[-1])
    e = d["e2e_latency_ms"]
    print(f"{rep},{case},{d['cpu_cores']:.4f},{wakes},{e['p50']:.3f},{e['p99']:.3f}")
except Exception:
    print(f"{rep},{case},,{wakes},,")
PY
  tail -1 "$csv"
}
for rep in $(seq 1 "$reps"); do
  r=$("$out/floor" 1000 8)
  echo "$rep,floor-1ms,$(echo "$r" | awk '/^cores/ {print $2}'),$(echo "$r" | awk '/^wakes_per_s/ {print $2}'),," >> "$csv"
  tail -1 "$csv"
  moirai "$rep" dynamic2 --threading dynamic:2
  moirai "$rep" dedicated --threading dedicated
  moirai "$rep" dynamic2-slack1ms --threading dynamic:2 --source-slack 1ms
done

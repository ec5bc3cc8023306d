#!/usr/bin/env bash
# The thread dump by jcmd (BASE build) against the dump over the JVM's attach socket (NEW build)
# on Apache Flink (1.20 MiniCluster), Lachesis SYN at one rate: `flink:os`, then `flink:qs` with
# each build's middleware at its defaults (--activation auto), interleaved, REPS repetitions of
# 20 s. Both builds use this checkout's Flink jobs (MOIRAI_FLINK_JOBS).
# Usage (from the repository root, under the benchmark lock):
#   bash docs/results/2026-11-26/attach/run.sh BASE_MOIRAI NEW_MOIRAI OUT_DIR [REPS] [RATE] [CONFIG]
# OS_CONFIG (default flink:os) is the Linux-alone configuration; RUN_ARGS (default --lachesis) the
# workload's arguments. The two-node cluster:
#   OS_CONFIG=flink:os/cluster=standalone:2 RUN_ARGS="--lachesis --parallelism 2" bash .../run.sh \
#     BASE NEW OUT 2 20000 flink:qs/cluster=standalone:2/activation=always
set -eu
BASE=${1:?base moirai}; NEW=${2:?new moirai}; OUT=${3:?out dir}; REPS=${4:-5}; RATE=${5:-32000}
CONFIG=${6:-flink:qs}; OS_CONFIG=${OS_CONFIG:-flink:os}; RUN_ARGS=${RUN_ARGS:---lachesis}
export MOIRAI_FLINK_JOBS=$PWD/integrations/flink
mkdir -p "$OUT"
for rep in $(seq 1 "$REPS"); do
  "$NEW" bench syn --rates "$RATE" --duration 20s --reps 1 --compare "$OS_CONFIG" \
    --out "$OUT/os-$rep" -- $RUN_ARGS 2>&1 | grep "\[1/1\]" | sed "s/^/os rep $rep: /"
  "$BASE" bench syn --rates "$RATE" --duration 20s --reps 1 --compare "$CONFIG" \
    --out "$OUT/jcmd-$rep" -- $RUN_ARGS 2>&1 | grep "\[1/1\]" | sed "s/^/jcmd rep $rep: /"
  "$NEW" bench syn --rates "$RATE" --duration 20s --reps 1 --compare "$CONFIG" \
    --out "$OUT/attach-$rep" -- $RUN_ARGS 2>&1 | grep "\[1/1\]" | sed "s/^/attach rep $rep: /"
done
python3 - "$OUT" "$REPS" <<'PY'
import csv, statistics, sys
out, reps = sys.argv[1], int(sys.argv[2])
def rows(kind):
    # Failed points (no figures) are left out and counted.
    return [next(csv.DictReader(open(f"{out}/{kind}-{r}/results.csv"))) for r in range(1, reps + 1)]
def ok(rs):
    return [r for r in rs if r["ok"] == "true"]
def med(rs, k):
    v = [float(r[k]) for r in rs if r[k] not in ("", None)]
    return statistics.median(v) if v else float("nan")
base = None
print(f"{'':8} {'p50 ms':>9} {'p99 ms':>9} {'ingress/s':>10} {'mw % core':>10} {'active %':>9}   p99 of each rep")
for kind in ("os", "jcmd", "attach"):
    every = rows(kind)
    rs = ok(every)
    p99 = med(rs, "e2e_p99_ms")
    base = base or p99
    print(f"{kind:8} {med(rs,'e2e_p50_ms'):9.1f} {p99:9.1f} {med(rs,'ingress_tps'):10.0f} "
          f"{100*med(rs,'middleware_cpu_share'):10.2f} {100*med(rs,'middleware_active_share'):9.1f}   "
          + " ".join(f"{float(r['e2e_p99_ms']):.0f}" for r in rs) + f"   (p99 {p99/base:.2f}x os)"
          + (f"; {len(every) - len(rs)} failed" if len(rs) < len(every) else ""))
PY

#!/usr/bin/env bash
# The middleware's CPU per round, two builds side by side on the same SPEs.
#
#   pairs.sh BASE_BIN NEW_BIN OUT.csv [REPS] [MODE] [PERIOD] [SECONDS]
#     MODE three (default): a moirai engine (100 operator threads), a Flink job read through its
#                 Prometheus reporter and a Storm topology whose executors park (~350 threads)
#          one, flink, storm: that SPE alone
#
# The SPEs are started once (the Lachesis SYN far below saturation, as in
# docs/results/2026-11-26/flink-prometheus/round-cost.sh) and given 25 s. Then, REPS times, each
# build's middleware in turn (BASE first in odd repetitions, NEW first in even ones) runs with
# `--activation always` (every round translates: the dearest case; ACTIVATION=auto for an idle
# middleware), is given 10 s (its first rounds take the thread dumps) and is measured for
# SECONDS: its CPU (utime + stime + cutime + cstime of /proc/<pid>/stat) over its rounds
# (moirai_schedule_rounds_total), no dashboard; then it is stopped (it restores every thread).
# The SPEs' CPU answering (moirai-http; Flink's REST, metric and reporter threads and its Attach
# Listener; Storm's Attach Listener) is the same window's CPU of those threads, per round.
# Needs both builds and the Maven jobs (integrations/*/target). The engine runs NEW_BIN.
set -u
BASE=$(realpath "${1:?base build}"); NEW=$(realpath "${2:?new build}"); OUT=${3:?output csv}
REPS=${4:-5}; MODE=${5:-three}; P=${6:-1s}; S=${7:-30}
cd "$(git rev-parse --show-toplevel)"
D=$(mktemp -d /tmp/mwpairs.XXXX)
port() { python3 -c 'import socket;s=socket.socket();s.bind(("127.0.0.1",0));print(s.getsockname()[1])'; }
EPORT=$(port); FPORT=$(port); MPORT=$(port); PPORT=$(port)
PIDS=()
cleanup() { for p in "${PIDS[@]}"; do kill "$p" 2>/dev/null; done; wait 2>/dev/null; rm -rf "$D"; }
trap cleanup EXIT
has() { case "$MODE" in three) true ;; one) [ "$1" = engine ] ;; *) [ "$1" = "$MODE" ] ;; esac; }
CONFIG="state_file = \"$D/state.json\"
metrics_addr = \"127.0.0.1:$MPORT\""
if has engine; then
  "$NEW" run syn --lachesis --rate 2000 --duration 2h --metrics-addr 127.0.0.1:$EPORT > $D/engine.out 2>&1 & E=$!; PIDS+=($E)
  CONFIG="$CONFIG
[[spe]]
name = \"engine\"
driver = \"moirai\"
url = \"http://127.0.0.1:$EPORT\""
fi
if has flink || has storm; then
  FCP=integrations/flink/target/moirai-flink-jobs.jar:$(cat integrations/flink/target/classpath.txt)
  SCP=integrations/storm/target/moirai-storm-jobs.jar:$(cat integrations/storm/target/classpath.txt)
  mkdir -p $D/storm
fi
if has flink; then
  java -Xmx1g -cp "$FCP" moirai.flink.Run syn --queries 10 --ops 3 --cost-ns 1000 --rate 1000 --duration 2h \
    --rest-port $FPORT --metrics-port $PPORT > $D/flink.out 2> $D/flink.err & F=$!; PIDS+=($F)
  CONFIG="$CONFIG
[[spe]]
name = \"flink\"
driver = \"flink\"
url = \"http://127.0.0.1:$FPORT\"
prometheus = \"http://127.0.0.1:$PPORT/metrics\""
fi
if has storm; then
  java -Xmx1g -cp "$SCP" moirai.storm.Run syn --queries 20 --ops 3 --cost-ns 1000 --rate 1000 --duration 2h \
    --metrics-dir $D/storm --wait-strategy park:1000 > $D/storm.out 2> $D/storm.err & ST=$!; PIDS+=($ST)
  CONFIG="$CONFIG
[[spe]]
name = \"storm\"
driver = \"storm\"
metrics_dir = \"$D/storm\""
fi
CONFIG="$CONFIG
[[policy]]
name = \"qs\"
type = \"qs\"
period = \"$P\""
echo "$CONFIG" > $D/schedule.toml
sleep 25
tk=$(getconf CLK_TCK)
# CPU ticks of the threads of process $1 whose names match the regex $2.
threads_cpu() { python3 - "$1" "$2" <<'PY'
import os, re, sys
pid, pat = sys.argv[1], re.compile(sys.argv[2]); total = 0
for t in os.listdir(f"/proc/{pid}/task"):
    try:
        if pat.search(open(f"/proc/{pid}/task/{t}/comm").read()):
            f = open(f"/proc/{pid}/task/{t}/stat").read().rsplit(")", 1)[1].split()
            total += int(f[11]) + int(f[12])
    except OSError:
        pass
print(total)
PY
}
answering() {
  local e=0 f=0
  if has engine; then e=$(threads_cpu $E '^moirai-http'); fi
  if has flink; then f=$(threads_cpu $F '^(flink-rest-server|Flink-Metric|flink-metrics|prometheus-http|Attach Listener)'); fi
  echo "$e $f"; }
rounds() { curl -s http://127.0.0.1:$MPORT/metrics | awk '/^moirai_schedule_rounds_total/{print $2}'; }
echo "rep,build,mode,period_s,rounds,wall_s,mw_ms_per_round,mw_core_pct,engine_answering_ms_per_round,flink_answering_ms_per_round" > "$OUT"
for rep in $(seq "$REPS"); do
  if [ $((rep % 2)) = 1 ]; then order="base new"; else order="new base"; fi
  for build in $order; do
    bin=$BASE; [ "$build" = new ] && bin=$NEW
    "$bin" schedule --config $D/schedule.toml --activation "${ACTIVATION:-always}" > $D/mw-$rep-$build.log 2>&1 & W=$!
    sleep 10
    r0=$(rounds); c0=$(awk '{print $14+$15+$16+$17}' /proc/$W/stat); a0=$(answering); t0=$(date +%s.%N)
    sleep "$S"
    r1=$(rounds); c1=$(awk '{print $14+$15+$16+$17}' /proc/$W/stat); a1=$(answering); t1=$(date +%s.%N)
    kill -INT $W; wait $W
    python3 - "$tk" "$rep" "$build" "$MODE" "$P" "$r0" "$r1" "$c0" "$c1" "$t0" "$t1" $a0 $a1 <<'PY' | tee -a "$OUT"
import sys
tk, rep, build, mode, p, r0, r1, c0, c1, t0, t1, e0, f0, e1, f1 = sys.argv[1:]
tk = float(tk); rounds = float(r1) - float(r0); wall = float(t1) - float(t0)
cpu = (float(c1) - float(c0)) / tk
per = lambda x: 1e3 * x / tk / max(rounds, 1)
period = float(p[:-2]) / 1e3 if p.endswith("ms") else float(p[:-1])
print(f"{rep},{build},{mode},{period:g},{rounds:.0f},{wall:.1f},{1e3 * cpu / max(rounds, 1):.2f},"
      f"{100 * cpu / wall:.3f},{per(float(e1) - float(e0)):.2f},{per(float(f1) - float(f0)):.2f}")
PY
  done
done

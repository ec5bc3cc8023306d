#!/usr/bin/env bash
# The middleware's CPU per round, and the CPU the SPEs spend answering it.
#
#   round-cost.sh MODE PERIOD SECONDS [schedule flags...]
#     MODE one:   one moirai engine, 100 operator threads
#          three: + a Flink job and a Storm topology (~300 threads)
#          flink, storm: that SPE alone (where the three-SPE round's CPU goes)
#
# The SPEs run the Lachesis SYN far below saturation (moirai: 20 x 3 operators; Flink: 10 x 3;
# Storm: 20 x 3). Each SPE is given 25 s to start; then the SPEs' answering threads are measured
# for SECONDS without a middleware (their own background: Flink's metric fetcher, Storm's
# reporter), then the middleware is started with `--activation always` (every round translates:
# the dearest case; ACTIVATION=auto measures an idle middleware), given 10 s, and
# measured for SECONDS: its CPU (utime + stime + cutime + cstime of /proc/<pid>/stat: itself and
# the jcmd children it waited for) over its rounds (moirai_schedule_rounds_total), no dashboard.
# The SPEs' answering cost is the CPU of their answering threads with the middleware minus
# without: moirai's `moirai-http`; Flink's REST (`flink-rest-server-netty*`) and metric fetcher
# (`Flink-Metric*`, `flink-metrics*`) threads and the JVM's `Attach Listener` (jcmd); Storm's
# `Attach Listener` (its CSV reporter writes the same files with or without a reader).
# KEEP=DIR keeps the logs (mw.log: pass -v to see every decision); PERF=FILE records
# a call-graph profile of the middleware (perf record -g) for SECONDS after the measurement.
# STORM_ARGS: more arguments for the Storm topology (e.g. --wait-strategy park:1000).
# Needs a release build and both Maven jobs built (integrations/*/target).
set -u
MODE=${1:?one, three, flink or storm}; P=${2:?period}; S=${3:?seconds}; shift 3
cd "$(git rev-parse --show-toplevel)"
M=${M:-$PWD/target/release/moirai}   # M=BINARY measures another build
D=$(mktemp -d /tmp/mwround.XXXX)
port() { python3 -c 'import socket;s=socket.socket();s.bind(("127.0.0.1",0));print(s.getsockname()[1])'; }
EPORT=$(port); FPORT=$(port); MPORT=$(port)
PIDS=()
cleanup() { for p in "${PIDS[@]}"; do kill "$p" 2>/dev/null; done; wait 2>/dev/null
  [ -n "${KEEP:-}" ] && mkdir -p "$KEEP" && cp $D/*.log $D/*.out $D/*.err "$KEEP"/ 2>/dev/null; rm -rf "$D"; }
trap cleanup EXIT
has() { case "$MODE" in three) true ;; one) [ "$1" = engine ] ;; *) [ "$1" = "$MODE" ] ;; esac; }
CONFIG="state_file = \"$D/state.json\"
metrics_addr = \"127.0.0.1:$MPORT\""
if has engine; then
  $M run syn --lachesis --rate 2000 --duration 10m --metrics-addr 127.0.0.1:$EPORT > $D/engine.out 2>&1 & E=$!; PIDS+=($E)
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
  java -Xmx1g -cp "$FCP" moirai.flink.Run syn --queries 10 --ops 3 --cost-ns 1000 --rate 1000 --duration 10m \
    --rest-port $FPORT > $D/flink.out 2> $D/flink.err & F=$!; PIDS+=($F)
  CONFIG="$CONFIG
[[spe]]
name = \"flink\"
driver = \"flink\"
url = \"http://127.0.0.1:$FPORT\""
fi
if has storm; then
  java -Xmx1g -cp "$SCP" moirai.storm.Run syn --queries 20 --ops 3 --cost-ns 1000 --rate 1000 --duration 10m \
    --metrics-dir $D/storm ${STORM_ARGS:-} > $D/storm.out 2> $D/storm.err & ST=$!; PIDS+=($ST)
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
  local out=""
  if has engine; then out="engine $(threads_cpu $E '^moirai-http')"; fi
  if has flink; then out="$out flink $(threads_cpu $F '^(flink-rest-server|Flink-Metric|flink-metrics|Attach Listener)')"; fi
  if has storm; then out="$out storm $(threads_cpu $ST '^Attach Listener')"; fi
  echo $out; }
a0=$(answering); sleep "$S"; a1=$(answering)
$M schedule --config $D/schedule.toml --activation "${ACTIVATION:-always}" "$@" > $D/mw.log 2>&1 & W=$!; PIDS+=($W)
sleep 10
rounds() { curl -s http://127.0.0.1:$MPORT/metrics | awk '/^moirai_schedule_rounds_total/{print $2}'; }
threads() { curl -s http://127.0.0.1:$MPORT/metrics | awk '/^moirai_schedule_threads /{print $2}'; }
mwcpu() { awk '{print $14+$15+$16+$17}' /proc/$W/stat; }
r0=$(rounds); c0=$(mwcpu); b0=$(answering); t0=$(date +%s.%N)
sleep "$S"
r1=$(rounds); c1=$(mwcpu); b1=$(answering); t1=$(date +%s.%N)
n=$(threads)
python3 - "$tk" "$S" "$r0" "$r1" "$c0" "$c1" "$t0" "$t1" "$n" "$a0" "$a1" "$b0" "$b1" <<'PY'
import sys
tk, S, r0, r1, c0, c1, t0, t1, n = sys.argv[1:10]
tk = float(tk); rounds = float(r1) - float(r0); wall = float(t1) - float(t0)
cpu = (float(c1) - float(c0)) / tk
print(f"threads scheduled: {n}; rounds: {rounds:.0f} in {wall:.1f} s")
print(f"middleware (with children): {1e3 * cpu / max(rounds, 1):.2f} ms CPU per round, {100 * cpu / wall:.2f} % of a core")
def parse(t):
    f = t.split(); return {f[i]: float(f[i + 1]) for i in range(0, len(f), 2)}
a0, a1, b0, b1 = (parse(x) for x in sys.argv[10:14])
for spe in a0:
    base = (a1[spe] - a0[spe]) / tk / float(S)       # CPU s per s without the middleware
    with_mw = (b1[spe] - b0[spe]) / tk / wall          # ... with it
    extra = max(with_mw - base, 0.0)
    print(f"{spe} answering: {1e3 * extra * wall / max(rounds, 1):.2f} ms CPU per round "
          f"({100 * with_mw:.2f} % of a core with the middleware, {100 * base:.2f} % without)")
PY
if [ -n "${PERF:-}" ]; then perf record -q -g -p $W -o "$PERF" -- sleep "$S" > /dev/null 2>&1; fi
kill -INT $W; wait $W; echo "middleware exit $?"; tail -1 $D/mw.log

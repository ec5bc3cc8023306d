#!/usr/bin/env bash
# Idle cost of moirai's engine before and after issue 27 item 3, side by side, interleaved.
# usage: run.sh BASE_BINARY NEW_BINARY OUTDIR   (run it alone on the machine; ~12 min)
#
# 1. Low rate: `moirai run syn --lachesis --rate 1000 --duration 30s` and the 7-operator
#    `moirai run syn --rate 1000 --duration 20s`, under dynamic:2 and dedicated, 3 repetitions,
#    base and new alternating: the engine's CPU (cpu_cores, the process over the measured window)
#    and the wake-ups per second of every thread (voluntary context switches, /proc, sampled for
#    10 s from the 8th second on: wakeups.py), and over the same 10 s the CPU time of every thread
#    from /proc/<pid>/task/*/schedstat (ns-exact; cpu_cores is tick-sampled: threadcpu.py).
# 2. Latency kept: `moirai run syn --ops 3 --cost-ns 500 --rate 900000 --threading dynamic:2
#    --duration 10s`, 3 repetitions, alternating: e2e p50/p99.
set -u
base=$1; new=$2; out=$3
here=$(cd "$(dirname "$0")" && pwd)
mkdir -p "$out"
csv="$out/lowrate.csv"
echo "rep,workload,threading,binary,cpu_cores,sched_cores,wakeups_per_s,e2e_p50_ms,e2e_p99_ms" > "$csv"
lat="$out/latency.csv"
echo "rep,binary,ingress_tps,e2e_p50_ms,e2e_p99_ms,cpu_cores" > "$lat"
# --json prints the summary as one JSON object on the last line.
field() { python3 -c "import json,sys;d=json.loads(open(sys.argv[1]).read().strip().splitlines()[-1]);print(eval(sys.argv[2]))" "$@"; }
for rep in 1 2 3; do
  for wl in lachesis seven; do
    if [ $wl = lachesis ]; then args="syn --lachesis --rate 1000"; dur=30; else args="syn --rate 1000"; dur=20; fi
    for model in dynamic:2 dedicated; do
      for bin in base new; do
        b=$base; [ $bin = new ] && b=$new
        port=$((20000 + RANDOM % 20000))
        tag="$wl-${model/:/}-$bin-$rep"
        $b run $args --threading $model --duration ${dur}s --json --metrics-addr 127.0.0.1:$port > "$out/$tag.json" 2>/dev/null &
        pid=$!
        sleep 8
        python3 "$here/threadcpu.py" $pid 10 > "$out/$tag.cpu" &
        python3 "$here/wakeups.py" $pid 10 > "$out/$tag.wakeups"
        wait
        cores=$(field "$out/$tag.json" "d['cpu_cores']")
        p50=$(field "$out/$tag.json" "d['e2e_latency_ms']['p50']")
        p99=$(field "$out/$tag.json" "d['e2e_latency_ms']['p99']")
        wk=$(awk '$1=="total"{print $3}' "$out/$tag.wakeups")
        sc=$(awk '$1=="total"{print $2}' "$out/$tag.cpu")
        echo "$rep,$wl,$model,$bin,$cores,$sc,$wk,$p50,$p99" | tee -a "$csv"
      done
    done
  done
  for bin in base new; do
    b=$base; [ $bin = new ] && b=$new
    tag="lat-$bin-$rep"
    $b run syn --ops 3 --cost-ns 500 --rate 900000 --threading dynamic:2 --duration 10s --json > "$out/$tag.json" 2>/dev/null
    echo "$rep,$bin,$(field "$out/$tag.json" "round(d['ingress_tps'])"),$(field "$out/$tag.json" "d['e2e_latency_ms']['p50']"),$(field "$out/$tag.json" "d['e2e_latency_ms']['p99']"),$(field "$out/$tag.json" "d['cpu_cores']")" | tee -a "$lat"
  done
done

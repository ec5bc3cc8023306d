#!/usr/bin/env bash
# The low-rate CPU of moirai's engine before and after, side by side (a shorter form of
# ../idle/run.sh: the 7-operator SYN only). usage: idle.sh BASE_BINARY NEW_BINARY OUTDIR [REPS]
# `moirai run syn --rate 1000 --duration 20s` under dynamic:2 and dedicated, base and new
# alternating: cpu_cores (the process over the measured window, tick-sampled), the CPU of every
# thread from /proc/<pid>/task/*/schedstat over 10 s from the 8th second (ns-exact), and the
# wake-ups per second of all threads over the same 10 s.
set -u
base=$1; new=$2; out=$3; reps=${4:-3}
idle=$(cd "$(dirname "$0")/../idle" && pwd)
mkdir -p "$out"
csv="$out/lowrate.csv"
echo "rep,threading,binary,cpu_cores,sched_cores,wakeups_per_s,e2e_p50_ms,e2e_p99_ms" > "$csv"
field() { python3 -c "import json,sys;d=json.loads(open(sys.argv[1]).read().strip().splitlines()[-1]);print(eval(sys.argv[2]))" "$@"; }
for rep in $(seq 1 "$reps"); do
  for model in dynamic:2 dedicated; do
    for bin in base new; do
      b=$base; [ $bin = new ] && b=$new
      tag="low-${model/:/}-$bin-$rep"
      $b run syn --rate 1000 --threading $model --duration 20s --json > "$out/$tag.json" 2>/dev/null &
      pid=$!
      sleep 8
      python3 "$idle/threadcpu.py" $pid 10 > "$out/$tag.cpu" &
      python3 "$idle/wakeups.py" $pid 10 > "$out/$tag.wakeups"
      wait
      echo "$rep,$model,$bin,$(field "$out/$tag.json" "d['cpu_cores']"),$(awk '$1=="total"{print $2}' "$out/$tag.cpu"),$(awk '$1=="total"{print $3}' "$out/$tag.wakeups"),$(field "$out/$tag.json" "d['e2e_latency_ms']['p50']"),$(field "$out/$tag.json" "d['e2e_latency_ms']['p99']")" | tee -a "$csv"
    done
  done
done

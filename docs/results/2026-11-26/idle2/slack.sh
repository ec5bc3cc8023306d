#!/usr/bin/env bash
# The source's timer slack at low and middle rates: CPU, wake-ups and e2e latency of the
# 7-operator SYN (`moirai run syn --rate R --duration 20s`), base and new binaries with several
# --source-slack values, alternating within each repetition.
# usage: slack.sh BASE_BINARY NEW_BINARY OUTDIR [REPS] (RATES="1000 10000", SLACKS="0 500us 1ms 2ms",
# MODELS="dynamic:2 dedicated")
# The CPU of every thread comes from /proc/<pid>/task/*/schedstat over 10 s from the 8th second
# (ns-exact, ../idle/threadcpu.py), the wake-ups from the threads' voluntary context switches over
# the same 10 s (../idle/wakeups.py).
set -u
base=$1; new=$2; out=$3; reps=${4:-3}
rates=${RATES:-1000 10000}; slacks=${SLACKS:-0 500us 1ms 2ms}; models=${MODELS:-dynamic:2 dedicated}
idle=$(cd "$(dirname "$0")/../idle" && pwd)
mkdir -p "$out"
csv="$out/slack.csv"
[ -f "$csv" ] || echo "rep,rate,threading,binary,slack,cpu_cores,sched_cores,wakeups_per_s,e2e_p50_ms,e2e_p99_ms,egress_tps" > "$csv"
field() { python3 -c "import json,sys;d=json.loads(open(sys.argv[1]).read().strip().splitlines()[-1]);print(eval(sys.argv[2]))" "$@"; }
for rep in $(seq 1 "$reps"); do
  for rate in $rates; do
    for model in $models; do
      for variant in base $slacks; do
        if [ $variant = base ]; then cmd=("$base" run syn); bin=base; slack=-
        else cmd=("$new" run syn --source-slack "$variant"); bin=new; slack=$variant; fi
        tag="r$rate-${model/:/}-$bin-$slack-$rep"
        "${cmd[@]}" --rate "$rate" --threading "$model" --duration 20s --json > "$out/$tag.json" 2>/dev/null &
        pid=$!
        sleep 8
        python3 "$idle/threadcpu.py" $pid 10 > "$out/$tag.cpu" &
        python3 "$idle/wakeups.py" $pid 10 > "$out/$tag.wakeups"
        wait
        echo "$rep,$rate,$model,$bin,$slack,$(field "$out/$tag.json" "d['cpu_cores']"),$(awk '$1=="total"{print $2}' "$out/$tag.cpu"),$(awk '$1=="total"{print $3}' "$out/$tag.wakeups"),$(field "$out/$tag.json" "d['e2e_latency_ms']['p50']"),$(field "$out/$tag.json" "d['e2e_latency_ms']['p99']"),$(field "$out/$tag.json" "d['egress_tps']")" | tee -a "$csv"
        rm -f "$out/$tag.json"
      done
    done
  done
done

#!/usr/bin/env bash
# What `-v` costs where the values change every round: the Lachesis SYN on moirai's engine at
# 46k tuples/s (past its saturation point here), `moirai schedule --policy qs --period 200ms
# --activation always`, quiet and -v, two builds interleaved in each repetition; ms of CPU a round
# from the middleware's own /metrics between 5 s and 20 s after its start, and the -v lines it
# wrote. Run alone, from the repository's root; ~1.5 min a repetition. Ports 39464/39465.
# usage: active.sh BASE NEW OUT.csv [REPS]   (absolute paths to release builds of moirai)
set -u
base=$1; new=$2; out=$3; reps=${4:-3}
tmp=$(mktemp -d)
[ -f "$out" ] || echo "rep,build,log,ms_per_round,lines" > "$out"
scrape() { curl -s http://127.0.0.1:39465/metrics | awk '/^moirai_schedule_cpu_seconds_total/{c=$2} /^moirai_schedule_rounds_total/{r=$2} END{print c, r}'; }
for r in $(seq 1 "$reps"); do for b in base new; do for v in quiet verbose; do
  M=$base; [ $b = new ] && M=$new
  flag=""; [ $v = verbose ] && flag="-v"
  $M run syn --lachesis --rate 46000 --duration 28s --metrics-addr 127.0.0.1:39464 > /dev/null 2>&1 & E=$!
  sleep 2
  $M schedule --engine http://127.0.0.1:39464 --policy qs --period 200ms --activation always $flag \
    --metrics-addr 127.0.0.1:39465 --state-file "$tmp/state.json" > "$tmp/mw.log" 2>&1 & W=$!
  sleep 5; a=$(scrape); sleep 15; z=$(scrape)
  kill -INT $W; wait $W; kill $E 2>/dev/null; wait $E 2>/dev/null
  ms=$(python3 -c "a='$a'.split(); z='$z'.split(); print('%.2f' % ((float(z[0])-float(a[0]))*1000/(float(z[1])-float(a[1]))))")
  echo "$r,$b,$v,$ms,$(grep -c "policy 'qs'" "$tmp/mw.log")" | tee -a "$out"
  sleep 1
done; done; done
rm -rf "$tmp"

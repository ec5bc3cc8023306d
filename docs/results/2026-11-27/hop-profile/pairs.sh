#!/usr/bin/env bash
# BASE and NEW side by side on one `moirai run syn` case, alternating within each repetition;
# appends rep,binary,cpu_cores,ingress_tps,e2e_p50_ms,e2e_p99_ms to OUT.csv. Run alone on the
# machine. usage: pairs.sh BASE NEW OUT.csv REPS SYN_ARGS...
set -u
base=$1; new=$2; out=$3; reps=$4; shift 4
[ -f "$out" ] || echo "rep,binary,cpu_cores,ingress_tps,e2e_p50_ms,e2e_p99_ms" > "$out"
for rep in $(seq 1 "$reps"); do
  for which in base new; do
    bin=$base; [ "$which" = new ] && bin=$new
    "$bin" run syn "$@" --json 2>/dev/null | tail -1 | python3 -c "
import json, sys
d = json.load(sys.stdin); e = d['e2e_latency_ms']
print('$rep,$which,%.5f,%.1f,%.3f,%.3f' % (d['cpu_cores'], d['ingress_tps'], e['p50'], e['p99']))" >> "$out"
    tail -1 "$out"
  done
done

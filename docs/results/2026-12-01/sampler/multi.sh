#!/usr/bin/env bash
# Builds side by side on one `moirai run syn` case, alternating within each repetition; appends
# rep,binary,cpu_cores,ingress_tps,e2e_p50_ms,e2e_p99_ms,op_cpu_ns_per_tuple to OUT.csv, where
# cpu_cores is the whole process's CPU over the measured window and op_cpu_ns_per_tuple the
# operator threads' CPU (the pool workers' shares) per source tuple over the whole run.
# Run alone on the machine. usage: multi.sh OUT.csv REPS "label=binary ..." SYN_ARGS...
set -u
out=$1; reps=$2; bins=$3; shift 3
[ -f "$out" ] || echo "rep,binary,cpu_cores,ingress_tps,e2e_p50_ms,e2e_p99_ms,op_cpu_ns_per_tuple" > "$out"
for rep in $(seq 1 "$reps"); do
  for lb in $bins; do
    label=${lb%%=*}; bin=${lb#*=}
    "$bin" run syn "$@" --json 2>/dev/null | tail -1 | python3 -c "
import json, sys
d = json.load(sys.stdin); e = d['e2e_latency_ms']
print('$rep,$label,%.5f,%.1f,%.3f,%.3f,%.0f' % (d['cpu_cores'], d['ingress_tps'], e['p50'], e['p99'], d['cpu_ns_per_tuple']))" >> "$out"
    tail -1 "$out"
  done
done

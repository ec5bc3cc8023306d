#!/usr/bin/env bash
# The CPU of a task turn as the pipeline grows, at the same number of turns a second
# (100 operators at 10 000 tuples/s, 1 000 at 1 000, 10 000 at 100: 1 M turns/s, batches of one
# tuple), under dynamic:1 and dynamic:2. Run alone on the machine.
# usage: sweep.sh MOIRAI_BINARY OUT.csv [REPS]
set -u
bin=$1; out=$2; reps=${3:-3}
echo "rep,ops,threading,cpu_cores,ns_per_turn" > "$out"
for rep in $(seq 1 "$reps"); do
  for ops in 100 1000 10000; do
    rate=$((1000000 / ops))
    for th in dynamic:1 dynamic:2; do
      "$bin" run syn --ops $ops --cost-ns 0 --rate $rate --duration 8s --threading $th --json 2>/dev/null | tail -1 |
        python3 -c "
import json, sys
d = json.load(sys.stdin)
print('$rep,$ops,$th,%.4f,%.0f' % (d['cpu_cores'], d['cpu_cores'] * 1e9 / (d['ingress_tps'] * ($ops + 2))))" >> "$out"
      tail -1 "$out"
    done
  done
done

#!/usr/bin/env bash
# The Lachesis SYN (20 queries x 3 operators: 100 tasks, cut into 2 segments of 10 queries under
# dynamic:2) near and past os's saturation, before and after the cut, interleaved.
# usage: lachesis.sh BASE_BINARY NEW_BINARY OUTDIR [REPS]   (run alone; ~5 min at 3 reps)
set -u
base=$1; new=$2; out=$3; reps=${4:-3}
mkdir -p "$out"
csv="$out/lachesis.csv"
echo "rep,rate,binary,ingress_tps,egress_tps,cpu_cores,e2e_p50_ms,e2e_p99_ms" > "$csv"
for rep in $(seq 1 "$reps"); do
  for rate in ${RATES:-51400 57900 61000 64000}; do
    for bin in base new; do
      b=$base; [ "$bin" = new ] && b=$new
      json="$out/$rate-$bin-$rep.json"
      timeout 120 $b run syn --lachesis --rate $rate --duration 10s --threading dynamic:2 --json > "$json" 2>/dev/null
      python3 - "$json" $rep $rate $bin >> "$csv" <<'PY'
import json, sys
f, rep, rate, binary = sys.argv[1:]
try:
    d = json.loads(open(f).read().strip().splitlines()[-1])
    e = d["e2e_latency_ms"]
    print(f"{rep},{rate},{binary},{d['ingress_tps']:.0f},{d['egress_tps']:.0f},{d['cpu_cores']:.3f},{e['p50']:.3f},{e['p99']:.3f}")
except Exception:
    print(f"{rep},{rate},{binary},,,,,")
PY
      tail -1 "$csv"
    done
  done
done

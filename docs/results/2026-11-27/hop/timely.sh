#!/usr/bin/env bash
# moirai against timely-dataflow (bench/timely) on the same pipelines, interleaved, side by side.
# usage: timely.sh MOIRAI_BINARY TIMELY_BINARY OUTDIR [REPS]      (run it alone on the machine)
#   MOIRAI_BINARY: target/release/moirai; TIMELY_BINARY: bench/timely/target/release/timely-syn
# Cases: the raw 5-operator pipeline as fast as it goes (moirai --chaining and dynamic:2, with and
# without --parallelism 2; timely with 1 and 2 workers), and the hand-off at low rates (10 000
# operators at 100 tuples/s, 100 operators at 10 000 tuples/s; moirai dynamic:1 and dynamic:2,
# timely 1 and 2 workers; timely's W workers each run a copy of the pipeline with 1/W of the rate).
set -u
moirai=$1; timely=$2; out=$3; reps=${4:-3}
mkdir -p "$out"
csv="$out/hop.csv"
echo "rep,case,args,binary,ingress_tps,egress_tps,cpu_cores,e2e_p50_ms,e2e_p99_ms" > "$csv"
run() {  # rep case binary-name command...
  local rep=$1 case=$2 name=$3; shift 3
  timeout 300 "$@" --json > "$out/$case-$name-$rep.json" 2>/dev/null
  python3 - "$out/$case-$name-$rep.json" "$rep" "$case" "${*:2}" "$name" >> "$csv" <<'PY'
import json, sys
f, rep, case, args, name = sys.argv[1:]
try:
    d = json.loads(open(f).read().strip().splitlines()[-1])
    e = d["e2e_latency_ms"]
    print(f"{rep},{case},{args},{name},{d['ingress_tps']:.0f},{d['egress_tps']:.0f},{d['cpu_cores']:.4f},{e['p50']:.3f},{e['p99']:.3f}")
except Exception:
    print(f"{rep},{case},{args},{name},,,,,")
PY
  tail -1 "$csv"
}
for rep in $(seq 1 "$reps"); do
  run $rep raw moirai-chaining "$moirai" run syn --ops 5 --cost-ns 0 --rate 0 --duration 5s --chaining
  run $rep raw moirai-dynamic2 "$moirai" run syn --ops 5 --cost-ns 0 --rate 0 --duration 5s --threading dynamic:2
  run $rep raw moirai-dynamic2-p2 "$moirai" run syn --ops 5 --cost-ns 0 --rate 0 --duration 5s --threading dynamic:2 --parallelism 2
  run $rep raw timely-w1 "$timely" --ops 5 --rate 0 --duration 5s --workers 1
  run $rep raw timely-w2 "$timely" --ops 5 --rate 0 --duration 5s --workers 2
  for c in "10000 100" "100 10000"; do
    set -- $c
    run $rep "handoff-$1-$2" moirai-dynamic1 "$moirai" run syn --ops $1 --cost-ns 0 --rate $2 --duration 10s --threading dynamic:1
    run $rep "handoff-$1-$2" moirai-dynamic2 "$moirai" run syn --ops $1 --cost-ns 0 --rate $2 --duration 10s --threading dynamic:2
    run $rep "handoff-$1-$2" timely-w1 "$timely" --ops $1 --rate $2 --duration 10s --workers 1
    run $rep "handoff-$1-$2" timely-w2 "$timely" --ops $1 --rate $2 --duration 10s --workers 2
  done
done

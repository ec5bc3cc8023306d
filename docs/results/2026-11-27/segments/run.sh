#!/usr/bin/env bash
# `dynamic` cutting a long graph into one segment per worker (issue 27), before and after, side
# by side: BASE and NEW alternate within each repetition. Run alone on the machine, from the
# repository's root, after building both binaries; ~15 min at 3 repetitions.
# usage: run.sh BASE_BINARY NEW_BINARY OUTDIR [REPS]
# The CSV has the columns of docs/results/2026-11-26/hop/run.sh, so that
# docs/results/2026-11-27/hop/summary.py summarises it (ns of CPU a hop for the handoff cases).
set -u
base=$1; new=$2; out=$3; reps=${4:-3}
mkdir -p "$out"
csv="$out/hop.csv"
echo "rep,case,args,binary,ingress_tps,egress_tps,cpu_cores,e2e_p50_ms,e2e_p99_ms" > "$csv"
run() {  # rep case binary args...
  local rep=$1 case=$2 bin=$3; shift 3
  local b=$base; [ "$bin" = new ] && b=$new
  local tag="$case-$bin-$rep"
  timeout 300 $b run syn "$@" --json > "$out/$tag.json" 2>/dev/null
  python3 - "$out/$tag.json" "$rep" "$case" "$*" "$bin" >> "$csv" <<'PY'
import json, sys
f, rep, case, args, binary = sys.argv[1:]
try:
    d = json.loads(open(f).read().strip().splitlines()[-1])
    e = d["e2e_latency_ms"]
    print(f"{rep},{case},{args},{binary},{d['ingress_tps']:.0f},{d['egress_tps']:.0f},{d['cpu_cores']:.4f},{e['p50']:.3f},{e['p99']:.3f}")
except Exception as x:
    print(f"{rep},{case},{args},{binary},,,,,")
PY
  tail -1 "$csv"
}
D=8s
for rep in $(seq 1 "$reps"); do
  for bin in base new; do
    # Cut into segments (>= 8 tasks per worker): IBM's 1 000-operator pipeline and its wide graph
    # (20 pipelines of 50) as fast as they go, and long pipelines at fixed rates.
    run $rep ibm-1000-dynamic2 $bin --ops 1000 --cost-ns 0 --rate 0 --duration $D --threading dynamic:2
    run $rep wide-20x50-dynamic2 $bin --queries 20 --ops 50 --cost-ns 0 --rate 0 --duration $D --threading dynamic:2
    run $rep pipe-50-rate0 $bin --ops 50 --cost-ns 0 --rate 0 --duration $D --threading dynamic:2
    run $rep pipe-50-3M $bin --ops 50 --cost-ns 0 --rate 3000000 --duration $D --threading dynamic:2
    run $rep pipe-100-1.5M $bin --ops 100 --cost-ns 0 --rate 1500000 --duration $D --threading dynamic:2
    run $rep pipe-20x100ns-0.7M $bin --ops 20 --cost-ns 100 --rate 700000 --duration $D --threading dynamic:2
    run $rep pipe-14x200ns-0.5M $bin --ops 14 --cost-ns 200 --rate 500000 --duration $D --threading dynamic:2
    run $rep handoff-1000-100 $bin --ops 1000 --cost-ns 0 --rate 100 --duration $D --threading dynamic:2
    run $rep handoff-10000-100 $bin --ops 10000 --cost-ns 0 --rate 100 --duration $D --threading dynamic:2
    # Not cut (fewer than 8 tasks per worker; controls): the 3 x 500 ns pipeline, 10 x 200 ns.
    run $rep lat-3x500ns-1.2M $bin --ops 3 --cost-ns 500 --rate 1200000 --duration $D --threading dynamic:2
    run $rep lat-10x200ns-0.7M $bin --ops 10 --cost-ns 200 --rate 700000 --duration $D --threading dynamic:2
  done
  # The reference IBM compares with (no change: one thread per operator), once per repetition.
  run $rep ibm-1000-dedicated new --ops 1000 --cost-ns 0 --rate 0 --duration $D --threading dedicated
  run $rep wide-20x50-dedicated new --queries 20 --ops 50 --cost-ns 0 --rate 0 --duration $D --threading dedicated
done

#!/usr/bin/env bash
# The cost of a hop in moirai's pools before and after issue 27 item 2, side by side,
# interleaved (base, new alternating within each repetition).
# usage: [CASES="handoff ibm raw lat"] run.sh BASE_BINARY NEW_BINARY OUTDIR [REPS]
#   (run it alone on the machine; ~20 min at 3 reps for all four groups)
#
# 1. Hand-off at low rates: `moirai run syn --ops N --cost-ns 0 --rate R --threading dynamic:2`
#    for N = 1 000 and 10 000 at R = 10 and 100 tuples/s (N x R tuple-hops a second, a few
#    tuples in flight at a time: batches of one tuple). CPU per operator per tuple =
#    cpu_cores / (N x R). Plus N = 10 000 at 1 000 tuples/s, where the base could not keep up.
# 2. IBM Streams' 1 000-operator trivial pipeline as fast as it goes (`--cost-ns 0 --rate 0`):
#    `dedicated` and `dynamic:2`, and `--chaining` (one thread, no hand-off: one core's bound).
# 3. The raw 5-operator pipeline (`--ops 5 --cost-ns 0 --rate 0`): `--chaining`, `dedicated`,
#    `dynamic:2`, `dynamic:2 --parallelism 2`.
# 4. Latency: the 3 x 500 ns pipeline under `dynamic:2` at 0.5, 0.9 and 1.2 M tuples/s.
set -u
base=$1; new=$2; out=$3; reps=${4:-3}
groups=${CASES:-handoff ibm raw lat}
want() { [[ " $groups " == *" $1 "* ]]; }
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
for rep in $(seq 1 "$reps"); do
  for bin in base new; do
    if want handoff; then
      for ops in 1000 10000; do
        for rate in 10 100; do
          run $rep "handoff-$ops-$rate" $bin --ops $ops --cost-ns 0 --rate $rate --duration 10s --threading dynamic:2
        done
      done
      run $rep "handoff-10000-1000" $bin --ops 10000 --cost-ns 0 --rate 1000 --duration 10s --threading dynamic:2
    fi
    if want ibm; then
      for m in dedicated dynamic:2; do
        run $rep "ibm-1000-${m/:/}" $bin --ops 1000 --cost-ns 0 --rate 0 --duration 10s --threading $m
      done
      # The same pipeline fused into one thread: no hand-off at all, one core's bound.
      run $rep "ibm-1000-chaining" $bin --ops 1000 --cost-ns 0 --rate 0 --duration 10s --chaining
    fi
    if want raw; then
      run $rep "raw-chaining" $bin --ops 5 --cost-ns 0 --rate 0 --duration 5s --chaining
      run $rep "raw-dedicated" $bin --ops 5 --cost-ns 0 --rate 0 --duration 5s --threading dedicated
      run $rep "raw-dynamic2" $bin --ops 5 --cost-ns 0 --rate 0 --duration 5s --threading dynamic:2
      run $rep "raw-dynamic2-p2" $bin --ops 5 --cost-ns 0 --rate 0 --duration 5s --threading dynamic:2 --parallelism 2
    fi
    if want lat; then
      for rate in 500000 900000 1200000; do
        run $rep "lat-$rate" $bin --ops 3 --cost-ns 500 --rate $rate --duration 10s --threading dynamic:2
      done
    fi
  done
done

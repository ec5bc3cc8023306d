#!/usr/bin/env bash
# IBM Streams 4.2's experiments (their Fig. 8-10) on this machine: a pure pipeline of 1 000
# operators and a wide graph (20 pipelines of 50), each with a trivial cost (0 ns, default
# channels) and a heavy one (1 us per tuple per operator, channels of 16 tuples in batches of 4 so
# that the drain after the run stays short), as fast as possible; dedicated vs dynamic at 1 and 2 threads vs fused vs
# elastic, alternated per repetition; plus the 7-operator SYN at 1 000 tuples/s for the CPU an
# idle-ish pool costs. Run from the repository's root after `cargo build --release -p moirai-cli`.
set -u
M=${M:-target/release/moirai}; OUT=${OUT:-/tmp/ibm}; REPS=${REPS:-3}; D=${D:-10s}
mkdir -p "$OUT"
MODELS="dedicated dynamic:1 dynamic:2 fused elastic"
for rep in $(seq 1 "$REPS"); do
  for graph in "pipe:--ops 1000" "wide:--queries 20 --ops 50"; do
    name=${graph%%:*}; args=${graph#*:}
    for cost in 0 1000; do
      ch=""; [ $cost -gt 0 ] && ch="--channel-capacity 16 --batch-size 4"
      for m in $MODELS; do
        $M run syn $args --cost-ns $cost $ch --rate 0 --duration $D --threading $m --json 2>/dev/null | tail -1 \
          > "$OUT/$name-$cost-${m//:/_}-$rep.json"
      done
    done
  done
  for m in dedicated dynamic:2; do
    $M run syn --ops 5 --rate 1000 --duration $D --threading $m --json 2>/dev/null | tail -1 > "$OUT/low-${m//:/_}-$rep.json"
  done
done
# Elastic settling: 40 s on the 1 000-operator pipeline, every decision logged.
$M run syn --ops 1000 --cost-ns 0 --rate 0 --duration 40s --warmup 0.75 --threading elastic -v --json \
  2> "$OUT/settle-elastic.log" | tail -1 > "$OUT/settle-elastic.json"
python3 - "$OUT" <<'PY'
import json, sys, glob, statistics as st, collections
out = sys.argv[1]
rows = collections.defaultdict(list)
for f in glob.glob(f"{out}/*.json"):
    base = f.split("/")[-1][:-5]
    key, rep = base.rsplit("-", 1)
    try:
        rows[key].append(json.load(open(f)))
    except Exception:
        pass
def med(key, field):
    v = [r[field] for r in rows[key]]
    return st.median(v) if v else float("nan")
print("graph  cost_ns  model        ingress/s (median)  vs dedicated  cores")
for name in ["pipe", "wide"]:
    for cost in ["0", "1000"]:
        base = med(f"{name}-{cost}-dedicated", "ingress_tps")
        for m in ["dedicated", "dynamic_1", "dynamic_2", "fused", "elastic"]:
            k = f"{name}-{cost}-{m}"
            t = med(k, "ingress_tps")
            print(f"{name:5}  {cost:7}  {m:11}  {t:18.0f}  {t/base:11.2f}x  {med(k, 'cpu_cores'):.2f}")
for m in ["dedicated", "dynamic_2"]:
    print(f"low rate 1000/s  {m:10}  cores median {med('low-'+m, 'cpu_cores'):.4f}  ingress {med('low-'+m, 'ingress_tps'):.0f}")
try:
    r = json.load(open(f"{out}/settle-elastic.json"))
    print("elastic settling (1 000-operator pipeline, 40 s): level per second", [p["thread_level"] for p in r["timeline"]])
    print("  throughput per second", [round(p["ingress_tps"]) for p in r["timeline"]])
    print("  level changes", [(round(c["at_s"], 1), c["from"], c["to"], c["reason"]) for c in r["level_changes"]])
    print(f"  ingress over the last 10 s {r['ingress_tps']:.0f}/s")
except Exception as e:
    print("no settling run:", e)
PY

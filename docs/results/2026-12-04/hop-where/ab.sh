#!/usr/bin/env bash
# Two or more builds side by side on issue 27's hop: the 10 000-operator SYN pipeline (cost 0)
# under dynamic:2 at 10 and 100 tuples/s, process CPU per operator per tuple (ns), the builds
# alternating within each repetition; prints the medians. Run alone on the machine.
# usage: ab.sh OUTDIR REPS BINARY_A BINARY_B [...]   (~40 s a build and repetition)
set -u
out=$1; reps=$2; shift 2
mkdir -p "$out"
csv=$out/ab.csv
echo "rep,bin,rate,ns_per_op" > "$csv"
for rep in $(seq 1 "$reps"); do
  for rate in 10 100; do
    for bin in "$@"; do
      ns=$("$bin" run syn --ops 10000 --cost-ns 0 --rate "$rate" --duration 8s --threading dynamic:2 --json 2>/dev/null \
        | tail -1 | python3 -c "import json, sys; d = json.load(sys.stdin); print('%.1f' % (d['cpu_cores'] / (10000 * $rate) * 1e9))")
      echo "$rep,$(basename "$bin"),$rate,$ns" | tee -a "$csv"
    done
  done
done
python3 - "$csv" <<'PY'
import collections, csv, statistics, sys
runs = collections.defaultdict(list)
for r in csv.DictReader(open(sys.argv[1])):
    runs[(r["bin"], int(r["rate"]))].append(float(r["ns_per_op"]))
for (build, rate), ns in sorted(runs.items()):
    print(f"{build} at {rate} tuples/s: median {statistics.median(ns):.1f} ns of {ns}")
PY

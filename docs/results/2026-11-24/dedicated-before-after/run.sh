#!/usr/bin/env bash
# The dedicated model before (blocking sends, BASE) and after (tasks that never block, NEW) the
# non-blocking rewrite: the same SYN runs alternated A B A B, raw JSON kept. Build both binaries
# with `cargo build --release -p moirai-cli` (BASE from the commit before the change).
set -u
BASE=${BASE:?path of the moirai binary before}; NEW=${NEW:-target/release/moirai}; OUT=${OUT:-/tmp/dedicated}
mkdir -p "$OUT"
for i in 1 2 3 4 5; do
  for v in base new; do
    bin=$BASE; [ $v = new ] && bin=$NEW
    # Raw: 5 operators, no cost, as fast as possible.
    $bin run syn --ops 5 --cost-ns 0 --rate 0 --duration 6s --json | tail -1 > "$OUT/raw-$v-$i.json"
    # The Lachesis SYN at a rate near this machine's saturation.
    $bin run syn --lachesis --rate 36000 --duration 10s --json | tail -1 > "$OUT/lachesis-$v-$i.json"
  done
done
python3 - "$OUT" <<'PY'
import json, sys, glob, statistics as st
out = sys.argv[1]
for kind in ["raw", "lachesis"]:
    for v in ["base", "new"]:
        runs = [json.load(open(f)) for f in sorted(glob.glob(f"{out}/{kind}-{v}-*.json"))]
        tps = [r["ingress_tps"] for r in runs]; p99 = [r["e2e_latency_ms"]["p99"] for r in runs]
        cores = [r["cpu_cores"] for r in runs]
        print(f"{kind:9} {v:4}  ingress median {st.median(tps):12.0f}  [{min(tps):.0f} - {max(tps):.0f}]  e2e p99 median {st.median(p99):9.2f} ms  cores {st.median(cores):.2f}")
PY

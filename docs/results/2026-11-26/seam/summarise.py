#!/usr/bin/env python3
"""Medians of the runs run.sh left in OUT, base against new (ratio new/base)."""
import csv, glob, json, os, statistics as st, sys

out = sys.argv[1] if len(sys.argv) > 1 else "/tmp/seam-bench"
print("raw 5-operator pipeline (syn --ops 5 --cost-ns 0 --rate 0, 6 s), medians over repetitions")
print(f"{'threading':10} {'bin':4} {'reps':>4} {'egress tuples/s':>16} {'range':>27} {'e2e p99 ms':>11} {'cores':>6}")
for th in ["dedicated", "chaining", "dynamic2"]:
    med = {}
    for v in ["base", "new"]:
        runs = [json.load(open(f)) for f in sorted(glob.glob(f"{out}/raw-{th}-{v}-*.json")) if os.path.getsize(f)]
        if not runs:
            continue
        tps = [r["egress_tps"] for r in runs]
        p99 = [r["e2e_latency_ms"]["p99"] for r in runs]
        cores = [r["cpu_cores"] for r in runs]
        med[v] = st.median(tps)
        print(f"{th:10} {v:4} {len(runs):4} {st.median(tps):16.0f} {min(tps):12.0f} - {max(tps):12.0f} "
              f"{st.median(p99):11.2f} {st.median(cores):6.2f}")
    if len(med) == 2:
        # Load on this shared machine drifts over a run: the ratio within each pair (base and new
        # run back to back) is the robust figure.
        pairs = []
        for f in sorted(glob.glob(f"{out}/raw-{th}-base-*.json")):
            g = f.replace("-base-", "-new-")
            if os.path.exists(g) and os.path.getsize(f) and os.path.getsize(g):
                pairs.append(json.load(open(g))["egress_tps"] / json.load(open(f))["egress_tps"])
        print(f"{th:10} new/base egress: ratio of medians {med['new'] / med['base']:.3f}, "
              f"median of paired ratios {st.median(pairs):.3f} over {len(pairs)} pairs")
print()
print("Lachesis SYN (20 x 3), moirai bench at 36k and 45k tuples/s, 10 s per point, medians over repetitions")
rows = {}
for v in ["base", "new"]:
    for f in sorted(glob.glob(f"{out}/lachesis-{v}-*/results.csv")):
        for r in csv.DictReader(open(f)):
            if r["ok"] != "true":
                continue
            rows.setdefault((r["configuration"], float(r["rate"]), v), []).append(r)
print(f"{'config':14} {'rate':>6} {'bin':4} {'reps':>4} {'ingress/s':>10} {'e2e p99 ms':>11} {'e2e p50 ms':>11} {'cores':>6}")
for config in ["os", "qs", "os@dynamic:2", "qs@policy:2"]:
    for rate in [36000.0, 45000.0]:
        med = {}
        for v in ["base", "new"]:
            rs = rows.get((config, rate, v), [])
            if not rs:
                continue
            ing = st.median(float(r["ingress_tps"]) for r in rs)
            p99 = st.median(float(r["e2e_p99_ms"]) for r in rs)
            p50 = st.median(float(r["e2e_p50_ms"]) for r in rs)
            cores = st.median(float(r["engine_cpu_cores"]) for r in rs)
            med[v] = (ing, p99)
            print(f"{config:14} {rate:6.0f} {v:4} {len(rs):4} {ing:10.0f} {p99:11.1f} {p50:11.1f} {cores:6.2f}")
        if len(med) == 2:
            print(f"{config:14} {rate:6.0f} new/base ingress {med['new'][0] / med['base'][0]:.3f}, "
                  f"e2e p99 {med['new'][1] / med['base'][1]:.2f}")

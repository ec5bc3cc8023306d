#!/usr/bin/env python3
"""Medians per case and binary from run.sh's hop.csv, and new/base ratios.
usage: summary.py OUTDIR/hop.csv"""
import csv, statistics as st, sys, collections

rows = collections.defaultdict(list)
for r in csv.DictReader(open(sys.argv[1])):
    if r["cpu_cores"]:
        rows[(r["case"], r["binary"])].append(r)

def med(rs, k):
    return st.median(float(r[k]) for r in rs)

print("| case | binary | n | ingress tuples/s | cpu cores | ns of CPU per operator per tuple | e2e p50 ms | e2e p99 ms |")
print("|---|---|---|---|---|---|---|---|")
for case in dict.fromkeys(c for c, _ in rows):
    for b in ("base", "new"):
        rs = rows.get((case, b))
        if not rs:
            continue
        per_hop = ""
        if case.startswith("handoff"):
            _, ops, rate = case.split("-")
            per_hop = f"{st.median(float(r['cpu_cores']) * 1e9 / (int(ops) * int(rate)) for r in rs):.0f}"
        print(f"| {case} | {b} | {len(rs)} | {med(rs, 'ingress_tps'):.0f} | {med(rs, 'cpu_cores'):.3f} | {per_hop} | "
              f"{med(rs, 'e2e_p50_ms'):.3f} | {med(rs, 'e2e_p99_ms'):.3f} |")

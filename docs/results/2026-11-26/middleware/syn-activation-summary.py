#!/usr/bin/env python3
"""Medians per (configuration, rate) of syn-activation/results.csv and the ratios qs/os:
python3 docs/results/2026-11-26/middleware/syn-activation-summary.py DIR > DIR/../syn-activation.md"""
import csv, statistics, sys
from collections import defaultdict

rows = list(csv.DictReader(open(f"{sys.argv[1]}/results.csv")))
by = defaultdict(list)
for r in rows:
    by[(r["configuration"], float(r["rate"]))].append(r)
configs = list(dict.fromkeys(r["configuration"] for r in rows))
rates = sorted({float(r["rate"]) for r in rows})

def med(rs, k):
    v = [float(r[k]) for r in rs if r["ok"] == "true" and r[k] not in ("", "nan")]
    return statistics.median(v) if v else float("nan")

print("| rate/s | configuration | reps ok | ingress/s | e2e p50 ms | × os | e2e p99 ms | × os | engine cores | middleware % core |")
print("|---|---|---|---|---|---|---|---|---|---|")
for rate in rates:
    base = by[(configs[0], rate)]
    for c in configs:
        rs = by[(c, rate)]
        ok = sum(r["ok"] == "true" for r in rs)
        p50, p99 = med(rs, "e2e_p50_ms"), med(rs, "e2e_p99_ms")
        mw = med(rs, "middleware_cpu_share")
        print(f"| {rate:.0f} | {c} | {ok}/{len(rs)} | {med(rs, 'ingress_tps'):.0f} | {p50:.2f} | {p50 / med(base, 'e2e_p50_ms'):.2f} "
              f"| {p99:.2f} | {p99 / med(base, 'e2e_p99_ms'):.2f} | {med(rs, 'engine_cpu_cores'):.2f} | "
              + ("-" if mw != mw else f"{100 * mw:.2f}") + " |")

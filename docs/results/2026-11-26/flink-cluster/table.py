#!/usr/bin/env python3
"""Medians per (rate, configuration) of a sweep's results.csv: ingress, e2e p99, engine CPU, the
middleware's CPU in total and per node (a standalone cluster's middleware_cpu_nodes), and the
ratios qs/os of each deployment. Usage: table.py results.csv"""
import csv, statistics, sys
from collections import defaultdict

rows = list(csv.DictReader(open(sys.argv[1])))
by = defaultdict(list)
for r in rows:
    by[(float(r["rate"]), r["configuration"])].append(r)

def med(rs, key):
    v = [float(r[key]) for r in rs if r["ok"] == "true" and r[key] not in ("", None)]
    return statistics.median(v) if v else None

def fmt(x, f):
    return "-" if x is None else f.format(x)

print("| rate | configuration | ok | ingress/s | e2e p99 ms | engine cores | middleware % core | per node % core |")
print("|---:|---|---:|---:|---:|---:|---:|---|")
configs = list(dict.fromkeys(r["configuration"] for r in rows))
for rate in sorted({k[0] for k in by}):
    for c in configs:
        rs = by.get((rate, c), [])
        ok = sum(r["ok"] == "true" for r in rs)
        nodes = [[float(x) for x in r["middleware_cpu_nodes"].split()] for r in rs if r["ok"] == "true" and r["middleware_cpu_nodes"]]
        per_node = " / ".join(f"{100 * statistics.median(col):.1f}" for col in zip(*nodes)) if nodes else "-"
        mw = med(rs, "middleware_cpu_share")
        print(f"| {rate/1000:g}k | {c} | {ok}/{len(rs)} | {fmt(med(rs, 'ingress_tps'), '{:.0f}')} | "
              f"{fmt(med(rs, 'e2e_p99_ms'), '{:.0f}')} | {fmt(med(rs, 'engine_cpu_cores'), '{:.2f}')} | "
              f"{fmt(None if mw is None else 100 * mw, '{:.1f}')} | {per_node} |")
print()
print("| rate | deployment | qs/os ingress | qs/os e2e p99 |")
print("|---:|---|---:|---:|")
for rate in sorted({k[0] for k in by}):
    for os_c, qs_c, name in [("flink:os/cluster=standalone:2", "flink:qs/cluster=standalone:2", "standalone, 2 nodes"),
                             ("flink:os", "flink:qs", "MiniCluster")]:
        a, b = by.get((rate, os_c), []), by.get((rate, qs_c), [])
        ia, ib, pa, pb = med(a, "ingress_tps"), med(b, "ingress_tps"), med(a, "e2e_p99_ms"), med(b, "e2e_p99_ms")
        r1 = fmt(None if not ia or ib is None else ib / ia, "{:.2f}")
        r2 = fmt(None if not pa or pb is None else pb / pa, "{:.2f}")
        print(f"| {rate/1000:g}k | {name} | {r1} | {r2} |")

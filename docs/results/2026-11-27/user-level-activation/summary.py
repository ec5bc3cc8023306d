#!/usr/bin/env python3
"""Medians per (configuration, rate) of a run.sh output directory, with ratios to os@dynamic:2."""
import collections
import csv
import statistics
import sys

base = "os@dynamic:2"
import os

for name in ("lr", "syn", "syn-high"):
    path = f"{sys.argv[1]}/{name}/results.csv"
    if not os.path.exists(path):
        continue
    rows = list(csv.DictReader(open(path)))
    groups = collections.defaultdict(list)
    for r in rows:
        if r["ok"] == "true":
            groups[(float(r["rate"]), r["configuration"])].append(r)

    def med(rs, col):
        vals = [float(r[col]) for r in rs if r[col] != ""]
        return statistics.median(vals) if vals else float("nan")

    print(f"## {name}\n")
    print("| rate | configuration | reps | ingress | e2e p50 ms | e2e p99 ms | p50 / base | p99 / base | cores | policy active |")
    print("|---|---|---|---|---|---|---|---|---|---|")
    for (rate, config), rs in sorted(groups.items()):
        b = groups.get((rate, base), [])
        p50, p99 = med(rs, "e2e_p50_ms"), med(rs, "e2e_p99_ms")
        ratio = lambda v, col: f"{v / med(b, col):.2f}" if b else "-"
        active = med(rs, "middleware_active_share")
        active = "-" if active != active else f"{active * 100:.0f} %"
        print(f"| {rate:.0f} | {config} | {len(rs)} | {med(rs, 'ingress_tps'):.0f} | {p50:.3f} | {p99:.2f} | "
              f"{ratio(p50, 'e2e_p50_ms')} | {ratio(p99, 'e2e_p99_ms')} | {med(rs, 'engine_cpu_cores'):.2f} | {active} |")
    print()

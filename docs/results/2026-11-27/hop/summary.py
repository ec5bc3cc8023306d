#!/usr/bin/env python3
"""Medians per case and binary of a hop.csv (run.sh of 2026-11-26/hop, or timely.sh here), and
each binary's ratio to the first one named.
usage: summary.py HOP_CSV [BINARY ...]   (default binaries: base new)"""
import collections
import csv
import statistics as st
import sys

path, binaries = sys.argv[1], sys.argv[2:] or ["base", "new"]
rows = collections.defaultdict(list)
for r in csv.DictReader(open(path)):
    if r["cpu_cores"]:
        rows[(r["case"], r["binary"])].append(r)


def med(rs, k):
    return st.median(float(r[k]) for r in rs)


def per_hop(case, rs):
    """ns of CPU per operator per tuple out, for the pipelines with a fixed rate."""
    if not case.startswith("handoff"):
        return None
    ops = int(case.split("-")[1])
    return st.median(float(r["cpu_cores"]) * 1e9 / (ops * float(r["egress_tps"])) for r in rs if float(r["egress_tps"]))


print(f"| case | binary | n | ingress tuples/s | egress tuples/s | egress / {binaries[0]} | cores "
      "| ns of CPU per operator per tuple | e2e p50 ms | e2e p99 ms |")
print("|---|---|---|---|---|---|---|---|---|---|")
for case in dict.fromkeys(c for c, _ in rows):
    first = rows.get((case, binaries[0]))
    for b in binaries:
        rs = rows.get((case, b))
        if not rs:
            continue
        ratio = f"{med(rs, 'egress_tps') / med(first, 'egress_tps'):.2f}" if first else ""
        hop = per_hop(case, rs)
        print(f"| {case} | {b} | {len(rs)} | {med(rs, 'ingress_tps'):.0f} | {med(rs, 'egress_tps'):.0f} | {ratio} "
              f"| {med(rs, 'cpu_cores'):.3f} | {'' if hop is None else f'{hop:.0f}'} "
              f"| {med(rs, 'e2e_p50_ms'):.3f} | {med(rs, 'e2e_p99_ms'):.3f} |")

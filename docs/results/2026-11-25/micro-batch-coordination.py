#!/usr/bin/env python3
"""Medians of micro-batch-coordination.sh's repetitions, as a Markdown table: coordination per
micro-batch at group 1 and group 100 and their ratio, per job and executor count."""
import statistics
import sys
from collections import defaultdict

rows = defaultdict(list)
for line in sys.stdin:
    f = line.split()
    if not f or f[0] == "rep":
        continue
    if f[-1] != "counts_equal_a_naive_count":
        sys.exit(f"a run counted wrongly: {line.strip()}")
    stages, executors, group = int(f[1]), int(f[2]), int(f[3])
    rows[(stages, executors, group)].append(
        dict(total=float(f[6]), coordination=float(f[7]), compute=float(f[8]), decision=float(f[9]))
    )

def median(key, field):
    return statistics.median(r[field] for r in rows[key])

groups = sorted({k[2] for k in rows})
print("| job | executors | " + " | ".join(f"group {g}" for g in groups) + " | ratio 1 → 100 | total ms, 1 → 100 |")
print("|---|---|" + "---|" * len(groups) + "---|---|")
for stages in (1, 2):
    for executors in sorted({k[1] for k in rows}):
        cells = [f"{median((stages, executors, g), 'coordination'):.3f}" for g in groups]
        c1, c100 = median((stages, executors, 1), "coordination"), median((stages, executors, 100), "coordination")
        t1, t100 = median((stages, executors, 1), "total"), median((stages, executors, 100), "total")
        job = "single stage" if stages == 1 else "shuffle"
        print(f"| {job} | {executors} | " + " | ".join(cells) + f" | **{c1 / c100:.1f}×** | {t1:.3f} → {t100:.3f} |")
n = min(len(v) for v in rows.values())
print(f"\nCoordination per micro-batch, ms (median of {n} repetitions per point).")

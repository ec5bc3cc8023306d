#!/usr/bin/env python3
"""Reads micro-batch-ysb-intervals/results.csv (micro-batch-ysb-intervals.sh) and prints, per
rate and scheduling, the e2e (window) p99 at every batch interval, and Drizzle §5.3's reading: the
lowest p99 among the intervals that keep up with the rate (every repetition's ingress at least
95 % of the offered rate and its p99 below 1 s), and group / per-batch at that reading."""
import csv
import re
import statistics
import sys
from collections import defaultdict
from pathlib import Path

path = Path(sys.argv[1] if len(sys.argv) > 1 else Path(__file__).with_name("micro-batch-ysb-intervals") / "results.csv")
runs = defaultdict(list)
for row in csv.DictReader(open(path)):
    if row["ok"] != "true":
        runs[(row["configuration"], float(row["rate"]))].append(None)
        continue
    runs[(row["configuration"], float(row["rate"]))].append(
        (float(row["ingress_tps"]), float(row["e2e_p99_ms"]), float(row["engine_cpu_cores"] or 0))
    )

def scheduling(config):
    m = re.match(r"os@micro-batch:interval=(\d+)ms:group=([^:]+)", config)
    return (m.group(2), int(m.group(1))) if m else ("continuous", 0)

rates = sorted({r for _, r in runs})
table = defaultdict(dict)  # (scheduling, rate) -> interval -> (p99 median, keeps up, cores)
for (config, rate), reps in runs.items():
    group, interval = scheduling(config)
    ok = [r for r in reps if r]
    keeps_up = len(ok) == len(reps) and all(i >= 0.95 * rate and p < 1000 for i, p, _ in ok)
    p99 = statistics.median(p for _, p, _ in ok) if ok else float("inf")
    cores = statistics.median(c for _, _, c in ok) if ok else 0
    table[(group, rate)][interval] = (p99, keeps_up, cores)

print("e2e p99 ms (median of repetitions); * = does not keep up (ingress < 95 % of the rate or p99 >= 1 s)\n")
intervals = sorted({i for v in table.values() for i in v if i})
print("| rate/s | scheduling | " + " | ".join(f"{i} ms" for i in intervals) + " | best that keeps up |")
print("|---|---|" + "---|" * len(intervals) + "---|")
best = {}
for rate in rates:
    for group in sorted({g for g, r in table if r == rate and g != "continuous"}):
        cells, row = [], table[(group, rate)]
        for i in intervals:
            p, up, _ = row.get(i, (float("inf"), False, 0))
            cells.append(f"{p:.1f}" + ("" if up else "*"))
        kept = [(p, i) for i, (p, up, _) in row.items() if up]
        best[(group, rate)] = min(kept) if kept else None
        b = best[(group, rate)]
        print(f"| {rate:.0f} | {group} | " + " | ".join(cells) + " | " + (f"{b[0]:.1f} ms at {b[1]} ms" if b else "none") + " |")
    if ("continuous", rate) in table:
        p, up, c = table[("continuous", rate)][0]
        print(f"| {rate:.0f} | continuous engine | {p:.1f}" + ("" if up else "*") + " |" + " |" * len(intervals))
print("\n| rate/s | per-batch best p99 | group best p99 | group / per-batch |")
print("|---|---|---|---|")
for rate in rates:
    pb, g = best.get(("per-batch", rate)), next((best[k] for k in best if k[1] == rate and k[0] not in ("per-batch", "continuous")), None)
    ratio = f"{g[0] / pb[0]:.2f}" if pb and g else "— (per-batch keeps up at no interval)" if g else "—"
    fmt = lambda b: f"{b[0]:.1f} ms ({b[1]} ms)" if b else "none"
    print(f"| {rate:.0f} | {fmt(pb)} | {fmt(g)} | {ratio} |")

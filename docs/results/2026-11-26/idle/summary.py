#!/usr/bin/env python3
"""Medians and ratios of run.sh's lowrate.csv and latency.csv (new / base), as markdown."""
import csv
import statistics
import sys
from collections import defaultdict

here = sys.argv[1] if len(sys.argv) > 1 else "."
rows = list(csv.DictReader(open(f"{here}/lowrate.csv")))
groups = defaultdict(list)
for r in rows:
    groups[(r["workload"], r["threading"], r["binary"])].append(r)
med = lambda rs, k: statistics.median(float(r[k]) for r in rs)
print("## Low rate (1 000 tuples/s), medians of 3, interleaved\n")
print("| workload | threading | cpu_cores base | new | new/base | schedstat cores base | new | new/base | wake-ups/s base | new | e2e p99 ms base | new |")
print("|---|---|---|---|---|---|---|---|---|---|---|---|")
for wl in ("seven", "lachesis"):
    for model in ("dynamic:2", "dedicated"):
        b, n = groups[(wl, model, "base")], groups[(wl, model, "new")]
        if not b or not n:
            continue
        name = "syn --rate 1000 (7 operators)" if wl == "seven" else "syn --lachesis --rate 1000 (100 operators)"
        c = [med(b, "cpu_cores"), med(n, "cpu_cores")]
        s = [med(b, "sched_cores"), med(n, "sched_cores")]
        w = [med(b, "wakeups_per_s"), med(n, "wakeups_per_s")]
        p = [med(b, "e2e_p99_ms"), med(n, "e2e_p99_ms")]
        print(f"| {name} | {model} | {c[0]:.4f} | {c[1]:.4f} | {c[1] / c[0]:.2f} | {s[0]:.4f} | {s[1]:.4f} | "
              f"{s[1] / s[0]:.2f} | {w[0]:.0f} | {w[1]:.0f} | {p[0]:.2f} | {p[1]:.2f} |")
lat = list(csv.DictReader(open(f"{here}/latency.csv")))
print("\n## 3 operators x 500 ns at 0.9 M tuples/s, dynamic:2, medians of 3, interleaved\n")
print("| binary | ingress tuples/s | e2e p50 ms | e2e p99 ms | cpu_cores |")
print("|---|---|---|---|---|")
m = {}
for b in ("base", "new"):
    rs = [r for r in lat if r["binary"] == b]
    m[b] = [med(rs, k) for k in ("ingress_tps", "e2e_p50_ms", "e2e_p99_ms", "cpu_cores")]
    print(f"| {b} | {m[b][0]:.0f} | {m[b][1]:.3f} | {m[b][2]:.2f} | {m[b][3]:.2f} |")
print(f"| new/base | {m['new'][0] / m['base'][0]:.3f} | {m['new'][1] / m['base'][1]:.2f} | "
      f"{m['new'][2] / m['base'][2]:.2f} | {m['new'][3] / m['base'][3]:.2f} |")

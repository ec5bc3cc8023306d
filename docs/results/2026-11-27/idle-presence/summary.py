#!/usr/bin/env python3
"""Medians per configuration of run.sh's output files, ratios to `os`:
python3 summary.py run1.txt run2.txt"""
import collections
import statistics as st
import sys

for f in sys.argv[1:]:
    runs = collections.defaultdict(list)
    for line in open(f):
        t = line.split()
        if len(t) >= 10 and t[2] == "p50":
            runs[t[0]].append((float(t[3]), float(t[5]), float(t[9])))
    print(f)
    base = None
    for c in ["os", "os-again", "mw", "mw10s", "curl"]:
        v = runs.get(c)
        if not v:
            continue
        p50, p99, cores = (st.median(x[i] for x in v) for i in range(3))
        base = base or (p50, p99)
        per_run = sorted(round(x[1], 1) for x in v)
        print(f"  {c:6} runs {len(v):2}  p50 {p50:.3f} ms ({p50 / base[0]:.2f}x)  "
              f"p99 {p99:.2f} ms ({p99 / base[1]:.2f}x)  engine cores {cores:.3f}  p99 per run {per_run}")

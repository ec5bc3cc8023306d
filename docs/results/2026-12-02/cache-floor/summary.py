"""Medians (range) per case and rate of run.sh's floor.csv. usage: python3 summary.py floor.csv"""
import csv, statistics, sys

rows = list(csv.DictReader(open(sys.argv[1])))
cases = list(dict.fromkeys((r["case"], r["rate"]) for r in rows))
for case, rate in cases:
    xs = [float(r["ns_per_op"]) for r in rows if (r["case"], r["rate"]) == (case, rate)]
    print(f"{case:18} {rate:>4} tuples/s: {statistics.median(xs):6.1f} ns an operator ({min(xs):.1f}-{max(xs):.1f}), {len(xs)} reps")

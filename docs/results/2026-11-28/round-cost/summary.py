#!/usr/bin/env python3
"""Medians and per-pair ratios (new / base) of pairs.sh's CSV files.

    python3 summary.py three.csv one.csv
"""
import csv
import statistics as st
import sys

for path in sys.argv[1:]:
    rows = list(csv.DictReader(open(path)))
    by = {b: {r["rep"]: r for r in rows if r["build"] == b} for b in ("base", "new")}
    mode, period = rows[0]["mode"], rows[0]["period_s"]
    print(f"{path}: {mode}, period {period} s, {len(by['base'])} pairs")
    for col in ("mw_ms_per_round", "engine_answering_ms_per_round", "flink_answering_ms_per_round"):
        base = [float(r[col]) for r in by["base"].values()]
        new = [float(r[col]) for r in by["new"].values()]
        ratios = [float(by["new"][k][col]) / float(by["base"][k][col])
                  for k in by["base"] if k in by["new"] and float(by["base"][k][col]) > 0]
        line = (f"  {col}: base {st.median(base):.2f} ({min(base):.2f}-{max(base):.2f}), "
                f"new {st.median(new):.2f} ({min(new):.2f}-{max(new):.2f})")
        if ratios:
            line += f", new/base per pair {[round(x, 2) for x in ratios]} median {st.median(ratios):.2f}"
        print(line)

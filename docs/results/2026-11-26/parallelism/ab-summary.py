#!/usr/bin/env python3
"""ab-p1.sh's runs as one CSV: ab-p1.csv (series, threading, binary, pair, egress, CPU per tuple).
Usage: ab-summary.py SERIES=DIR ..."""
import glob, json, os, re

here = os.path.dirname(os.path.abspath(__file__))
rows = []
for arg in __import__("sys").argv[1:]:
    series, d = arg.split("=", 1)
    for path in glob.glob(os.path.join(d, "ab-*.json")):
        m = re.match(r"ab-(.+)-(base|new)-(\d+)\.json$", os.path.basename(path))
        v = json.load(open(path))
        rows.append((series, m[1], m[2], int(m[3]), v["egress_tps"] / 1e6, v["cpu_ns_per_tuple"]))
rows.sort()
with open(os.path.join(here, "ab-p1.csv"), "w") as f:
    f.write("series,threading,binary,pair,egress_mtps,cpu_ns_per_tuple\n")
    for r in rows:
        f.write(f"{r[0]},{r[1]},{r[2]},{r[3]},{r[4]:.2f},{r[5]:.1f}\n")
import statistics
for series in sorted({r[0] for r in rows}):
    for th in ("dynamic2", "dedicated"):
        b = {r[3]: r[4] for r in rows if r[0] == series and r[1] == th and r[2] == "base"}
        n = {r[3]: r[4] for r in rows if r[0] == series and r[1] == th and r[2] == "new"}
        lower = sum(n[i] < b[i] for i in b)
        print(f"{series} {th}: median base {statistics.median(b.values()):.1f}, new {statistics.median(n.values()):.1f} "
              f"M tuples/s; new lower in {lower} of {len(b)} pairs")

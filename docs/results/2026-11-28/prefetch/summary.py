#!/usr/bin/env python3
"""Medians of new/base per pair for each pairs CSV (rep,binary,cpu_cores,ingress_tps,e2e_p50_ms,e2e_p99_ms),
and the CPU per task turn where the file name says how many operators (NxR-...: N operators).
usage: summary.py FILE.csv ..."""
import csv, os, re, statistics as st, sys

for path in sys.argv[1:]:
    rows = list(csv.DictReader(open(path)))
    pairs = {}
    for r in rows:
        pairs.setdefault(r["rep"], {})[r["binary"]] = r
    full = [p for p in pairs.values() if "base" in p and "new" in p]
    def ratio(field):
        v = [float(p["new"][field]) / float(p["base"][field]) for p in full]
        return "%.2f (%.2f-%.2f)" % (st.median(v), min(v), max(v))
    name = os.path.basename(path)
    line = "%s: %d pairs; new/base cpu %s, ingress %s, e2e p50 %s, p99 %s" % (
        name, len(full), ratio("cpu_cores"), ratio("ingress_tps"), ratio("e2e_p50_ms"), ratio("e2e_p99_ms"))
    m = re.match(r"(\d+)x", name)
    if m:
        tasks = int(m.group(1)) + 2
        for b in ("base", "new"):
            ns = [float(p[b]["cpu_cores"]) * 1e9 / (float(p[b]["ingress_tps"]) * tasks) for p in full]
            line += "; %s %.0f ns a turn (%.0f-%.0f)" % (b, st.median(ns), min(ns), max(ns))
    print(line)

"""Ingress medians per build and the median of the per-repetition ratios new/base, for multi.sh
CSVs of the raw pipeline. usage: python3 raw.py CSV..."""
import csv, statistics, sys

for path in sys.argv[1:]:
    rows = list(csv.DictReader(open(path)))
    by = {(r["rep"], r["binary"]): float(r["ingress_tps"]) for r in rows}
    reps = sorted({r["rep"] for r in rows}, key=int)
    ratios = [by[(r, "new")] / by[(r, "base")] for r in reps]
    med = lambda label: statistics.median(by[(r, label)] for r in reps) / 1e6
    print(f"{path}: base {med('base'):.1f} M tuples/s, new {med('new'):.1f} M; new/base "
          f"{statistics.median(ratios):.2f} ({min(ratios):.2f}-{max(ratios):.2f}), {len(reps)} reps")

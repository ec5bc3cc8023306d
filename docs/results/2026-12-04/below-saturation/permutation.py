#!/usr/bin/env python3
"""How likely a ratio of medians this large is when the configuration makes no difference: an
exact permutation test over a lab results.csv. Every way of splitting the runs of BASE and OTHER
into two groups of their sizes is one outcome of "the label does not matter"; p is the share of
splits whose median(OTHER) / median(BASE) is at least the one measured (one-sided: OTHER worse).
usage: permutation.py RESULTS.csv BASE OTHER [METRIC ...]   (default e2e_p50_ms e2e_p99_ms)"""
import csv
import itertools
import statistics
import sys


def main():
    if len(sys.argv) < 4:
        sys.exit(__doc__)
    path, base, other = sys.argv[1:4]
    metrics = sys.argv[4:] or ["e2e_p50_ms", "e2e_p99_ms"]
    rows = [r for r in csv.DictReader(open(path)) if r["ok"] == "true"]
    for metric in metrics:
        a = [float(r[metric]) for r in rows if r["configuration"] == base]
        b = [float(r[metric]) for r in rows if r["configuration"] == other]
        if not a or not b:
            sys.exit(f"no runs of {base!r} or {other!r} in {path}")
        measured = statistics.median(b) / statistics.median(a)
        runs = a + b
        splits = at_least = 0
        for chosen in itertools.combinations(range(len(runs)), len(a)):
            rest = [runs[i] for i in range(len(runs)) if i not in chosen]
            ratio = statistics.median(rest) / statistics.median([runs[i] for i in chosen])
            splits += 1
            at_least += ratio >= measured
        print(f"{metric}: {other} / {base} = {measured:.2f}x (medians of {len(b)} and {len(a)} runs); "
              f"p = {at_least / splits:.2f} ({at_least} of {splits} splits as large or larger)")


main()

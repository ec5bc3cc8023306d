#!/usr/bin/env python3
"""Medians over the repetitions of slack.csv (slack.sh): one row per rate, threading model and
binary/slack. usage: summary.py OUT/slack.csv"""
import csv
import statistics
import sys
from collections import defaultdict

rows = defaultdict(list)
for r in csv.DictReader(open(sys.argv[1])):
    rows[(int(r["rate"]), r["threading"], r["binary"], r["slack"])].append(r)
print("| rate | threading | binary | slack | sched cores | wake-ups/s | e2e p50 ms | e2e p99 ms | reps |")
print("|---|---|---|---|---|---|---|---|---|")
for (rate, model, binary, slack), rs in rows.items():
    med = lambda k: statistics.median(float(r[k]) for r in rs)
    print(f"| {rate} | `{model}` | {binary} | {slack} | {med('sched_cores'):.4f} | {med('wakeups_per_s'):.0f} "
          f"| {med('e2e_p50_ms'):.3f} | {med('e2e_p99_ms'):.3f} | {len(rs)} |")

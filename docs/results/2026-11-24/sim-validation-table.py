#!/usr/bin/env python3
"""Side by side: the measured sweeps (moirai bench) and the simulated ones (moirai sim), per
configuration and rate: median ingress share of offered, median end-to-end p99 (ms), whether the
rate is sustainable (every repetition ran, ingress >= 98 %, p99 <= 1 s, as moirai bench decides),
then each configuration's saturation point and the order of the configurations by p99 at each
rate. Usage: sim-validation-table.py MEASURED_DIR[,MEASURED_DIR...] SIMULATED_DIR"""
import csv
import statistics
import sys
from collections import defaultdict


def load(dirs):
    rows = defaultdict(list)
    for d in dirs.split(","):
        for r in csv.DictReader(open(f"{d}/results.csv")):
            rows[(r["configuration"], float(r["rate"]))].append(r)
    out = {}
    for k, rs in rows.items():
        ok = all(r["ok"] == "true" for r in rs)
        share = statistics.median(float(r["ingress_tps"]) / float(r["rate"]) for r in rs)
        p99 = statistics.median(float(r["e2e_p99_ms"]) for r in rs)
        out[k] = (share, p99, ok and share >= 0.98 and p99 <= 1000.0, len(rs))
    return out


def saturation(points, config):
    rates = sorted(r for c, r in points if c == config)
    for r in rates:
        if not points[(config, r)][2]:
            return r
    return None


measured, simulated = load(sys.argv[1]), load(sys.argv[2])
configs = []
for c, _ in list(measured) + list(simulated):
    if c not in configs:
        configs.append(c)
rates = sorted({r for _, r in measured} | {r for _, r in simulated})
print("| rate | configuration | measured ingress | measured e2e p99 ms | simulated ingress | simulated e2e p99 ms |")
print("|---|---|---|---|---|---|")
fmt = lambda p: "–" if p is None else f"{p[0] * 100:.0f} % | {p[1]:.1f}{'' if p[2] else ' ✗'}"
for r in rates:
    for c in configs:
        m, s = measured.get((c, r)), simulated.get((c, r))
        if m or s:
            print(f"| {r / 1000:g}k | {c} | {fmt(m)} | {fmt(s)} |")
print()
print("| configuration | measured saturation | simulated saturation | sim / measured |")
print("|---|---|---|---|")
for c in configs:
    m, s = saturation(measured, c), saturation(simulated, c)
    ratio = f"{s / m:.2f}" if m and s else "–"
    show = lambda x: "not reached" if x is None else f"{x / 1000:g}k"
    print(f"| {c} | {show(m)} | {show(s)} | {ratio} |")
print()
print("Order of the configurations by median end-to-end p99, lowest first (✗ = not sustainable):")
print()
print("| rate | measured | simulated | same |")
print("|---|---|---|---|")
for r in rates:
    both = [c for c in configs if (c, r) in measured and (c, r) in simulated]
    if len(both) < 2:
        continue
    order = lambda pts: sorted(both, key=lambda c: pts[(c, r)][1])
    mo, so = order(measured), order(simulated)
    print(f"| {r / 1000:g}k | {' < '.join(mo)} | {' < '.join(so)} | {'yes' if mo == so else 'no'} |")

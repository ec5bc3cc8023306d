#!/usr/bin/env python3
"""Medians per (rate, configuration) of a lab results.csv — ingress, e2e p50 and p99, engine cores —
and their ratios to a baseline configuration (the median of the per-repetition ratios of the
interleaved pairs as well). Usage: ratios.py RESULTS.csv BASELINE [OTHER...]
e.g. ratios.py rt-vs-nice-moirai.csv qs qs/translator=realtime
"""
import csv, statistics, sys

path, base, others = sys.argv[1], sys.argv[2], sys.argv[3:]
rows = [r for r in csv.DictReader(open(path)) if r['ok'] == 'true']
rates = sorted({float(r['rate']) for r in rows})
f = lambda r, k: float(r[k]) if r[k] not in ('', None) else float('nan')
print(f'| rate | configuration | ingress/s | e2e p50 ms | e2e p99 ms | cores | ingress x {base} | p50 x | p99 x | '
      f'p99 x (median of pairs) |')
print('|---|---|---|---|---|---|---|---|---|---|')
for rate in rates:
    at = [r for r in rows if float(r['rate']) == rate]
    b = [r for r in at if r['configuration'] == base]
    med = lambda rs, k: statistics.median(f(r, k) for r in rs)
    for c in [base, *others]:
        rs = [r for r in at if r['configuration'] == c]
        if not rs:
            continue
        pairs = [f(x, 'e2e_p99_ms') / f(y, 'e2e_p99_ms') for x in rs for y in b if x['rep'] == y['rep']]
        print(f"| {rate:.0f} | {c} | {med(rs, 'ingress_tps'):.0f} | {med(rs, 'e2e_p50_ms'):.1f} | "
              f"{med(rs, 'e2e_p99_ms'):.1f} | {med(rs, 'engine_cpu_cores'):.2f} | "
              f"{med(rs, 'ingress_tps') / med(b, 'ingress_tps'):.3f} | {med(rs, 'e2e_p50_ms') / med(b, 'e2e_p50_ms'):.2f} | "
              f"{med(rs, 'e2e_p99_ms') / med(b, 'e2e_p99_ms'):.2f} | {statistics.median(pairs):.2f} ({len(pairs)}) |")

#!/usr/bin/env python3
"""Medians per configuration of results.csv (run.sh), and ratios to `os`."""
import csv, statistics, sys
rows = list(csv.DictReader(open(sys.argv[1] if len(sys.argv) > 1 else 'results.csv')))
med = {}
for c in ('os', 'base', 'new'):
    rs = [r for r in rows if r['config'] == c]
    if not rs:
        continue
    m = {k: statistics.median(float(r[k]) for r in rs) for k in ('e2e_p50_ms', 'e2e_p99_ms', 'engine_cores', 'ingress_tps')}
    med[c] = m
    ends = ', '.join(f"{r['mw_reason']}({r['mw_activations']})" for r in rs) if c != 'os' else '-'
    print(f"{c:5} n={len(rs)} p50 {m['e2e_p50_ms']:.3f} ms  p99 {m['e2e_p99_ms']:.3f} ms  "
          f"cores {m['engine_cores']:.2f}  ingress {m['ingress_tps']:.0f}  rule at the end: {ends}")
for c in ('base', 'new'):
    if c in med and 'os' in med:
        print(f"{c}/os: p50 {med[c]['e2e_p50_ms'] / med['os']['e2e_p50_ms']:.2f}x  "
              f"p99 {med[c]['e2e_p99_ms'] / med['os']['e2e_p99_ms']:.2f}x")

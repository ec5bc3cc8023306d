#!/usr/bin/env python3
"""Medians per (rate, configuration) of a lab results.csv, as ratios to the first configuration,
with when the middleware first acted and why it stopped (the lab's middleware columns).

Usage: python3 summary.py RESULTS.csv [...]"""
import csv
import statistics
import sys


def median(rows, key):
    vals = [float(r[key]) for r in rows if r.get(key) not in (None, "")]
    return statistics.median(vals) if vals else None


for path in sys.argv[1:]:
    rows = [r for r in csv.DictReader(open(path)) if r["ok"] == "true"]
    print(f"## {path}")
    print("| rate | configuration | runs | ingress | p50 ms | × first | p99 ms (per run) | × first | acting % (per run) | first acted s (per run) | handed back |")
    print("|---|---|---|---|---|---|---|---|---|---|---|")
    for rate in sorted({float(r["rate"]) for r in rows}):
        at = [r for r in rows if float(r["rate"]) == rate]
        configs = list(dict.fromkeys(r["configuration"] for r in at))
        base = [r for r in at if r["configuration"] == configs[0]]
        b50, b99 = median(base, "e2e_p50_ms"), median(base, "e2e_p99_ms")
        for c in configs:
            rs = [r for r in at if r["configuration"] == c]
            p50, p99 = median(rs, "e2e_p50_ms"), median(rs, "e2e_p99_ms")
            p99s = [float(r["e2e_p99_ms"]) for r in rs]
            acting = [r["middleware_active_share"] for r in rs if r["middleware_active_share"]]
            act = " ".join(f"{float(a) * 100:.0f}" for a in acting) or "–"
            firsts = [r["middleware_first_active_s"] or "never" for r in rs] if acting else []
            first = " ".join(f if f == "never" else f"{float(f):.1f}" for f in firsts) or "–"
            back = {}
            for r in rs:
                for item in (r.get("middleware_releases") or "").split():
                    reason, n = item.split(":")
                    back[reason] = back.get(reason, 0) + int(n)
            backs = " ".join(f"{k}:{v}" for k, v in sorted(back.items())) or "–"
            print(
                f"| {rate / 1000:g}k | `{c}` | {len(rs)} | {median(rs, 'ingress_tps'):.0f} | {p50:.2f} | {p50 / b50:.2f} |"
                f" {p99:.0f} ({min(p99s):.0f}–{max(p99s):.0f}) | {p99 / b99:.2f} | {act} | {first} | {backs} |"
            )
    print()

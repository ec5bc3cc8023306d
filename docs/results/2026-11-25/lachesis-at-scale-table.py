#!/usr/bin/env python3
"""Side-by-side table of a `moirai sim` sweep: throughput, mean and p99 latency per configuration,
with ratios to the first configuration. Usage: lachesis-at-scale-table.py DIR/results.csv ..."""
import csv
import sys

for path in sys.argv[1:]:
    rows = list(csv.DictReader(open(path)))
    configs = list(dict.fromkeys(r["configuration"] for r in rows))
    print(f"{path}\n")
    print("| offered t/s | " + " | ".join(f"{c} ingress / egress t/s, e2e mean / p99 ms" for c in configs) + " |")
    print("|---|" + "---|" * len(configs))
    for rate in dict.fromkeys(r["rate"] for r in rows):
        cells = []
        base = None
        for c in configs:
            r = next(x for x in rows if x["rate"] == rate and x["configuration"] == c)
            p99 = float(r["e2e_p99_ms"])
            base = base or p99
            cells.append(
                f"{float(r['ingress_tps'])/1e6:.3f}M / {float(r['egress_tps'])/1e6:.3f}M, "
                f"{float(r['e2e_mean_ms']):.3g} / {p99:.3g} (×{p99/base:.2f})"
            )
        print(f"| {float(rate)/1e6:.2f}M | " + " | ".join(cells) + " |")
    print()

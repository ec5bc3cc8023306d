"""The cases beside the hand-off: cores (low rate), e2e latency (0.9 M tuples/s) and ingress (raw),
medians per build and of the per-repetition ratios new/base. usage: others.py OUTDIR"""
import csv, statistics as st, sys

out = sys.argv[1]
def rows(name):
    return list(csv.DictReader(open(f"{out}/{name}.csv")))
def line(name, key, scale, unit):
    r = rows(name)
    by = {(x["rep"], x["binary"]): float(x[key]) * scale for x in r}
    reps = sorted({x["rep"] for x in r}, key=int)
    base = [by[(k, "base")] for k in reps]
    new = [by[(k, "new")] for k in reps]
    ratio = [n / b for n, b in zip(new, base)]
    print(f"{name}: {key} base {st.median(base):.3f} {unit} ({min(base):.3f}-{max(base):.3f}), new {st.median(new):.3f} "
          f"({min(new):.3f}-{max(new):.3f}); new/base {st.median(ratio):.2f} ({min(ratio):.2f}-{max(ratio):.2f}), {len(reps)} pairs")
line("low-rate-dynamic2", "cpu_cores", 1, "cores")
line("low-rate-dedicated", "cpu_cores", 1, "cores")
for k in ("e2e_p50_ms", "e2e_p99_ms"):
    line("3x500ns-0.9M-dynamic2", k, 1, "ms")
line("3x500ns-0.9M-dynamic2", "cpu_cores", 1, "cores")
line("raw5-chaining", "ingress_tps", 1e-6, "M tuples/s")
line("raw5-dynamic2", "ingress_tps", 1e-6, "M tuples/s")

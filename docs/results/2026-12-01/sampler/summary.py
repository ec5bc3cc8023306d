"""Medians per build of multi.sh's CSVs, and each build's ratio to the first label (per repetition).

usage: python3 summary.py BASE_LABEL OPS RATE CSV...  (OPS × RATE turns a second: ns a hop =
cores / (OPS × RATE) and op_cpu_ns_per_tuple / OPS)"""
import csv, statistics, sys

base, ops, rate = sys.argv[1], int(sys.argv[2]), float(sys.argv[3])
for path in sys.argv[4:]:
    rows = list(csv.DictReader(open(path)))
    labels = list(dict.fromkeys(r["binary"] for r in rows))
    by = {(r["rep"], r["binary"]): r for r in rows}
    reps = sorted({r["rep"] for r in rows}, key=int)
    print(f"{path}: {len(reps)} repetitions")
    for label in labels:
        mine = [by[(rep, label)] for rep in reps if (rep, label) in by]
        col = lambda k: [float(r[k]) for r in mine]
        med = lambda xs: statistics.median(xs)
        process = [c / (ops * rate) * 1e9 for c in col("cpu_cores")]
        workers = [x / ops for x in col("op_cpu_ns_per_tuple")]
        ratios = [float(by[(rep, label)]["cpu_cores"]) / float(by[(rep, base)]["cpu_cores"])
                  for rep in reps if (rep, label) in by and (rep, base) in by]
        print(f"  {label:8} process {med(process):4.0f} ns a hop ({min(process):.0f}-{max(process):.0f}), "
              f"operator threads {med(workers):4.0f} ({min(workers):.0f}-{max(workers):.0f}); "
              f"CPU vs {base} {med(ratios):.2f} ({min(ratios):.2f}-{max(ratios):.2f}); "
              f"e2e p50 {med(col('e2e_p50_ms')):.3f} ms, p99 {med(col('e2e_p99_ms')):.3f} ms")

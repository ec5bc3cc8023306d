#!/usr/bin/env python3
"""Summarises run.sh's JSON summaries: TAG-runs.csv (one row per run) and TAG-medians.md.
Usage: summarise.py OUT TAG"""
import glob, json, os, re, statistics, sys

out, tag = sys.argv[1], sys.argv[2]
here = os.path.dirname(os.path.abspath(__file__))
rows = []
for path in sorted(glob.glob(os.path.join(out, "*.json"))):
    m = re.match(r"(raw|lat)-(.+)-(\d+)\.json$", os.path.basename(path))
    if not m:
        continue
    with open(path) as f:
        v = json.load(f)
    e2e = v["e2e_latency_ms"]
    rows.append(dict(part=m[1], config=m[2], rep=int(m[3]), egress_mtps=v["egress_tps"] / 1e6,
                     ingress_mtps=v["ingress_tps"] / 1e6, cpu_ns_per_tuple=v["cpu_ns_per_tuple"],
                     e2e_p50_ms=e2e["p50"], e2e_p99_ms=e2e["p99"], tuples_in=v["tuples_in"], tuples_out=v["tuples_out"]))
cols = list(rows[0].keys())
with open(os.path.join(here, f"{tag}-runs.csv"), "w") as f:
    f.write(",".join(cols) + "\n")
    for r in sorted(rows, key=lambda r: (r["part"], r["config"], r["rep"])):
        f.write(",".join(f"{r[c]:.4f}" if isinstance(r[c], float) else str(r[c]) for c in cols) + "\n")

def med(part, config, field):
    xs = [r[field] for r in rows if r["part"] == part and r["config"] == config]
    return (statistics.median(xs), len(xs)) if xs else (float("nan"), 0)

lines = ["# Data parallelism: medians", "",
         "## Raw pipeline (`syn --ops 5 --cost-ns 0 --rate 0`, 5 s per run), egress M tuples/s", "",
         "| threading | base (p1) | p1 | p2 | p2 / p1 | p2 / one-core chaining p1 | CPU ns/tuple p1 | p2 | runs |",
         "|---|---|---|---|---|---|---|---|---|"]
one_core, _ = med("raw", "chaining-p1", "egress_mtps")
for name, label in [("chaining", "--chaining"), ("dedicated", "dedicated"), ("dynamic2", "dynamic:2"),
                    ("dynamic2chaining", "dynamic:2 --chaining"), ("elastic22", "elastic:2-2 (pool, no affinity)")]:
    base, _ = med("raw", f"{name}-base", "egress_mtps")
    p1, n = med("raw", f"{name}-p1", "egress_mtps")
    p2, _ = med("raw", f"{name}-p2", "egress_mtps")
    c1, _ = med("raw", f"{name}-p1", "cpu_ns_per_tuple")
    c2, _ = med("raw", f"{name}-p2", "cpu_ns_per_tuple")
    base_s = "–" if base != base else f"{base:.1f}"
    lines.append(f"| {label} | {base_s} | {p1:.1f} | {p2:.1f} | {p2 / p1:.2f}x | {p2 / one_core:.2f}x | {c1:.1f} | {c2:.1f} | {n} |")
lines += ["", "## 3 operators x 500 ns at 0.9 M tuples/s (10 s per run), e2e latency ms", "",
          "| configuration | p50 | p99 | ingress M/s | runs |", "|---|---|---|---|---|"]
for name, label in [("dynamic2-base", "dynamic:2, base"), ("dynamic2-p1", "dynamic:2, p1"),
                    ("dedicated-base", "dedicated, base"), ("dedicated-p1", "dedicated, p1"),
                    ("dynamic2-p2", "dynamic:2, p2")]:
    p50, n = med("lat", name, "e2e_p50_ms")
    p99, _ = med("lat", name, "e2e_p99_ms")
    tin, _ = med("lat", name, "ingress_mtps")
    lines.append(f"| {label} | {p50:.3f} | {p99:.3f} | {tin:.3f} | {n} |")
with open(os.path.join(here, f"{tag}-medians.md"), "w") as f:
    f.write("\n".join(lines) + "\n")
print("\n".join(lines))

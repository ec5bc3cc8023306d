"""Medians per (config, binary) of raw.sh's CSV, and new/base ratios per repetition."""
import csv, statistics as st, sys
rows = [r for r in csv.DictReader(open(sys.argv[1])) if r["egress_tps"]]
by = {}
for r in rows:
    by.setdefault((r["config"], r["binary"]), []).append(float(r["egress_tps"]))
for (config, binary), v in sorted(by.items()):
    print(f"{config:12} {binary:7} median {st.median(v) / 1e6:6.1f} M tuples/s  range {min(v) / 1e6:.1f}-{max(v) / 1e6:.1f}  n={len(v)}")
reps = {}
for r in rows:
    reps.setdefault((r["rep"], r["config"]), {})[r["binary"]] = float(r["egress_tps"])
for config in sorted({c for _, c in reps}):
    ratios = [v["new"] / v["base"] for (_, c), v in reps.items() if c == config and "new" in v and "base" in v]
    if ratios:
        print(f"{config:12} new/base per repetition: median {st.median(ratios):.2f} range {min(ratios):.2f}-{max(ratios):.2f}")

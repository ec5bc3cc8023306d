import csv, sys, statistics as st
rows = list(csv.DictReader(open(sys.argv[1])))
base = sys.argv[2] if len(sys.argv) > 2 else 'base'
by = {}
for r in rows:
    if r['cpu_cores']: by.setdefault(r['rep'], {})[r['binary']] = r
labels = sorted({r['binary'] for r in rows})
for l in labels:
    if l == base: continue
    rs = [float(v[l]['cpu_cores'])/float(v[base]['cpu_cores']) for v in by.values() if l in v and base in v]
    ps = [float(v[l]['e2e_p50_ms'])/float(v[base]['e2e_p50_ms']) for v in by.values() if l in v and base in v]
    print(f"{l}/{base}: cpu median {st.median(rs):.3f} range {min(rs):.2f}-{max(rs):.2f} n={len(rs)}; p50 {st.median(ps):.3f}")
for l in labels:
    print(l, 'cpu median', st.median(float(v[l]['cpu_cores']) for v in by.values() if l in v))

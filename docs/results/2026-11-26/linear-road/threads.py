#!/usr/bin/env python3
"""CPU per thread in 5-s buckets (cores) from diag.sh's samples: threads.py SAMPLES."""
import collections
import sys

rows = [l.split() for l in open(sys.argv[1])]
by = collections.defaultdict(list)
for r in rows:
    if len(r) < 5:
        continue
    by[(r[1], " ".join(r[2:-2]))].append((float(r[0]), int(r[-2]) + int(r[-1])))
t0 = min(v[0][0] for v in by.values())
buckets = collections.defaultdict(lambda: collections.defaultdict(float))
names = {}
for (tid, comm), v in by.items():
    names[tid] = comm
    for (a, ca), (b, cb) in zip(v, v[1:]):
        buckets[int((a - t0) // 5)][tid] += (cb - ca) / 100  # clock ticks of 10 ms
tids = sorted(names, key=lambda t: -sum(buckets[b][t] for b in buckets))[:9]
print("s    " + " ".join("%12s" % names[t][:12] for t in tids) + "  total")
for b in sorted(buckets):
    print("%4d " % (b * 5) + " ".join("%12.2f" % (buckets[b][t] / 5) for t in tids)
          + "  %5.2f" % (sum(buckets[b].values()) / 5))

#!/usr/bin/env python3
"""CPU time per thread name of a running process over an interval, in cores.

usage: threadcpu.py PID SECONDS   (time on CPU, ns, from /proc/PID/task/*/schedstat)
"""
import os
import sys
import time

NS = 1e9


def snapshot(pid):
    out = {}
    for tid in os.listdir(f"/proc/{pid}/task"):
        try:
            with open(f"/proc/{pid}/task/{tid}/comm") as f:
                name = f.read().strip()
            with open(f"/proc/{pid}/task/{tid}/schedstat") as f:
                out[tid] = (name, int(f.read().split()[0]))
        except (FileNotFoundError, ProcessLookupError):
            pass
    return out


pid, secs = int(sys.argv[1]), float(sys.argv[2])
a = snapshot(pid)
t0 = time.monotonic()
time.sleep(secs)
b = snapshot(pid)
dt = time.monotonic() - t0
per = {}
for tid, (name, ticks) in b.items():
    if tid in a:
        per[name] = per.get(name, 0) + ticks - a[tid][1]
for name in sorted(per):
    print(f"{name:<16} {per[name] / NS / dt:.4f}")
print(f"{'total':<16} {sum(per.values()) / NS / dt:.4f}")

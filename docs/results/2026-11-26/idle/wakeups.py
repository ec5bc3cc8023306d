#!/usr/bin/env python3
"""Wake-ups per second of each thread of a running process, by thread name.

usage: wakeups.py PID SECONDS

Reads /proc/PID/task/*/status twice, SECONDS apart, and prints per thread name (threads of the
same name summed, with their count) the context switches per second over that interval:
voluntary (the thread slept and was woken) and involuntary (preempted). An idle thread that
wakes from a timed wait shows as voluntary switches.
"""
import os
import sys
import time


def snapshot(pid):
    out = {}
    base = f"/proc/{pid}/task"
    for tid in os.listdir(base):
        try:
            with open(f"{base}/{tid}/comm") as f:
                name = f.read().strip()
            vol = invol = 0
            with open(f"{base}/{tid}/status") as f:
                for line in f:
                    if line.startswith("voluntary_ctxt_switches"):
                        vol = int(line.split()[1])
                    elif line.startswith("nonvoluntary_ctxt_switches"):
                        invol = int(line.split()[1])
            out[tid] = (name, vol, invol)
        except (FileNotFoundError, ProcessLookupError):
            pass
    return out


def main():
    pid, secs = int(sys.argv[1]), float(sys.argv[2])
    a = snapshot(pid)
    t0 = time.monotonic()
    time.sleep(secs)
    b = snapshot(pid)
    dt = time.monotonic() - t0
    per_name = {}
    for tid, (name, vol, invol) in b.items():
        if tid not in a:
            continue
        n, v, i = per_name.get(name, (0, 0, 0))
        per_name[name] = (n + 1, v + vol - a[tid][1], i + invol - a[tid][2])
    total_v = total_i = 0
    print(f"{'thread':<16} {'n':>3} {'vol/s':>9} {'invol/s':>9}")
    for name in sorted(per_name):
        n, v, i = per_name[name]
        total_v += v
        total_i += i
        print(f"{name:<16} {n:>3} {v / dt:>9.1f} {i / dt:>9.1f}")
    print(f"{'total':<16} {len(b):>3} {total_v / dt:>9.1f} {total_i / dt:>9.1f}")


if __name__ == "__main__":
    main()

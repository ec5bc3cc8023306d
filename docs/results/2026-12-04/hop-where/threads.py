#!/usr/bin/env python3
"""CPU time of each thread name of process PID over WAIT seconds, from /proc/PID/task/*/schedstat
(nanoseconds, unlike /proc's stat in clock ticks); prints `name ms_per_s` lines.
usage: threads.py PID WAIT"""
import collections
import os
import sys
import time


def snapshot(pid):
    cpu = collections.Counter()
    for tid in os.listdir(f"/proc/{pid}/task"):
        try:
            name = open(f"/proc/{pid}/task/{tid}/comm").read().strip()
            cpu[name] += int(open(f"/proc/{pid}/task/{tid}/schedstat").read().split()[0])
        except OSError:
            pass  # the thread ended between the listing and the read
    return cpu


pid, wait = int(sys.argv[1]), float(sys.argv[2])
before = snapshot(pid)
time.sleep(wait)
after = snapshot(pid)
for name in sorted(after):
    print(name, "%.4f" % ((after[name] - before.get(name, 0)) / 1e6 / wait))

#!/usr/bin/env python3
"""Context switches of a Storm worker JVM while the lab runs it (issue 23: does queue-size nice
make Storm switch more per tuple?). Every 5 s, the sum over all the worker's threads of
voluntary_ctxt_switches and nonvoluntary_ctxt_switches from /proc/PID/task/*/status, one line per
sample, and a `worker PID at EPOCH` line each time a new worker JVM (a `java` process with a
thread named `Thread-<n>-lr-…`, moirai's Linear Road topology) appears. Runs until killed.
usage: ctx-switches.py OUT.txt
       ctx-switches.py --summary OUT.txt RESULTS.csv   (per worker, in the lab's order: switches
       per second and per 1 000 tuples taken in, over the samples after the first 40 %)"""
import csv
import os
import sys
import time


def worker():
    for pid in filter(str.isdigit, os.listdir("/proc")):
        try:
            if open(f"/proc/{pid}/comm").read().strip() != "java":
                continue
            for t in os.listdir(f"/proc/{pid}/task"):
                comm = open(f"/proc/{pid}/task/{t}/comm").read()
                if comm.startswith("Thread-") and "-lr-" in comm:
                    return int(pid)
        except OSError:
            pass
    return None


def switches(pid):
    vol = nonvol = 0
    for t in os.listdir(f"/proc/{pid}/task"):
        try:
            for line in open(f"/proc/{pid}/task/{t}/status"):
                if line.startswith("voluntary_ctxt_switches"):
                    vol += int(line.split()[1])
                elif line.startswith("nonvoluntary_ctxt_switches"):
                    nonvol += int(line.split()[1])
        except OSError:
            pass  # a thread that ended meanwhile
    return vol, nonvol


def sample(path):
    out = open(path, "a")
    seen = None
    while True:
        pid = worker()
        if pid is None:
            time.sleep(1)
            continue
        if pid != seen:
            print(f"worker {pid} at {time.time():.0f}", file=out, flush=True)
            seen = pid
        try:
            vol, nonvol = switches(pid)
        except OSError:
            continue  # the worker ended
        print(f"{time.time():.1f} {pid} vol {vol} nonvol {nonvol}", file=out, flush=True)
        time.sleep(5)


def summary(path, results):
    runs = []
    for line in open(path):
        if line.startswith("worker "):
            runs.append([])
        elif runs and line[0].isdigit():
            f = line.split()
            runs[-1].append((float(f[0]), int(f[3]), int(f[5])))
    rows = [r for r in csv.DictReader(open(results))]
    if len(rows) != len(runs):
        sys.exit(f"{results} has {len(rows)} runs, {path} {len(runs)} workers: not the same sweep")
    print("| configuration | rep | ingress/s | voluntary/s | involuntary/s | switches per 1 000 tuples |")
    print("|---|---|---|---|---|---|")
    for row, r in zip(rows, runs):
        r = r[len(r) * 4 // 10:]
        span = r[-1][0] - r[0][0]
        vol, nonvol = (r[-1][1] - r[0][1]) / span, (r[-1][2] - r[0][2]) / span
        ingress = float(row["ingress_tps"])
        print(f"| {row['configuration']} | {row['rep']} | {ingress:.0f} | {vol:.0f} | {nonvol:.0f} | "
              f"{1000 * (vol + nonvol) / ingress:.0f} |")


if __name__ == "__main__":
    if len(sys.argv) == 4 and sys.argv[1] == "--summary":
        summary(sys.argv[2], sys.argv[3])
    elif len(sys.argv) == 2:
        sample(sys.argv[1])
    else:
        sys.exit(__doc__)

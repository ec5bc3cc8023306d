#!/usr/bin/env python3
"""Where a Storm worker JVM's CPU goes while the lab runs it (issue 23: why does Storm's Linear
Road spend more CPU a tuple under QS's nice values?). Every 5 s, each thread of the worker (a
`java` process with a thread named `Thread-<n>-lr-…`, moirai's Linear Road topology): its
utime+stime from /proc/PID/task/TID/stat, one line per sample; a `worker PID at EPOCH` line each
time a new worker appears. Runs until killed.
usage: thread-cpu.py OUT.txt
       thread-cpu.py --summary OUT.txt RESULTS.csv   (per worker, in the lab's order: CPU per
       1 000 tuples taken in by kind of thread, over the samples after the first 40 %; a thread
       counts between two samples only if both saw it)"""
import csv
import os
import re
import sys
import time

TICK = os.sysconf("SC_CLK_TCK")
KINDS = [
    ("executors", re.compile(r"^Thread-\d+-")),
    ("gc", re.compile(r"^(GC Thread|G1 |VM Periodic|GC )")),
    ("jit", re.compile(r"^C[12] Compiler")),
    ("vm", re.compile(r"^VM Thread")),
]


def kind(comm):
    return next((k for k, p in KINDS if p.search(comm)), "other")


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


def threads(pid):
    out = []
    for t in os.listdir(f"/proc/{pid}/task"):
        try:
            stat = open(f"/proc/{pid}/task/{t}/stat").read()
        except OSError:
            continue  # ended meanwhile
        comm = stat[stat.index("(") + 1 : stat.rindex(")")]
        f = stat[stat.rindex(")") + 2 :].split()
        out.append((t, int(f[11]) + int(f[12]), comm.replace(" ", "_")))
    return out


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
            ts = threads(pid)
        except OSError:
            continue
        print(f"{time.time():.1f} " + " ".join(f"{t}:{c}:{n}" for t, c, n in ts), file=out, flush=True)
        time.sleep(5)


def summary(path, results):
    runs = []
    for line in open(path):
        if line.startswith("worker "):
            runs.append([])
        elif runs and line[0].isdigit():
            f = line.split()
            runs[-1].append((float(f[0]), {t: (int(c), n) for t, c, n in (x.split(":", 2) for x in f[1:])}))
    rows = list(csv.DictReader(open(results)))
    if len(rows) != len(runs):
        sys.exit(f"{results} has {len(rows)} runs, {path} {len(runs)} workers: not the same sweep")
    names = [k for k, _ in KINDS] + ["other"]
    print("| configuration | rep | ingress/s | " + " | ".join(f"{k} µs/tuple" for k in names) + " | all |")
    print("|---|---|---|" + "---|" * (len(names) + 1))
    for row, r in zip(rows, runs):
        r = r[len(r) * 4 // 10 :]
        used = dict.fromkeys(names, 0.0)
        for (_, a), (_, b) in zip(r, r[1:]):
            for t, (c, n) in b.items():
                if t in a:
                    used[kind(n.replace("_", " "))] += (c - a[t][0]) / TICK
        span = r[-1][0] - r[0][0]
        ingress = float(row["ingress_tps"])
        per = {k: used[k] / span / ingress * 1e6 for k in names}
        print(f"| {row['configuration']} | {row['rep']} | {ingress:.0f} | "
              + " | ".join(f"{per[k]:.1f}" for k in names) + f" | {sum(per.values()):.1f} |")


if __name__ == "__main__":
    if sys.argv[1] == "--summary":
        summary(sys.argv[2], sys.argv[3])
    else:
        sample(sys.argv[1])

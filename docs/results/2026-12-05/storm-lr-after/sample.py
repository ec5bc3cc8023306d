#!/usr/bin/env python3
"""What a Storm worker's executors look like while the lab runs Storm's Linear Road (issue 23:
does QS leave anything behind when it hands the topology back?). Every 2 s, one JSON line:
the time; each executor thread (`Thread-<n>-<component>-executor[...]`) with its nice value,
scheduling policy and CPU ticks (utime + stime) from /proc; and the newest value of each of
Storm's receive-queue population and overflow gauges and of the emit counters, read from the
metrics directory the lab gave the job (`--metrics-dir` on its command line). Runs until killed.
usage: sample.py OUT.jsonl"""
import glob
import json
import os
import re
import sys
import time

EXECUTOR = re.compile(r"^Thread-\d+-")


def worker():
    for pid in filter(str.isdigit, os.listdir("/proc")):
        try:
            cmd = open(f"/proc/{pid}/cmdline").read().split("\0")
        except OSError:
            continue
        if "moirai.storm.Run" in cmd and "--metrics-dir" in cmd:
            return int(pid), cmd[cmd.index("--metrics-dir") + 1]
    return None


def executors(pid):
    out = {}
    for t in os.listdir(f"/proc/{pid}/task"):
        try:
            stat = open(f"/proc/{pid}/task/{t}/stat").read()
        except OSError:
            continue
        comm = stat[stat.index("(") + 1 : stat.rindex(")")]
        if not EXECUTOR.search(comm):
            continue
        f = stat[stat.rindex(")") + 2 :].split()
        # fields 14/15 utime/stime, 19 nice, 41 policy (man 5 proc), counted from 3 here
        out[t] = [comm, int(f[16]), int(f[38]), int(f[11]) + int(f[12])]
    return out


def last(path):
    try:
        with open(path, "rb") as fh:
            fh.seek(0, 2)
            fh.seek(max(0, fh.tell() - 200))
            line = fh.read().decode(errors="replace").strip().splitlines()[-1]
        return float(line.split(",")[-1])
    except (OSError, IndexError, ValueError):
        return None


def gauges(mdir):
    out = {}
    for p in glob.glob(os.path.join(mdir, "*.csv")):
        name = os.path.basename(p)[: -len(".csv")]
        if re.search(r"receive-queue-(population|overflow)$|__emit-count-default$", name):
            out[name.split(".", 4)[-1]] = last(p)
    return out


def main(path):
    with open(path, "a") as out:
        while True:
            w = worker()
            if w is None:
                time.sleep(1)
                continue
            pid, mdir = w
            try:
                line = {"t": round(time.time(), 1), "pid": pid, "threads": executors(pid), "gauges": gauges(mdir)}
            except OSError:
                continue
            print(json.dumps(line), file=out, flush=True)
            time.sleep(2)


if __name__ == "__main__":
    main(sys.argv[1])

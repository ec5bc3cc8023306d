#!/usr/bin/env python3
"""Summarises sample.py's lines, run by run (a new worker pid starts a run), over the lab's
measured window (after the first SKIP seconds of the worker; 60 s = 40 % of a 150 s point).
Each 2 s interval between two samples is put in a phase by the executors' nice values at both
ends: `acting` when any executor is away from nice 0 (its original value) at either end,
`linux` otherwise; a QS run's `linux` intervals after its first `acting` one are `after`. Per
phase: seconds, tuples the sources emitted a second, executors' CPU (cores) and CPU per tuple
(µs), and the mean of the summed receive-queue population and overflow of the sources and of
the bolts.
With the lab's middleware-logs directory: the rule's own state (its `active —` / `idle —`
lines, placed at the log's birth time plus their offset) beside the nice values, and every
sample taken 2 s or more after the rule turned idle that still finds an executor away from 0.
usage: analyze.py SAMPLES.jsonl [SKIP_S] [MIDDLEWARE_LOGS]"""
import glob
import json
import os
import re
import subprocess
import sys

TICK = os.sysconf("SC_CLK_TCK")


def runs(path):
    out, pid = [], None
    for line in open(path):
        s = json.loads(line)
        if s["pid"] != pid:
            out.append([])
            pid = s["pid"]
        out[-1].append(s)
    return out


def emitted(s):
    return sum(v or 0 for k, v in s["gauges"].items() if "-source." in k and k.endswith("__emit-count-default"))


def queues(s, part):
    """The gauges ending in `part`, summed over the sources and over the bolts."""
    sums = [0.0, 0.0]
    for k, v in s["gauges"].items():
        if k.endswith(part):
            sums["-source." not in k] += v or 0
    return sums


def summarise(run, skip):
    t0 = run[0]["t"]
    run = [s for s in run if s["t"] - t0 >= skip]
    phases, seen_acting = {}, False
    for a, b in zip(run, run[1:]):
        nice = [v[1] for s in (a, b) for v in s["threads"].values()]
        acting = any(n != 0 for n in nice)
        seen_acting |= acting
        phase = "acting" if acting else ("after" if seen_acting else "linux")
        common = a["threads"].keys() & b["threads"].keys()
        cpu = sum(b["threads"][t][3] - a["threads"][t][3] for t in common) / TICK
        p = phases.setdefault(phase, {"s": 0.0, "tuples": 0.0, "cpu": 0.0, "pop": [0, 0], "ovf": [0, 0], "n": 0})
        p["s"] += b["t"] - a["t"]
        p["tuples"] += emitted(b) - emitted(a)
        p["cpu"] += cpu
        p["n"] += 1
        for key, part in (("pop", "receive-queue-population"), ("ovf", "receive-queue-overflow")):
            src, bolts = queues(b, part)
            p[key][0] += src
            p[key][1] += bolts
    return phases


def transitions(logs):
    """Each middleware log's state changes as (epoch, active?) lists, by the log's birth time."""
    out = []
    for f in sorted(glob.glob(os.path.join(logs, "*.log"))):
        born = float(subprocess.run(["stat", "-c", "%W", f], capture_output=True, text=True, check=True).stdout)
        changes = []
        for line in open(f, errors="replace"):
            m = re.match(r"\[\s*([\d.]+)\] SPE '[^']+': (active|idle) —", line)
            if m:
                changes.append((born + float(m.group(1)), m.group(2) == "active"))
        out.append((born, f, changes))
    return out


def strays(run, logs):
    """The samples of `run` taken when the rule had been idle for 2 s or more: how many, and those
    that found an executor away from nice 0."""
    t0, t1 = run[0]["t"], run[-1]["t"]
    mine = [x for x in logs if t0 - 30 <= x[0] <= t1]
    if not mine:
        return None
    changes = mine[0][2]
    checked, found = 0, []
    for s in run:
        before = [c for c in changes if c[0] <= s["t"] - 2]
        if before and not before[-1][1] and not any(c[0] > s["t"] - 2 and c[0] <= s["t"] for c in changes):
            checked += 1
            off = {v[0]: v[1] for v in s["threads"].values() if v[1] != 0}
            if off:
                found.append((round(s["t"] - t0), off))
    return os.path.basename(mine[0][1]), sum(1 for c in changes if c[1]), checked, found


def main(path, skip, logs=None):
    logs = transitions(logs) if logs else None
    all_runs = runs(path)
    print("| run | phase | seconds | emitted/s | executors' cores | µs a tuple | queued (sources / bolts) | overflow (sources / bolts) |")
    print("|---|---|---|---|---|---|---|---|")
    for i, run in enumerate(all_runs, 1):
        for name, p in summarise(run, skip).items():
            rate = p["tuples"] / p["s"] if p["s"] else 0
            us = p["cpu"] / p["tuples"] * 1e6 if p["tuples"] else float("nan")
            n = p["n"]
            print(f"| {i} (pid {run[0]['pid']}) | {name} | {p['s']:.0f} | {rate:.0f} | {p['cpu'] / p['s']:.2f} | {us:.1f} "
                  f"| {p['pop'][0] / n:.0f} / {p['pop'][1] / n:.0f} | {p['ovf'][0] / n:.0f} / {p['ovf'][1] / n:.0f} |")
    if logs:
        print()
        for i, run in enumerate(all_runs, 1):
            r = strays(run, logs)
            if r:
                name, acting, checked, found = r
                print(f"run {i}: {name}: {acting} 'active' line(s); of {checked} samples with the rule idle >= 2 s, "
                      f"{len(found)} found an executor away from nice 0 {found[:3]}")


if __name__ == "__main__":
    main(sys.argv[1], float(sys.argv[2]) if len(sys.argv) > 2 else 60.0, sys.argv[3] if len(sys.argv) > 3 else None)

#!/usr/bin/env python3
"""What a hop costs on this machine: runs `moirai run syn ... --json` and reads, per operator
thread, its CPU time (`/proc/PID/task/TID/schedstat`) and its voluntary context switches (each
one is a sleep, so the number of times the thread was woken) over the measured window.

Usage: sim-validation-measure.py MOIRAI NAME DURATION_S -- [WORKLOAD] RUN-ARGS...
(WORKLOAD: syn unless the first argument after -- names another, e.g. linear-road)
Prints one JSON line: the run's report fields that matter plus
  wakeups_per_s      voluntary switches of the operator threads per second (all threads)
  involuntary_per_s  preemptions of the operator threads per second
  thread_cpu_cores   CPU of the operator threads, in cores
  per_thread         {thread name: [voluntary/s, involuntary/s, cpu cores]}
The window is [20 % + 0.5 s, 100 % - 0.5 s] of the run (inside the report's measured window).
"""
import json
import os
import subprocess
import sys
import time


def read_threads(pid):
    out = {}
    base = f"/proc/{pid}/task"
    for tid in os.listdir(base):
        try:
            with open(f"{base}/{tid}/comm") as f:
                comm = f.read().strip()
            with open(f"{base}/{tid}/schedstat") as f:
                cpu = int(f.read().split()[0])
            vol = invol = 0
            with open(f"{base}/{tid}/status") as f:
                for line in f:
                    if line.startswith("voluntary_ctxt_switches"):
                        vol = int(line.split()[1])
                    elif line.startswith("nonvoluntary_ctxt_switches"):
                        invol = int(line.split()[1])
        except (FileNotFoundError, ProcessLookupError):
            continue
        out[tid] = (comm, vol, invol, cpu)
    return out


def main():
    moirai, name, duration = sys.argv[1], sys.argv[2], float(sys.argv[3])
    args = sys.argv[sys.argv.index("--") + 1:]
    workload = "syn"
    if args and not args[0].startswith("-"):
        workload, args = args[0], args[1:]
    cmd = [moirai, "run", workload, "--duration", f"{duration}s", "--json", *args]
    p = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    t0 = time.monotonic()
    a_at, b_at = 0.2 * duration + 0.5, duration - 0.5
    time.sleep(max(0.0, a_at - (time.monotonic() - t0)))
    a, ta = read_threads(p.pid), time.monotonic()
    time.sleep(max(0.0, b_at - (time.monotonic() - t0)))
    b, tb = read_threads(p.pid), time.monotonic()
    out, err = p.communicate()
    if p.returncode != 0:
        print(err, file=sys.stderr)
        sys.exit(p.returncode)
    # The text report comes first; the JSON report is the last line.
    report = json.loads(out.strip().splitlines()[-1])
    dt = tb - ta
    per_thread = {}
    # The main thread, the HTTP thread and the run's sampler are not operator threads.
    skip = {"moirai"}
    vol = invol = cpu = 0
    for tid, (comm, v1, i1, c1) in b.items():
        if tid not in a or comm in skip:
            continue
        _, v0, i0, c0 = a[tid]
        dv, di, dc = (v1 - v0) / dt, (i1 - i0) / dt, (c1 - c0) / 1e9 / dt
        per_thread[f"{comm}/{tid}"] = [round(dv, 1), round(di, 1), round(dc, 4)]
        vol, invol, cpu = vol + dv, invol + di, cpu + dc
    keep = ["offered_rate", "ingress_tps", "egress_tps", "cpu_ns_per_tuple", "cpu_cores", "threads"]
    result = {"name": name, "cmd": " ".join(cmd[1:])}
    result.update({k: report.get(k) for k in keep})
    result["latency_ms"] = report["latency_ms"]
    result["e2e_latency_ms"] = report["e2e_latency_ms"]
    result["wakeups_per_s"] = round(vol, 1)
    result["involuntary_per_s"] = round(invol, 1)
    result["thread_cpu_cores"] = round(cpu, 4)
    result["per_thread"] = per_thread
    print(json.dumps(result))


if __name__ == "__main__":
    main()

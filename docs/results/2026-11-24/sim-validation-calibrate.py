#!/usr/bin/env python3
"""The simulator against the engine, run by run: for every measured run of
sim-validation-measure.jsonl, simulates the same workload at the same rate (`moirai sim syn`, os,
2 cores, 6 s) and prints ingress, CPU (cores), wake-ups per second and processing latency side by
side. Usage: sim-validation-calibrate.py MOIRAI MEASURED.jsonl OUTDIR [SIM FLAGS...]"""
import json
import os
import shlex
import subprocess
import sys

moirai, measured, outdir = sys.argv[1], sys.argv[2], sys.argv[3]
flags = sys.argv[4:]
os.makedirs(outdir, exist_ok=True)
print("| run | rate | ingress engine | ingress sim | cores engine | cores sim | wake-ups/s engine | wake-ups/s sim | p50 ms engine | p50 ms sim | p99 ms engine | p99 ms sim |")
print("|---|---|---|---|---|---|---|---|---|---|---|---|")
for line in open(measured):
    m = json.loads(line)
    words = shlex.split(m["cmd"])
    if words[1] != "syn":
        continue  # Linear Road's runs give its costs (sim-validation.md), not a run to simulate
    run_args = words[words.index("--json") + 1:]
    rate = run_args[run_args.index("--rate") + 1]
    run_args = [a for i, a in enumerate(run_args) if a != "--rate" and (i == 0 or run_args[i - 1] != "--rate")]
    if rate == "0":
        continue  # an unlimited source has no rate to sweep
    out = os.path.join(outdir, m["name"])
    cmd = [moirai, "sim", "syn", "--rates", rate, "--compare", "os", "--duration", "6s", "--out", out, *flags, "--", *run_args]
    subprocess.run(cmd, check=True, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    s = json.load(open(os.path.join(out, "results.json")))["points"][0]["run"]
    wk = s["wakeups"] / s["duration_s"]
    print(f"| {m['name']} | {rate} | {m['ingress_tps']:.0f} | {s['ingress_tps']:.0f} | {m['thread_cpu_cores']:.3f} | {s['cpu_cores']:.3f} "
          f"| {m['wakeups_per_s']:.0f} | {wk:.0f} | {m['latency_ms']['p50']:.3f} | {s['latency_ms']['p50']:.3f} "
          f"| {m['latency_ms']['p99']:.2f} | {s['latency_ms']['p99']:.2f} |")

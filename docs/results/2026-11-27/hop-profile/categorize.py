"""Groups a flat `perf report --sort sym` of a moirai run into the parts of a hand-off, each as
a share of the samples and as ns of CPU per task turn (the run's cpu_cores / (tuples/s × tasks)).

usage: categorize.py REPORT.txt RUN.json THREADING"""
import json
import re
import sys

# First match wins; patterns are searched in the symbol's name.
GROUPS = [
    ("kernel: sleep, wake-up, context switch", r"^\[k\]"),
    ("clock reads (vDSO)", r"clock_gettime|Timespec"),
    ("waking the consumer (its state word, the ready slot)", r"Executor>::start::\{\{closure\}\}|affinity::Ready|signal::Signal|TaskState|state::"),
    ("channel: enqueue and receive (a mutex each)", r"sync::channel|futex::Mutex|lock_contended"),
    ("the operator and its router (step, map, route, flush, watermark)", r"task::|operator::|router::|Progress|finish_step|source::|sink::"),
    ("the pool's loop (claim, run, release, timers, CPU charge)", r"executor::pool|turn_cpu|executor::"),
    ("memory (malloc, free, copy)", r"malloc|free|_int_|memmove|memcpy|unlink_chunk|alloc::"),
    ("the run's own sampling (snapshot, summary)", r"moirai::run|metrics::|fmt::|memcmp|Vec<T> as alloc::vec::spec_from_iter"),
]


def main():
    report, run, model = sys.argv[1:4]
    shares = {name: 0.0 for name, _ in GROUPS}
    other = 0.0
    for line in open(report):
        m = re.match(r"\s*([0-9.]+)%\s+(\[[.k]\])\s+(.*)", line)
        if not m:
            continue
        pct, kind, sym = float(m.group(1)), m.group(2), m.group(3)
        text = f"{kind} {sym}" if kind == "[k]" else sym
        for name, pattern in GROUPS:
            if re.search(pattern, text):
                shares[name] += pct
                break
        else:
            other += pct
    d = json.loads(open(run).read().strip().splitlines()[-1])
    turn_ns = d["cpu_cores"] * 1e9 / (d["ingress_tps"] * 10002)
    print(f"{model}: {d['cpu_cores']:.3f} cores at {d['ingress_tps']:.0f} tuples/s, "
          f"{turn_ns:.0f} ns of CPU per task turn")
    for name, _ in GROUPS:
        print(f"  {shares[name]:5.1f} %  {shares[name] * turn_ns / 100:5.0f} ns  {name}")
    print(f"  {other:5.1f} %  {other * turn_ns / 100:5.0f} ns  other")


main()

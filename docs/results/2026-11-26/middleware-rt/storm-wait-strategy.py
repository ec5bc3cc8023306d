#!/usr/bin/env python3
"""Storm (Lachesis SYN, 100 executors) under each wait strategy, Linux alone: CPU per tuple,
ingress and latency at fixed rates. Interleaved (every strategy once per repetition and rate),
REPS repetitions, 30 s per run (20 % warm-up); prints every run and the medians, writes
storm-wait-strategy-<RATES>.csv beside this script.

Usage (from the repository root, after `mvn -q -B -f integrations/storm/pom.xml -DskipTests package`):
  (alone on the machine) python3 docs/results/2026-11-26/middleware-rt/storm-wait-strategy.py RATES REPS STRATEGY...
e.g. storm-wait-strategy.py 2000,6000 2 progressive park:100 park:1000
"""
import csv, json, os, shutil, statistics, subprocess, sys, tempfile

root = subprocess.run(['git', 'rev-parse', '--show-toplevel'], capture_output=True, text=True).stdout.strip()
rates = [r for r in sys.argv[1].split(',')]
reps = int(sys.argv[2])
strategies = sys.argv[3:]
d = f'{root}/integrations/storm/target'
cp = f'{d}/moirai-storm-jobs.jar:' + open(f'{d}/classpath.txt').read().strip()
rows = []
for rate in rates:
    for rep in range(reps):
        for ws in strategies:
            tmp = tempfile.mkdtemp(prefix='storm-ws-')
            out = subprocess.run(['java', '-Xmx1g', '-cp', cp, 'moirai.storm.Run', 'syn', '--lachesis', '--rate', rate,
                                  '--duration', '30s', '--json', '--metrics-dir', tmp, '--wait-strategy', ws],
                                 capture_output=True, text=True).stdout
            shutil.rmtree(tmp, ignore_errors=True)
            s = json.loads([l for l in out.splitlines() if l.startswith('{')][-1])
            row = {'rate': rate, 'rep': rep + 1, 'wait_strategy': ws, 'ingress_tps': round(s['ingress_tps']),
                   'cpu_cores': round(s['cpu_cores'], 3),
                   'cpu_us_per_tuple': round(s['cpu_cores'] / max(s['ingress_tps'], 1) * 1e6, 1),
                   'e2e_p50_ms': s['e2e_latency_ms']['p50'], 'e2e_p99_ms': s['e2e_latency_ms']['p99']}
            rows.append(row)
            print(row, flush=True)
with open(os.path.join(os.path.dirname(os.path.abspath(__file__)), f'storm-wait-strategy-{sys.argv[1]}.csv'), 'w', newline='') as f:
    w = csv.DictWriter(f, fieldnames=list(rows[0]))
    w.writeheader()
    w.writerows(rows)
for rate in rates:
    for ws in strategies:
        r = [x for x in rows if x['rate'] == rate and x['wait_strategy'] == ws]
        med = {k: statistics.median(x[k] for x in r) for k in
               ['ingress_tps', 'cpu_cores', 'cpu_us_per_tuple', 'e2e_p50_ms', 'e2e_p99_ms']}
        print(f'rate {rate} {ws}: median of {len(r)}: {med}')

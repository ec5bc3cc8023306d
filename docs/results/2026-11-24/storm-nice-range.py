#!/usr/bin/env python3
"""Storm, Lachesis SYN at a fixed rate: the OS alone vs QS with the full nice range (-20..19, the
default) vs QS that only lowers priorities (0..19). Interleaved, REPS repetitions; prints e2e p99
and ingress per run and the medians. Usage: storm_nice_range.py RATE REPS [extra job flags]."""
import glob, json, os, shutil, signal, statistics, subprocess, sys, tempfile, time
root = subprocess.run(['git', 'rev-parse', '--show-toplevel'], capture_output=True, text=True).stdout.strip()
rate, reps, extra = sys.argv[1], int(sys.argv[2]), sys.argv[3:] or ['--lachesis']
M = f'{root}/target/release/moirai'
d = f'{root}/integrations/storm/target'
cp = f'{d}/moirai-storm-jobs.jar:' + open(f'{d}/classpath.txt').read().strip()
configs = {'os': None, 'qs -20..19': ['-20', '19'], 'qs 0..19': ['0', '19']}
res = {c: [] for c in configs}
for rep in range(reps):
    for name, nice in configs.items():
        tmp = tempfile.mkdtemp(prefix='storm-nice-')
        job = subprocess.Popen(['java', '-Xmx1g', '-cp', cp, 'moirai.storm.Run', 'syn', *extra, '--rate', rate,
                                '--duration', '20s', '--json', '--metrics-dir', tmp],
                               stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True)
        mw = None
        if nice:
            while not glob.glob(f'{tmp}/storm.worker.*-__emit-count-default.csv') and job.poll() is None:
                time.sleep(0.2)
            mw = subprocess.Popen([M, 'schedule', '--storm', tmp, '--policy', 'qs', '--period', '1s',
                                   '--nice-best', nice[0], '--nice-worst', nice[1], '--quiet',
                                   '--state-file', f'{tmp}/state.json'])
        out, _ = job.communicate()
        if mw:
            mw.send_signal(signal.SIGINT); mw.wait()
        s = json.loads([l for l in out.splitlines() if l.startswith('{')][-1])
        res[name].append((s['e2e_latency_ms']['p99'], s['ingress_tps']))
        print(f'rep {rep + 1} {name}: e2e p99 {s["e2e_latency_ms"]["p99"]:.1f} ms, ingress {s["ingress_tps"]:.0f}/s', flush=True)
        shutil.rmtree(tmp, ignore_errors=True)
for name, r in res.items():
    p99 = statistics.median(x[0] for x in r)
    print(f'median {name}: e2e p99 {p99:.1f} ms (x{p99 / statistics.median(x[0] for x in res["os"]):.2f} of os), '
          f'ingress {statistics.median(x[1] for x in r):.0f}/s')

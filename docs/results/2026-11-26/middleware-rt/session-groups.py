#!/usr/bin/env python3
"""Session groups: moirai's engine (the Lachesis SYN) beside one busy process at nice 19 started in
another session (sched_autogroup on), with and without the middleware's handles. Interleaved, REPS
repetitions of 20 s (20 % warm-up) per configuration; prints every run and the medians of the
engine's ingress and CPU, writes session-groups.csv beside this script.

Configurations (the engine in this script's session, the busy process in a session of its own):
  alone            dynamic:2, no busy process (the reference)
  busy             dynamic:2, the busy process, Linux alone
  busy+autogroup   dynamic:2, the busy process, moirai schedule --policy qs --autogroup-nice -10
  busy+qs          dedicated, the busy process, moirai schedule --policy qs (per-thread nice only)
  busy+qs+autogroup  dedicated, the busy process, qs and --autogroup-nice -10
  busy+qs-cgroup   dedicated, the busy process, qs through the cgroup translator (a group per operator)

Usage (from the repository root, after `cargo build --release -p moirai-cli`):
  (alone on the machine) python3 docs/results/2026-11-26/middleware-rt/session-groups.py RATE REPS
e.g. session-groups.py 57900 5
"""
import csv, json, os, signal, statistics, subprocess, sys, tempfile, time

root = subprocess.run(['git', 'rev-parse', '--show-toplevel'], capture_output=True, text=True).stdout.strip()
M = f'{root}/target/release/moirai'
rate, reps = sys.argv[1], int(sys.argv[2])
here = os.path.dirname(os.path.abspath(__file__))
configs = {
    'alone': ('dynamic:2', False, None),
    'busy': ('dynamic:2', True, None),
    'busy+autogroup': ('dynamic:2', True, ['--policy', 'qs', '--autogroup-nice', '-10']),
    'busy+qs': ('dedicated', True, ['--policy', 'qs']),
    'busy+qs+autogroup': ('dedicated', True, ['--policy', 'qs', '--autogroup-nice', '-10']),
    'busy+qs-cgroup': ('dedicated', True, ['--policy', 'qs', '--translator', 'cgroup']),
}


def busy_process():
    """One busy thread at nice 19 in a session of its own."""
    return subprocess.Popen(['nice', '-n', '19', 'sh', '-c', 'while :; do :; done'], start_new_session=True)


def autogroup(pid):
    try:
        return open(f'/proc/{pid}/autogroup').read().strip()
    except OSError:
        return '?'


rows = []
port = 19871
for rep in range(reps):
    for name, (threading, busy, mw_args) in configs.items():
        tmp = tempfile.mkdtemp(prefix='session-groups-')
        hog = busy_process() if busy else None
        engine = subprocess.Popen([M, 'run', 'syn', '--lachesis', '--threading', threading, '--rate', rate,
                                   '--duration', '20s', '--json', '--metrics-addr', f'127.0.0.1:{port}'],
                                  stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True)
        mw = None
        if mw_args:
            time.sleep(0.5)
            mw = subprocess.Popen([M, 'schedule', '--engine', f'http://127.0.0.1:{port}', *mw_args, '--period', '1s',
                                   '--quiet', '--state-file', f'{tmp}/state.json'])
        time.sleep(5)
        seen = autogroup(engine.pid)
        out, _ = engine.communicate()
        if mw:
            mw.send_signal(signal.SIGINT)
            mw.wait()
        if hog:
            hog.kill()
            hog.wait()
        s = json.loads([l for l in out.splitlines() if l.startswith('{')][-1])
        row = {'configuration': name, 'rep': rep + 1, 'threading': threading, 'offered': float(rate),
               'ingress_tps': round(s['ingress_tps']), 'engine_cores': round(s['cpu_cores'], 3),
               'e2e_p99_ms': s['e2e_latency_ms']['p99'], 'engine_autogroup': seen}
        rows.append(row)
        print(row, flush=True)
with open(os.path.join(here, 'session-groups.csv'), 'w', newline='') as f:
    w = csv.DictWriter(f, fieldnames=list(rows[0]))
    w.writeheader()
    w.writerows(rows)
base = statistics.median(r['ingress_tps'] for r in rows if r['configuration'] == 'alone')
for name in configs:
    r = [x for x in rows if x['configuration'] == name]
    ing = statistics.median(x['ingress_tps'] for x in r)
    print(f'{name:18s} median of {len(r)}: ingress {ing:.0f}/s ({ing / base:.2f} of alone), engine cores '
          f'{statistics.median(x["engine_cores"] for x in r):.2f}, e2e p99 {statistics.median(x["e2e_p99_ms"] for x in r):.0f} ms')

#!/usr/bin/env python3
"""Per-thread CPU of the Flink SYN job (heavy operator) with and without the middleware.

usage (from the repository root, after `cargo build --release -p moirai-cli` and a
built integrations/flink): python3 docs/results/2026-11-24/flink-heavy-thread-cpu.py RATE os|qs [extra moirai-schedule args...]
Starts the job (30 s), optionally `moirai schedule --flink … --policy qs`, samples each
thread's CPU time (/proc/<pid>/task/<tid>/stat) from 10 s to 25 s after the sources start,
names threads by one `jcmd Thread.print`, prints cores per thread and µs per egress tuple."""
import json, os, re, signal, subprocess, sys, tempfile, time

signal.signal(signal.SIGPIPE, signal.SIG_DFL)  # quiet under `| head`
rate, mode, extra = sys.argv[1], sys.argv[2], sys.argv[3:]
port = 18500 + os.getpid() % 400
jar = "integrations/flink/target/moirai-flink-jobs.jar"
cp = jar + ":" + open("integrations/flink/target/classpath.txt").read().strip()
tmp = tempfile.mkdtemp(prefix="threadcpu-")
env = dict(os.environ, JAVA_TOOL_OPTIONS=f"-Djava.io.tmpdir={tmp}")
job = subprocess.Popen(["java", "-Xmx1g", "-cp", cp, "moirai.flink.Run", "syn", "--rate", rate, "--duration", "30s",
                        "--ops", "5", "--cost-ns", "5000", "--heavy-op", "3", "--heavy-factor", "4",
                        "--rest-port", str(port), "--json"], stdout=subprocess.PIPE, stderr=subprocess.PIPE, env=env, text=True)
mw = None
try:
    while True:
        line = job.stderr.readline()
        if not line: sys.exit("job ended early")
        if "sources started" in line: break
    t0 = time.time()
    if mode == "qs":
        mw = subprocess.Popen(["target/release/moirai", "schedule", "--flink", f"http://127.0.0.1:{port}", "--policy", "qs",
                               "--period", "1s", "-q", "--state-file", f"{tmp}/state"] + extra)
    time.sleep(8)
    dump = subprocess.run(["jcmd", str(job.pid), "Thread.print"], capture_output=True, text=True).stdout
    names = {int(m.group(2), 16): m.group(1) for m in re.finditer(r'^"(.*?)".*? nid=(0x[0-9a-f]+)', dump, re.M)}
    hz = os.sysconf("SC_CLK_TCK")
    def sample():
        out = {}
        for tid in os.listdir(f"/proc/{job.pid}/task"):
            try:
                f = open(f"/proc/{job.pid}/task/{tid}/stat").read().rsplit(")", 1)[1].split()
                out[int(tid)] = (int(f[11]) + int(f[12])) / hz
            except OSError: pass
        cpu = [int(x) for x in open("/proc/stat").readline().split()[1:]]
        out["machine_busy"] = (sum(cpu) - cpu[3] - cpu[4]) / hz  # all but idle and iowait
        return out
    time.sleep(max(0, 10 - (time.time() - t0))); a = sample(); ta = time.time()
    time.sleep(15); b = sample(); tb = time.time()
    out, _ = job.communicate(timeout=60)
finally:
    if mw: mw.send_signal(signal.SIGTERM); mw.wait()
    if job.poll() is None: job.kill(); job.wait()
    subprocess.run(["rm", "-rf", tmp])
summary = json.loads(out.strip().splitlines()[-1])
egress = summary["egress_tps"]
p99 = summary["e2e_latency_ms"]["p99"]
machine = (b.pop("machine_busy") - a.pop("machine_busy")) / (tb - ta)
cores = {t: (b[t] - a.get(t, 0)) / (tb - ta) for t in b}
total = sum(cores.values())
print(f"rate {rate} {mode} {' '.join(extra)}: egress {egress:.0f}/s, e2e p99 {p99:.0f} ms, JVM {total:.2f} cores, {1e6*total/egress:.1f} µs/tuple; "
      f"machine busy {machine:.2f} of {os.cpu_count()} cores")
for t, c in sorted(cores.items(), key=lambda x: -x[1])[:12]:
    print(f"  {c:5.2f} cores {1e6*c/egress:6.1f} µs/tuple  {names.get(t, '?')[:70]}")

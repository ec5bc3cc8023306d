# Sourced by sink-publish/raw.sh and sink-runs/timely.sh: `run REP CONFIG LABEL COMMAND...` runs
# COMMAND with --json (moirai or timely-syn, same summary fields) and appends one CSV row
# (rep,config,binary,egress_tps,cpu_cores,e2e_p50_ms,e2e_p99_ms; empty figures if it failed) to
# "$out", creating it with its header first.
[ -f "$out" ] || echo "rep,config,binary,egress_tps,cpu_cores,e2e_p50_ms,e2e_p99_ms" > "$out"
run() {  # rep config label command...
  local rep=$1 config=$2 label=$3; shift 3
  timeout 120 "$@" --json 2>/dev/null | tail -1 | python3 -c "
import json, sys
try:
    d = json.load(sys.stdin); e = d['e2e_latency_ms']
    print('$rep,$config,$label,%.0f,%.4f,%.3f,%.3f' % (d['egress_tps'], d['cpu_cores'], e['p50'], e['p99']))
except Exception:
    print('$rep,$config,$label,,,,')" >> "$out"
  tail -1 "$out"
}

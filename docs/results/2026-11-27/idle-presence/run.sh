#!/usr/bin/env bash
# Which part of an idle middleware costs the engine its latency at 28k tuples/s (88 % busy)?
# Usage (repository root, release build, under the benchmark lock): bash THIS [REPS]; one line per run.
# configs: os | mw (auto, 200ms) | mw10s (auto, 10 s period: started, nearly no rounds) | curl (scrape every 200 ms, no middleware)
set -u
cd "$(git rev-parse --show-toplevel)"
M=$PWD/target/release/moirai
REPS=${1:-5}; RATE=${RATE:-28000}; CONFIGS=${CONFIGS:-os mw mw10s curl}
port() { python3 -c 'import socket;s=socket.socket();s.bind(("127.0.0.1",0));print(s.getsockname()[1])'; }
for rep in $(seq 1 $REPS); do for c in $(echo $CONFIGS | tr " " "\n" | shuf); do
  D=$(mktemp -d /tmp/diag.XXXX); P=$(port)
  $M run syn --lachesis --rate $RATE --duration 20000ms --warmup 0.25 --json --metrics-addr 127.0.0.1:$P > $D/out.json 2>$D/err & E=$!
  X=""
  sleep 0.3
  case $c in
    mw) $M schedule --engine http://127.0.0.1:$P --policy qs --state-file $D/state.json --quiet --period 200ms ${MWARGS:-} > $D/mw.log 2>&1 & X=$! ;;
    mw10s) $M schedule --engine http://127.0.0.1:$P --policy qs --state-file $D/state.json --quiet --period 10s > $D/mw.log 2>&1 & X=$! ;;
    curl) ( while kill -0 $E 2>/dev/null; do curl -s -o /dev/null "http://127.0.0.1:$P/metrics?name[]=moirai_queue_len&name[]=moirai_tuples_in_total"; sleep 0.2; done ) & X=$! ;;
  esac
  wait $E
  [ -n "$X" ] && { kill -INT $X 2>/dev/null; wait $X 2>/dev/null; }
  python3 - "$c" "$rep" $D/out.json <<'PY'
import json,sys
c,rep,f=sys.argv[1:4]
try:
  t=open(f).read(); j=json.loads(t[t.index('\n{')+1:])
  e=j["e2e_latency_ms"]
  print(c,rep,"p50 %.3f p99 %.3f p999 %.3f cores %.3f in %.0f"%(e["p50"],e["p99"],e["p999"],j["cpu_cores"],j["ingress_tps"]), flush=True)
except Exception as ex:
  print(c,rep,"ERR",ex)
PY
  rm -rf $D
done; done

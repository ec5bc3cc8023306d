#!/usr/bin/env bash
# Is an idle middleware what raises the p99 at 80 % load? moirai engine (Lachesis SYN) at 26k
# tuples/s, 12 s runs, interleaved: nothing polling it, a curl of the middleware's /metrics
# request every 200 ms, and `moirai schedule` at its defaults (it never acted at 26k).
# Usage (from the repository root, release build): bash idle-poller.sh
# p99 at 26k: no poller vs curl scrape every 200 ms vs moirai schedule idle, interleaved, 10 s each.
cd "$(git rev-parse --show-toplevel)"
Q='?name[]=moirai_operator_tuples_in_total&name[]=moirai_operator_tuples_out_total&name[]=moirai_operator_queue_len&name[]=moirai_operator_head_wait_seconds&name[]=moirai_operator_cpu_seconds_total&name[]=moirai_operator_backlog'
for rep in 1 2 3 4; do
 for mode in none curl mw; do
  target/release/moirai run syn --lachesis --rate 26000 --duration 12s --metrics-addr 127.0.0.1:9913 --json > /tmp/pe.json 2>/dev/null &
  E=$!
  sleep 0.5
  P=
  case $mode in
   curl) (while kill -0 $E 2>/dev/null; do curl -s -o /dev/null "http://127.0.0.1:9913/metrics$Q"; sleep 0.2; done) & P=$!;;
   mw) target/release/moirai schedule --engine http://127.0.0.1:9913 --policy qs --quiet --state-file /tmp/pe-state.json & P=$!;;
  esac
  wait $E
  [ -n "$P" ] && { kill -INT $P 2>/dev/null; wait $P 2>/dev/null; }
  python3 -c "import json;d=json.loads(open('/tmp/pe.json').read().strip().splitlines()[-1]);l=d['e2e_latency_ms'];print('$rep $mode p50',l['p50'],'p99',l['p99'])"
 done
done

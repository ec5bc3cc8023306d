#!/usr/bin/env bash
# A second look at the e2e p99 of `syn --lachesis --rate 1000 --threading dynamic:2` (base vs
# new, interleaved, 4 x 20 s). usage: lachesis-p99.sh BASE NEW OUT.csv
set -u
echo "rep,binary,cpu_cores,e2e_p50_ms,e2e_p99_ms,e2e_p999_ms" > "$3"
for rep in 1 2 3 4; do
  for bin in base new; do
    b=$1; [ $bin = new ] && b=$2
    $b run syn --lachesis --rate 1000 --threading dynamic:2 --duration 20s --json 2>/dev/null | tail -1 |
      python3 -c "import json,sys;d=json.loads(sys.stdin.read());l=d['e2e_latency_ms'];print('$rep,$bin',round(d['cpu_cores'],4),l['p50'],l['p99'],l['p999'],sep=',')" | tee -a "$3"
  done
done

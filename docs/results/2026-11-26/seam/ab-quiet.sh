#!/usr/bin/env bash
# The raw 5-operator pipeline under dynamic:2 and dedicated, 10 interleaved pairs of 4 s, BASE vs NEW
# (binaries). Usage: BASE=… NEW=… benchlock bash ab-quiet.sh OUT
set -u
OUT=$1; mkdir -p "$OUT"
for i in $(seq 1 10); do
  for th in dynamic:2 dedicated; do
    for v in base new; do
      bin=${BASE:?moirai of 5ec4dd5}; [ $v = new ] && bin=${NEW:?moirai to compare}
      "$bin" run syn --ops 5 --cost-ns 0 --rate 0 --duration 4s --threading $th --json | tail -1 > "$OUT/$th-$v-$i.json"
    done
  done
done
for th in dynamic:2 dedicated; do for v in base new; do echo -n "$th $v: "; for i in $(seq 1 10); do python3 -c "import json;print('%.1f' % (json.load(open('$OUT/$th-$v-$i.json'))['egress_tps']/1e6), end=' ')"; done; echo; done; done

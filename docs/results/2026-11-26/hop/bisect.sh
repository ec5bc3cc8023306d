#!/bin/bash
# usage: BIN_DIR=DIR bisect.sh   (DIR holds moirai-base, moirai-v1, moirai-v2, moirai-v3, moirai-new2)
for rep in 1 2; do for b in base v1 v2 v3 new2; do
${BIN_DIR:-/work/data/bin}/moirai-$b run syn --ops 1000 --cost-ns 0 --rate 0 --duration 8s --threading dynamic:2 --json 2>/dev/null | tail -1 | python3 -c "
import json,sys; d=json.load(sys.stdin); print('$rep $b ingress %.0f' % d['ingress_tps'])"; done; done

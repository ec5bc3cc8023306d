#!/usr/bin/env bash
# The round cost again after the loop and the stop watchdog sleep parked instead of waking every
# 50 ms (commit after 73f1403), then the SYN activation campaign piece:
#   cargo build --release -p moirai-cli
#   bash docs/results/2026-11-26/middleware/round-cost-run2.sh [LOGDIR]
set -u
cd "$(git rev-parse --show-toplevel)"
H=docs/results/2026-11-26/middleware
OUT=$H/round-cost-2.txt
L=${1:-/tmp/mw-round-cost-2}
mkdir -p "$L"
: > $OUT
for spec in "one 1s 60" "one 250ms 30" "three 1s 60"; do
  set -- $spec
  echo "== round-cost.sh $1 $2 $3 (--activation always), $(date -u +%FT%TZ)" | tee -a $OUT
  KEEP=$L/$1-$2 bash $H/round-cost.sh "$1" "$2" "$3" 2>&1 | tee -a $OUT
done
bash $H/syn-activation.sh $H/syn-activation "${REPS:-3}" 2>&1 | tail -40 > $H/syn-activation.log

#!/usr/bin/env bash
# The round-cost measurement of 2026-11-26 (issue 23, item 4), all at `--activation always`:
#   cargo build --release -p moirai-cli
#   bash docs/results/2026-11-26/middleware/round-cost-run.sh [LOGDIR]
# Output: round-cost.txt next to this script; the SPEs' and the middleware's logs under LOGDIR
# (default /tmp/mw-round-cost), a perf profile of the three-SPE middleware there too.
set -u
cd "$(git rev-parse --show-toplevel)"
H=docs/results/2026-11-26/middleware
OUT=$H/round-cost.txt
L=${1:-/tmp/mw-round-cost}
mkdir -p "$L"
: > $OUT
for spec in "one 1s 90" "one 250ms 30" "three 1s 60" "flink 1s 30" "storm 1s 30"; do
  set -- $spec
  echo "== round-cost.sh $1 $2 $3 (--activation always), commit $(git rev-parse --short HEAD), $(date -u +%FT%TZ)" | tee -a $OUT
  perf=""; [ "$1" = three ] && perf=$L/three.perf
  KEEP=$L/$1-$2 PERF=$perf bash $H/round-cost.sh "$1" "$2" "$3" 2>&1 | tee -a $OUT
done

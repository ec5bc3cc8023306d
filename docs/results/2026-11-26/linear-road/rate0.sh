#!/usr/bin/env bash
# Records per second through the faithful query at --rate 0: one expressway's 3-hour LinearGenerator
# file (23 M position reports and its queries), 5 runs; then the largest L's traffic of moirai's
# generator. Usage: benchlock rate0.sh FILE TOLLS
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
moirai=${MOIRAI:-$here/../../../../target/release/moirai}
file=$1 tolls=$2
for i in 1 2 3 4 5; do
  "$moirai" run linear-road --input "$file" --historical-tolls "$tolls" --rate 0 --json | tail -1 \
    | python3 -c 'import json,sys; v=json.load(sys.stdin); s=v["workload_stats"]; print("run %s: %d records in %.2f s: %.0f records/s, all in time %s" % (sys.argv[1], s["records_read"], v["egress_s"], s["records_read"]/v["egress_s"], s["response_times"]["all_in_time"]))' $i
done

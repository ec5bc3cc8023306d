#!/usr/bin/env bash
# What one scrape by the middleware costs moirai's engine: an engine running Linear Road (the
# Lachesis shape) at RATE, N requests of the query the middleware sends every round
# (`/metrics?name[]=…`, six families), and the CPU its `moirai-http` thread spent on them
# (utime+stime from /proc, before and after). Run alone, from the repository's root.
# usage: scrape-cost.sh [RATE] [N]   (default 300k, 500)
set -euo pipefail
rate=${1:-300k}; n=${2:-500}; port=9431
cargo build --release -p moirai-cli
target/release/moirai run linear-road --shape lachesis --traffic 64h --rate "$rate" --duration 120s \
  --metrics-addr 127.0.0.1:$port > /dev/null 2>&1 & engine=$!
trap 'kill $engine 2>/dev/null' EXIT
sleep 8
http=$(grep -l '^moirai-http$' /proc/$engine/task/*/comm | head -1 | xargs dirname)
ticks() { awk '{print $14 + $15}' "$http/stat"; }
url="http://127.0.0.1:$port/metrics?name[]=moirai_operator_tuples_in_total&name[]=moirai_operator_tuples_out_total"
url+="&name[]=moirai_operator_queue_len&name[]=moirai_operator_head_wait_seconds"
url+="&name[]=moirai_operator_cpu_seconds_total&name[]=moirai_operator_backlog"
a=$(ticks)
for _ in $(seq "$n"); do curl -sf -g "$url" > /dev/null; done
b=$(ticks)
hz=$(getconf CLK_TCK)
echo "$n scrapes: the engine's HTTP thread spent $(( (b - a) * 1000 / hz )) ms of CPU," \
  "$(python3 -c "print(f'{($b - $a) * 1000 / $hz / $n:.3f}')") ms a scrape"

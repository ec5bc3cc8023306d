#!/usr/bin/env bash
# Everything in this directory, in one hold of the benchmark lock:
#   /work/bin/benchlock bash docs/results/2026-11-26/flink-prometheus/all.sh
# 1. where Flink's round goes today (REST): a call-graph profile of the middleware (perf-rest.txt);
# 2. round cost, REST against the reporter, Flink alone and three SPEs (round-cost.txt);
# 3. past saturation (Lachesis SYN at 48k): the reporter's and the REST API's latency, and the
#    middleware reading either (saturation.txt).
set -u
cd "$(git rev-parse --show-toplevel)"
H=docs/results/2026-11-26/flink-prometheus
P=$(mktemp -d /tmp/flinkperf.XXXX)
echo "== round-cost.sh flink 1s 30 (REST), perf record -g of the middleware for 30 s after, $(git rev-parse --short HEAD)" > $H/perf-rest.txt
FLINK_READ=rest PERF=$P/perf.data bash $H/round-cost.sh flink 1s 30 2>&1 | grep -v '^\[' >> $H/perf-rest.txt
perf report -i $P/perf.data --stdio --no-children --sort dso,sym 2>/dev/null | grep -E '^ +[0-9.]+%' | head -40 >> $H/perf-rest.txt
echo "== the same, the reporter" >> $H/perf-rest.txt
FLINK_READ=prometheus PERF=$P/perf2.data bash $H/round-cost.sh flink 1s 30 2>&1 | grep -v '^\[' >> $H/perf-rest.txt
perf report -i $P/perf2.data --stdio --no-children --sort dso,sym 2>/dev/null | grep -E '^ +[0-9.]+%' | head -40 >> $H/perf-rest.txt
rm -rf "$P"
bash $H/round-cost-run.sh $H/round-cost.txt 30 2
: > $H/saturation.txt
for read in prometheus rest; do bash $H/saturation.sh $read 48000 40 2>&1 | tee -a $H/saturation.txt; done

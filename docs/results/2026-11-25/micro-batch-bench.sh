#!/bin/bash
# Every micro-batch figure of micro-batch.md (this directory), release build, on a quiet machine:
#   cargo build --release -p moirai-cli && bash docs/results/2026-11-25/micro-batch-bench.sh
cd "$(dirname "$0")/../../.."
R=docs/results/2026-11-25
B=target/release/moirai
# Drizzle Fig. 4-5 analog: coordination per micro-batch vs group size (3 repetitions, medians).
BIN=$B bash $R/micro-batch-coordination.sh > $R/micro-batch-coordination.txt
python3 $R/micro-batch-coordination.py < $R/micro-batch-coordination.txt > $R/micro-batch-coordination-table.md
# YSB window latency vs throughput at several batch intervals (the lab).
BIN=$B OUT=$R/micro-batch-ysb-intervals bash $R/micro-batch-ysb-intervals.sh > $R/micro-batch-ysb-intervals.log 2>&1
python3 $R/micro-batch-ysb-intervals.py > $R/micro-batch-ysb-intervals-table.md
# AIMD under a load change: WordCount ramping from 5 000 to 60 000 sentences/s over 30 s.
$B run wordcount --rate 5000 --ramp-to 60000 --duration 30s --batch-interval 20ms --threading micro-batch \
  --group auto --executors 2 --json -v > $R/micro-batch-aimd-ramp.json 2> $R/micro-batch-aimd-ramp.log
# Recovery: kill -9 an executor once micro-batch 150 is committed, groups 10 and 100.
for g in 10 100; do
  $B run ysb --rate 10000 --duration 25s --window-ms 1000 --parallelism 2 --threading micro-batch \
    --batch-interval 100ms --group $g --executors 3 --kill-executor 1@150 --json -v \
    > $R/micro-batch-recovery-group-$g.json 2> $R/micro-batch-recovery-group-$g.log
done
# The timelines (drawing is not measured).
$B micro-batch-timeline --out $R/micro-batch-aimd-ramp ramp=$R/micro-batch-aimd-ramp.json
$B micro-batch-timeline --out $R/micro-batch-recovery group-10=$R/micro-batch-recovery-group-10.json \
  group-100=$R/micro-batch-recovery-group-100.json

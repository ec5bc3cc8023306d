#!/bin/bash
# Every micro-batch figure of micro-batch-coordination.md, release build, on a quiet machine.
cd "$(dirname "$0")/../../.."
R=docs/results/2026-11-24
B=target/release/moirai
BIN=$B $R/micro-batch-coordination.sh > $R/micro-batch-coordination.txt 2>&1
for g in 10 100; do
  $B run ysb --rate 10000 --duration 25s --window-ms 1000 --parallelism 2 --threading micro-batch \
    --batch-interval 100ms --group $g --executors 3 --kill-executor 1@150 --json -v \
    > $R/micro-batch-recovery-group-$g.json 2> $R/micro-batch-recovery-group-$g.log
done
$B run wordcount --rate 20000 --duration 20s --batch-interval 20ms --threading micro-batch --group auto \
  --executors 2 --json -v > $R/micro-batch-aimd.json 2> $R/micro-batch-aimd.log
$B bench ysb --rates 5000,10000,20000 --duration 10s --reps 2 \
  --compare os,os@micro-batch:interval=100ms:group=per-batch,os@micro-batch:interval=100ms:group=10 \
  --out /tmp/micro-batch-ysb -- --window-ms 1000 --parallelism 2 > /tmp/micro-batch-ysb.out 2>&1
cp /tmp/micro-batch-ysb/results.csv $R/micro-batch-ysb-latency.csv
grep -v "^moirai bench: \[" /tmp/micro-batch-ysb.out > $R/micro-batch-ysb-latency.txt
# The timelines (after the lock is released: drawing is not measured).
$B micro-batch-timeline --out $R/micro-batch-recovery group-10=$R/micro-batch-recovery-group-10.json \
  group-100=$R/micro-batch-recovery-group-100.json
$B micro-batch-timeline --out $R/micro-batch-aimd auto=$R/micro-batch-aimd.json

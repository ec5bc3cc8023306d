#!/bin/bash
# YSB end-to-end latency vs throughput, Drizzle §5.3's way: every scheduling at several batch
# intervals, so that each can be read at the smallest interval that keeps up with a rate.
# 8 executors (8 map and 8 reduce partitions), 1 s windows; the continuous engine for reference.
# From the repository's root, on a quiet machine; micro-batch-ysb-intervals.py reads the results.
set -e
BIN=${BIN:-target/release/moirai}
OUT=${OUT:-docs/results/2026-11-25/micro-batch-ysb-intervals}
$BIN bench ysb --rates 10000,20000,40000 --duration 10s --reps 2 \
  --compare os,os@micro-batch:interval=1ms:group=per-batch:executors=8,os@micro-batch:interval=1ms:group=50:executors=8,os@micro-batch:interval=2ms:group=per-batch:executors=8,os@micro-batch:interval=2ms:group=50:executors=8,os@micro-batch:interval=5ms:group=per-batch:executors=8,os@micro-batch:interval=5ms:group=50:executors=8,os@micro-batch:interval=10ms:group=per-batch:executors=8,os@micro-batch:interval=10ms:group=50:executors=8 \
  --out "$OUT" -- --window-ms 1000 --parallelism 8

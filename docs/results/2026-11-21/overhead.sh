#!/bin/bash
# Middleware CPU with 60 scheduled threads (10 SYN queries x (source + 4 ops + sink)), 60 s per period.
B=${B:-target/release/moirai}
$B run syn --queries 10 --ops 4 --cost-ns 1000 --rate 500 --duration 200s --metrics-addr 127.0.0.1:9480 > /tmp/ovh-engine.txt 2>&1 &
EP=$!
sleep 2
for period in 1s 100ms; do
  $B schedule --engine http://127.0.0.1:9480 --policy qs --period $period --state-file /tmp/ovh-state.json --metrics-addr 127.0.0.1:9481 -q &
  MP=$!
  sleep 5
  t0=$(awk '{print $14+$15}' /proc/$MP/stat); s0=$(date +%s.%N)
  sleep 60
  t1=$(awk '{print $14+$15}' /proc/$MP/stat); s1=$(date +%s.%N)
  threads=$(curl -s 127.0.0.1:9481/metrics | awk '/^moirai_schedule_threads /{print $2}')
  rounds=$(curl -s 127.0.0.1:9481/metrics | awk '/^moirai_schedule_rounds_total /{print $2}')
  rs=$(curl -s 127.0.0.1:9481/metrics | awk '/^moirai_schedule_round_seconds_total /{print $2}')
  kill -INT $MP; wait $MP
  echo "period $period: threads $threads, rounds $rounds, mean round $(echo "$rs / $rounds * 1000" | bc -l | cut -c1-6) ms, CPU $(echo "($t1 - $t0) / $(getconf CLK_TCK) / ($s1 - $s0) * 100" | bc -l | cut -c1-5) % of one core"
done
kill $EP; wait $EP 2>/dev/null

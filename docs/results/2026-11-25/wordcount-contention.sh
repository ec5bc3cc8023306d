#!/usr/bin/env bash
# Was the engine short of CPU during the WordCount bench? Runs `moirai run wordcount --rate 0` and
# reads every thread's schedstat (run time, time runnable but waiting for a core) over 6 s of it:
# on an idle 2-core machine the threads' run time approaches 2 cores; waiting time beyond it with
# fewer than 2 cores used means other processes held the cores.
set -euo pipefail
M=${MOIRAI:-target/release/moirai}
$M run wordcount --rate 0 --duration 14s > /tmp/wordcount-contention.txt 2>&1 & PID=$!
snap() { for t in /proc/$PID/task/*; do echo "$(tr ' ' _ < $t/comm) $(cat $t/schedstat)"; done; }
sleep 4; snap > /tmp/wordcount-contention.0; sleep 6; snap > /tmp/wordcount-contention.1
echo "load average: $(cat /proc/loadavg)"
wait $PID
paste /tmp/wordcount-contention.0 /tmp/wordcount-contention.1 | awk '{r=($6-$2)/6e9; w=($7-$3)/6e9; R+=r; W+=w;
  printf "%-16s run %.2f cores, runnable-waiting %.2f\n",$1,r,w} END {printf "all threads: run %.2f cores, runnable-waiting %.2f\n",R,W}'
grep -E "^(ingress|CPU use)" /tmp/wordcount-contention.txt

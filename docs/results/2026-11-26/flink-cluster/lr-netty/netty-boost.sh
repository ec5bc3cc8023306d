#!/usr/bin/env bash
# While a `moirai schedule` whose log's name contains "boost" runs (a lab configuration labelled
# #boost), renice every TaskManager's Flink Netty threads to $NICE (default -10), once a second;
# stops when $STOP exists. Experiment only: the JVMs end with each point.
NICE=${NICE:--10}; STOP=${STOP:-/tmp/netty-boost.stop}
rm -f "$STOP"; n=0
while [ ! -e "$STOP" ]; do
  boost=0
  for m in $(pgrep -f "moirai schedule"); do
    readlink /proc/$m/fd/2 2>/dev/null | grep -q boost && boost=1
  done
  if [ $boost = 1 ]; then
    for p in $(pgrep -f TaskManagerRunner); do
      for t in /proc/$p/task/*; do
        c=$(cat $t/comm 2>/dev/null)
        case "$c" in "Flink Netty"*) cur=$(awk '{print $19}' $t/stat 2>/dev/null); [ "$cur" != "$NICE" ] && renice -n $NICE -p ${t##*/} >/dev/null 2>&1 && n=$((n+1)) && echo "$(date +%T) reniced ${t##*/} ($c) of $p" ;; esac
      done
    done
  fi
  sleep 1
done
echo "reniced $n"

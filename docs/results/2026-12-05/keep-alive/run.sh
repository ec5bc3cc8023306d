#!/usr/bin/env bash
# What an idle round of the middleware costs with a fresh connection per request to the engine
# (BEFORE) against one connection kept open (AFTER): moirai's engine at 26k tuples/s of the Lachesis
# SYN, the middleware (QS, a round every 200 ms: --activation-quiet-period 0s) measured over 60 s
# after 10 s, three interleaved pairs. Run alone, from the repository's root.
# usage: run.sh BEFORE AFTER OUT   (two moirai binaries; OUT/results.csv)
set -u
before=${1:?usage: run.sh BEFORE AFTER OUT}; after=${2:?}; out=${3:?}; mkdir -p $out; echo "build,rep,mw_cpu_s,rounds,ms_per_round,engine_http_ticks" > $out/results.csv
port=20100
for rep in 1 2 3; do for b in fresh keep; do
  if [ $b = fresh ]; then bin=$before; else bin=$after; fi
  port=$((port+2))
  "$after" run syn --lachesis --rate 26000 --duration 75s --json --metrics-addr 127.0.0.1:$port > $out/e-$b-$rep.json 2>/dev/null & E=$!
  sleep 1
  "$bin" schedule --policy qs --engine http://127.0.0.1:$port --activation-quiet-period 0s --metrics-addr 127.0.0.1:$((port+1)) --state-file $out/st-$b-$rep.json > $out/m-$b-$rep.log 2>&1 & M=$!
  sleep 10
  m0=$(curl -s 127.0.0.1:$((port+1))/metrics); h0=$(for t in /proc/$E/task/*; do [ "$(cat $t/comm)" = moirai-http ] && awk '{print $14+$15}' $t/stat; done)
  sleep 60
  m1=$(curl -s 127.0.0.1:$((port+1))/metrics); h1=$(for t in /proc/$E/task/*; do [ "$(cat $t/comm)" = moirai-http ] && awk '{print $14+$15}' $t/stat; done)
  kill -TERM $M; wait $M; wait $E
  c0=$(awk '/^moirai_schedule_cpu_seconds_total /{print $2}' <<< "$m0"); c1=$(awk '/^moirai_schedule_cpu_seconds_total /{print $2}' <<< "$m1")
  r0=$(awk '/^moirai_schedule_rounds_total /{print $2}' <<< "$m0"); r1=$(awk '/^moirai_schedule_rounds_total /{print $2}' <<< "$m1")
  python3 -c "c=$c1-$c0; r=$r1-$r0; print(f'$b,$rep,{c:.4f},{r},{1000*c/r:.3f},$((h1-h0))')" >> $out/results.csv
  tail -1 $out/results.csv
done; done

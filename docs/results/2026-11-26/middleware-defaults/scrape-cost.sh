#!/usr/bin/env bash
# The CPU a moirai engine spends answering one /metrics scrape: a Lachesis SYN engine at 16k
# tuples/s, 200 scrapes with curl, the CPU of its `moirai-http` thread (schedstat) before and
# after. Q is the query string (empty: every family; the middleware's: its six families).
# Usage: Q='?name[]=...' bash scrape-cost.sh PATH/TO/moirai
BIN=${1:?moirai binary}
PORT=${PORT:-9912}
$BIN run syn --lachesis --rate 16000 --duration 40s --metrics-addr 127.0.0.1:$PORT > /dev/null 2>&1 &
E=$!
trap 'kill $E 2>/dev/null; wait $E 2>/dev/null' EXIT
sleep 3
T=$(for t in /proc/$E/task/*; do [ "$(cat $t/comm)" = moirai-http ] && echo ${t##*/}; done | head -1)
a=$(awk '{print $1}' /proc/$E/task/$T/schedstat)
for i in $(seq 200); do curl -s -o /dev/null "http://127.0.0.1:$PORT/metrics$Q"; done
b=$(awk '{print $1}' /proc/$E/task/$T/schedstat)
echo "$BIN Q='$Q': $(curl -s "http://127.0.0.1:$PORT/metrics$Q" | wc -c) bytes, $(( (b-a)/200/1000 )) us of engine CPU per scrape"

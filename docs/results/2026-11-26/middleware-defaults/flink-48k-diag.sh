#!/usr/bin/env bash
# Why the activation rule never acted on Flink past saturation: a Flink Lachesis SYN job at
# 48k tuples/s (local cluster in one JVM), `moirai schedule -v` at its defaults attached after
# 15 s, its /metrics read 25 s later. Output: flink-48k-middleware.log.
cd "$(git rev-parse --show-toplevel)"
FCP=integrations/flink/target/moirai-flink-jobs.jar:$(cat integrations/flink/target/classpath.txt)
java -Xmx1g -cp "$FCP" moirai.flink.Run syn --lachesis --rate 48000 --duration 60s --rest-port 9931 > /tmp/fd.out 2> /tmp/fd.err & F=$!
sleep 15
target/release/moirai schedule --flink http://127.0.0.1:9931 --policy qs -v --state-file /tmp/fd-state.json --metrics-addr 127.0.0.1:9932 > /tmp/fd-mw.txt 2>&1 & M=$!
sleep 25
curl -s http://127.0.0.1:9932/metrics | grep -E "active|busy" 
kill -INT $M; wait $M
kill $F; wait $F

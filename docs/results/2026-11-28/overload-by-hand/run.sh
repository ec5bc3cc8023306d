#!/usr/bin/env bash
# The overload test's scenario by hand, with -v: an engine of 1 query x 3 operators x 200 us at
# 2600 tuples/s; `moirai schedule --policy qs --activation-lag LAG -v`; two busy loops from its first
# round until 2 s after it acts; then up to 90 s for it to hand the engine back. Prints the outcome.
#   run.sh LAG LOG
set -u
cd "$(git rev-parse --show-toplevel)"
M=$PWD/target/release/moirai; LAG=${1:-25ms}; OUT=${2:?log file}
port() { python3 -c 'import socket;s=socket.socket();s.bind(("127.0.0.1",0));print(s.getsockname()[1])'; }
EP=$(port); MP=$(port); D=$(mktemp -d)
$M run syn --queries 1 --ops 3 --cost-ns 200000 --rate 2600 --duration 180s --metrics-addr 127.0.0.1:$EP > $D/eng.log 2>&1 & E=$!
sleep 3
$M schedule --engine http://127.0.0.1:$EP --policy qs --state-file $D/state.json --metrics-addr 127.0.0.1:$MP --activation-lag $LAG -v > $OUT 2>&1 & W=$!
t0=$(date +%s)
until grep -q "round 1:" $OUT; do sleep 0.1; [ $(( $(date +%s) - t0 )) -gt 30 ] && break; done
# the hogs start with the middleware's first round, as in the test
H=(); for i in 1 2; do (while :; do :; done) & H+=($!); done
sleep 0.1
until grep -q "': active —" $OUT; do sleep 0.1; [ $(( $(date +%s) - t0 )) -gt 60 ] && break; done
sleep 2; kill "${H[@]}"; wait "${H[@]}" 2>/dev/null
ta=$(date +%s)
idle() { grep -E "': (active|idle) —" $OUT | tail -1 | grep -q "': idle —" && grep -q "': active —" $OUT; }
until idle; do sleep 0.5; [ $(( $(date +%s) - ta )) -gt 90 ] && break; done
tb=$(date +%s)
kill -INT $W; wait $W; kill $E; wait $E 2>/dev/null
echo "lag $LAG: $(grep "': active —" $OUT | grep -vc 'still needed') activation(s); $(grep -E "': idle —" $OUT | sed -n 2p | cut -c1-150); waited $((tb-ta)) s"
rm -rf $D

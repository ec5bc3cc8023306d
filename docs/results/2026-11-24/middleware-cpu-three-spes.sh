#!/usr/bin/env bash
# Middleware CPU with three SPEs at once (~100 operators: 50 Storm executors, 25 Flink subtasks, 25 engine operators), 1 s period.
# Each SPE runs SYN, 3 ops per query (Storm 10 queries, Flink and moirai 5), 500 tuples/s; needs a release build and both Maven jobs built.
set -u
O_LOG=${O_LOG:-/dev/null}
cd "$(git rev-parse --show-toplevel)"
M=$PWD/target/release/moirai
D=$(mktemp -d /tmp/mwcpu.XXXX)
FCP=integrations/flink/target/moirai-flink-jobs.jar:$(cat integrations/flink/target/classpath.txt)
SCP=integrations/storm/target/moirai-storm-jobs.jar:$(cat integrations/storm/target/classpath.txt)
mkdir -p $D/storm
java -Xmx1g -cp "$SCP" moirai.storm.Run syn --queries 10 --ops 3 --cost-ns 1000 --rate 500 --duration 10m --metrics-dir $D/storm > $D/storm.out 2> $D/storm.err & SP=$!
java -Xmx1g -cp "$FCP" moirai.flink.Run syn --queries 5 --ops 3 --cost-ns 1000 --rate 500 --duration 10m --rest-port 18141 > $D/flink.out 2> $D/flink.err & FP=$!
$M run syn --queries 5 --ops 3 --cost-ns 1000 --rate 500 --duration 10m --metrics-addr 127.0.0.1:19464 > $D/engine.out 2>&1 & EP=$!
sleep 25
cat > $D/schedule.toml <<TOML
state_file = "$D/state.json"
metrics_addr = "127.0.0.1:19465"
[[spe]]
name = "engine"
driver = "moirai"
url = "http://127.0.0.1:19464"
[[spe]]
name = "flink"
driver = "flink"
url = "http://127.0.0.1:18141"
[[spe]]
name = "storm"
driver = "storm"
metrics_dir = "$D/storm"
[[policy]]
name = "shares"
type = "groups"
by = "spe"
priority = { constant = { values = { engine = 1, flink = 1, storm = 1 } } }
translator = "cgroup"
period = "1s"
[[policy]]
name = "qs"
type = "qs"
translator = "nice"
nice_best = 0
period = "1s"
TOML
$M schedule --config $D/schedule.toml ${UI:+--ui 127.0.0.1:19466} > $D/mw.log 2>&1 & MP=$!
sleep 15
ticks=$(getconf CLK_TCK)
cpu() { awk '{print $14+$15}' /proc/$MP/stat; }
c0=$(cpu); t0=$(date +%s.%N)
sleep 60
c1=$(cpu); t1=$(date +%s.%N)
threads=$(curl -s http://127.0.0.1:19465/metrics | grep -c '^moirai_schedule_applied{policy="qs"')
rounds=$(curl -s http://127.0.0.1:19465/metrics | grep '^moirai_schedule_rounds_total' )
echo "threads under qs: $threads; $rounds"
python3 -c "print('middleware CPU: %.2f %% of a core over %.0f s' % (100*($c1-$c0)/$ticks/($t1-$t0), $t1-$t0))"
kill -INT $MP; wait $MP; echo "middleware exit $?"; tail -2 $D/mw.log
kill $SP $FP $EP; wait $SP $FP $EP 2>/dev/null
cp $D/mw.log $O_LOG 2>/dev/null; rm -rf $D

#!/usr/bin/env bash
# Raw throughput, moirai's engine vs Flink 1.20 on the same SYN pipeline (5 operators, no cost, as
# fast as possible), alternated A B A B A B. Run from the repository's root after
# `cargo build --release -p moirai-cli` and `mvn -q -B -f integrations/flink/pom.xml -DskipTests package`.
set -u
OUT=${OUT:-/tmp/res}
mkdir -p "$OUT"
M=target/release/moirai
J=integrations/flink/target
CP=$J/moirai-flink-jobs.jar:$(cat $J/classpath.txt)
for i in 1 2 3; do
  $M run syn --ops 5 --cost-ns 0 --rate 0 --duration 15s --json | tail -1 > "$OUT/raw-moirai-$i.json"
  java -Xmx1g -cp "$CP" moirai.flink.Run syn --ops 5 --cost-ns 0 --rate 0 --duration 15s --rest-port 18099 --json \
    2>"$OUT/raw-flink-$i.log" | tail -1 > "$OUT/raw-flink-$i.json"
done

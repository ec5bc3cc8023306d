#!/usr/bin/env bash
# A call-graph profile of the 7-operator SYN at 1 000 tuples/s: usage: profile.sh BINARY THREADING TAG [args]
# (perf record of the running process for 6 s from its 3rd second; perf report -i TAG.perf.data)
set -u
b=$1; model=$2; tag=$3; shift 3
$b run syn --rate 1000 --threading $model --duration 12s --json "$@" > $tag.json 2>/dev/null &
pid=$!
sleep 3
perf record -F 5000 --call-graph dwarf,16384 -p $pid -o $tag.perf.data -- sleep 6 2>&1 | tail -2
wait

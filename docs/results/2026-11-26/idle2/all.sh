#!/usr/bin/env bash
# The whole comparison of this directory (~16 min): run it through the benchmark lock.
# usage: all.sh BASE_BINARY NEW_BINARY OUTDIR
set -u
base=$1; new=$2; out=$3
here=$(cd "$(dirname "$0")" && pwd)
RATES=1000 SLACKS="0 1ms 2ms" MODELS="dynamic:2 dedicated" bash "$here/slack.sh" "$base" "$new" "$out" 3
CASES=lat bash "$here/../hop/run.sh" "$base" "$new" "$out/lat" 3
RATES=10000 SLACKS="0 1ms" MODELS="dynamic:2" bash "$here/slack.sh" "$base" "$new" "$out" 3

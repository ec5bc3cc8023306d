#!/usr/bin/env bash
# The diagnostic trial behind the finding in docs/linear-road.md (cause of the late answers at
# L = 100): one trial, shortened further (20 s lead-in, 1 judged minute), with the CPU of every
# thread of the trial's process sampled each second. Usage: benchlock diag.sh NAME L [flags].
# Writes NAME/trials.{json,csv} (with the per-second timeline) and NAME/threads-cpu.txt (CPU per
# thread in 5-s buckets from the trial's start, threads.py).
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
moirai=${MOIRAI:-$here/../../../../target/release/moirai}
name=$1 at=$2
shift 2
out=$here/$name
mkdir -p "$out"
"$moirai" l-rating --at "$at" --cars-per-second 23 --skip 75m --fast-forward 5m --lead-in 20s --judged 1m \
  --out "$out" "$@" > "$out/log" 2>&1 &
parent=$!
samples=$(mktemp)
# Every second: time, thread id, name, utime, stime of each thread of the trial's process.
( while kill -0 $parent 2>/dev/null; do
    for p in $(pgrep -P $parent); do
      ts=$(date +%s.%N)
      for t in /proc/$p/task/*; do
        read -r line < "$t/stat" 2>/dev/null || continue
        comm=$(cat "$t/comm" 2>/dev/null)
        set -- ${line##*) }
        echo "$ts ${t##*/} $comm ${12} ${13}"
      done
    done
    sleep 1
  done ) > "$samples" &
wait $parent
python3 "$here/threads.py" "$samples" > "$out/threads-cpu.txt"
rm -f "$samples"

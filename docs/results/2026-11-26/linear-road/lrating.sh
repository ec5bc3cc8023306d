#!/usr/bin/env bash
# L-rating trials of `moirai l-rating` at given L, one lock session per call, each trial a process
# of its own. Usage: benchlock lrating.sh NAME L[,L…] [moirai l-rating flags, e.g. --threading dynamic:2]
# (L = search: no --at, the command searches; give it --from, --max, --resolution)
# Shortened against the command's defaults to fit the shared machine's lock: 75 min of traffic
# simulated by the generator and not replayed, 5 min fast-forwarded, then at the records' clock
# 30 s of lead-in and 2 min judged (the default judges 10 min). Writes NAME/trials.{csv,json} and
# NAME.log next to this script.
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
moirai=${MOIRAI:-$here/../../../../target/release/moirai}
name=$1 at=$2
shift 2
at_flag=(--at "$at")
[ "$at" = search ] && at_flag=()
"$moirai" l-rating "${at_flag[@]}" --cars-per-second 23 --skip 75m --fast-forward 5m --lead-in 30s --judged 2m \
  --out "$here/$name" "$@" 2>&1 | tee -a "$here/$name.log"

#!/usr/bin/env bash
# Wake-ups per second per thread name of `moirai run syn` at a low rate, for each binary and
# threading model given. usage: wakeups.sh OUTFILE BINARY... (env: ARGS, MODELS, SECS)
set -u
out=$1; shift
here=$(cd "$(dirname "$0")" && pwd)
models=${MODELS:-"dynamic:2 dedicated"}
args=${ARGS:-"syn --lachesis --rate 1000"}
secs=${SECS:-10}
: > "$out"
for model in $models; do
  for bin in "$@"; do
    port=$((20000 + RANDOM % 20000))
    "$bin" run $args --threading "$model" --duration $((secs + 8))s --metrics-addr 127.0.0.1:$port > /dev/null 2>&1 &
    pid=$!
    sleep 4
    { echo "## $bin $args --threading $model"; python3 "$here/wakeups.py" "$pid" "$secs"; echo; } >> "$out"
    wait "$pid"
  done
done

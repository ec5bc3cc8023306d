#!/usr/bin/env bash
# moirai's engine at 26k tuples/s of the Lachesis SYN (83 % of its CPU bound here) three ways,
# REPS interleaved triples of 150 s (60 s discarded), the order rotating: alone; with an idle
# `moirai schedule` (QS, -v) that runs a round every period (200 ms) whatever the load
# (--activation-quiet-period 0s, as before the quiet period); with one at its defaults (a round
# every second while the engine keeps up). What the idle middleware costs the engine's p99
# (issue 23), and whether looking less often while it keeps up takes that cost away. Run alone,
# from the repository's root; ~7.7 min a triple.
# usage: run.sh OUT [REPS]
#   OUT/results.csv: configuration,rep,ok,e2e_p50_ms,e2e_p99_ms,engine_cpu_cores,middleware_cpu_s,rounds
set -euo pipefail
out=${1:?usage: run.sh OUT [REPS]}
reps=${2:-6}
mkdir -p "$out"
cargo build --release -p moirai-cli
bin=target/release/moirai
echo "configuration,rep,ok,e2e_p50_ms,e2e_p99_ms,engine_cpu_cores,middleware_cpu_s,rounds" > "$out/results.csv"
configs=(alone every-period quiet)
port=19900
for rep in $(seq 1 "$reps"); do
  for i in 0 1 2; do
    config=${configs[$(( (i + rep - 1) % 3 ))]}
    port=$((port + 2))
    "$bin" run syn --lachesis --rate 26000 --duration 150s --warmup 0.4 --json \
      --metrics-addr "127.0.0.1:$port" > "$out/$config-$rep.json" 2> "$out/$config-$rep.err" &
    engine=$!
    mw=
    case "$config" in
      every-period) quiet=0s ;;
      quiet) quiet=1s ;;
      *) quiet= ;;
    esac
    if [ -n "$quiet" ]; then
      sleep 0.5
      "$bin" schedule --policy qs -v --engine "http://127.0.0.1:$port" --activation-quiet-period "$quiet" \
        --metrics-addr "127.0.0.1:$((port + 1))" --state-file "$out/state-$rep.json" \
        > "$out/$config-$rep.log" 2>&1 &
      mw=$!
    fi
    # The middleware's CPU and rounds, read just before the engine stops (it runs 150 s).
    mw_cpu= rounds=
    if [ -n "$mw" ]; then
      sleep 148
      m=$(curl -s "http://127.0.0.1:$((port + 1))/metrics" || true)
      mw_cpu=$(awk '/^moirai_schedule_cpu_seconds_total /{print $2}' <<< "$m")
      rounds=$(awk '/^moirai_schedule_rounds_total /{print $2}' <<< "$m")
    fi
    wait "$engine"
    if [ -n "$mw" ]; then kill -TERM "$mw"; wait "$mw" || true; fi
    python3 - "$out/$config-$rep.json" "$config" "$rep" "$mw_cpu" "$rounds" >> "$out/results.csv" <<'PY'
import json, sys
doc = json.loads(open(sys.argv[1]).read().strip().splitlines()[-1])  # --json: the summary's last line
lat = doc["e2e_latency_ms"]
print(f"{sys.argv[2]},{sys.argv[3]},true,{lat['p50']},{lat['p99']},{doc['cpu_cores']},{sys.argv[4]},{sys.argv[5]}")
PY
    tail -1 "$out/results.csv"
  done
done

#!/usr/bin/env bash
# moirai's engine at 26k tuples/s of the Lachesis SYN (83 % of its CPU bound here) three ways,
# REPS interleaved triples of 150 s (60 s discarded), the order rotating: alone; with scrape.py
# asking its /metrics for what the middleware asks every 200 ms, and nothing else; with an idle
# `moirai schedule` (QS, -v, its defaults: a 200 ms period). Splits what the idle middleware
# costs the engine's p99 (issue 23) into its scrapes and the rest of it. Run alone, from the
# repository's root; ~7.7 min a triple.
# usage: run.sh OUT [REPS]   (OUT/results.csv: configuration,rep,ok,e2e_p50_ms,e2e_p99_ms,engine_cpu_cores)
set -euo pipefail
out=${1:?usage: run.sh OUT [REPS]}
reps=${2:-4}
here=$(dirname "$(readlink -f "$0")")
mkdir -p "$out"
cargo build --release -p moirai-cli
bin=target/release/moirai
echo "configuration,rep,ok,e2e_p50_ms,e2e_p99_ms,engine_cpu_cores" > "$out/results.csv"
configs=(alone scrape schedule)
port=19700
for rep in $(seq 1 "$reps"); do
  for i in 0 1 2; do
    config=${configs[$(( (i + rep - 1) % 3 ))]}
    port=$((port + 1))
    "$bin" run syn --lachesis --rate 26000 --duration 150s --warmup 0.4 --json \
      --metrics-addr "127.0.0.1:$port" > "$out/$config-$rep.json" 2> "$out/$config-$rep.err" &
    engine=$!
    side=
    case "$config" in
      scrape) python3 "$here/scrape.py" "127.0.0.1:$port" 0.2 & side=$! ;;
      schedule) sleep 0.5; "$bin" schedule --policy qs -v --engine "http://127.0.0.1:$port" \
                  --state-file "$out/state-$rep.json" > "$out/schedule-$rep.log" 2>&1 & side=$! ;;
    esac
    wait "$engine"
    # SIGTERM: a background job of a script starts with SIGINT ignored (python would not stop).
    if [ -n "$side" ]; then kill -TERM "$side"; wait "$side" || true; fi
    python3 - "$out/$config-$rep.json" "$config" "$rep" >> "$out/results.csv" <<'PY'
import json, sys
doc = json.loads(open(sys.argv[1]).read().strip().splitlines()[-1])  # --json: the summary's last line
lat = doc["e2e_latency_ms"]
print(f"{sys.argv[2]},{sys.argv[3]},true,{lat['p50']},{lat['p99']},{doc['cpu_cores']}")
PY
    tail -1 "$out/results.csv"
  done
done

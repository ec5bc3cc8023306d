#!/usr/bin/env bash
# Any SPE and workload past its saturation point in steady state (issue 23), as ../moirai-long/,
# ../storm-long/ and ../flink-long/ measure one pair each: Linux alone against the middleware's QS
# at its defaults, 150 s points of which the first 40 % (60 s) is discarded, REPS interleaved
# repetitions at RATES. Run alone, from the repository's root; ~2.6 min a point.
#   SPE:      moirai (`os`, `qs/verbose`, one thread per operator), flink (`flink:os`, `flink:qs/verbose`, Flink 1.20 MiniCluster),
#             storm (`storm:os`, `storm:qs/verbose`, executors parking: --wait-strategy park:1000)
#   WORKLOAD: syn (the Lachesis SYN), lr (Linear Road, the Lachesis shape)
#   $EXTRA:   more configurations after the pair, e.g. EXTRA=qs/translator=realtime (RT vs nice)
#   $OTHER:   the pair's second configuration instead of QS at its defaults, e.g.
#             OTHER=flink:qs/verbose/translator=realtime (Linux alone against the real-time translator)
# usage: bash docs/results/2026-12-02/steady/run.sh OUT SPE WORKLOAD RATES [REPS] [NAME]
#   (results.csv, table.txt and ratios.md land here, or in $RESULTS when set, as
#   SPE-WORKLOAD-NAME-*, NAME by default the rates, e.g. moirai-lr-1.8M-2.1M-results.csv)
set -euo pipefail
here=${RESULTS:-$(dirname "$(readlink -f "$0")")}
usage="usage: run.sh OUT moirai|flink|storm syn|lr RATES [REPS] [NAME]"
out=${1:?$usage}
spe=${2:?$usage}
workload=${3:?$usage}
rates=${4:?$usage}
reps=${5:-3}
name=$spe-$workload-${6:-$(echo "$rates" | sed 's/,.*,/,/; s/,/-/')}
case "$workload" in
  syn) bench=(syn); args=(--lachesis) ;;
  lr) bench=(linear-road); args=(--shape lachesis) ;;
  *) echo "unknown workload '$workload'; $usage" >&2; exit 2 ;;
esac
case "$spe" in
  # The engine's generator ends the run when its traffic is spent (3 h of it, ~24 M tuples, by
  # default: 13 s at 1.8M tuples/s); the JVM jobs' sources start another lap instead.
  moirai) base=os; other=qs/verbose; [ "$workload" = lr ] && args+=(--traffic 64h) ;;
  flink) base=flink:os; other=flink:qs/verbose ;;
  storm) base=storm:os; other=storm:qs/verbose; args+=(--wait-strategy park:1000) ;;
  *) echo "unknown SPE '$spe'; $usage" >&2; exit 2 ;;
esac
other=${OTHER:-$other}
configs=$base,$other${EXTRA:+,$EXTRA}
cargo build --release -p moirai-cli
target/release/moirai bench "${bench[@]}" --rates "$rates" --duration 150s --warmup 0.4 --reps "$reps" \
  --compare "$configs" --out "$out" -- "${args[@]}" 2>&1 | tee "$here/$name-table.txt"
cp "$out/results.csv" "$here/$name-results.csv"
IFS=, read -ra compared <<< "$configs"
python3 docs/results/2026-11-26/middleware-rt/ratios.py "$here/$name-results.csv" "${compared[@]}" > "$here/$name-ratios.md"

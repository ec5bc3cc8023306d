#!/bin/bash
# Drizzle Fig. 4-5 analog: time per micro-batch, its coordination part and its compute part vs group
# size (1, 10, 25, 50, 100), 2/4/8 executors, for a single-stage job (WordCount's map tasks to the
# sink) and a job with a shuffle (map, shuffle, reduce); unpaced (micro-batches back to back), 4000
# micro-batches of 10 ms holding 20 sentences each. Every point REPS times (default 3), the
# repetitions interleaved; micro-batch-coordination.py prints the medians. Run it from the
# repository's root on a quiet machine, after `cargo build --release -p moirai-cli`:
#   bash docs/results/2026-11-25/micro-batch-coordination.sh > micro-batch-coordination.txt
#   python3 docs/results/2026-11-25/micro-batch-coordination.py < micro-batch-coordination.txt
BIN=${BIN:-target/release/moirai}
REPS=${REPS:-3}
echo "rep stages executors group batches decisions ms_per_batch coordination_ms compute_ms decision_ms mean_overhead check"
for rep in $(seq 1 "$REPS"); do
  for stages in 1 2; do
    flag=""; [ $stages = 1 ] && flag="--single-stage"
    for E in 2 4 8; do
      for g in 1 10 25 50 100; do
        out=$($BIN run wordcount --threading micro-batch --unpaced --sentences 80000 --rate 2000 --parallelism $E \
          --batch-interval 10ms --group $g --executors $E $flag --json 2>/dev/null | tail -1)
        echo "$rep $stages $E $g $(echo "$out" | python3 -c 'import json,sys; v=json.load(sys.stdin); print(v["batches"], v["decisions"], round(v["ms_per_batch"],4), round(v["coordination_ms_per_batch"],4), round(v["compute_ms_per_batch"],4), round(v["decision_ms_per_batch"],4), round(v["mean_overhead"],3), v["check"].replace(" ", "_"))')"
      done
    done
  done
done

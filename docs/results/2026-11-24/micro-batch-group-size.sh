#!/bin/bash
# Drizzle Fig. 4-5 analog: time per micro-batch vs group size, unpaced (micro-batches back to back),
# WordCount (map, shuffle, reduce), 4000 micro-batches of 10 ms holding 20 sentences each.
BIN=${BIN:-target/release/moirai}
echo "executors group batches decisions ms_per_batch mean_overhead check"
for E in 2 4 8; do
  for g in per-batch 1 10 25 50 100; do
    out=$($BIN run wordcount --threading micro-batch --unpaced --sentences 80000 --rate 2000 --parallelism $E \
      --batch-interval 10ms --group $g --executors $E --json 2>/dev/null | tail -1)
    echo "$E $g $(echo "$out" | python3 -c 'import json,sys; v=json.load(sys.stdin); print(v["batches"], v["decisions"], round(v["ms_per_batch"],3), round(v["mean_overhead"],3), v["check"])')"
  done
done

#!/usr/bin/env bash
# Does Flink answer the middleware past saturation? The Lachesis SYN shape as a Flink job at
# RATE tuples/s (48k: past this machine's saturation, where the REST API timed out before), its
# Prometheus reporter on (--metrics-port). `moirai schedule --policy qs -v` attaches after 15 s,
# reading the counters by READ (prometheus: one scrape a round; rest: one request per vertex);
# meanwhile a probe times, once a second for SECONDS, one scrape of the reporter and one REST
# request of one vertex's counters (what the REST path asks 5 times per job each round), each
# with a 30 s bound, and reads the middleware's last round time and whether Flink was up (its
# /metrics). Then the middleware's rounds, errors and activity.
#   bash docs/results/2026-11-26/flink-prometheus/saturation.sh READ [RATE] [SECONDS]
set -u
READ=${1:?prometheus or rest}; RATE=${2:-48000}; S=${3:-40}
cd "$(git rev-parse --show-toplevel)"
FCP=integrations/flink/target/moirai-flink-jobs.jar:$(cat integrations/flink/target/classpath.txt)
D=$(mktemp -d /tmp/flinksat.XXXX)
port() { python3 -c 'import socket;s=socket.socket();s.bind(("127.0.0.1",0));print(s.getsockname()[1])'; }
R=$(port); P=$(port); M=$(port)
PIDS=()
cleanup() { for p in "${PIDS[@]}"; do kill "$p" 2>/dev/null; done; wait 2>/dev/null
  [ -n "${KEEP:-}" ] && mkdir -p "$KEEP" && cp $D/*.log $D/*.err "$KEEP"/ 2>/dev/null; rm -rf "$D"; }
trap cleanup EXIT
java -Xmx1g -cp "$FCP" moirai.flink.Run syn --lachesis --rate "$RATE" --duration $((S + 45))s \
  --rest-port $R --metrics-port $P > $D/flink.out 2> $D/flink.err & F=$!; PIDS+=($F)
sleep 15
FLAGS=(--flink http://127.0.0.1:$R)
[ "$READ" = prometheus ] && FLAGS+=(--flink-prometheus http://127.0.0.1:$P/metrics)
target/release/moirai schedule "${FLAGS[@]}" --policy qs -v --state-file $D/state.json \
  --metrics-addr 127.0.0.1:$M > $D/mw.log 2>&1 & W=$!; PIDS+=($W)
JOB=$(curl -s -m 30 http://127.0.0.1:$P/metrics | grep -o 'job_id="[^"]*"' | head -1 | cut -d'"' -f2)
VERTEX=$(curl -s -m 30 http://127.0.0.1:$P/metrics | grep '^flink_taskmanager_job_task_numRecordsIn' | grep -v 'task_name="Source' \
  | grep -o 'task_id="[^"]*"' | head -1 | cut -d'"' -f2)
for i in $(seq "$S"); do
  t0=$(date +%s.%N)
  s=$(curl -s -o /dev/null -m 30 -w '%{http_code} %{time_total}' http://127.0.0.1:$P/metrics)
  r=$(curl -s -o /dev/null -m 30 -w '%{http_code} %{time_total}' \
      "http://127.0.0.1:$R/jobs/$JOB/vertices/$VERTEX/metrics?get=0.numRecordsIn,0.accumulateBusyTimeMs")
  m=$(curl -s -m 5 http://127.0.0.1:$M/metrics | awk '/^moirai_schedule_round_seconds_last /{l=$2} /^moirai_schedule_spes_up /{u=$2} END{print (l==""?"nan":l), (u==""?0:u)}')
  echo "$s $r $m" >> $D/probe.log
  left=$(python3 -c "import time;print(max(0.0,1-(time.time()-$t0)))"); sleep "$left"
done
curl -s -m 10 http://127.0.0.1:$M/metrics | grep -E '^moirai_schedule_(rounds_total|round_seconds_max|errors_total|spes_up|active|activations_total|threads )' > $D/mwmetrics.log
kill -INT $W; wait $W
echo "== saturation.sh $READ $RATE $S, $(git rev-parse --short HEAD), $(date -u +%FT%TZ)"
python3 - $D/probe.log <<'PY'
import sys, statistics as st
rows = [l.split() for l in open(sys.argv[1]) if l.strip()]
for name, (c, t) in (("scrape of the reporter", (0, 1)), ("REST request of one vertex", (2, 3))):
    times = sorted(float(r[t]) * 1e3 for r in rows)
    ok = sum(1 for r in rows if r[c] == "200")
    q = lambda p: times[min(len(times) - 1, int(p * len(times)))]
    print(f"{name}: {ok}/{len(rows)} answered (HTTP 200 within 30 s); latency ms median {st.median(times):.1f}, "
          f"p90 {q(0.9):.1f}, max {times[-1]:.1f}")
last = sorted(float(r[4]) * 1e3 for r in rows if len(r) > 5 and r[4] != "nan")
up = sum(1 for r in rows if len(r) > 5 and r[5] == "1")
if last:
    print(f"middleware, once a second: Flink up in {up}/{len(rows)} looks; last round's wall time ms median "
          f"{st.median(last):.1f}, max {last[-1]:.1f}")
PY
cat $D/mwmetrics.log
grep -E "unavailable|is back|active|error" $D/mw.log | head -8
grep -E '"ingress_tps"|ingress' $D/flink.out | head -2

#!/usr/bin/env bash
# How often a Storm job's LocalCluster halts its JVM at start (exit code 20, `"nimbus" is null` in
# the supervisor's first assignment sync or heartbeat report), for two builds of the Storm jobs,
# alternating, REPS starts each, with HOGS busy loops beside them (a loaded host widens the race).
# Each start runs until the topology runs (then is stopped by its PID) or the JVM exits.
# usage: starts.sh OUT.csv REPS HOGS JAR_A JAR_B   (JARs: integrations/storm/target/moirai-storm-jobs.jar
#        of each build; the classpath is integrations/storm/target/classpath.txt of this checkout)
set -u
csv=$1; reps=$2; hogs=$3; shift 3
cp_deps=$(cat integrations/storm/target/classpath.txt)
hog_pids=()
for _ in $(seq 1 "$hogs"); do sh -c 'while :; do :; done' & hog_pids+=($!); done
trap 'kill "${hog_pids[@]}" 2>/dev/null' EXIT
echo "rep,jar,outcome,seconds" > "$csv"
for rep in $(seq 1 "$reps"); do
  for jar in "$@"; do
    err=$(mktemp)
    start=$(date +%s.%N)
    java -Xmx1g -cp "$jar:$cp_deps" moirai.storm.Run syn --ops 3 --cost-ns 2000 --rate 1000 --duration 10m \
      --parallelism 2 > /dev/null 2> "$err" &
    pid=$!
    outcome=timeout
    for _ in $(seq 1 1200); do
      if grep -q "topology running" "$err"; then outcome=running; kill "$pid"; break; fi
      if ! kill -0 "$pid" 2>/dev/null; then
        wait "$pid"; code=$?
        outcome="exit $code"
        grep -q '"nimbus" is null' "$err" && outcome="exit $code (nimbus is null)"
        break
      fi
      sleep 0.1
    done
    [ "$outcome" = timeout ] && kill "$pid"
    wait "$pid" 2>/dev/null
    secs=$(echo "$(date +%s.%N) - $start" | bc)
    echo "$rep,$jar,$outcome,$secs" | tee -a "$csv"
    rm -f "$err"
  done
done

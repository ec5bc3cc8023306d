#!/usr/bin/env bash
# Where a pool hop's CPU goes as the pipeline grows: the SYN pipeline (cost 0) under dynamic:2
# with OPS operators at RATE tuples/s, each thread's CPU over 10 s of a 16 s run
# (threads.py: /proc schedstat), REPS repetitions interleaved. The 10-operator case is the
# process's cost whatever the pipeline (its main thread, the source's timer, the wake-ups);
# 1 000 operators at 1 000 tuples/s keep their memory in a core's L2 (~1 MB of 2), 10 000 do not.
# Run alone, from the repository's root, after `cargo build --release -p moirai-cli`.
# usage: hop-by-size.sh MOIRAI_BINARY OUT.csv [REPS]   (~1.3 min a repetition)
set -u
bin=$1; csv=$2; reps=${3:-3}
here=$(dirname "$0")
echo "rep,ops,rate,workers_ms_per_s,others_ms_per_s,worker_ns_per_hop" > "$csv"
for rep in $(seq 1 "$reps"); do
  for case in "10 10" "1000 100" "1000 1000" "10000 10" "10000 100"; do
    set -- $case
    ops=$1; rate=$2
    "$bin" run syn --ops "$ops" --cost-ns 0 --rate "$rate" --duration 16s --threading dynamic:2 > /dev/null 2>&1 &
    pid=$!
    sleep 4
    python3 "$here/threads.py" "$pid" 10 > /tmp/hop-by-size.$$ || { kill "$pid"; exit 1; }
    wait "$pid"
    awk -v rep="$rep" -v ops="$ops" -v rate="$rate" '
      /^dynamic-/ { w += $2; next } { o += $2 }
      END { printf "%s,%s,%s,%.3f,%.3f,%.1f\n", rep, ops, rate, w, o, w * 1e6 / (ops * rate) }' /tmp/hop-by-size.$$ | tee -a "$csv"
  done
done
rm -f /tmp/hop-by-size.$$

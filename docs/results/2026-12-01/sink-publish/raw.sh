#!/usr/bin/env bash
# The raw 5-operator pipeline (`moirai run syn --ops 5 --cost-ns 0 --rate 0`) before and after
# the sink's time-based publication, beside timely-dataflow (bench/timely), interleaved.
# usage: raw.sh BASE_MOIRAI NEW_MOIRAI TIMELY_SYN OUT.csv [REPS]   (run it alone on the machine)
set -u
base=$1; new=$2; timely=$3; out=$4; reps=${5:-5}
. "$(dirname "$0")/../row.sh"
syn="run syn --ops 5 --cost-ns 0 --rate 0 --duration 5s"
for rep in $(seq 1 "$reps"); do
  for b in base new; do
    bin=$base; [ $b = new ] && bin=$new
    run $rep chaining $b $bin $syn --chaining
    run $rep dynamic2 $b $bin $syn --threading dynamic:2
    run $rep chaining-p2 $b $bin $syn --chaining --parallelism 2
  done
  run $rep w1 timely $timely --ops 5 --rate 0 --duration 5s --workers 1
  run $rep w2 timely $timely --ops 5 --rate 0 --duration 5s --workers 2
done

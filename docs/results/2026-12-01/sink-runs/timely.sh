#!/usr/bin/env bash
# moirai (sink counting runs) beside timely-syn before and after its sink counts runs the same
# way, interleaved: the raw 5-operator pipeline at rate 0 on one and two cores.
# usage: timely.sh MOIRAI TIMELY_OLD TIMELY_NEW OUT.csv [REPS]   (run it alone on the machine)
set -u
moirai=$1; old=$2; new=$3; out=$4; reps=${5:-5}
. "$(dirname "$0")/../row.sh"
syn="run syn --ops 5 --cost-ns 0 --rate 0 --duration 5s"
for rep in $(seq 1 "$reps"); do
  run $rep one moirai $moirai $syn --chaining
  run $rep one timely-old $old --ops 5 --rate 0 --duration 5s --workers 1
  run $rep one timely-new $new --ops 5 --rate 0 --duration 5s --workers 1
  run $rep two moirai $moirai $syn --chaining --parallelism 2
  run $rep two timely-old $old --ops 5 --rate 0 --duration 5s --workers 2
  run $rep two timely-new $new --ops 5 --rate 0 --duration 5s --workers 2
done

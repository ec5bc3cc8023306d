#!/usr/bin/env bash
# The cost of waking 1 000 times a second with four ways of sleeping (a futex wait with a relative
# timeout, as a pool worker's timed wait; a futex wait until an absolute time; clock_nanosleep
# until an absolute time; a periodic timerfd), each 4 s, interleaved in REPS repetitions.
# Run alone, from the repository's root. usage: wait-primitives.sh OUT.txt [REPS]
set -eu
here=$(dirname "$0"); out=$1; reps=${2:-5}
bin=$(mktemp); gcc -O2 -o "$bin" "$here/wait-primitives.c"
: > "$out"
for r in $(seq 1 "$reps"); do
  for m in futex futexabs nanosleep timerfd; do echo "$r $("$bin" $m 4)" | tee -a "$out"; done
done
rm -f "$bin"

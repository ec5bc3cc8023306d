#!/usr/bin/env bash
# Second part of the session's campaign (2026-11-26, afternoon): records per second at --rate 0
# on a 3-hour, 1-expressway LinearGenerator file (5 runs); one trial of dynamic:2 at L = 290; the
# per-thread CPU of a dedicated trial at L = 310 (the first late L of the search), to see what
# limits the rating. Usage: benchlock campaign3.sh FILE TOLLS   (MOIRAI=… for another binary)
set -uo pipefail
here=$(cd "$(dirname "$0")" && pwd)
bash "$here/rate0.sh" "$1" "$2" 2>&1 | tee "$here/rate0-x1-3h.txt"
bash "$here/lrating.sh" dynamic2-290 290 --threading dynamic:2
bash "$here/diag.sh" diag-310 310

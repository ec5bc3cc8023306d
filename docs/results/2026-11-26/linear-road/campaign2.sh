#!/usr/bin/env bash
# The L-rating campaign of the second session (2026-11-26, afternoon): a search with `dedicated`,
# then one trial at L = 250 under each other threading model and with --parallelism 2. Each call
# of lrating.sh is as documented there (75 min skipped, 5 min fast-forwarded, 30 s lead-in, 2 min
# judged). Usage: benchlock campaign2.sh   (MOIRAI=… to use another binary)
set -uo pipefail
here=$(cd "$(dirname "$0")" && pwd)
bash "$here/lrating.sh" search-dedicated search --from 250 --max 330 --resolution 20
bash "$here/lrating.sh" dynamic2-250 250 --threading dynamic:2
bash "$here/lrating.sh" qs-policy2-250 250 --threading policy:qs:2
bash "$here/lrating.sh" par2-250 250 --parallelism 2

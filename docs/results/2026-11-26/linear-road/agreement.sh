#!/usr/bin/env bash
# Agreement of moirai's answers with the benchmark validator's, per output type, on LinearGenerator's
# files. Run the generator and the validator yourself first (docs/linear-road.md, "Checking against
# the benchmark's validator"); for each set NAME this expects, in $DATA:
#   NAME.dat, NAME.dat.tolls.dat (the generator's records and tolls) and val-NAME/out (the validator's
#   expected answers for them). Usage: DATA=DIR agreement.sh NAME...
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
moirai=${MOIRAI:-$here/../../../../target/release/moirai}
data=${DATA:?set DATA to the directory with the files}
for name in "$@"; do
  tolls=$data/$name.dat.tolls.dat
  [ -f "$tolls" ] || tolls=$data/${name%-*}.dat.tolls.dat   # a cut of a longer file shares its tolls
  echo "## $name"
  "$moirai" run linear-road --input "$data/$name.dat" --historical-tolls "$tolls" \
    --output "$data/moirai-$name.out" --rate 0 > "$data/run-$name.log"
  python3 "$here/compare.py" "$data/val-$name/out" "$data/moirai-$name.out" | head -6
done

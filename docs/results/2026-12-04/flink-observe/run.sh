#!/usr/bin/env bash
# Where does `flink:qs` lose its 1.5-2.5 % of intake on Linear Road past saturation
# (../../2026-12-02/flink-compare/: in every run, also where it acted 14 % of the window)?
# Three configurations interleaved per repetition: `flink:os` (Linux alone), the middleware
# observing only (`flink:qs` with every nice value at 0: the same scrapes, /proc reads, thread
# dumps and activation rule, no thread ever set apart), and `flink:qs` at its defaults, all three
# with the -v log. Linear Road, the Lachesis shape, 150 s points, first 40 % discarded.
# Run alone, from the repository's root (~30 min for one rate x 3).
# usage: bash docs/results/2026-12-04/flink-observe/run.sh OUT [RATES] [REPS]
set -euo pipefail
here=${RESULTS:-$(dirname "$(readlink -f "$0")")}
out=${1:?usage: run.sh OUT [RATES] [REPS]}
rates=${2:-420k}
reps=${3:-3}
observe='flink:qs/nice-best=0/nice-worst=0/verbose#observe'
cargo build --release -p moirai-cli
target/release/moirai bench linear-road --rates "$rates" --duration 150s --warmup 0.4 --reps "$reps" \
  --compare "flink:os,$observe,flink:qs/verbose" --out "$out" -- --shape lachesis 2>&1 | tee "$here/table.txt"
cp "$out/results.csv" "$here/results.csv"
python3 docs/results/2026-11-26/middleware-rt/ratios.py "$here/results.csv" flink:os "$(grep -o 'flink:qs/nice[^,]*' "$here/results.csv" | head -1)" flink:qs/verbose > "$here/ratios.md"

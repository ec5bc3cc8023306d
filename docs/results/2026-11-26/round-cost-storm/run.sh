#!/usr/bin/env bash
# The middleware's CPU per round, Storm alone and the three SPEs, two builds side by side:
# BASE (before the Storm driver's cheaper reads) and NEW, interleaved (ABBA), REPS reps of
# `round-cost.sh MODE 1s SECONDS` each, Flink read by its Prometheus reporter, Storm's executors
# parking (--wait-strategy park:1000), `--activation always` (every round translates).
#
#   cargo build --release -p moirai-cli   # for each build; copy the binaries out of target/
#   /work/bin/benchlock bash docs/results/2026-11-26/round-cost-storm/run.sh BASE_BIN NEW_BIN [OUT] [SECONDS] [REPS]
#
# round-cost.sh is ../flink-prometheus/round-cost.sh, run with its binary replaced by MOIRAI
# (a sed at run time, into a temporary file; nothing else changed). Prints the medians at the end.
set -u
cd "$(git rev-parse --show-toplevel)"
H=docs/results/2026-11-26/round-cost-storm
BASE=${1:?base binary}; NEW=${2:?new binary}
OUT=${3:-$H/round-cost.txt}; S=${4:-30}; REPS=${5:-3}
RC=$(mktemp /tmp/round-cost.XXXX.sh)
trap 'rm -f "$RC"' EXIT
sed 's|^M=\$PWD/target/release/moirai$|M=${MOIRAI:?}|' docs/results/2026-11-26/flink-prometheus/round-cost.sh > "$RC"
grep -q '^M=${MOIRAI:?}$' "$RC" || { echo "round-cost.sh changed: cannot set its binary" >&2; exit 2; }
: > "$OUT"
for rep in $(seq "$REPS"); do
  if [ $((rep % 2)) = 1 ]; then order="base new"; else order="new base"; fi
  for mode in storm three; do
    for v in $order; do
      bin=$BASE; [ "$v" = new ] && bin=$NEW
      echo "== rep $rep: $v: round-cost.sh $mode 1s $S (FLINK_READ=prometheus, Storm --wait-strategy park:1000), $(date -u +%FT%TZ)" | tee -a "$OUT"
      MOIRAI=$bin FLINK_READ=prometheus STORM_ARGS="--wait-strategy park:1000" bash "$RC" "$mode" 1s "$S" 2>&1 | grep -v '^\[' | tee -a "$OUT"
    done
  done
done
python3 - "$OUT" <<'PY'
import re, statistics, sys
runs, cur = {}, None
for line in open(sys.argv[1]):
    m = re.match(r"== rep \d+: (\w+): round-cost.sh (\w+)", line)
    if m:
        cur = (m.group(2), m.group(1)); runs.setdefault(cur, []); continue
    m = re.match(r"middleware \(with children\): ([\d.]+) ms CPU per round", line)
    if m and cur:
        runs[cur].append(float(m.group(1)))
print("| setup | base ms/round (runs) | new ms/round (runs) | median base | median new | ratio |")
print("|---|---|---|---|---|---|")
for mode in ("storm", "three"):
    b, n = runs.get((mode, "base"), []), runs.get((mode, "new"), [])
    if b and n:
        mb, mn = statistics.median(b), statistics.median(n)
        print(f"| {mode} | {', '.join(f'{x:.2f}' for x in b)} | {', '.join(f'{x:.2f}' for x in n)} | {mb:.2f} | {mn:.2f} | {mn / mb:.2f} |")
PY

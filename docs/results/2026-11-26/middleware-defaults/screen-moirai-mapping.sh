#!/usr/bin/env bash
# Screening of the nice mapping on moirai's engine (Lachesis SYN), below (31k) and above (45k)
# the Linux scheduler's saturation point: the former defaults (nice -20..19, no smoothing, 1 s,
# activation auto), the same always active, against a best nice of 0, a shorter period,
# smoothing and a narrower range. Run on commit 63d6f3c, whose defaults were the former ones;
# the results (screen-moirai-mapping.{csv,txt}) carry the labels of that run:
#   qs                        = qs/nice-best=-20/smoothing=1/period=1s below
#   qs/activation=always      = qs/activation=always/nice-best=-20/smoothing=1/period=1s
#   .../nice-best=0           = .../nice-best=0/smoothing=1/period=1s
#   .../period=200ms          = .../period=200ms/smoothing=1 (without smoothing=0.5)
# Usage (from the repository root, release build first):
#   bash docs/results/2026-11-26/middleware-defaults/screen-moirai-mapping.sh OUT_DIR [REPS]
set -eu
OUT=${1:?out dir}; REPS=${2:-3}
A=activation=always
OLD=nice-best=-20/smoothing=1/period=1s
target/release/moirai bench syn --rates 31000,45000 --duration 10s --reps "$REPS" --compare \
"os,qs/$OLD,qs/$A/$OLD,qs/$A/nice-best=0/smoothing=1/period=1s,qs/$A/nice-best=0/period=200ms/smoothing=1,qs/$A/nice-best=0/period=200ms/smoothing=0.5,qs/$A/nice-best=0/nice-worst=10/period=200ms/smoothing=1" \
  --out "$OUT" -- --lachesis

#!/usr/bin/env bash
# Screening of the nice mapping on moirai's engine (Lachesis SYN), below (31k) and above (45k)
# the Linux scheduler's saturation point: the defaults (nice -20..19, 1 s, activation auto), the
# same always active, against a best nice of 0, a shorter period, smoothing and a narrower range.
# Usage (from the repository root, release build first): benchlock bash THIS OUT_DIR [REPS]
set -eu
OUT=${1:?out dir}; REPS=${2:-3}
A=activation=always
target/release/moirai bench syn --rates 31000,45000 --duration 10s --reps "$REPS" --compare \
"os,qs,qs/$A,qs/$A/nice-best=0,qs/$A/nice-best=0/period=200ms,qs/$A/nice-best=0/period=200ms/smoothing=0.5,qs/$A/nice-best=0/nice-worst=10/period=200ms" \
  --out "$OUT" -- --lachesis

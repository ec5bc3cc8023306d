#!/usr/bin/env bash
# Operators' memory in huge pages (issue 27): BASE and NEW alternating within each repetition on
# the 10 000-operator pipeline at 10 and 100 tuples/s, beside BASE run with glibc's own huge-page
# tunable (every allocation of the process in huge pages) as the reference.
# Run alone, from the repository's root. ~12 min. usage: run.sh BASE NEW OUTDIR (absolute paths)
set -u
base=$1; new=$2; out=$3
mkdir -p "$out"
glibc="$out/base-glibc-hugetlb"
printf '#!/bin/sh\nGLIBC_TUNABLES=glibc.malloc.hugetlb=1 exec %s "$@"\n' "$base" > "$glibc"
chmod +x "$glibc"
m=docs/results/2026-12-01/sampler/multi.sh
b="base=$base new=$new glibc=$glibc"
bash $m "$out/10000x10-dynamic2.csv" 10 "$b" --ops 10000 --cost-ns 0 --rate 10 --duration 8s --threading dynamic:2
bash $m "$out/10000x100-dynamic2.csv" 8 "$b" --ops 10000 --cost-ns 0 --rate 100 --duration 8s --threading dynamic:2
rm -f "$glibc"

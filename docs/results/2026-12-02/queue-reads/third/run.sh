# The repeat sweeps of README.md (second: the length next to the lock word; third: the raw
# pipeline again). usage: bash run.sh BASE NEW OUTDIR  (absolute paths; alone on the machine)
cd "$(dirname "$0")/../../../../.." || exit 1
m=docs/results/2026-12-01/sampler/multi.sh
b="base=$1 new=$2"
out=$3; mkdir -p $out
bash $m "$out/raw5-dynamic2.csv" 8 "$b" --ops 5 --cost-ns 0 --rate 0 --duration 8s --threading dynamic:2
bash $m "$out/raw5-dedicated.csv" 6 "$b" --ops 5 --cost-ns 0 --rate 0 --duration 8s --threading dedicated

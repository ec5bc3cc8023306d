#!/usr/bin/env bash
# Instructions per pool turn, counted by valgrind's callgrind (deterministic: no noise from the
# machine, unlike time): 1 000 operators at 20 tuples/s under dynamic:1 for 4 s (~81 000 turns of
# one-tuple batches), then the pool worker's instructions (inclusive) over the turns it ran.
# Under valgrind the turn clock's counter readings are never tight enough to anchor
# (turn_clock.rs), so every turn also reads the monotonic clock: the figures carry ~300
# instructions a turn that a native run does not spend, the same in every build.
# usage: callgrind.sh BINARY [OUT_PREFIX]   (needs valgrind; ~10 s)
set -eu
bin=$1; out=${2:-/tmp/moirai-callgrind}
valgrind --tool=callgrind --callgrind-out-file="$out.out" "$bin" run syn --ops 1000 --cost-ns 0 --rate 20 \
  --duration 4s --threading dynamic:1 --json > /dev/null 2> "$out.log"
callgrind_annotate --inclusive=yes --tree=calling "$out.out" 2>/dev/null > "$out.tree"
python3 - "$out.tree" <<'PY'
import re, sys
text = open(sys.argv[1]).read().split("\n")
def block(name):
    for i, line in enumerate(text):
        if re.search(r"\*\s+\S*" + re.escape(name) + r"( \[|$)", line):
            return i
    return None
i = block("Pool::worker")
if i is None:
    sys.exit("no pool worker in the profile")
worker = int(text[i].split()[0].replace(",", ""))
run = re.search(r"Pool::run \(([\d,]+)x\)", text[i + 1])
turns = int(run.group(1).replace(",", ""))
print(f"pool worker: {worker:,} instructions over {turns:,} turns = {worker / turns:.0f} a turn")
for label, name in [("a step of the task", "OneInputTask<T> as moirai_engine::task::Task>::step"),
                    ("its send (enqueue)", "Sender<T>::enqueue"), ("its router's sends", "Router<T>::send_partial"),
                    ("waking the consumer", "Signal::notify"), ("the CPU charge", "TurnCpu::record"),
                    ("the watermark's progress", "Progress::watermark")]:
    j = block(name)
    if j is None:
        print(f"  {label}: inlined into its caller")
        continue
    total = int(text[j].split()[0].replace(",", ""))
    print(f"  {label}: {total / turns:.0f} a turn (inclusive)")
PY

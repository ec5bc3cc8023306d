#!/usr/bin/env python3
"""The L-rating trials of lrating.sh as one table: summarize.py DIR... > lrating.md

Each DIR is an --out directory of `moirai l-rating` (trials.json). A row per trial and output type:
the share of judged answers within the limit and the response-time distribution, with the
trial's load, fast-forward rate, memory and CPU."""
import json
import sys

print("| run | threading | parallelism | L | verdict | reports/s per L (judged) | output | answers | within limit | p50 ms | p99 ms | worst ms | ff records/s | RSS after ff GiB | cars | CPU cores (judged) |")
print("|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|")
for d in sys.argv[1:]:
    j = json.load(open(f"{d}/trials.json"))
    for t in j["trials"]:
        for i, k in enumerate(t["responses"]["kinds"]):
            head = [d, j["threading"], str(j["parallelism"]), str(t["xways"]), "in time" if t["passed"] else "late",
                    f"{t['judged_reports_per_s_per_xway']:.0f}"] if i == 0 else [""] * 6
            tail = [f"{t['fast_forward_records_per_s']:.0f}", f"{t['rss_after_fast_forward_bytes'] / 2**30:.2f}",
                    str(t["cars"]), f"{t['cpu_cores_judged']:.2f}"] if i == 0 else [""] * 4
            mid = [k["output"], str(k["answers"]), f"{100 * k['share_within']:.1f} %", f"{k['p50_ms']:.0f}",
                   f"{k['p99_ms']:.0f}", f"{k['worst_ms']:.0f}"]
            print("| " + " | ".join(head + mid + tail) + " |")

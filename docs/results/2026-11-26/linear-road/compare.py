#!/usr/bin/env python3
"""Agreement of moirai's Linear Road answers with the benchmark validator's, per output type.

Usage: compare.py VALIDATOR_OUT MOIRAI_OUT [--markdown]

Both files are in the validator's line format (moirai's default output):
  0,carid,time,emit,lav,toll   1,time,emit,xway,seg,dir,carid   2,time,emit,resulttime,qid,bal
  3,time,emit,qid,bal          (the validator's type 5, an alternative balance, is not compared)
An answer agrees when an answer of the same type with the same key is in the other file with the
same values; the emit field (a processing or response time) is not compared. Keys and values are
those of the validator's CompareFiles, plus the LAV and the result time, which it ignores or checks.
"""
import sys
from collections import Counter

def key_value(f):
    t = f[0]
    if t == "0":
        return (f[1], f[2]), (f[4], f[5])          # (carid, time) -> (lav, toll)
    if t == "1":
        return (f[1], f[3], f[4], f[5], f[6]), ()  # (time, xway, seg, dir, carid)
    if t == "2":
        return (f[1], f[4]), (f[3], f[5])          # (time, qid) -> (resulttime, bal)
    if t == "3":
        return (f[1], f[3]), (f[4],)               # (time, qid) -> (bal)
    return None, None

def load(path):
    answers = {t: {} for t in "0123"}
    dups = Counter()
    with open(path) as fh:
        for line in fh:
            f = line.strip().split(",")
            if not f or f[0] not in answers:
                continue
            k, v = key_value(f)
            if k in answers[f[0]]:
                dups[f[0]] += 1
            answers[f[0]][k] = v
    return answers, dups

NAMES = {"0": "type 0, toll notifications", "1": "type 1, accident alerts",
         "2": "type 2, account balances", "3": "type 3, daily expenditures"}

def main():
    v, vd = load(sys.argv[1])
    m, md = load(sys.argv[2])
    rows = []
    for t in "0123":
        vt, mt = v[t], m[t]
        agree = sum(1 for k, val in vt.items() if mt.get(k) == val)
        differ = sum(1 for k, val in vt.items() if k in mt and mt[k] != val)
        missing = sum(1 for k in vt if k not in mt)
        extra = sum(1 for k in mt if k not in vt)
        rows.append((NAMES[t], len(vt), len(mt), agree, differ, missing, extra, vd[t], md[t]))
    print("| output | validator | moirai | agreeing | differing | missing in moirai | extra in moirai |")
    print("|---|---|---|---|---|---|---|")
    for r in rows:
        share = f" ({100.0 * r[3] / r[1]:.2f} %)" if r[1] else ""
        print(f"| {r[0]} | {r[1]} | {r[2]} | {r[3]}{share} | {r[4]} | {r[5]} | {r[6]} |")
    if any(r[7] or r[8] for r in rows):
        print("duplicate keys (validator, moirai):", [(r[0], r[7], r[8]) for r in rows if r[7] or r[8]])
    # Show a few disagreements, to trace them.
    shown = 0
    for t in "0123":
        for k, val in v[t].items():
            if m[t].get(k) != val and shown < 12:
                print(f"  type {t} {k}: validator {val}, moirai {m[t].get(k, 'none')}")
                shown += 1
        for k in m[t]:
            if k not in v[t] and shown < 16:
                print(f"  type {t} {k}: moirai only {m[t][k]}")
                shown += 1

main()

#!/usr/bin/env python3
"""Summarizes an `ncu --csv --metrics gpu__time_duration.sum` log: device time per kernel family
(template arguments dropped), its launch count, and the total. Used by scripts/profile_decode_step.sh."""
import collections
import csv
import re
import sys


def family(name: str) -> str:
    for junk in ("(anonymous namespace)::", "<unnamed>::", "unnamed>::", "dsinfer::backend::cuda::"):
        name = name.replace(junk, "")
    name = name.replace("(WeightFormat)", "F")
    if name.startswith("void "):
        name = name[5:]
    depth, cut = 0, len(name)
    for i, ch in enumerate(name):  # the argument list: the first '(' outside template brackets
        if ch == "<":
            depth += 1
        elif ch == ">":
            depth -= 1
        elif ch == "(" and depth == 0:
            cut = i
            break
    return name[:cut][:90]


def main(path: str) -> None:
    lines = [l for l in open(path, encoding="utf-8", errors="replace") if l.startswith('"')]
    rows = list(csv.DictReader(lines))
    total = 0.0
    per = collections.OrderedDict()
    single = []
    for r in rows:
        if r.get("Metric Name") != "gpu__time_duration.sum":
            continue
        v = float(r["Metric Value"].replace(",", ""))
        unit = r.get("Metric Unit", "ns")
        us = {"ns": 1e-3, "nsecond": 1e-3, "us": 1.0, "usecond": 1.0, "ms": 1e3, "msecond": 1e3}[unit] * v
        key = family(r["Kernel Name"])
        single.append((us, r.get("ID", ""), key, r.get("Grid Size", ""), r.get("Block Size", "")))
        t, n = per.get(key, (0.0, 0))
        per[key] = (t + us, n + 1)
        total += us
    print(f"kernels: {sum(n for _, n in per.values())}, summed device time {total:.1f} us")
    for key, (t, n) in sorted(per.items(), key=lambda kv: -kv[1][0]):
        print(f"{t:9.1f} us {n:4d}x {t / n:7.2f} us  {key}")
    print("longest launches:")
    for us, i, key, grid, block in sorted(single, reverse=True)[:25]:
        print(f"{us:8.2f} us  #{i:>4} grid {grid} block {block}  {key}")


if __name__ == "__main__":
    try:
        main(sys.argv[1])
    except BrokenPipeError:  # the reader (`| head`) stopped early
        sys.stderr.close()

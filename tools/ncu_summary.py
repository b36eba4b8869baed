#!/usr/bin/env python3
"""Summarizes an `ncu --csv --metrics gpu__time_duration.sum` log: device time per kernel family
(template arguments dropped), its launch count, and the total. Used by scripts/profile_decode_step.sh."""
import collections
import csv
import re
import sys


def family(name: str) -> str:
    name = re.sub(r"\(.*$", "", name)          # drop the argument list
    name = re.sub(r"^void ", "", name)
    name = name.split("::")[-1] if "<" not in name else name
    base = re.sub(r"<.*$", "", name).split("::")[-1]
    targs = re.search(r"<(.*)>", name)
    return base + ("<" + targs.group(1)[:60] + ">" if targs else "")


def main(path: str) -> None:
    lines = [l for l in open(path, encoding="utf-8", errors="replace") if l.startswith('"')]
    rows = list(csv.DictReader(lines))
    total = 0.0
    per = collections.OrderedDict()
    for r in rows:
        if r.get("Metric Name") != "gpu__time_duration.sum":
            continue
        v = float(r["Metric Value"].replace(",", ""))
        unit = r.get("Metric Unit", "ns")
        us = v / 1000.0 if unit == "ns" else (v if unit in ("us", "usecond") else v * 1000.0)
        key = family(r["Kernel Name"])
        t, n = per.get(key, (0.0, 0))
        per[key] = (t + us, n + 1)
        total += us
    print(f"kernels: {sum(n for _, n in per.values())}, summed device time {total:.1f} us")
    for key, (t, n) in sorted(per.items(), key=lambda kv: -kv[1][0]):
        print(f"{t:9.1f} us {n:4d}x {t / n:7.2f} us  {key}")


if __name__ == "__main__":
    main(sys.argv[1])

#!/usr/bin/env python3
"""Summarizes one graph launch of a cupti_trace CSV (tools/cupti_trace/README.md).

  timeline.py TRACE.csv [--launch -1] [--list] [--chain]

Picks the graph launch (correlation id) by index among launches with the most common kernel
count of the last ones (default: the last), prints its span, the time no kernel ran, per-kernel
totals and the 'exposed' time of each kernel name (time it was the only kernel running), and
with --list every kernel in start order (offset, duration, stream, name), and with --chain every
kernel in end order with the time its end moves the launch's frontier (the latest end so far):
the kernels with a large 'adds' are the step's critical path, and a kernel that ends long after
the one before it on the chain started late (a join, an event wait) or ran slowly."""
import argparse
import collections
import csv


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("trace")
    ap.add_argument("--launch", type=int, default=-1)
    ap.add_argument("--list", action="store_true")
    ap.add_argument("--chain", action="store_true")
    a = ap.parse_args()
    groups = collections.OrderedDict()
    with open(a.trace) as f:
        for r in csv.DictReader(f):
            groups.setdefault(int(r["correlation"]), []).append(r)
    big = [g for g in groups.values() if len(g) >= 20]
    if not big:
        raise SystemExit("no graph launch with >= 20 kernels")
    size = collections.Counter(len(g) for g in big[-10:]).most_common(1)[0][0]
    cands = [g for g in big if len(g) == size]
    ks = sorted(cands[a.launch], key=lambda r: int(r["start_ns"]))
    t0 = int(ks[0]["start_ns"])
    t1 = max(int(r["end_ns"]) for r in ks)
    ev = []
    for i, r in enumerate(ks):
        ev.append((int(r["start_ns"]), 1, i))
        ev.append((int(r["end_ns"]), -1, i))
    ev.sort()
    running, last, idle = set(), t0, 0
    exposed = collections.Counter()
    for t, kind, i in ev:
        if not running:
            idle += t - last
        elif len(running) == 1:
            exposed[ks[next(iter(running))]["name"]] += t - last
        last = t
        (running.add if kind == 1 else running.discard)(i)
    tot = collections.Counter()
    cnt = collections.Counter()
    for r in ks:
        tot[r["name"]] += int(r["end_ns"]) - int(r["start_ns"])
        cnt[r["name"]] += 1
    print(f"launch of {len(ks)} kernels ({len(cands)} such launches): span {(t1 - t0) / 1e3:.1f} us, "
          f"no kernel running {idle / 1e3:.1f} us, one kernel running {sum(exposed.values()) / 1e3:.1f} us")
    print(f"{'total us':>9} {'exposed':>8} {'n':>4}  name")
    for name, v in tot.most_common():
        print(f"{v / 1e3:9.1f} {exposed[name] / 1e3:8.1f} {cnt[name]:4d}  {name[:110]}")
    if a.list:
        print(f"{'start':>8} {'dur':>7} {'strm':>4}  name")
        for r in ks:
            s = (int(r["start_ns"]) - t0) / 1e3
            d = (int(r["end_ns"]) - int(r["start_ns"])) / 1e3
            print(f"{s:8.2f} {d:7.2f} {r['stream']:>4}  {r['name'][:100]} grid {r['grid_x']}x{r['grid_y']}x{r['grid_z']}")
    if a.chain:
        print(f"{'end':>8} {'adds':>7} {'start':>8} {'dur':>7} {'strm':>4}  name")
        frontier = t0
        for r in sorted(ks, key=lambda r: int(r["end_ns"])):
            e = int(r["end_ns"])
            adds = max(0, e - frontier)
            frontier = max(frontier, e)
            print(f"{(e - t0) / 1e3:8.2f} {adds / 1e3:7.2f} {(int(r['start_ns']) - t0) / 1e3:8.2f} "
                  f"{(e - int(r['start_ns'])) / 1e3:7.2f} {r['stream']:>4}  {r['name'][:90]}")


if __name__ == "__main__":
    main()

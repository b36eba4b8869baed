#!/usr/bin/env python3
"""The GPU's idle time between engine steps, from a cupti_trace CSV (tools/cupti_trace/README.md)
of an engine run (bench_engine, generate, serve on CUDA).

  step_gaps.py TRACE.csv [--skip N] [--json] [--kernels K]

Every paged forward of the engine starts with the feed kernel (FeedTokensKernel), so a step is
the kernels from one feed kernel to the next. For each step after the first N (--skip, default 2:
warm-up and graph capture): the idle time before it — from the latest end of any kernel that
started earlier to the feed kernel's start, i.e. the GPU ran no kernel while the host finished
the previous step and launched this one (its uploads, which are copies, count as idle) — and the
idle time before its sampling kernel (SampleRowsKernel / GreedyRowsKernel: the host computing
grammar masks and histories after the forward was launched). Prints the count and p50 / p90 /
p99 / max of both in microseconds, the steps' mean span, and the share of the run's span with no
kernel running between steps; --kernels K adds the K kernel names with the most time per step
(over the steps measured)."""
import argparse
import csv
import json


def percentile(xs, p):
    if not xs:
        return 0.0
    xs = sorted(xs)
    k = (len(xs) - 1) * p / 100
    lo = int(k)
    hi = min(lo + 1, len(xs) - 1)
    return xs[lo] + (xs[hi] - xs[lo]) * (k - lo)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("trace")
    ap.add_argument("--skip", type=int, default=2)
    ap.add_argument("--json", action="store_true")
    ap.add_argument("--kernels", type=int, default=0)
    a = ap.parse_args()
    ks = []
    with open(a.trace) as f:
        for r in csv.DictReader(f):
            ks.append((int(r["start_ns"]), int(r["end_ns"]), r["name"]))
    ks.sort()
    step_gaps, sample_gaps, spans = [], [], []
    per_kernel = {}
    frontier = None  # the latest end of the kernels seen so far
    step_start = None
    steps = 0
    for start, end, name in ks:
        if "FeedTokensKernel" in name:
            if step_start is not None:
                spans.append(frontier - step_start)
            steps += 1
            if frontier is not None and steps > a.skip:
                step_gaps.append(max(0, start - frontier) / 1e3)
            step_start = start
        elif ("SampleRowsKernel" in name or "GreedyRowsKernel" in name) and steps > a.skip:
            if frontier is not None:
                sample_gaps.append(max(0, start - frontier) / 1e3)
        if steps > a.skip:
            per_kernel[name] = per_kernel.get(name, 0) + end - start
        frontier = end if frontier is None else max(frontier, end)
    if not step_gaps:
        raise SystemExit("no engine steps (FeedTokensKernel) in the trace")
    total = (ks[-1][1] - ks[0][0]) / 1e3
    out = {
        "steps": len(step_gaps),
        "step_gap_us": {p: percentile(step_gaps, q) for p, q in
                        (("p50", 50), ("p90", 90), ("p99", 99), ("max", 100))},
        "sample_gap_us": {p: percentile(sample_gaps, q) for p, q in
                          (("p50", 50), ("p90", 90), ("p99", 99), ("max", 100))},
        "mean_step_span_us": sum(spans) / max(len(spans), 1) / 1e3,
        "idle_between_steps_share": sum(step_gaps) / max(total, 1e-9),
    }
    if a.kernels:
        top = sorted(per_kernel.items(), key=lambda kv: -kv[1])[:a.kernels]
        out["kernel_us_per_step"] = {k[:80]: v / 1e3 / len(step_gaps) for k, v in top}
    if a.json:
        print(json.dumps(out))
        return
    g, s = out["step_gap_us"], out["sample_gap_us"]
    print(f"{out['steps']} steps, mean span {out['mean_step_span_us']:.1f} us; idle before a step: "
          f"p50 {g['p50']:.1f} p90 {g['p90']:.1f} p99 {g['p99']:.1f} max {g['max']:.1f} us "
          f"({100 * out['idle_between_steps_share']:.1f}% of the run); before sampling: p50 "
          f"{s['p50']:.1f} p99 {s['p99']:.1f} max {s['max']:.1f} us")


if __name__ == "__main__":
    main()

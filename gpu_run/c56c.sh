#!/usr/bin/env bash
# Session 56: main with the TMA-fed experts by default. A cupti kernel trace of flash-l8's
# 8,192-token prefill in the mode (--fp8-mma), summed per kernel: where the 0.168 s goes.
source "$(dirname "$0")/common.sh"
gpu_build dsinfer
tr=build-cuda/libcupti_trace.so
[ -f $tr ] || g++ -O2 -std=c++20 -shared -fPIC -I/usr/local/cuda/include \
  tools/cupti_trace/cupti_trace.cc -L/usr/local/cuda/lib64 -lcupti -o $tr
LD_PRELOAD=$tr DSINFER_TRACE_OUT=/tmp/trace_p.csv timeout 150 build-cuda/bin/dsinfer bench \
  --preset flash-l8 --batches 1 --prefill 8192 --steps 1 --kv-cache-dtype fp8 --fp8-mma > "$OUT/bench_trace.jsonl" 2>&1
echo "trace rc=$? $(( $(date +%s) - t0 )) s"
python3 - /tmp/trace_p.csv > "$OUT/prefill_kernels.txt" <<'PY'
import collections, sys
tot = collections.defaultdict(float); cnt = collections.Counter(); grid = {}
for i, line in enumerate(open(sys.argv[1])):
    if i == 0: continue
    f = line.rstrip("\n").split(",", 9)
    d = (int(f[1]) - int(f[0])) / 1e6
    tot[f[9]] += d; cnt[f[9]] += 1; grid[f[9]] = (f[5], f[6], f[7], f[8])
print("total_ms count mean_us grid name")
for n, t in sorted(tot.items(), key=lambda x: -x[1])[:60]:
    print(f"{t:9.2f} {cnt[n]:6d} {1000*t/cnt[n]:9.1f} {grid[n]} {n[:160]}")
PY
head -45 "$OUT/prefill_kernels.txt"
grep -o '"bench": "prefill", "tokens": [0-9]*, "chunk": [0-9]*, "seconds": [0-9.]*' "$OUT/bench_trace.jsonl"
echo "total $(( $(date +%s) - t0 )) s"

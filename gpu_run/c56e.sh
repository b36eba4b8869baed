#!/usr/bin/env bash
# Session 56: a cupti kernel trace of flash-l8's 8,192-token prefill in the mode (--fp8-mma) on
# main, summed per kernel and grid (launch shape) over the bench's three prefills.
source "$(dirname "$0")/common.sh"
gpu_build dsinfer
tr=build-cuda/libcupti_trace.so
[ -f $tr ] || g++ -O2 -std=c++20 -shared -fPIC -I/usr/local/cuda/include \
  tools/cupti_trace/cupti_trace.cc -L/usr/local/cuda/lib64 -lcupti -o $tr
LD_PRELOAD=$tr DSINFER_TRACE_OUT=/tmp/trace_p.csv timeout 150 build-cuda/bin/dsinfer bench \
  --preset flash-l8 --batches 1 --prefill 8192 --steps 1 --kv-cache-dtype fp8 --fp8-mma > "$OUT/bench_trace.jsonl" 2>&1
echo "trace rc=$? $(( $(date +%s) - t0 )) s"
python3 - /tmp/trace_p.csv > "$OUT/prefill_kernels_grid.txt" <<'PY'
import collections, sys
tot = collections.defaultdict(float); cnt = collections.Counter()
for i, line in enumerate(open(sys.argv[1])):
    if i == 0: continue
    f = line.rstrip("\n").split(",", 9)
    d = (int(f[1]) - int(f[0])) / 1e6
    key = (f[9][:70], f[5], f[6], f[7], f[8])
    tot[key] += d; cnt[key] += 1
print("ms_per_prefill count mean_us name grid block")
for k, t in sorted(tot.items(), key=lambda x: -x[1])[:70]:
    print(f"{t/3:8.2f} {cnt[k]:6d} {1000*t/cnt[k]:9.1f} {k[0]} ({k[1]},{k[2]},{k[3]}) {k[4]}")
PY
head -70 "$OUT/prefill_kernels_grid.txt"
echo "total $(( $(date +%s) - t0 )) s"

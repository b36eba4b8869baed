#!/usr/bin/env bash
# Prepared in session 51 (not run), carry [".devcarry"]; the tree is main. Batch 1's critical
# path after the combine change: a cupti kernel timeline of graph-replayed steps (the last one is
# session 39's, at 1.894 ms), its chain (end order, what each kernel adds) and its exposed time per
# kernel; then the step as `dsinfer bench` times it. Session 51's ncu found the routed experts'
# GEMVs waiting on their routing chain; the timeline says how much of them is exposed now.
source "$(dirname "$0")/common.sh"
gpu_build dsinfer
TR=build-cuda/libcupti_trace.so
g++ -O2 -std=c++20 -shared -fPIC -I/usr/local/cuda/include tools/cupti_trace/cupti_trace.cc \
  -L/usr/local/cuda/lib64 -lcupti -o $TR || exit 1
LD_PRELOAD=$TR DSINFER_TRACE_OUT=/tmp/trace_b1.csv timeout 90 build-cuda/bin/dsinfer bench \
  --preset flash-l8 --batches 1 --prefill 0 --steps 3 --kv-cache-dtype fp8 > /dev/null 2>&1
python3 tools/cupti_trace/timeline.py /tmp/trace_b1.csv --chain > "$OUT/timeline_b1.txt" 2>&1
echo "timeline rc=$? $(( $(date +%s) - t0 )) s"
head -30 "$OUT/timeline_b1.txt"
bench_flash b1 --batches 1
echo "total $(( $(date +%s) - t0 )) s"

#!/usr/bin/env bash
# Overlap scheduling's measurements (docs/perf.md "Overlap scheduling"), on a machine with a Hopper
# GPU and a built cuda-release tree, each with overlap on (the default) and off (--no-overlap):
#   decode : flash-l8 device-random, B requests of 16 prompt and 512 output tokens at once
#            (B = 1, 8, 64; one short prefill step, so the per-step figures are decode steps'):
#            steps/s, output tok/s, host and wait time per step;
#   trace  : the same at 128 output tokens under the CUPTI tracer: the GPU's idle time between
#            consecutive steps (tools/cupti_trace/step_gaps.py);
#   offline: the GPU engine issue's offline workloads, tiny official (256 requests) and flash-l8
#            (REQUESTS requests, default 128, of the 512-request workload's length distribution).
#   scripts/gpu_overlap_bench.sh OUT_DIR [REQUESTS]
set -uo pipefail
cd "$(dirname "$0")/.."
out="${1:?OUT_DIR}"
requests="${2:-128}"
mkdir -p "$out"
bin=build-cuda/bin
tracer=build-cuda/libcupti_trace.so
g++ -O2 -std=c++20 -shared -fPIC -I/usr/local/cuda/include tools/cupti_trace/cupti_trace.cc \
  -L/usr/local/cuda/lib64 -lcupti -o "$tracer" || tracer=""
tag() {  # adds {"overlap": ..., "batch": ...} to a JSON line
  python3 -c 'import json,sys; j=json.loads(sys.stdin.readline()); j.update(json.loads(sys.argv[1])); print(json.dumps(j))' "$1"
}
for mode in on off; do
  flag=""
  [ "$mode" = off ] && flag="--no-overlap"
  for b in 1 8 64; do
    echo "== decode flash-l8 batch $b overlap $mode"
    "$bin/bench_engine" --random-preset flash-l8 --device cuda --requests "$b" --max-running "$b" \
      --prompt-len 16 --output-len 512 --max-batch-tokens 4096 $flag |
      tag "{\"workload\": \"decode\", \"batch\": $b}" | tee -a "$out/overlap_decode.jsonl"
    if [ -n "$tracer" ]; then
      LD_PRELOAD="$tracer" DSINFER_TRACE_OUT="$out/trace.csv" "$bin/bench_engine" \
        --random-preset flash-l8 --device cuda --requests "$b" --max-running "$b" \
        --prompt-len 16 --output-len 128 --max-batch-tokens 4096 $flag > /dev/null
      python3 tools/cupti_trace/step_gaps.py "$out/trace.csv" --json --kernels 6 |
        tag "{\"workload\": \"trace\", \"batch\": $b, \"overlap\": \"$mode\"}" |
        tee -a "$out/overlap_gaps.jsonl"
      rm -f "$out/trace.csv"
    fi
  done
  dir=/tmp/dsinfer-tiny-official
  [ -d "$dir" ] || "$bin/dsinfer" init-model --preset tiny --weights official --out "$dir" > /dev/null
  echo "== offline tiny official, 256 requests, overlap $mode"
  "$bin/bench_engine" --model "$dir" --device cuda --requests 256 --prompt-median 55 \
    --prompt-min 16 --prompt-max 1024 --output-median 33 --output-min 16 --output-max 256 \
    --max-running 64 --max-batch-tokens 2048 $flag |
    tag '{"workload": "offline_tiny"}' | tee -a "$out/overlap_offline.jsonl"
  echo "== offline flash-l8, $requests requests, overlap $mode"
  "$bin/bench_engine" --random-preset flash-l8 --device cuda --requests "$requests" \
    --prompt-median 1024 --prompt-min 16 --prompt-max 4096 --output-median 256 --output-min 16 \
    --output-max 1024 --max-running 128 --max-batch-tokens 4096 $flag |
    tag '{"workload": "offline_flash"}' | tee -a "$out/overlap_offline.jsonl"
done

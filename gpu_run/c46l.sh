#!/usr/bin/env bash
# Session 46, carry [".devcarry"]: the model keeps a row a block for steps of short chunks
# (kIndexerRunsMinChunk): gpu_model_test (prefill = decode bits, schedules) on it.
source "$(dirname "$0")/common.sh"
gpu_build gpu_model_test
timeout 100 build-cuda/bin/gpu_model_test > "$OUT/gpu_model_test.log" 2>&1; echo "gpu_model_test rc=$? $(( $(date +%s) - t0 )) s"; grep -E "PASSED|FAILED|Failure" -A3 "$OUT/gpu_model_test.log" | head -12

#!/usr/bin/env bash
# Session 40, after c40b. Carry [".devcarry"]. The mode's warp-specialized expert tile with the
# tokens' codes 128-byte-swizzled (as the TMA tile's boxes), and grouped input (wo_a) on the TMA
# tile: the op tests, the tiny model in the mode, and flash-l8's bench with --fp8-mma.
source "$(dirname "$0")/common.sh"
gpu_build gpu_fp8mma_test gpu_model_test dsinfer
timeout 150 build-cuda/bin/gpu_fp8mma_test > "$OUT/fp8mma_test.log" 2>&1; echo "gpu_fp8mma_test rc=$? $(( $(date +%s) - t0 )) s"
grep -E "OK \]|FAILED|Failure|element|differing|Expected|Which is" "$OUT/fp8mma_test.log" | head -30
timeout 100 build-cuda/bin/gpu_model_test --gtest_filter='*TinyOfficialFp8Mma*' > "$OUT/model_mma.log" 2>&1; echo "gpu_model_test rc=$?"
grep -E "OK \]|FAILED|rel err|Failure" "$OUT/model_mma.log" | head -8
timeout 120 build-cuda/bin/dsinfer bench --preset flash-l8 --batches 1,32,128 --steps 10 --prefill 8192 --kv-cache-dtype fp8 --fp8-mma > "$OUT/bench_fp8mma.jsonl" 2>&1; echo "bench rc=$? $(( $(date +%s) - t0 )) s"
grep -o '"bench": "decode", "batch": [0-9]*, "context": [0-9]*, "step_ms": [0-9.]*\|"bench": "prefill", "tokens": [0-9]*, "chunk": [0-9]*, "seconds": [0-9.]*' "$OUT/bench_fp8mma.jsonl" | tr '\n' ' '; echo
grep '"prefill_profile_eager"' "$OUT/bench_fp8mma.jsonl" | head -c 1200; echo
echo "total $(( $(date +%s) - t0 )) s"

#!/usr/bin/env bash
# Session 41, fourth call. Carry [".devcarry"]. The mode's FP4 re-expressed in FP8's form (per
# row and 128-column block one scale 2^e_max, the groups' codes shifted: io::QuantizedToMma; one
# chain of four k32 steps and one promotion a block, where each 32-column group had its own): the
# op tests (both expert kernels; FP4 groups 0-14 binades apart), the tiny official model GPU vs
# CPU in the mode, flash-l8 in the mode (c41a: experts 113.5 ms, decode 2.620 / 10.434 / 18.006 /
# 25.236 ms), then the GPU suite.
source "$(dirname "$0")/common.sh"
gpu_build
fp8mma_tests
timeout 150 build-cuda/bin/gpu_model_test --gtest_filter='*TinyOfficial*' > "$OUT/model_mma.log" 2>&1; echo "gpu_model_test rc=$? $(( $(date +%s) - t0 )) s"
grep -E "OK \]|FAILED|rel err|Failure|Expected|Which is" "$OUT/model_mma.log" | head -12
bench_flash mma --batches 1,32,128,256 --fp8-mma
timeout 300 ctest --test-dir build-cuda -L gpu -E "tokenizer_v4_setup|structured_e2e_gpu" --timeout 200 -j6 > "$OUT/ctest.log" 2>&1; echo "ctest rc=$? $(( $(date +%s) - t0 )) s"
grep -E "tests passed|tests failed|\*\*\*|Failed|Timeout" "$OUT/ctest.log" | head -16
echo "total $(( $(date +%s) - t0 )) s"

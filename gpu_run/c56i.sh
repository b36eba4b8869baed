#!/usr/bin/env bash
# Session 56, after the review mends: the mode's op tests (three expert forms) and the model in
# the mode against the CPU (gpu_model_test TinyOfficialFp8Mma), the attention's and mHC's codes.
source "$(dirname "$0")/common.sh"
gpu_build gpu_fp8mma_test gpu_model_test gpu_attention_tc_test gpu_ops_test
fp8mma_tests
timeout 90 build-cuda/bin/gpu_fp8mma_test --no-fp8mma-tma-experts > "$OUT/fp8mma_cp.log" 2>&1; echo "gpu_fp8mma_test --no-fp8mma-tma-experts rc=$?"
timeout 150 build-cuda/bin/gpu_model_test --gtest_filter='*Fp8Mma*:*Official*' > "$OUT/model_test.log" 2>&1; echo "gpu_model_test rc=$?"
grep -hE "PASSED|FAILED" "$OUT/model_test.log" | head -5
timeout 120 build-cuda/bin/gpu_attention_tc_test --gtest_filter='*Codes*:*RowBlock*' > "$OUT/attn.log" 2>&1; echo "attention rc=$?"
timeout 120 build-cuda/bin/gpu_ops_test --gtest_filter='HcTest.*' > "$OUT/hc.log" 2>&1; echo "HcTest rc=$?"
echo "total $(( $(date +%s) - t0 )) s"

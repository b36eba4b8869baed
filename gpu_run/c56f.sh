#!/usr/bin/env bash
# Session 56 (record: run twice, the diff landed after the second, then deleted): s56_codes.diff (its second form: the row block's codes 8 lanes a block, xn's codes made by the mHC finish), the FP8-instruction mode's activations handed on as act_quant codes:
# the attention writes wo_a's input codes (out_c) instead of fp32 o; xn quantized once per half
# layer for all its projections (XnCodes); QuantizedRows' mode form (c / cs) taken by every mma
# linear. Main's mode bench first (same card), then the diff: op tests, GPU suite, the mode bench.
source "$(dirname "$0")/common.sh"
gpu_build dsinfer
bench_flash main_mode --batches 1,32,128,256 --fp8-mma
apply_diff s56_codes.diff
gpu_build
for m in "" "--no-fp8mma-tma-experts" "--no-fp8mma-ws-experts"; do
  timeout 90 build-cuda/bin/gpu_fp8mma_test $m > "$OUT/fp8mma_test$m.log" 2>&1; echo "gpu_fp8mma_test $m rc=$?"
  grep -hE "PASSED|FAILED|Failure" -A4 "$OUT/fp8mma_test$m.log" | head -12
done
timeout 120 build-cuda/bin/gpu_attention_tc_test > "$OUT/attn_tc_test.log" 2>&1; echo "gpu_attention_tc_test rc=$?"
timeout 120 build-cuda/bin/gpu_ops_test --gtest_filter="HcTest.*" > "$OUT/hc_test.log" 2>&1; echo "HcTest rc=$?"; grep -hE "PASSED|FAILED" "$OUT/hc_test.log" | head -5
grep -hE "PASSED|FAILED|Failure" -A4 "$OUT/attn_tc_test.log" | head -12
bench_flash codes_mode --batches 1,32,128,256 --fp8-mma
grep -h prefill_profile "$OUT/bench_main_mode.jsonl" "$OUT/bench_codes_mode.jsonl" | cut -c1-420
gpu_suite 300
unapply_diff s56_codes.diff
echo "total $(( $(date +%s) - t0 )) s"

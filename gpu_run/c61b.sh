#!/usr/bin/env bash
# c61a's fallback when the device budget is short (about 4-5 minutes; prepared in session 61,
# never run): the same diff (the key pre-pass on by default, decided by the row block's launch), only the tests that
# reach the row attention and the model, run as binaries instead of the whole suite, then the
# mode's prefill.
source "$(dirname "$0")/common.sh"
# Session 61 unlanded the change for want of a GPU run: it comes as a diff.
apply_diff s61_prepass_default.diff
gpu_build gpu_attention_tc_test gpu_model_test dsinfer
run_test() {  # name, limit, binary, args...
  local n=$1 lim=$2; shift 2
  timeout "$lim" "$@" > "$OUT/$n.log" 2>&1; echo "$n rc=$? $(grep -c '^\[       OK' "$OUT/$n.log") ok $(( $(date +%s) - t0 )) s"
  grep -E "^\[  FAILED|Failure" -A3 "$OUT/$n.log" | head -12
}
run_test attn_tc 150 build-cuda/bin/gpu_attention_tc_test
run_test attn_tc_rowblock_sync 90 build-cuda/bin/gpu_attention_tc_test --gtest_filter='*RowBlock*' --attention-row-pv=sync
run_test model_rowblock 120 build-cuda/bin/gpu_model_test --gtest_filter='*Fp8KvCache*' --attention-tc-row-min-rows=1
run_test model_rowblock_noprepass 120 build-cuda/bin/gpu_model_test --gtest_filter='*Fp8KvCache*' --no-attention-row-prepass --attention-tc-row-min-rows=1
bench_flash mode --batches 1 --fp8-mma
run_test model 200 build-cuda/bin/gpu_model_test
echo "total $(( $(date +%s) - t0 )) s"

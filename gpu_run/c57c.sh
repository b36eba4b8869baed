#!/usr/bin/env bash
# Session 57, one call for both prepared diffs (device starts were scarce; about 7-8 minutes):
# main's experts' shapes, the mode's prefill and the attention's codes epilogue first; then
# s57_experts_ss.diff (the experts' tile with both operands in shared memory: gpu_fp8mma_test,
# the shapes, the prefill); then s56_wob_codes.diff on top (wo_a's output to wo_b as codes:
# gpu_fp8mma_test, the model in the mode against the CPU, the prefill). Both reversed at the end.
source "$(dirname "$0")/common.sh"
ex() {  # name
  for s in expert_w1 expert_w2; do
    timeout 60 build-cuda/bin/bench_fp8_gemm --sample 256 --only $s > "$OUT/gemm_$1_$s.jsonl" 2>&1
    echo "gemm $1 $s rc=$? $(grep -o '"us": [0-9.]*\|"mismatches": [0-9]*' "$OUT/gemm_$1_$s.jsonl" | tr '\n' ' ')"
  done
}
gpu_build dsinfer bench_fp8_gemm gpu_fp8mma_test gpu_model_test bench_attention
ex main
bench_flash main_mode --batches 1 --fp8-mma
for f in "" "--codes"; do
  timeout 60 build-cuda/bin/bench_attention --rows 128 --prefill 8192 --variants tc_packed_qp $f > "$OUT/attn$f.jsonl" 2>&1
  echo "attention $f rc=$? $(grep -o '"kind": "[a-z]*", "rows": [0-9]*\|"us": [0-9.]*' "$OUT/attn$f.jsonl" | paste -d" " - - | tr '\n' ';')"
done
apply_diff s57_experts_ss.diff
gpu_build dsinfer bench_fp8_gemm gpu_fp8mma_test
fp8mma_tests
ex ss
bench_flash ss_mode --batches 1 --fp8-mma
apply_diff s56_wob_codes.diff
gpu_build dsinfer gpu_fp8mma_test gpu_model_test
timeout 60 build-cuda/bin/gpu_fp8mma_test > "$OUT/fp8mma_test_wob.log" 2>&1; echo "gpu_fp8mma_test (ss + wob) rc=$?"
grep -hE "FAILED|Failure" -A4 "$OUT/fp8mma_test_wob.log" | head -12
timeout 120 build-cuda/bin/gpu_model_test --gtest_filter='*Fp8Mma*' > "$OUT/model_test.log" 2>&1; echo "gpu_model_test rc=$?"
grep -hE "PASSED|FAILED" "$OUT/model_test.log" | head -3
bench_flash wob_mode --batches 1 --fp8-mma
grep -h prefill_profile "$OUT/bench_main_mode.jsonl" "$OUT/bench_ss_mode.jsonl" "$OUT/bench_wob_mode.jsonl" | cut -c1-420
unapply_diff s56_wob_codes.diff
unapply_diff s57_experts_ss.diff
echo "total $(( $(date +%s) - t0 )) s"

#!/usr/bin/env bash
# Prepared in session 56 for the next device session, carry [".devcarry"]; the tree is main
# (about 3-4 minutes). s56_wob_codes.diff: wo_a's output handed to wo_b as act_quant codes
# (LinearParams::yc; the TMA tile's epilogue writes them, MmaTmaKernel<true>: per token the
# maximum over the tile's 128 rows through two consumer named barriers; other tiles write y and
# act_quant it after). The trace put wo_b's act_quant at 1.18 ms a prefill, plus z's fp32 rows.
# Compiled here without spills, never run. Main's mode bench first (same card), then the diff:
# gpu_fp8mma_test (DenseMatchesCpuBitForBit now asks every case for the codes), the model in the
# mode against the CPU, the mode's bench; the GPU suite if it gains.
source "$(dirname "$0")/common.sh"
gpu_build dsinfer bench_attention
bench_flash main_mode --batches 1,256 --fp8-mma
# The attention's codes epilogue on main (bench_attention --codes, session 56's landed form).
for f in "" "--codes"; do
  timeout 60 build-cuda/bin/bench_attention --rows 128 --prefill 8192 --variants tc_packed_qp $f > "$OUT/attn$f.jsonl" 2>&1
  echo "attention $f rc=$? $(grep -o '"kind": "[a-z]*", "rows": [0-9]*\|"us": [0-9.]*' "$OUT/attn$f.jsonl" | paste -d" " - - | tr '\n' ';')"
done
apply_diff s56_wob_codes.diff
gpu_build
fp8mma_tests
timeout 120 build-cuda/bin/gpu_model_test --gtest_filter='*Fp8Mma*' > "$OUT/model_test.log" 2>&1; echo "gpu_model_test rc=$?"
grep -hE "PASSED|FAILED" "$OUT/model_test.log" | head -3
bench_flash wob_codes_mode --batches 1,256 --fp8-mma
grep -h prefill_profile "$OUT/bench_main_mode.jsonl" "$OUT/bench_wob_codes_mode.jsonl" | cut -c1-420
gpu_suite 240
unapply_diff s56_wob_codes.diff
echo "total $(( $(date +%s) - t0 )) s"

#!/usr/bin/env bash
# Ran in session 60 on an H100 (its output: docs/perf.md "Session 60", bench/results/*_s60_c60e_*); the
# diff it applied landed as ccafbbc and was removed, so this script is the record of that call.
# Prepared in session 60 (about 5 minutes on a warm machine; compiled only, never run before): the
# row attention's per-call key pre-pass (gpu_run/s60_attn_row_prepass.diff): for calls whose
# sequences all start at position 0, LaunchRowKeysDecode decodes the call's packed K=V rows and
# its sequences' compressed entries once into bf16 rows in S's position order
# (SparseAttentionParams::keys16), and the row block's kPre form copies each chunk's keys as they
# are (16-byte cp.async pieces into two alternating swizzled key buffers, no decode pass; the
# running softmax in shared memory and P V's wgmma in m64n32 pieces, as c60b's spill-free
# ablation). Unlike c60b's ablations the bits are kept: the op test compares the pre-decoded row
# block with the decoding one (memcmp, both P V forms), the model at the row block's shapes with
# and without it (its schedules' bits, against the CPU), then bench_attention's 128 decode rows and
# 8,192-token prefill with and without the pre-pass (the pre-pass's decode timed with it), then
# the mode's prefill with --attention-row-prepass against main's (the first chunk only: later
# chunks start past 0 and keep the decode). c60b measured what dropping the decode gains; this
# measures what is left of it once the decode runs once per call.
source "$(dirname "$0")/common.sh"
apply_diff s60_attn_row_prepass.diff
gpu_build bench_attention gpu_attention_tc_test gpu_model_test dsinfer
op_test() {  # flags...
  local tag=${*//[ =-]/_}
  timeout 180 build-cuda/bin/gpu_attention_tc_test --gtest_filter='*RowBlock*' "$@" > "$OUT/attn_tc_test$tag.log" 2>&1; echo "gpu_attention_tc_test RowBlock $* rc=$?"
  grep -E "OK \]|FAILED|Failure" -A3 "$OUT/attn_tc_test$tag.log" | head -24
}
attn_pre() {  # name, flags...
  local n=$1; shift
  timeout 120 build-cuda/bin/bench_attention --rows 128 --prefill 8192 --variants tc_packed_qp "$@" > "$OUT/attn_$n.jsonl" 2>&1; echo "bench_attention $n rc=$?"
  grep -o '"kind": "[a-z]*", "rows": [0-9]*, "prefill": [a-z]*, "kernel": "[a-z_]*"\|"us": [0-9.]*' "$OUT/attn_$n.jsonl" | paste -d" " - - | tr '\n' ';'; echo
  grep -iE "error|abort" "$OUT/attn_$n.jsonl" | head -3
}
# The model at the row block's shapes (GpuModelTest.Fp8KvCacheRowBlockShapes, new, with the tiny
# FP8-cache model's test): its schedules' bits with the row block by default, from 1 row, and with
# the pre-pass on every first chunk (one prompt, and two in one forward).
model_test() {  # flags...
  local tag=${*//[ =-]/_}
  timeout 240 build-cuda/bin/gpu_model_test --gtest_filter='*Fp8KvCache*' "$@" > "$OUT/model_fp8cache_$tag.log" 2>&1; echo "gpu_model_test Fp8KvCache '$*' rc=$? $(( $(date +%s) - t0 )) s"
  grep -E "OK \]|FAILED|Failure|rel err" -A2 "$OUT/model_fp8cache_$tag.log" | head -16
}
# In the order of what matters if the call is cut short.
op_test
attn_pre decode
attn_pre prepass --row-prepass
model_test --attention-row-prepass --attention-tc-row-min-rows=1
model_test
bench_flash mode_prepass --batches 1 --fp8-mma --attention-row-prepass
bench_flash mode --batches 1 --fp8-mma
op_test --attention-row-pv=sync
model_test --attention-tc-row-min-rows=1
attn_pre decode_sync --row-pv-sync
attn_pre prepass_sync --row-pv-sync --row-prepass
echo "total $(( $(date +%s) - t0 )) s"

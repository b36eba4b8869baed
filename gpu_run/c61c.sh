#!/usr/bin/env bash
# Prepared in session 61 (about 5 minutes; after c61a, whose diff it applies first): the row
# attention's key pre-pass for every prefill chunk (gpu_run/s61_prepass_later.diff: a host plan,
# PlanRowKeys, places each sequence's ring rows before the call and its compressed entries after
# the call's rows; later chunks read them pre-decoded too). In order: the op test's row-block
# cases (new later-chunk and mixed three-sequence cases, memcmp against the decoding row block)
# with P V on wgmma and on mma.sync, the model tests at the row block's shapes with every call on
# the row block (the chunked schedules' bits), the mode's 32K prefill in chunks of 8K with it and
# then without it (main, rebuilt).
source "$(dirname "$0")/common.sh"
apply_diff s61_prepass_default.diff  # (skip if c61a's change has landed)
apply_diff s61_prepass_later.diff
gpu_build gpu_attention_tc_test gpu_model_test dsinfer
for m in "" --attention-row-pv=sync; do
  timeout 150 build-cuda/bin/gpu_attention_tc_test --gtest_filter='*RowBlock*' $m > "$OUT/attn_tc_rowblock$m.log" 2>&1; echo "gpu_attention_tc_test RowBlock $m rc=$? $(( $(date +%s) - t0 )) s"
  grep -E "OK \]|FAILED|Failure" -A3 "$OUT/attn_tc_rowblock$m.log" | head -16
done
timeout 150 build-cuda/bin/gpu_model_test --gtest_filter='*Fp8KvCache*' --attention-tc-row-min-rows=1 > "$OUT/model_rowblock.log" 2>&1; echo "gpu_model_test Fp8KvCache row block rc=$? $(( $(date +%s) - t0 )) s"
grep -E "OK \]|FAILED|Failure|rel err" -A2 "$OUT/model_rowblock.log" | head -20
long32k later
bench_flash mode_later --batches 1 --fp8-mma
unapply_diff s61_prepass_later.diff
gpu_build dsinfer
long32k main
echo "total $(( $(date +%s) - t0 )) s"

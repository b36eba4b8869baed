#!/usr/bin/env bash
# Prepared in session 61, never run (no device machine could be started; about 7 minutes): the
# row attention's key pre-pass on by default and decided by the row block's launch (keys16 a
# scratch the caller offers), gpu_run/s61_prepass_default.diff (branch s61-prepass-default:
# runtime.h's default, cuda_flags' --no-attention-row-prepass, gpu_test_main, ctest
# gpu_model_row_no_prepass for the form without it, the launch's decision, the op test's
# offered-not-taken cases). The whole build, the mode's prefill, bench_attention's prefill with
# the scratch offered (its kernel names end in _prepass), then the GPU suite. If it passes, the
# diff lands as it is.
source "$(dirname "$0")/common.sh"
# Session 61 unlanded the change for want of a GPU run: it comes as a diff.
apply_diff s61_prepass_default.diff
gpu_build
bench_flash mode --batches 1 --fp8-mma
for f in --row-prepass; do
  timeout 60 build-cuda/bin/bench_attention --rows 128 --prefill 8192 --variants tc_packed_qp $f > "$OUT/attn_prefill$f.jsonl" 2>&1; echo "bench_attention $f rc=$?"
  grep -o '"kind": "[a-z]*", "rows": [0-9]*, "prefill": [a-z]*\|"kernel": "[a-z_]*"\|"us": [0-9.]*' "$OUT/attn_prefill$f.jsonl" | paste -d" " - - - | tr '\n' ';'; echo
done
gpu_suite 320
grep -E "gpu_model_row|gpu_attention_tc" "$OUT/ctest.log" | head
echo "total $(( $(date +%s) - t0 )) s"

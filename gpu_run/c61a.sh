#!/usr/bin/env bash
# Session 61's first call (about 7 minutes): the row attention's key pre-pass on by default (the
# working tree's flip: runtime.h, cuda_flags' --no-attention-row-prepass, gpu_test_main, ctest
# gpu_model_row_no_prepass for the form without it) and the pre-pass decided by the row block's
# launch (keys16 a scratch offered: dac4fc6), the whole build, the mode's prefill and the
# bench_attention's prefill with the scratch offered (its kernel names end in _prepass), then the
# GPU suite. (Trimmed to fit the session's device budget.)
source "$(dirname "$0")/common.sh"
gpu_build
bench_flash mode --batches 1 --fp8-mma
for f in --row-prepass; do
  timeout 60 build-cuda/bin/bench_attention --rows 128 --prefill 8192 --variants tc_packed_qp $f > "$OUT/attn_prefill$f.jsonl" 2>&1; echo "bench_attention $f rc=$?"
  grep -o '"kind": "[a-z]*", "rows": [0-9]*, "prefill": [a-z]*\|"kernel": "[a-z_]*"\|"us": [0-9.]*' "$OUT/attn_prefill$f.jsonl" | paste -d" " - - - | tr '\n' ';'; echo
done
gpu_suite 320
grep -E "gpu_model_row|gpu_attention_tc" "$OUT/ctest.log" | head
echo "total $(( $(date +%s) - t0 )) s"

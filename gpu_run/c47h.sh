#!/usr/bin/env bash
# Session 47, carry [".devcarry"]. The row attention's prologue writes each query straight into
# the swizzled bf16 rows (s47_attn_row_prologue.diff: no staging pass, one barrier instead of 8; the
# same values rounded the same way), now with the prologue a function of its own (inlined, c47g,
# ptxas spilled 48 bytes in the chunk loop of <512, true>). Where any spills sit (SASS), the
# attention's bit tests, bench_attention at the 8,192-token prefill, the mode's prefill, the GPU
# suite; then the diff reversed (main) and the same figures. No git stash / checkout.
source "$(dirname "$0")/common.sh"
gpu_build
cuobjdump -sass build-cuda/bin/bench_attention 2>/dev/null | awk '/Function : .*SparseAttentionTcRowKernelILi512ELb1/{f=1} f&&/Function : /&&!/SparseAttentionTcRowKernelILi512ELb1/{f=0} f' > "$OUT/row512_sass.txt"
echo "sass lines $(wc -l < "$OUT/row512_sass.txt")"; echo "STL $(grep -c STL "$OUT/row512_sass.txt") LDL $(grep -c LDL "$OUT/row512_sass.txt") CALL $(grep -c CALL "$OUT/row512_sass.txt")"
timeout 150 build-cuda/bin/gpu_attention_tc_test > "$OUT/attn_tc_test.log" 2>&1; echo "gpu_attention_tc_test rc=$?"; grep -E "PASSED|FAILED|Failure" -A3 "$OUT/attn_tc_test.log" | head -10
timeout 100 build-cuda/bin/bench_attention --rows 32 --prefill 8192 --variants tc_packed_qp > "$OUT/attn_prologue.jsonl" 2>&1; grep -o '"kind": "[a-z]*", "rows": [0-9]*, "prefill": [a-z]*\|"us": [0-9.]*' "$OUT/attn_prologue.jsonl" | paste -d" " - -
bench_flash prologue_mma --batches 1 --fp8-mma
gpu_suite 300
git apply -R gpu_run/s47_attn_row_prologue.diff || { echo "reverse failed"; exit 1; }
gpu_build bench_attention dsinfer
timeout 100 build-cuda/bin/bench_attention --rows 32 --prefill 8192 --variants tc_packed_qp > "$OUT/attn_main.jsonl" 2>&1; grep -o '"kind": "[a-z]*", "rows": [0-9]*, "prefill": [a-z]*\|"us": [0-9.]*' "$OUT/attn_main.jsonl" | paste -d" " - -
bench_flash main_mma --batches 1 --fp8-mma
git apply gpu_run/s47_attn_row_prologue.diff
echo "total $(( $(date +%s) - t0 )) s"

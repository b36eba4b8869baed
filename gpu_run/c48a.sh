#!/usr/bin/env bash
# Prepared in session 47 (compiled here: no spills; reviewed; not run), carry [".devcarry"]; the
# tree is main, the script applies the diff itself. The row attention with two key buffers
# (s47_attn_row_kdouble.diff): chunk ci + 1's keys decode into the other buffer while chunk ci's
# S runs on warpgroup MMA (issued, then the decode, then the wait), each warp decoding the raw
# rows its own lanes copied (a cp.async wait and a __syncwarp, no block barrier), chunk 0's keys
# decoded in the prologue: four block barriers a chunk instead of five, and the decode off the
# critical path. The same operations on the same values, so the same bits (gpu_attention_tc_test:
# the row block against the per-tile kernel, on both P V paths). Dynamic shared memory +32 KB
# (at most 201,728 bytes, 224,768 with the static; the L1 carveout shrinks with it).
# Main first (bench_attention at decode rows 128 / 256, which take the row block, and the
# 8,192-token prefill; the mode's prefill; the default's decode at 128 / 256), then the diff: the
# SASS's local-memory count, the bit tests, the same figures, the GPU suite. No git stash /
# checkout (common.sh).
source "$(dirname "$0")/common.sh"
gpu_build bench_attention dsinfer
timeout 100 build-cuda/bin/bench_attention --rows 128,256 --prefill 8192 --variants tc_packed_qp > "$OUT/attn_main.jsonl" 2>&1; grep -o '"kind": "[a-z]*", "rows": [0-9]*, "prefill": [a-z]*\|"us": [0-9.]*' "$OUT/attn_main.jsonl" | paste -d" " - -
bench_flash main_mma --batches 1 --fp8-mma
bench_flash main_default --batches 128,256
apply_diff s47_attn_row_kdouble.diff
gpu_build
cuobjdump -sass build-cuda/bin/bench_attention 2>/dev/null | awk '/Function : .*SparseAttentionTcRowKernelILi512ELb1/{f=1} f&&/Function : /&&!/SparseAttentionTcRowKernelILi512ELb1/{f=0} f' > "$OUT/row512_sass.txt"
echo "sass lines $(wc -l < "$OUT/row512_sass.txt") STL $(grep -c STL "$OUT/row512_sass.txt") LDL $(grep -c LDL "$OUT/row512_sass.txt")"
for m in "" "--attention-row-pv=sync"; do
  timeout 150 build-cuda/bin/gpu_attention_tc_test $m > "$OUT/attn_tc_test$m.log" 2>&1; echo "gpu_attention_tc_test $m rc=$?"; grep -E "PASSED|FAILED|Failure" -A3 "$OUT/attn_tc_test$m.log" | head -8
done
timeout 100 build-cuda/bin/bench_attention --rows 128,256 --prefill 8192 --variants tc_packed_qp > "$OUT/attn_kdouble.jsonl" 2>&1; grep -o '"kind": "[a-z]*", "rows": [0-9]*, "prefill": [a-z]*\|"us": [0-9.]*' "$OUT/attn_kdouble.jsonl" | paste -d" " - -
bench_flash kdouble_mma --batches 1 --fp8-mma
bench_flash kdouble_default --batches 128,256
gpu_suite 240
git apply -R gpu_run/s47_attn_row_kdouble.diff
echo "total $(( $(date +%s) - t0 )) s"

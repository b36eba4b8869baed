#!/usr/bin/env bash
# Prepared in session 43 (not run: the device budget went to failed starts), carry [".devcarry"].
# Two changes, the same bits by construction, compiled here without spills:
# * gpu_run/s43_rope_table.diff: the sparse attention's RoPE (cos, sin) once per block
#   (RopeTable, device_math.cuh) instead of once per head, and the row kernel's query swizzle and key decode
#   with kDim's constants (ncu c43b: the row kernel's prologue, its 64 heads' double-precision
#   sincos and the swizzle's runtime divisions, was 23% of its instructions);
# * gpu_run/s43_indexer_runs.diff: the indexer's tensor-core scores 4 rows a block at prefill,
#   each run of one slot's rows decoding its keys once (IndexerScoreTcRunKernel); bench_indexer's
#   tc_rows variant keeps a row a block, so one build times both.
# Main's figures first (bench_attention, the mode's model bench), then both changes on the same
# card: the same benches, bench_indexer tc against tc_rows, the op tests that check their bits, the
# GPU suite; last, ncu of the indexer's kernels at the prefill.
source "$(dirname "$0")/common.sh"
attn() { timeout 100 build-cuda/bin/bench_attention --rows 1,32 --prefill 8192 --variants tc_packed_qp > "$OUT/attn_$1.jsonl" 2>&1; echo "bench_attention $1 rc=$?"; grep -o '"kind": "[a-z]*", "rows": [0-9]*, "prefill": [a-z]*\|"us": [0-9.]*' "$OUT/attn_$1.jsonl" | paste -d" " - -; }
gpu_build dsinfer bench_attention
attn main
bench_flash mainmma --batches 1 --fp8-mma
apply_diff s43_rope_table.diff
apply_diff s43_indexer_runs.diff
gpu_build
attn new
bench_flash newmma --batches 1 --fp8-mma
grep -o '"attention_ms": [0-9.]*\|"indexer_topk_ms": [0-9.]*' "$OUT"/bench_*mma.jsonl
timeout 100 build-cuda/bin/bench_indexer --rows 1,32 --prefill 8192 --variants tc,tc_rows > "$OUT/indexer.jsonl" 2>&1; echo "bench_indexer rc=$?"
grep -o '"rows": [0-9]*, "prefill": [a-z]*, "variant": "[a-z_]*"\|"us": [0-9.]*' "$OUT/indexer.jsonl" | paste -d" " - -
timeout 120 build-cuda/bin/gpu_attention_tc_test > "$OUT/attention_tc.log" 2>&1; echo "gpu_attention_tc_test rc=$?"; grep -E "PASSED|FAILED" "$OUT/attention_tc.log" | head -8
timeout 120 build-cuda/bin/gpu_v41_ops_test --gtest_filter='V4Fp8Cache*' > "$OUT/indexer_ops.log" 2>&1; echo "gpu_v41_ops_test V4Fp8Cache rc=$?"; grep -E "PASSED|FAILED|Failure" -A3 "$OUT/indexer_ops.log" | head -12
gpu_suite 200
# Launch order: the one-row shape (tc, tc_rows: 9 launches each), then the prefill (tc: the run
# kernel, tc_rows: IndexerScoreTcKernel<4>; the top-k after each).
ncu_kernel IndexerScoreTcRunKernel 0 build-cuda/bin/bench_indexer --rows 1 --prefill 8192 --variants tc,tc_rows
ncu_kernel IndexerScoreTcKernel 18 build-cuda/bin/bench_indexer --rows 1 --prefill 8192 --variants tc,tc_rows
ncu_kernel IndexerTopKKernel 18 build-cuda/bin/bench_indexer --rows 1 --prefill 8192 --variants tc,tc_rows
echo "total $(( $(date +%s) - t0 )) s"

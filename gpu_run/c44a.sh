#!/usr/bin/env bash
# Prepared in sessions 43-44 (not run yet), carry [".devcarry"]; c44b.sh and c44c.sh follow on the
# same warm machine (each call under 600 s). Four changes, the same bits by construction, compiled
# together here without spills:
# * gpu_run/s44_expand_experts.diff: the mode's routed FP4 experts at prefill sizes in two steps
#   behind --fp8mma-expand-experts (off by default, so one build times both): a chunk of expert
#   slots' weights expanded into FP8's form in a 1.5 GiB scratch (MmaExpandFp4Kernel), then the
#   TMA tile over them and the pairs' rows quantized in slot order (MmaTmaExpertKernel; the dense
#   TMA kernel's consumer shared as TmaConsumeTile). Session 42's ncu: the warp-specialized
#   experts are instruction-bound (2.08 IPC), their consumers' e2m1 conversion and the producer's
#   gathers a third of the instructions each k block;
# * gpu_run/s43_rope_table.diff: the sparse attention's RoPE (cos, sin) once per block
#   (RopeTable, device_math.cuh) instead of once per head, the row kernel's query swizzle and key
#   decode with kDim's constants (ncu c43b: the row kernel's prologue was 23% of its instructions);
# * gpu_run/s43_indexer_runs.diff: the indexer's tensor-core scores 4 rows a block at prefill,
#   each run of one slot's rows decoding its keys once (IndexerScoreTcRunKernel); bench_indexer's
#   tc_rows variant keeps a row a block, so one build times both.
# * gpu_run/s44_tma_tokens_a.diff (after the first): behind --fp8mma-tma-tokens-a, the dense TMA
#   tile with the tokens as wgmma's A (a thread's promotion products two a k block instead of 32).
# This call: main's attention and model bench (c44b.sh times the changes against them), then the
# four diffs: the FP8 linears' bit tests under each flag, and bench_fp8_gemm by default, with the
# tokens as A, and the experts expanded.
source "$(dirname "$0")/common.sh"
gpu_build dsinfer bench_attention
attn main
bench_flash mainmma --batches 1 --fp8-mma
for d in s44_expand_experts s44_tma_tokens_a s43_rope_table s43_indexer_runs; do apply_diff $d.diff; done
gpu_build
for m in "" "--fp8mma-expand-experts" "--fp8mma-tma-tokens-a"; do
  timeout 90 build-cuda/bin/gpu_fp8mma_test $m > "$OUT/fp8mma_test$m.log" 2>&1; echo "gpu_fp8mma_test $m rc=$?"
  grep -hE "FAILED|Failure" -A4 "$OUT/fp8mma_test$m.log" | head -12
done
gemm new
gemm tokens_a --fp8mma-tma-tokens-a
gemm expand_w1 --fp8mma-expand-experts --only expert_w1
gemm expand_w2 --fp8mma-expand-experts --only expert_w2
echo "total $(( $(date +%s) - t0 )) s"

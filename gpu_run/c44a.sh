#!/usr/bin/env bash
# Prepared in sessions 43-44 (not run yet), carry [".devcarry"]; c44b.sh follows on the warm
# machine. Three changes, the same bits by construction, compiled together here without spills:
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
# Main's figures first (bench_attention, bench_fp8_gemm, the mode's model bench), then the four
# changes on the same card: the bit checks of the FP8 linears with each flag, the same benches,
# the experts with and without the expansion, the dense shapes with and without the tokens as A,
# bench_indexer tc against tc_rows. c44b.sh runs the attention and indexer op tests, the suite
# and ncu.
source "$(dirname "$0")/common.sh"
attn() { timeout 100 build-cuda/bin/bench_attention --rows 1,32 --prefill 8192 --variants tc_packed_qp > "$OUT/attn_$1.jsonl" 2>&1; echo "bench_attention $1 rc=$?"; grep -o '"kind": "[a-z]*", "rows": [0-9]*, "prefill": [a-z]*\|"us": [0-9.]*' "$OUT/attn_$1.jsonl" | paste -d" " - -; }
gemm() {  # name, flags...
  local n=$1; shift
  timeout 150 build-cuda/bin/bench_fp8_gemm --sample 256 "$@" > "$OUT/fp8_gemm_$n.jsonl" 2>&1; echo "bench_fp8_gemm $n rc=$? $(( $(date +%s) - t0 )) s"
  grep '"fp8_gemm"' "$OUT/fp8_gemm_$n.jsonl" | grep -o '"shape": "[a-z_0-9]*"\|"kernel": "[a-z_]*"\|"us": [0-9.]*\|"mismatches": [0-9]*' | paste -d" " - - - -
}
gpu_build dsinfer bench_attention bench_fp8_gemm
attn main
gemm main
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
attn new
bench_flash newmma --batches 1 --fp8-mma
bench_flash allnew --batches 1 --fp8-mma --fp8mma-expand-experts --fp8mma-tma-tokens-a
grep -o '"attention_ms": [0-9.]*\|"indexer_topk_ms": [0-9.]*\|"moe_routed_experts_ms": [0-9.]*' "$OUT"/bench_*mma.jsonl "$OUT"/bench_allnew.jsonl
timeout 60 build-cuda/bin/bench_indexer --rows 1,32 --prefill 8192 --variants tc,tc_rows > "$OUT/indexer.jsonl" 2>&1; echo "bench_indexer rc=$?"
grep -o '"rows": [0-9]*, "prefill": [a-z]*, "variant": "[a-z_]*"\|"us": [0-9.]*' "$OUT/indexer.jsonl" | paste -d" " - -
echo "total $(( $(date +%s) - t0 )) s"

#!/usr/bin/env bash
# Prepared in session 55 for the next device session, carry [".devcarry"]; the tree is main
# (about 3-4 minutes; LIMIT: the call's seconds, default 360). Two diffs, applied together (they
# touch different files), one build:
# 1. s55_experts_tma2.diff (c55b's): the warp-specialized experts' tile with only the tokens fed
#    by the TMA (--fp8mma-tma-experts / bench_fp8_gemm --tma-experts, off by default). Its bits,
#    bench_fp8_gemm against main's tile; the mode's prefill both ways if time is left.
# 2. s55_attn_row_ablate.diff (never to land: it breaks the bits): the FP8 cache's row attention
#    block with parts removed, picked by DSINFER_ABLATE at launch (head_dim 512, P V on wgmma):
#    1 no key decode, 2 no raw-row prefetch, 3 both, 4 no S, 8 no softmax and P fragments, 16 no
#    P V, 32 no query staging, 64 no epilogue (FinishRow), 127 all of them (the loop's skeleton).
#    bench_attention's 128 rows and 8,192-token prefill for each. (ptxas: forms 1, 3 and 8 spill
#    140-308 bytes, the others none.)
source "$(dirname "$0")/common.sh"
left() { echo $(( ${LIMIT:-360} - ($(date +%s) - t0) )); }
apply_diff s55_experts_tma2.diff
apply_diff s55_attn_row_ablate.diff
gpu_build bench_fp8_gemm gpu_fp8mma_test bench_attention
timeout 90 build-cuda/bin/gpu_fp8mma_test --fp8mma-tma-experts > "$OUT/fp8mma_test_tma.log" 2>&1; echo "gpu_fp8mma_test --fp8mma-tma-experts rc=$?"
grep -hE "PASSED|FAILED|Failure" -A3 "$OUT/fp8mma_test_tma.log" | head -10
gemm_experts_ab --tma-experts
for a in 0 1 2 3 4 8 16 32 64 127; do
  DSINFER_ABLATE=$a timeout 60 build-cuda/bin/bench_attention --rows 128 --prefill 8192 --variants tc_packed_qp > "$OUT/attn_abl$a.jsonl" 2>&1
  echo "attention ablate $a rc=$? $(grep -o '"kind": "[a-z]*", "rows": [0-9]*\|"us": [0-9.]*' "$OUT/attn_abl$a.jsonl" | paste -d" " - - | tr '\n' ';')"
done
if [ "$(left)" -gt 150 ]; then
  gpu_build dsinfer
  bench_flash mma_main --batches 1 --fp8-mma
  bench_flash mma_tma2 --batches 1 --fp8-mma --fp8mma-tma-experts
fi
unapply_diff s55_attn_row_ablate.diff
unapply_diff s55_experts_tma2.diff
echo "total $(( $(date +%s) - t0 )) s"

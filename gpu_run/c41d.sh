#!/usr/bin/env bash
# Session 41, fourth call. Carry [".devcarry"]. The mode's FP4 re-expressed in FP8's form (per
# row and 128-column block one scale 2^e_max, the groups' codes shifted: io::QuantizedToMma; one
# chain of four k32 steps and one promotion a block, where each 32-column group had its own): the
# op tests (both expert kernels; FP4 groups 0-14 binades apart), the tiny official model GPU vs
# CPU in the mode, flash-l8 in the mode (c41a: experts 113.5 ms, decode 2.620 / 10.434 / 18.006 /
# 25.236 ms), then the GPU suite.
source "$(dirname "$0")/common.sh"
gpu_build
for m in "" "--no-fp8mma-ws-experts"; do
  timeout 60 build-cuda/bin/gpu_fp8mma_test $m > "$OUT/fp8mma_test$m.log" 2>&1; echo "gpu_fp8mma_test $m rc=$?"
  grep -hE "FAILED|Failure" -A2 "$OUT/fp8mma_test$m.log" | head -12
done
timeout 150 build-cuda/bin/gpu_model_test --gtest_filter='*TinyOfficial*' > "$OUT/model_mma.log" 2>&1; echo "gpu_model_test rc=$? $(( $(date +%s) - t0 )) s"
grep -E "OK \]|FAILED|rel err|Failure|Expected|Which is" "$OUT/model_mma.log" | head -12
bm() {  # name, flags...
  local n=$1; shift
  timeout 150 build-cuda/bin/dsinfer bench --preset flash-l8 --steps 10 --prefill 8192 --kv-cache-dtype fp8 "$@" > "$OUT/bench_$n.jsonl" 2>&1; echo "bench $n rc=$? $(( $(date +%s) - t0 )) s"
  grep -o '"bench": "decode", "batch": [0-9]*, "context": [0-9]*, "step_ms": [0-9.]*\|"bench": "prefill", "tokens": [0-9]*, "chunk": [0-9]*, "seconds": [0-9.]*\|"moe_routed_experts_ms": [0-9.]*' "$OUT/bench_$n.jsonl" | tr '\n' ' '; echo
  grep -iE "error|abort|fail" "$OUT/bench_$n.jsonl" | head -3
}
bm mma --batches 1,32,128,256 --fp8-mma
timeout 300 ctest --test-dir build-cuda -L gpu -E "tokenizer_v4_setup|structured_e2e_gpu" --timeout 200 -j6 > "$OUT/ctest.log" 2>&1; echo "ctest rc=$? $(( $(date +%s) - t0 )) s"
grep -E "tests passed|tests failed|\*\*\*|Failed|Timeout" "$OUT/ctest.log" | head -16
echo "total $(( $(date +%s) - t0 )) s"

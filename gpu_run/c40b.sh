#!/usr/bin/env bash
# Session 40. Carry [".devcarry"]. The FP8-instruction mode's kernels in src
# (backend/cuda/fp8mma_linear_sm90.cu): their op tests against the CPU reference (bit for bit),
# the tiny official model in the mode (GPU vs CPU, every schedule), flash-l8's bench with and
# without --fp8-mma (the FP8 cache: the tensor-core attention).
source "$(dirname "$0")/common.sh"
g++ --version | head -1
gpu_build gpu_fp8mma_test gpu_model_test dsinfer
timeout 150 build-cuda/bin/gpu_fp8mma_test > "$OUT/fp8mma_test.log" 2>&1; echo "gpu_fp8mma_test rc=$? $(( $(date +%s) - t0 )) s"
grep -E "OK \]|FAILED|Failure|element|differing|Expected|Which is" "$OUT/fp8mma_test.log" | head -40
timeout 150 build-cuda/bin/gpu_model_test --gtest_filter='*TinyOfficial*' > "$OUT/model_mma.log" 2>&1; echo "gpu_model_test rc=$? $(( $(date +%s) - t0 )) s"
grep -E "OK \]|FAILED|rel err|Failure|Expected|Which is" "$OUT/model_mma.log" | head -20
for m in "" "--fp8-mma"; do
  timeout 120 build-cuda/bin/dsinfer bench --preset flash-l8 --batches 1,32,128 --steps 10 --prefill 8192 --kv-cache-dtype fp8 $m > "$OUT/bench_model$m.jsonl" 2>&1; echo "bench $m rc=$? $(( $(date +%s) - t0 )) s"
  grep -o '"bench": "decode", "batch": [0-9]*, "context": [0-9]*, "step_ms": [0-9.]*\|"bench": "prefill", "tokens": [0-9]*, "chunk": [0-9]*, "seconds": [0-9.]*' "$OUT/bench_model$m.jsonl" | tr '\n' ' '; echo
  grep '"prefill_profile_eager"\|"decode_profile_eager", "batch": 1,' "$OUT/bench_model$m.jsonl" | head -c 2000; echo
  grep -iE "error|abort|fail" "$OUT/bench_model$m.jsonl" | head -5
done
echo "total $(( $(date +%s) - t0 )) s"

#!/usr/bin/env bash
# Session 58, after the review's mends (about 3 minutes): the wide tile only past 128 expected
# pairs a slot, ExpertsMatchCpuBitForBit at T = 330 and 400 (the wide tile's 160- and 192-token
# tiles, two blocks a slot, 3 slices through its shared-memory totals): gpu_fp8mma_test with and
# without the wide tile, then the mode's 8,192-token prefill (192 pairs a slot: the wide tile).
source "$(dirname "$0")/common.sh"
gpu_build dsinfer gpu_fp8mma_test
for f in "" --no-fp8mma-wide-experts; do
  timeout 120 build-cuda/bin/gpu_fp8mma_test $f > "$OUT/fp8mma_test$f.log" 2>&1; echo "gpu_fp8mma_test $f rc=$?"
  grep -hE "FAILED|Failure|OK \] Fp8MmaTest.Experts" -A3 "$OUT/fp8mma_test$f.log" | head -12
done
bench_flash main_mode --batches 1 --fp8-mma
echo "total $(( $(date +%s) - t0 )) s"

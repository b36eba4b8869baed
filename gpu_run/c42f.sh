#!/usr/bin/env bash
# Session 42, carry [".devcarry"]. The experts' consumers pipelined: a block's wgmma steps run while
# the next block's A fragments are built (two fragment sets), the totals in shared memory (folded
# once a slice; FP8 experts 4 stages, FP4 5), producer 48 registers / consumers 232. It HUNG: the
# consumers' raise (256 x 64) exceeds the producer's release (128 x 120), so setmaxnreg.inc never
# returned (gpu_fp8mma_test and the benches timed out). Fixed as gpu_run/s42_ws_pipelined.diff
# (40 / 232), run by c43a.sh; WsRegs now rejects such a split at compile time. Same bits by
# construction: the op tests, the GPU suite; the benches against the committed kernel (6bffb0d,
# rebuilt from a stash) on the same card.
source "$(dirname "$0")/common.sh"
gpu_build
fp8mma_tests
timeout 120 build-cuda/bin/bench_fp8_gemm > "$OUT/fp8_gemm.txt" 2>&1; echo "bench_fp8_gemm rc=$?"; grep '"fp8_gemm"' "$OUT/fp8_gemm.txt" | cut -c30-60,150-240
bench_flash mma --batches 1,32,128,256 --fp8-mma
gpu_suite 240
baseline_from_stash
echo "total $(( $(date +%s) - t0 )) s"

#!/usr/bin/env bash
# Prepared in session 42 (not run), carry [".devcarry"]. The experts' consumers pipelined
# (gpu_run/s42_ws_pipelined.diff): a block's wgmma steps run while the next block's A fragments
# are built (two fragment sets), the totals in shared memory (folded once a slice; FP8 experts 4
# stages, FP4 5), registers 40 / 232 (c42f's 48 / 232 hung: see c42f.sh). Same bits by
# construction: the op tests first (a hang shows as rc 124), then the benches against main's
# kernel rebuilt from a stash on the same card, then the GPU suite.
source "$(dirname "$0")/common.sh"
apply_diff s42_ws_pipelined.diff
gpu_build
fp8mma_tests
for s in expert_w1 expert_w2; do timeout 60 build-cuda/bin/bench_fp8_gemm --only $s > "$OUT/fp8_gemm_$s.txt" 2>&1; echo "$s rc=$?"; grep '"fp8_gemm"' "$OUT/fp8_gemm_$s.txt" | cut -c30-60,150-240; done
bench_flash mma --batches 1,32,128,256 --fp8-mma
gpu_suite 240
baseline_from_stash
echo "total $(( $(date +%s) - t0 )) s"

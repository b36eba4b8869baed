#!/usr/bin/env bash
# Session 57, on c57c's warm machine: ncu of s57_experts_ss.diff's tile on expert_w1 (why it is
# slower), then s56_wob_codes.diff alone: the mode's prefill and the GPU suite.
source "$(dirname "$0")/common.sh"
apply_diff s57_experts_ss.diff
gpu_build bench_fp8_gemm
ncu_kernel MmaWsSs 0 build-cuda/bin/bench_fp8_gemm --only expert_w1 --iters 1
grep -E "Registers Per|Achieved Active Warps|Eligible Warps|Stall|Warp Cycles Per Issued" "$OUT/MmaWsSs_details.txt" | head -12
unapply_diff s57_experts_ss.diff
apply_diff s56_wob_codes.diff
gpu_build
bench_flash wob_only --batches 1 --fp8-mma
grep -h prefill_profile "$OUT/bench_wob_only.jsonl" | cut -c1-420
gpu_suite 240
unapply_diff s56_wob_codes.diff
echo "total $(( $(date +%s) - t0 )) s"

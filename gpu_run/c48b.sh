#!/usr/bin/env bash
# Session 48, carry [".devcarry"]; the tree is main (bench_hc with its pre line's out_hash), the
# script applies the diff itself. The split mHC pre finish with the token's mix partials reduced
# once (s48_hc_pre_once.diff): one output a warp spread over the cluster's four blocks (each sums
# the outputs its collapse needs and a quarter of the Sinkhorn's, stored into block 0 through
# distributed shared memory), the sums of squares pushed into every block, one cluster barrier
# instead of two, the Sinkhorn on block 0's first warp at the end (the second grid half of
# Sinkhorn blocks gone). Each output's sum keeps ReducePartials' order, so the same bits:
# bench_hc's out_hash of the pre's outputs (xn, post, comb, xq, xs) at 1 / 32 / 256 / 8,192
# tokens must equal main's. Main first (bench_hc pre, the mode's prefill and batch 1, the
# default's batch 1 / 256 and prefill), then the diff: the same, and the HcTest op tests. The GPU
# suite runs in c48c. No git stash / checkout (common.sh).
source "$(dirname "$0")/common.sh"
gpu_build bench_hc dsinfer gpu_ops_test
hc() {  # name
  timeout 60 build-cuda/bin/bench_hc --kernels pre > "$OUT/hc_$1.jsonl" 2>&1; echo "bench_hc $1 rc=$?"
  grep -o '"tokens": [0-9]*, "us": [0-9.]*\|"out_hash": "[0-9a-f]*"' "$OUT/hc_$1.jsonl" | paste -d" " - -
}
hc main
bench_flash main_mma --batches 1 --fp8-mma
bench_flash main_default --batches 1,256
apply_diff s48_hc_pre_once.diff
gpu_build bench_hc dsinfer gpu_ops_test
hc once
diff <(grep -o '"tokens": [0-9]*\|"out_hash": "[0-9a-f]*"' "$OUT/hc_main.jsonl") <(grep -o '"tokens": [0-9]*\|"out_hash": "[0-9a-f]*"' "$OUT/hc_once.jsonl") > /dev/null && echo "out_hash: the same bits" || echo "out_hash: DIFFERENT"
timeout 120 build-cuda/bin/gpu_ops_test --gtest_filter='HcTest.*' > "$OUT/hc_ops_test.log" 2>&1; echo "gpu_ops_test HcTest rc=$?"; grep -E "PASSED|FAILED|Failure" -A3 "$OUT/hc_ops_test.log" | head -12
bench_flash once_mma --batches 1 --fp8-mma
bench_flash once_default --batches 1,256
git apply -R gpu_run/s48_hc_pre_once.diff
echo "total $(( $(date +%s) - t0 )) s"

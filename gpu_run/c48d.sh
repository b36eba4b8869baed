#!/usr/bin/env bash
# Session 48, carry [".devcarry"]; the tree is main, the script applies the diffs itself (c48c's
# steps, which found no machine, then the post). 1) s48_hc_pre_once.diff (c48c.sh's header):
# bench_hc pre at 1 .. 8,192 tokens for main, the shared form everywhere (threshold 0), the
# own-cluster form everywhere (2^30) and the diff (64), out_hash equal to main's for all three;
# the HcTest op tests; the model. 2) s48_hc_post_regs.diff on top: the many-token post with the
# next mix (HcPostMixRegKernel: the mix weights in registers, the inputs through a 4-token
# cp.async ring, 32 tokens a block; HcPostMixKernel's operations, so its bits: HcTest's
# PostMixManyRowsEqualRowAlone compares it with the one-token kernel bit for bit); bench_hc post /
# post_moe at 512 and 8,192 tokens (main's first), the model; with kPostRegTokens 16 as well.
# 3) the GPU suite on both, the mode's 32K and 128K prefills. No git stash / checkout.
source "$(dirname "$0")/common.sh"
gpu_build bench_hc dsinfer gpu_ops_test
hc() {  # name
  timeout 60 build-cuda/bin/bench_hc --kernels pre --tokens 1,16,32,64,128,256,8192 > "$OUT/hc_$1.jsonl" 2>&1; echo "bench_hc $1 rc=$?"
  grep -o '"tokens": [0-9]*, "us": [0-9.]*\|"out_hash": "[0-9a-f]*"' "$OUT/hc_$1.jsonl" | paste -d" " - - | tr '\n' ';'; echo
  diff <(grep -o '"tokens": [0-9]*\|"out_hash": "[0-9a-f]*"' "$OUT/hc_main.jsonl") <(grep -o '"tokens": [0-9]*\|"out_hash": "[0-9a-f]*"' "$OUT/hc_$1.jsonl") > /dev/null && echo "$1 out_hash: main's bits" || echo "$1 out_hash: DIFFERENT"
}
post() {  # name
  timeout 60 build-cuda/bin/bench_hc --kernels post,post_moe --tokens 512,8192 > "$OUT/hcpost_$1.jsonl" 2>&1; echo "bench_hc post $1 rc=$?"
  grep -o '"kernel": "[a-z_]*", "tokens": [0-9]*, "us": [0-9.]*' "$OUT/hcpost_$1.jsonl" | tr '\n' ';'; echo
}
hctest() {  # name
  timeout 120 build-cuda/bin/gpu_ops_test --gtest_filter='HcTest.*' > "$OUT/hc_ops_test_$1.log" 2>&1; echo "gpu_ops_test HcTest $1 rc=$?"; grep -E "PASSED|FAILED|Failure" -A3 "$OUT/hc_ops_test_$1.log" | head -12
}
hc main
post main
bench_flash main_mma --batches 1 --fp8-mma
bench_flash main_default --batches 1,128,256
F=src/backend/cuda/hyper_connection_sm90.cu
apply_diff s48_hc_pre_once.diff
sed -i 's/kHcOwnSinkhornMaxRows = 64;/kHcOwnSinkhornMaxRows = 0;/' $F; gpu_build bench_hc; hc shared
sed -i 's/kHcOwnSinkhornMaxRows = 0;/kHcOwnSinkhornMaxRows = int64_t{1} << 30;/' $F; gpu_build bench_hc; hc own
sed -i 's/kHcOwnSinkhornMaxRows = int64_t{1} << 30;/kHcOwnSinkhornMaxRows = 64;/' $F
gpu_build bench_hc dsinfer gpu_ops_test
hc once
hctest once
bench_flash once_mma --batches 1 --fp8-mma
bench_flash once_default --batches 1,128,256
apply_diff s48_hc_post_regs.diff
gpu_build bench_hc dsinfer gpu_ops_test
post regs
hctest regs
bench_flash regs_mma --batches 1 --fp8-mma
bench_flash regs_default --batches 1,128,256
sed -i 's/kPostRegTokens = 32;/kPostRegTokens = 16;/' $F; gpu_build bench_hc; post regs16
sed -i 's/kPostRegTokens = 16;/kPostRegTokens = 32;/' $F
gpu_build
gpu_suite 240
long32k both
p128 both
git apply -R gpu_run/s48_hc_post_regs.diff
git apply -R gpu_run/s48_hc_pre_once.diff
echo "total $(( $(date +%s) - t0 )) s"

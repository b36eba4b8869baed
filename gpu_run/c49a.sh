#!/usr/bin/env bash
# Prepared in session 48 (compiled here: 119 registers, no spills; not run), carry [".devcarry"];
# the tree is main, the script applies the diff itself. Session 48's one-token post kernel
# (HcPostMixKernel<4>, decode sizes below 512 rows) compiles to 128 registers against the 118 of
# the kernel it replaced, and c48e measured its MoE post at 128 / 256 rows 5% over the old one's
# (45.95 -> 48.20, 100.04 -> 104.55 us). s48_post_one_token_loop.diff writes the token's work as
# a loop that runs once, as the old kernel's was (119 registers). The same operations, so the
# same bits: bench_hc's out_hash must equal main's at every kernel and size. Main first, then
# the diff: bench_hc (pre, post, post_moe at 1 / 32 / 128 / 256 / 512 / 8,192 rows), the HcTest
# op tests, the default's decode at 1 / 32 / 128 / 256, the GPU suite. No git stash / checkout.
source "$(dirname "$0")/common.sh"
gpu_build bench_hc dsinfer gpu_ops_test
hcall() {  # name
  timeout 90 build-cuda/bin/bench_hc --kernels pre,post,post_moe --tokens 1,32,128,256,512,8192 > "$OUT/hcall_$1.jsonl" 2>&1; echo "bench_hc $1 rc=$?"
  grep -o '"kernel": "[a-z_]*", "tokens": [0-9]*, "us": [0-9.]*' "$OUT/hcall_$1.jsonl" | tr '\n' ';'; echo
}
hcall main
bench_flash main_default --batches 1,32,128,256
apply_diff s48_post_one_token_loop.diff
gpu_build bench_hc dsinfer gpu_ops_test
hcall loop
diff <(grep -o '"kernel": "[a-z_]*", "tokens": [0-9]*\|"out_hash": "[0-9a-f]*"' "$OUT/hcall_main.jsonl") <(grep -o '"kernel": "[a-z_]*", "tokens": [0-9]*\|"out_hash": "[0-9a-f]*"' "$OUT/hcall_loop.jsonl") && echo "out_hash: main's bits at every kernel and size" || echo "out_hash: DIFFERENT"
timeout 120 build-cuda/bin/gpu_ops_test --gtest_filter='HcTest.*' > "$OUT/hc_ops_test.log" 2>&1; echo "gpu_ops_test HcTest rc=$?"; grep -E "PASSED|FAILED|Failure" -A3 "$OUT/hc_ops_test.log" | head -12
bench_flash loop_default --batches 1,32,128,256
gpu_build
gpu_suite 240
git apply -R gpu_run/s48_post_one_token_loop.diff
echo "total $(( $(date +%s) - t0 )) s"

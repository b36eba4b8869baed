#!/usr/bin/env bash
# A record of what ran (session 49): its diff was measured, rejected and deleted; figures in
# docs/perf.md "Session 49".
# Prepared in session 48 (compiled here: 119 registers, no spills; not run), carry [".devcarry"];
# the tree is main, the script applies the diff itself. Session 48's one-token post kernel
# (HcPostMixKernel<4>, decode sizes below 512 rows) compiles to 128 registers against the 118 of
# the kernel it replaced, and c48e measured its MoE post at 128 / 256 rows 5% over the old one's
# (45.95 -> 48.20, 100.04 -> 104.55 us). s48_post_one_token_loop.diff writes the token's work as
# a loop that runs once, as the old kernel's was (119 registers). The same operations, so the
# same bits: bench_hc's out_hash must equal main's at every kernel and size. Main first, then
# the diff: bench_hc (pre, post, post_moe at 1 / 32 / 128 / 256 / 512 / 8,192 rows), the HcTest
# op tests, the default's decode at 1 / 32 / 128 / 256, the GPU suite. Then, on main, ncu of the
# many-token MoE post at 8,192 rows (HcPostMixManyKernel<4, 32>, 1.93x its bytes in c48e: is it
# the copies' instructions, the ring's depth or DRAM?) to choose its next form. No git stash /
# checkout. Then ncu of the CSA row attention and of the dense TMA tile on wo_b.
source "$(dirname "$0")/common.sh"
gpu_build bench_hc dsinfer gpu_ops_test
hcall main
# Session 48's review mends (compiled, not GPU-run): HcTest's pre finish at 300 rows (the Sinkhorn
# on block 0) against the last row alone (its own cluster), the folded combine at 4,097 rows.
hctest main
bench_flash main_default --batches 1,32,128,256
apply_diff s48_post_one_token_loop.diff
gpu_build bench_hc dsinfer gpu_ops_test
hcall loop
hc_same main loop
hctest loop
bench_flash loop_default --batches 1,32,128,256
gpu_build
gpu_suite 240
git apply -R gpu_run/s48_post_one_token_loop.diff
gpu_build bench_hc
# bench_hc launches the y post once before its timings, so the MoE post is the second launch.
ncu_kernel HcPostMixManyKernel 1 build-cuda/bin/bench_hc --kernels post_moe --tokens 8192
# Profiles for the next designs: the row attention at a CSA layer (20 chunks a row; session 47
# profiled SWA's 4) and the dense TMA tile on wo_b (k 8,192: the main loop, not the epilogue).
gpu_build bench_attention bench_fp8_gemm
ncu_kernel SparseAttentionTcRowKernel 0 build-cuda/bin/bench_attention --rows 1 --prefill 8192 --kinds csa --variants tc_packed_qp
ncu_kernel MmaTmaKernel 0 build-cuda/bin/bench_fp8_gemm --only wo_b
echo "total $(( $(date +%s) - t0 )) s"

#!/usr/bin/env bash
# Session 48, carry [".devcarry"]; the tree is main plus s48_hc_final.diff (uncommitted), which the
# script reverses first for main's figures and then applies again. The final form of c48d's two
# changes: the pre finish reduced once (its own Sinkhorn cluster up to 256 rows: c48d's
# bench_hc had that form faster than main at every size up to 256, and the model's decode at
# 128 / 256 rows +0.5% with the shared form), the many-token post with the weights in registers
# (HcPostMixManyKernel: 16 tokens a block from 512 rows, 32 from 4,096; the old kernel's
# many-token path removed). bench_hc out_hash (pre, post, post_moe) must equal main's at every
# size; the HcTest op tests (PostMixManyRowsEqualRowAlone now at 4,184 rows too: the 32-token
# launch), the model's figures of the day (default decode 1 / 32 / 128 / 256 and prefill, the
# mode's batch 1 and prefill), the GPU suite. No git stash / checkout (common.sh).
source "$(dirname "$0")/common.sh"
git apply -R gpu_run/s48_hc_final.diff || { echo "the diff does not reverse"; exit 1; }
gpu_build bench_hc dsinfer gpu_ops_test
hcall main
bench_flash main_mma --batches 1 --fp8-mma
bench_flash main_default --batches 1,32,128,256
apply_diff s48_hc_final.diff
gpu_build bench_hc dsinfer gpu_ops_test
hcall final
hc_same main final
hctest final
bench_flash final_mma --batches 1 --fp8-mma
bench_flash final_default --batches 1,32,128,256
gpu_build
gpu_suite 240
echo "total $(( $(date +%s) - t0 )) s"

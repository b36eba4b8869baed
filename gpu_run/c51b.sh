#!/usr/bin/env bash
# Session 51, carry [".devcarry"]; the tree is main. The split attention's combine loading its
# chunks 8 at a time (s51_combine_chunk_batch.diff: 64 loads in flight a thread, folded in the
# same order; c50a's ncu: CSA's combine 36 us at one row, 20 chunks a round trip each). The
# attention op tests (split against unsplit, bit for bit), bench_attention and batch 1's step with
# the diff, then without it.
source "$(dirname "$0")/common.sh"
apply_diff s51_combine_chunk_batch.diff
gpu_build dsinfer bench_attention gpu_attention_tc_test
timeout 120 build-cuda/bin/gpu_attention_tc_test > "$OUT/attn_tc_test.log" 2>&1; echo "gpu_attention_tc_test rc=$?"
grep -E "PASSED|FAILED|Failure" -A3 "$OUT/attn_tc_test.log" | head -12
attn4 batch
bench_flash batch --batches 1
unapply_diff s51_combine_chunk_batch.diff
gpu_build dsinfer bench_attention
attn4 main
bench_flash main --batches 1
apply_diff s51_combine_chunk_batch.diff
gpu_build dsinfer
bench_flash batch2 --batches 1
unapply_diff s51_combine_chunk_batch.diff
echo "total $(( $(date +%s) - t0 )) s"

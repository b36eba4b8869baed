#!/usr/bin/env bash
# Prepared in session 45 (not run), carry [".devcarry"]. gpu_run/s45_indexer_head_terms.diff: the
# indexer's tensor-core head terms at head_dim 128 with their k steps known at compile time and all
# four n8 tiles' sums before the stores, so that the 16 mma chains interleave (c45d's ncu: with
# runtime step tests each chain ran alone; HeadTerms 40% of IndexerScoreTcRunKernel's
# instructions, the kernel 94% of the indexer, the indexer 57% of a 131,072-token prompt's last
# chunk). The same bits by construction (each block sum and the order of their adds unchanged).
# Then gpu_run/s45_indexer_ldmatrix.diff on top: each block's four B loads as one ldmatrix .x4
# (the same words), the run kernel held to two blocks an SM (128 registers; 16 bytes spill here).
# Main first, then each change: the indexer's bit tests, bench_indexer (rows 1, 32 and the
# 8,192-token prefill; the one-row kernel's registers went 64 -> 118 / 134, so decode may differ:
# if it does, keep the one-row kernel on the runtime path), the mode's 32,768-token prefill (its
# last chunk's indexer profiled).
source "$(dirname "$0")/common.sh"
gpu_build bench_indexer dsinfer
idx main
long32k main
for d in head_terms ldmatrix; do
  apply_diff s45_indexer_$d.diff
  gpu_build bench_indexer dsinfer gpu_v41_ops_test
  timeout 120 build-cuda/bin/gpu_v41_ops_test --gtest_filter='V4Fp8Cache*:V41Indexer*' > "$OUT/indexer_ops_$d.log" 2>&1; echo "gpu_v41_ops_test $d rc=$?"; grep -E "PASSED|FAILED|Failure" -A3 "$OUT/indexer_ops_$d.log" | head -12
  idx $d
  long32k $d
done
echo "total $(( $(date +%s) - t0 )) s"

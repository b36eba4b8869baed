// Lightning-indexer selection (spec §2.7) for CSA layers: for each query row t at position p,
//   score[w] = sum_h wI[t,h] * relu(qI[t,h] · K_I[w]) * head_dim^-0.5     for w < (p+1) / rate
// and the top min(topk, visible) entries (ties: lower index first), returned in ascending order.
// fp32 scores (the CPU reference; the official kernel's bf16 scores are §7 item 6). The FP8 cache
// (fp4_blocks): each head's dot summed per 32-column block, optionally on the tensor cores
// (tensor_core_min_rows: a block per token and 64 or 256 entries, the token's queries as bf16 A
// fragments in registers, the keys decoded to bf16 rows per 64 entries; the same bits). Two kernels
// per chunk of score_rows tokens: scoring over (entry tiles x tokens) blocks (32-entry tiles, or
// 8-entry tiles for a few tokens: more blocks), each score the same fmaf chain over head_dim and
// the same sum over heads (backend/indexer_head_sum.h's tree) for any tiling; then one block per
// token selects the top-k (radix select on the scores, ties to the lower index, output in ascending
// index order). The scoring blocks apply the query's RoPE (rope_dim > 0: RopeCosSin + RotateWith,
// as the other RoPE kernels) and the head weights' scale (weight_scale) to their staged copies.
#pragma once

#include <cstdint>

#include "backend/cuda/runtime.h"
#include "backend/cuda/token_meta.cuh"
#include "backend/quant_codec.h"
#include "base/status.h"

namespace dsinfer::backend::cuda {

struct IndexerTopKParams {
  TokenMeta meta;
  const float* q = nullptr;         // [n, heads, head_dim] indexer queries (RoPE applied when
                                    // rope_dim is 0, else applied here)
  const float* weights = nullptr;   // [n, heads] head weights, times weight_scale here
  float weight_scale = 1.0f;        // heads^-0.5 when the weights come unscaled
  int rope_dim = 0;                 // > 0: RoPE of each head's trailing rope_dim values (the
  const float* inv_freq = nullptr;  // rope frequencies [rope_dim / 2])
  ListRef keys;                     // index-key entries (width head_dim, or key_format's floats)
  // The FP8 cache's packed index keys (backend/quant_codec.h's qc::PackedRow, head_dim coded
  // values, no tail; decoded as staged, packed_row.cuh); q == 0: fp32 keys.
  qc::PackedRow key_format;
  int heads = 0;                   // <= 64
  int head_dim = 0;                // multiple of 4
  int rate = 0;
  int topk = 0;
  int max_entries = 0;             // bound on visible entries (state capacity per slot)
  int32_t* sel = nullptr;          // [n, topk] out: selected entries ascending
  int32_t* sel_count = nullptr;    // [n] out
  float* scores = nullptr;         // scratch [score_rows, max_entries]
  int64_t score_rows = 0;          // tokens per chunk (>= 1)
  // DeepSeek-V4's FP8 cache: queries and keys are FP4 values in 32-column blocks (one power-of-two
  // scale per block): each head's dot is the sum, in block order, of its blocks' sums (fmaf chains
  // from zero per block: exact for FP4 values, in any order), the CPU's IndexerTopK with
  // fp4_blocks. Off: one fmaf chain over head_dim.
  bool fp4_blocks = false;
  // With fp4_blocks: chunks of at least this many tokens score on the tensor cores (bf16 mma: FP4
  // values are bf16 values, and a block's two k16 steps sum it exactly), the same bits as the CUDA
  // cores; 0: never. Needs packed FP4 keys (kFp4Pow2, blocks of 32), queries already rounded
  // (rope_dim 0, query_fp4_block 0), head_dim a multiple of 32 and at most 128, no candidate
  // blocks.
  int64_t tensor_core_min_rows = 0;
  // On the tensor cores, chunks of at least this many rows score 16 consecutive rows a block, a run
  // of rows of one slot (a prefill's) decoding its keys once for all of them (the same bits); 0:
  // never. Decode batches, one row a sequence, keep a row a block (with more blocks resident).
  int64_t tc_runs_min_rows = 512;
  // The most rows of one sequence in `meta` (the caller's longest chunk; unknown: no limit). Runs
  // shorter than a block's rows leave it idle while it decodes each row's keys alone: below that
  // the launch keeps a row a block (one H100, session 46's c46k: 512 one-row sequences 556.9 us in
  // runs of 16 rows a block, 167.4 a row a block). The same bits either way.
  int64_t longest_run = INT64_MAX;
  // DeepSeek-V4.1 (all off for V4):
  //   query_fp4_block > 0: after the query's RoPE, each head's query is fake-quantized kFp4Pow2
  //     (fake_quant.cuh) in blocks of this size (V4.1: 32) on the staged copy, before scoring
  //     (head_dim % block != 0: left as is, as the CPU).
  //   candidates_out (candidate-source layer): per row, block b of candidate_block_size entries
  //     scores the max of its visible entries' scores, the newest (last visible) block pinned to
  //     +inf; the top candidate_topk_blocks blocks (ties: lower block first) are marked 1 in
  //     candidates_out[t * candidate_stride + b], every other b < candidate_stride 0 (all visible
  //     blocks 1 when there are at most candidate_topk_blocks of them).
  //   candidates_in: the top-k is taken only among entries whose block is marked in
  //     candidates_in[t * candidate_stride + b] (sel_count: min(topk, entries in marked blocks)).
  //   Both may be set in one launch (the same array too: the row's new mask then restricts its
  //   own top-k); the block scores always come from the unmasked scores.
  int query_fp4_block = 0;
  int candidate_block_size = 0;
  uint8_t* candidates_out = nullptr;
  int candidate_topk_blocks = 0;
  const uint8_t* candidates_in = nullptr;
  int candidate_stride = 0;  // blocks per row in those arrays, >= ceil(max_entries / block size)
  // Unimplemented naming the limit when the kernel cannot take these shapes.
  Status Validate() const;
};
void LaunchIndexerTopK(const IndexerTopKParams& p, StreamHandle stream);
// Whether p may score on the tensor cores (tensor_core_min_rows > 0): its shapes and formats fit.
bool IndexerTensorCoresFit(const IndexerTopKParams& p);

// DeepSeek-V4 with the FP8 cache: the indexer's queries rounded as the CPU's (model/deepseek_v4/
// attention.cc), once per token, in place: each head's RoPE of its trailing rope_dim values at the
// token's position (RopeCosSin + RotateWith, as the scoring kernel's), the Hadamard rotation
// (fake_quant.cuh's FqHadamardRows) and kFp4Pow2 in blocks of fp4_block; the scoring then takes
// them with rope_dim 0. A block per token and 4 heads.
struct IndexQueryRoundParams {
  float* q = nullptr;  // [n, heads, head_dim]
  int64_t n = 0;
  int heads = 0;
  int head_dim = 0;  // a power of two (else not rotated, as the CPU), at most 2,048
  int rope_dim = 0;
  const float* inv_freq = nullptr;  // [rope_dim / 2]
  const int32_t* pos = nullptr;     // [n]
  int fp4_block = 32;
  Status Validate() const;
};
void LaunchIndexQueryRound(const IndexQueryRoundParams& p, StreamHandle stream);
// Raises the kernel's shared-memory limit for these sizes; call once before capturing a graph.
void PrepareIndexerTopK(int heads, int head_dim, int max_entries);

}  // namespace dsinfer::backend::cuda
